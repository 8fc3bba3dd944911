"""The merge engines, one module each (merge/engines/base.py says what an engine provides), and
their registration: a new engine is a module and a line here."""

from __future__ import annotations

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.merge.engines.aggregation import Aggregation
from dbt.adapters.chaintable.merge.engines.base import Engine, MergeInput
from dbt.adapters.chaintable.merge.engines.deduplicate import Deduplicate
from dbt.adapters.chaintable.merge.engines.first_row import FirstRow
from dbt.adapters.chaintable.merge.engines.partial_update import PartialUpdate

ENGINES: dict[str, Engine] = {
    e.name: e for e in (Deduplicate(), PartialUpdate(), Aggregation(), FirstRow())
}


__all__ = ["ENGINES", "Engine", "MergeInput", "engine_of"]


def engine_of(opts: ChainOptions) -> Engine:
    """The engine of a chain's options (their merge_engine, checked when they were read)."""
    return ENGINES[opts.merge_engine]
