"""first-row: the earliest row of a key wins; -U/-D rows are ignored."""

from __future__ import annotations

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.merge.engines.base import PicksOne
from dbt.adapters.chaintable.merge.rules import RETRACT


class FirstRow(PicksOne):
    name = "first-row"
    latest_wins = False

    def ignored(self, opts: ChainOptions) -> str | None:
        return RETRACT if opts.rowkind_field else None
