"""aggregation: each value column aggregated with its function over a key's rows."""

from __future__ import annotations

from collections.abc import Sequence

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.merge.engines.base import Engine, MergeInput
from dbt.adapters.chaintable.merge.engines.columns import aggregation_sql
from dbt.adapters.chaintable.merge.rules import (
    ORDER_SENSITIVE_FUNCTIONS,
    retract_refusal,
    value_columns,
)


class Aggregation(Engine):
    name = "aggregation"
    combines_rows = True

    def merge_select(self, m: MergeInput) -> str:
        return aggregation_sql(m, self)

    def refusal(self, opts: ChainOptions, columns: Sequence[str]) -> str | None:
        if not opts.rowkind_field:
            return None
        return retract_refusal(opts, value_columns(opts, columns))

    def late_rows_commute(self, opts: ChainOptions, value_columns: Sequence[str]) -> bool:
        # the rowkind field merges to the kind of the latest insert or update: order-sensitive
        return not opts.rowkind_field and not any(
            opts.aggregate_function(c) in ORDER_SENSITIVE_FUNCTIONS for c in value_columns
        )
