"""partial-update: per column the latest non-null value (with sequence groups, per group)."""

from __future__ import annotations

from collections.abc import Sequence

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.quoting import q
from dbt.adapters.chaintable.merge.engines.base import Engine, MergeInput
from dbt.adapters.chaintable.merge.engines.columns import partial_update
from dbt.adapters.chaintable.merge.rules import RETRACT, retract_refusal


class PartialUpdate(Engine):
    name = "partial-update"

    def merge_select(self, m: MergeInput) -> str:
        return partial_update(m, self)

    def ignored(self, opts: ChainOptions) -> str | None:
        if not opts.rowkind_field:
            return None
        if opts.ignore_delete:
            return RETRACT
        if opts.remove_record_on_delete:
            return f"({RETRACT} AND {q(opts.rowkind_field)} = '-U')"
        return None

    def refusal(self, opts: ChainOptions, columns: Sequence[str]) -> str | None:
        if not opts.rowkind_field:
            return None
        if opts.sequence_groups:
            if opts.ignore_delete:
                return None  # the rows are dropped before any function sees them
            members = [c for _, cols in opts.sequence_groups for c in cols]
            return retract_refusal(opts, [c for c in members if c in opts.aggregate_functions])
        if not (opts.ignore_delete or opts.remove_record_on_delete):
            return (
                "merge_engine 'partial-update' cannot take -U/-D rows; set "
                "partial_update_ignore_delete or partial_update_remove_record_on_delete"
            )
        return None

    def late_rows_commute(self, opts: ChainOptions, value_columns: Sequence[str]) -> bool:
        return False  # a late row's non-null value may land before a later one's
