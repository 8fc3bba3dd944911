"""The adapter's relation: dbt-spark's, plus what a ref to a chain model needs to be filtered to
a batch (docs/design.md#batches, downstream models). dbt renders a ref's event-time filter as
`event_time >= '<start>' and event_time < '<end>'`; a chain's event_time is its chain key, a
string like 20250801 that such a filter never matches, so a chain's ref filters its chain keys
through the chain's own partition_timestamp_pattern and _formatter instead."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dbt.adapters.base.relation import EventTimeFilter
from dbt.adapters.spark.relation import SparkRelation

from dbt.adapters.chaintable.base.timestamps import ExpirationConfigError, pattern_parts
from dbt.adapters.chaintable.batch.plan import event_time_filter as chain_filter

CHAIN_MATERIALIZATIONS = ("chain_incremental",)


def chain_time(node: Any) -> dict[str, str]:
    """The fields of a relation to a chain model whose event_time is one of its chain keys and
    whose partitions have a time (pattern and formatter); {} for any other node."""
    config = getattr(node, "config", None)
    get = getattr(config, "get", None)
    if get is None:
        return {}
    chain = get("materialized") in CHAIN_MATERIALIZATIONS or bool(get("chain_table"))
    pattern, formatter = get("partition_timestamp_pattern"), get("partition_timestamp_formatter")
    keys = get("chain_partition_keys") or get("partition_by") or []
    keys = [keys] if isinstance(keys, str) else list(keys)
    event_time = get("event_time")
    if not (chain and pattern and formatter and event_time in keys):
        return {}
    try:  # a pattern over group keys gives a partition no single time: dbt's filter stays
        pattern_parts(str(pattern), keys)
    except ExpirationConfigError:
        return {}
    return {
        "chain_time_keys": ",".join(keys),
        "chain_time_pattern": str(pattern),
        "chain_time_formatter": str(formatter),
    }


@dataclass(frozen=True, eq=False, repr=False)
class ChainTableRelation(SparkRelation):
    chain_time_keys: str | None = None  # comma separated
    chain_time_pattern: str | None = None
    chain_time_formatter: str | None = None

    @classmethod
    def create_from(cls, quoting: Any, relation_config: Any, **kwargs: Any) -> Any:
        if kwargs.get("event_time_filter") is not None:
            kwargs.update(chain_time(relation_config))
        return super().create_from(quoting, relation_config, **kwargs)

    def _render_event_time_filtered(self, event_time_filter: EventTimeFilter) -> str:
        if not (self.chain_time_keys and self.chain_time_pattern and self.chain_time_formatter):
            return super()._render_event_time_filtered(event_time_filter)
        if event_time_filter.start is None and event_time_filter.end is None:
            return ""
        return chain_filter(
            self.chain_time_keys.split(","),
            self.chain_time_pattern,
            self.chain_time_formatter,
            event_time_filter.start,
            event_time_filter.end,
        )
