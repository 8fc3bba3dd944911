"""Operations on an existing chain that no feature owns alone: chain_read, chain_status (which
asks compaction and expiration what they would do) and dropping one partition."""

from __future__ import annotations

from typing import Any

from dbt.adapters.base.relation import BaseRelation

from dbt.adapters.chaintable.base.keys import BRANCHES
from dbt.adapters.chaintable.base.partitions import (
    ChainPlanError,
    parse_partition_spec,
)
from dbt.adapters.chaintable.chain.catalog import Catalog
from dbt.adapters.chaintable.chain.tables import ChainTables
from dbt.adapters.chaintable.compaction.compactor import Compactor
from dbt.adapters.chaintable.cumulative.plan import served_days
from dbt.adapters.chaintable.expiration.expirer import Expirer, parse_now
from dbt.adapters.chaintable.expiration.plan import check_snapshot_drop
from dbt.adapters.chaintable.operations.status import render as render_status
from dbt.adapters.chaintable.read.render import Renderer
from dbt.adapters.chaintable.read.visible import visible_sql
from dbt.adapters.chaintable.write.unit import WriteUnit


class Maintenance:
    def __init__(self, catalog: Catalog, unit: WriteUnit, compactor: Compactor, expirer: Expirer):
        self.catalog, self.unit, self.views = catalog, unit, unit.views
        self.compactor, self.expirer = compactor, expirer

    # ---- reads --------------------------------------------------------------------------------
    def read_sql(self, relation: BaseRelation, partition: Any) -> str:
        """Full state of one partition (all groups, or the groups the spec names) as a SELECT."""
        loaded = self.catalog.load(relation)
        plans = loaded.state().plan_partition_read(parse_partition_spec(partition))
        read = Renderer.of(loaded).partition_read(plans, served_days(loaded, plans))
        return visible_sql(loaded.opts, loaded.column_names, read)

    def status(self, relation: BaseRelation, now: str | None = None) -> str:
        loaded = self.catalog.load(relation)
        plan = (
            self.expirer.expiration_plan(loaded, parse_now(now))
            if loaded.opts.expiration_enabled
            else None
        )
        state = loaded.state()
        serving = served_days(loaded, state.delta_only()) if loaded.opts.cumulative_delta else None
        verdicts = self.compactor.compaction_verdicts(loaded) if loaded.opts.compaction else None
        return render_status(loaded.opts, state, loaded.stale(), plan, serving, verdicts)

    # ---- dropping one partition ---------------------------------------------------------------
    def drop_partition(self, relation: BaseRelation, partition: Any, branch: str) -> str:
        """Drop one partition of a branch, refusing a snapshot that later deltas depend on."""
        with self.unit.locked(ChainTables.of(relation), "drop_chain_partition"):
            return self._drop_partition(relation, partition, branch)

    def _drop_partition(self, relation: BaseRelation, partition: Any, branch: str) -> str:
        loaded = self.catalog.load(relation)
        state = loaded.state()
        try:
            values = state.partition_of(parse_partition_spec(partition))
        except ChainPlanError as e:
            raise ChainPlanError(f"drop_chain_partition {relation}: {e.msg}") from e
        group, chain = state.layout.split(values)
        label = loaded.layout.path(values)
        if branch not in BRANCHES:
            raise ChainPlanError(f"drop_chain_partition: branch must be one of {list(BRANCHES)}")
        parts = state.snapshots if branch == "snapshot" else state.deltas
        if values not in parts:
            return f"{relation}: no {branch} partition {label}; nothing dropped"
        if branch == "snapshot":
            error = check_snapshot_drop(
                group,
                chain,
                state.snapshot_chains().get(group, []),
                state.delta_chains().get(group, []),
                state.sort_key,
            )
            if error:
                raise ChainPlanError(f"drop_chain_partition {relation} {label}: {error}")
        gone = {"snapshots" if branch == "snapshot" else "deltas": [values]}
        loaded = self.unit.before_drop(loaded, [values])
        self.views.refresh(loaded, state.without(**gone))
        self.catalog.retire(
            "the dropped partition",
            Renderer.of(loaded).drop_partitions(str(loaded.tables.branch(branch)), [values]),
        )
        return f"{relation}: dropped {branch} partition {label}"
