"""The history macros' entry (chain_changes, chain_history): the chain as the catalog gives it,
planned (history/plan.py) and rendered (history/sql.py). Like chain_read it only renders a
query: nothing is written, no lock is taken."""

from __future__ import annotations

from typing import Any

from dbt.adapters.base.relation import BaseRelation

from dbt.adapters.chaintable.base.partitions import ChainPlanError
from dbt.adapters.chaintable.chain.catalog import Catalog, Loaded
from dbt.adapters.chaintable.chain.lineage import compacted_of
from dbt.adapters.chaintable.cumulative.plan import served_days
from dbt.adapters.chaintable.history import sql
from dbt.adapters.chaintable.history.plan import HistoryPlan, plan_history
from dbt.adapters.chaintable.history.stored import ChangesStore
from dbt.adapters.chaintable.read.render import Renderer
from dbt.adapters.chaintable.read.visible import visible_changes_sql, visible_sql


class History:
    def __init__(self, catalog: Catalog, store: ChangesStore):
        self.catalog, self.store = catalog, store

    def changes_sql(self, relation: BaseRelation, from_day: Any, to_day: Any) -> str:
        loaded, plan = self.plan(relation, "chain_changes", from_day, to_day, every_day=False)
        rows = self.store.changes_sql(loaded, plan, self.serving(loaded, plan))
        return visible_changes_sql(loaded.opts, loaded.column_names, rows, sql.CHANGE, sql.BEFORE)

    def history_sql(self, relation: BaseRelation, from_day: Any, to_day: Any) -> str:
        loaded, plan = self.plan(relation, "chain_history", from_day, to_day, every_day=True)
        rows = sql.history(Renderer.of(loaded), plan, self.serving(loaded, plan))
        ends = [sql.TO_PREFIX + c for c in loaded.opts.chain_keys]
        return visible_sql(loaded.opts, loaded.column_names, rows, ends)

    def plan(
        self, relation: BaseRelation, what: str, from_day: Any, to_day: Any, every_day: bool
    ) -> tuple[Loaded, HistoryPlan]:
        loaded = self.catalog.load(relation)  # refuses a relation that is no chain
        return loaded, plan_of(loaded, str(relation), what, from_day, to_day, every_day)

    @staticmethod
    def serving(loaded: Loaded, plan: HistoryPlan) -> dict:
        return served_days(loaded, [p for plans in plan.reads for p in plans])


def plan_of(
    loaded: Loaded, name: str, what: str, from_day: Any, to_day: Any, every_day: bool
) -> HistoryPlan:
    """The plan of a range of `loaded`, an error naming the macro and the chain otherwise."""
    try:
        return plan_history(
            loaded.state(), from_day, to_day, loaded.history(), every_day, compacted_of(loaded)
        )
    except ChainPlanError as e:
        raise ChainPlanError(f"{what} {name}: {e.msg}") from e
