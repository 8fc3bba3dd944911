"""The chaintable adapter: dbt-spark plus the chain table runtime.

This class is the facade dbt's macros call (materializations/chain_incremental.sql and
operations/chain_operations.sql): each method resolves its arguments and delegates to the module
that owns the work. docs/design.md#code-layout describes the modules.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any

from dbt.adapters.base import available
from dbt.adapters.base.relation import BaseRelation
from dbt.adapters.contracts.relation import RelationType
from dbt.adapters.spark.impl import SparkAdapter

from dbt.adapters.chaintable.base.config import ChainTableConfig
from dbt.adapters.chaintable.base.failpoints import failpoint
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.runner import Runner, logger
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.batch.batches import BatchCall, Batches, BatchRun
from dbt.adapters.chaintable.batch.loop import BatchLoop, LoopRun, loops
from dbt.adapters.chaintable.batch.relation import ChainTableRelation
from dbt.adapters.chaintable.chain.catalog import Catalog
from dbt.adapters.chaintable.chain.tables import name_of, schema_of, split_relation
from dbt.adapters.chaintable.compaction.compactor import Compactor
from dbt.adapters.chaintable.connections import ChainTableConnectionManager
from dbt.adapters.chaintable.cumulative.accumulate import Accumulator
from dbt.adapters.chaintable.expiration.expirer import Expirer
from dbt.adapters.chaintable.history.reader import History
from dbt.adapters.chaintable.history.stored import ChangesStore
from dbt.adapters.chaintable.operations.maintenance import Maintenance
from dbt.adapters.chaintable.publish.lock import ChainLock, ChainLockedError
from dbt.adapters.chaintable.publish.publisher import Publisher
from dbt.adapters.chaintable.publish.recovery import Recovery
from dbt.adapters.chaintable.run.finish import Finisher
from dbt.adapters.chaintable.run.flow import RunFlow
from dbt.adapters.chaintable.run.model import ChainRun, RunResult
from dbt.adapters.chaintable.view.docs import Docs, catalog_with_chain_relations, column_docs
from dbt.adapters.chaintable.view.writer import ViewWriter
from dbt.adapters.chaintable.write.derived import CumulativeDelta, StoredChanges
from dbt.adapters.chaintable.write.unit import Derived, WriteUnit


class Chain:
    """The adapter's chain runtime, wired once per adapter: every module gets the same runner
    (and so the same dbt connection) and the state that lives for the process (the lock's
    re-entrancy, the view statement the server accepts, the mapping tables known to have the
    stamp column)."""

    def __init__(self, runner: Runner):
        self.catalog = Catalog(runner)
        self.views = ViewWriter(self.catalog)
        recovery = Recovery(self.catalog, self.views)
        self.publisher = Publisher(self.catalog, ChainLock(self.catalog, recovery), recovery)
        self.accumulator = Accumulator(
            self.catalog, lambda loaded, days: self.views.refresh(loaded, unserved=days)
        )
        store = ChangesStore(self.catalog)
        # the tables derived from the branches, told around every write in this order: the
        # cumulative delta before the view (it reads it), the stored changes after it
        derived: list[Derived] = [CumulativeDelta(self.accumulator), StoredChanges(store)]
        self.unit = WriteUnit(self.publisher, self.views, derived)
        self.compactor = Compactor(self.catalog, self.unit, self.accumulator)
        self.expirer = Expirer(self.catalog, self.unit)
        self.maintenance = Maintenance(self.catalog, self.unit, self.compactor, self.expirer)
        finisher = Finisher(self.catalog, self.unit, self.compactor, self.expirer)
        self.runs = RunFlow(self.catalog, self.unit, self.accumulator, finisher)
        self.batches = Batches(self.catalog, self.runs)
        self.loop = BatchLoop(self.batches)
        self.history = History(self.catalog, store)
        self.docs = Docs(self.catalog)


class ChainTableAdapter(SparkAdapter):
    ConnectionManager = ChainTableConnectionManager
    AdapterSpecificConfigs = ChainTableConfig
    Relation = ChainTableRelation

    @cached_property
    def chain(self) -> Chain:
        return Chain(Runner(lambda: self.connections))

    # ---- dbt's relation cache ----------------------------------------------------------------
    def get_relation(self, database: str, schema: str, identifier: str) -> BaseRelation | None:
        """A chain's view is reported as a table: dbt's microbatch runner takes a model for
        incremental (its batches: the current one and `lookback`, not all since `begin`) only
        when its relation is a table (docs/design.md#batches)."""
        found = self.cached_relation(database, schema, identifier)
        if found is None or not found.is_view or not identifier:
            return found
        if not self.Relation.get_default_include_policy().database:
            database = None  # type: ignore[assignment]  # as dbt-spark looks it up
        names = {(r.identifier or "").lower() for r in self.list_relations(database, schema) if r}
        branches = {f"{identifier.lower()}__snapshot", f"{identifier.lower()}__delta"}
        return found.incorporate(type=RelationType.Table) if branches <= names else found

    def cached_relation(self, database: str, schema: str, identifier: str) -> BaseRelation | None:
        """What dbt's cache holds, a chain's view as a view."""
        return super().get_relation(database, schema, identifier)

    def drop_relation(self, relation: BaseRelation) -> None:
        """A chain's view, which get_relation reports as a table, is dropped as the view it is."""
        if relation.type == RelationType.Table and relation.identifier:
            found = self.cached_relation(
                relation.database or "", relation.schema or "", relation.identifier
            )
            if found is not None and found.is_view:
                relation = relation.incorporate(type=RelationType.View)
        super().drop_relation(relation)

    # ---- resolving a chain table -------------------------------------------------------------
    @available
    def chain_relation(
        self,
        model: str | None,
        relation: Any,
        default_schema: str,
        nodes: list[Mapping[str, Any]] | None = None,
    ) -> BaseRelation:
        """Resolve an operation's `model: t` (a model of the project) or `relation: schema.t`."""
        if relation:
            schema, ident = split_relation(relation, default_schema)
            return self.Relation.create(schema=schema, identifier=ident, type=RelationType.View)
        if not model:
            raise ChainConfigError(
                "give the chain table as `model: <name>` or `relation: schema.name`"
            )
        for node in nodes or []:
            if node.get("name") == model and node.get("resource_type") == "model":
                return self.Relation.create(
                    schema=node["schema"],
                    identifier=node.get("alias") or model,
                    type=RelationType.View,
                )
        raise ChainConfigError(f"no model named '{model}' in this project")

    # ---- the materialization -----------------------------------------------------------------
    @available
    def chain_prepare(
        self,
        relation: BaseRelation,
        model: str,
        config: Mapping[str, Any],
        full_refresh: bool,
        full_refresh_flag: bool,
        empty: bool = False,
        node: Mapping[str, Any] | None = None,
        grants_probe: str | None = None,
    ) -> ChainRun:
        return self.chain.runs.prepare(
            relation,
            model,
            config,
            full_refresh,
            full_refresh_flag,
            empty,
            existing=self._existing(relation),
            drop=self.drop_relation,
            node=node,
            grants_probe=grants_probe,
        )

    def _existing(self, relation: BaseRelation) -> Any:
        """What `relation` is in dbt's cache, a chain view as a view."""
        return lambda: self.cached_relation(
            relation.database or "", schema_of(relation), name_of(relation)
        )

    @available
    def chain_batched(self, config: Mapping[str, Any]) -> bool:
        """Whether an `incremental` model is a chain whose batches dbt runs (chain_table)."""
        return bool(dict(config).get("chain_table"))

    @available
    def chain_prepare_batch(
        self,
        relation: BaseRelation,
        model: str,
        config: Mapping[str, Any],
        batch: Mapping[str, Any] | None,
        invocation: str,
        args: Mapping[str, Any],
        rewrite: Any,
        full_refresh: bool,
        full_refresh_flag: bool,
        empty: bool = False,
        node: Mapping[str, Any] | None = None,
        grants_probe: str | None = None,
    ) -> BatchRun:
        call = self._batch_call(
            relation, model, config, args, rewrite, (full_refresh, full_refresh_flag, empty),
            node, grants_probe,
        )  # fmt: skip
        return self.chain.batches.prepare(call, batch, invocation)

    def _batch_call(
        self,
        relation: BaseRelation,
        model: str,
        config: Mapping[str, Any],
        args: Mapping[str, Any],
        rewrite: Any,
        refresh: tuple[bool, bool, bool],
        node: Mapping[str, Any] | None,
        grants_probe: str | None,
    ) -> BatchCall:
        """The arguments every batch of the run is prepared with. `refresh`: whether the run
        refreshes in full, --full-refresh and --empty."""
        full_refresh, full_refresh_flag, empty = refresh
        opts = ChainOptions.from_config(model, config)
        existing, drop = self._existing(relation), self.drop_relation
        return BatchCall(
            model, relation, opts, dict(config), args, rewrite, full_refresh,
            (full_refresh_flag, empty), existing, drop, node, grants_probe,
        )  # fmt: skip

    @available
    def chain_execute_batch(self, run: BatchRun, compiled_code: str) -> RunResult:
        return self.chain.batches.execute(run, compiled_code)

    @available
    def chain_loops(self, config: Mapping[str, Any]) -> bool:
        """Whether a chain_incremental model runs its batches itself (batch_size, no
        chain_partition)."""
        return loops(config)

    @available
    def chain_prepare_loop(
        self,
        relation: BaseRelation,
        model: str,
        config: Mapping[str, Any],
        args: Mapping[str, Any],
        rewrite: Any,
        full_refresh: bool,
        full_refresh_flag: bool,
        empty: bool = False,
        node: Mapping[str, Any] | None = None,
        grants_probe: str | None = None,
    ) -> LoopRun:
        call = self._batch_call(
            relation, model, config, args, rewrite, (full_refresh, full_refresh_flag, empty),
            node, grants_probe,
        )  # fmt: skip
        return self.chain.loop.prepare(call)

    @available
    def chain_execute_loop(self, run: LoopRun, compiled_code: str) -> RunResult:
        return self.chain.loop.execute(run, compiled_code)

    @available
    def chain_is_incremental(
        self, relation: BaseRelation, config: Mapping[str, Any], full_refresh: bool
    ) -> bool:
        return self.chain.runs.is_incremental(relation, config, full_refresh)

    @available
    def chain_execute(self, run: ChainRun, compiled_code: str) -> RunResult:
        return self.chain.runs.execute(run, compiled_code)

    @available
    def chain_persist_docs(
        self, run: ChainRun | BatchRun | LoopRun, node: Mapping[str, Any]
    ) -> None:
        if isinstance(run, LoopRun):  # the docs of the last batch's run, on the view
            if not run.runs:
                return
            run = run.runs[-1]
        if isinstance(run, BatchRun):
            if run.run is None:
                return
            run = run.run
        if not any(run.settings.persist_docs):
            return
        # under the chain's lock, as every change of its catalog: Spark rewrites a table's whole
        # property map on each ALTER, so a comment set beside another writer's change could
        # undo it. A chain another writer holds now keeps its comments until the next run: the
        # model's rows are published already, and its run does not fail for its comments
        operation = f"persist_docs of model '{run.model}'"
        try:
            with self.chain.unit.locked(run.tables, operation, lease=run.settings.lock_lease):
                self.chain.docs.persist(
                    run.settings, run.tables, str(node.get("description") or ""), column_docs(node)
                )
        except ChainLockedError as e:
            logger.warning(f"{e}; the comments are set by the model's next run")

    def _get_one_catalog(self, information_schema, schemas, used_schemas):  # type: ignore[no-untyped-def]
        """dbt docs generate: dbt-spark's catalog of a schema, with each chain view's relations
        named in its entry (view/docs.py)."""
        table = super()._get_one_catalog(information_schema, schemas, used_schemas)
        return catalog_with_chain_relations(table)

    # ---- snapshots ---------------------------------------------------------------------------
    @available
    def chain_failpoint(self, name: str) -> str:
        """A named step of the snapshot materialization (materializations/snapshot.sql), where
        the tests fail a run (base/failpoints.py)."""
        failpoint(name)
        return ""

    # ---- operations --------------------------------------------------------------------------
    @available
    def chain_read_sql(self, relation: BaseRelation, partition: Any) -> str:
        return self.chain.maintenance.read_sql(relation, partition)

    @available
    def chain_changes_sql(self, relation: BaseRelation, from_day: Any, to_day: Any) -> str:
        return self.chain.history.changes_sql(relation, from_day, to_day)

    @available
    def chain_history_sql(self, relation: BaseRelation, from_day: Any, to_day: Any) -> str:
        return self.chain.history.history_sql(relation, from_day, to_day)

    @available
    def chain_compact(
        self, relation: BaseRelation, partition: Any, overwrite: bool = False
    ) -> bool:
        return self.chain.compactor.compact(relation, partition, overwrite)

    @available
    def chain_expire(
        self, relation: BaseRelation, now: str | None = None, dry_run: bool = False
    ) -> list[str]:
        return self.chain.expirer.expire(relation, now, dry_run)

    @available
    def chain_status(self, relation: BaseRelation, now: str | None = None) -> str:
        return self.chain.maintenance.status(relation, now)

    @available
    def chain_drop_partition(
        self, relation: BaseRelation, partition: Any, branch: str = "snapshot"
    ) -> str:
        return self.chain.maintenance.drop_partition(relation, partition, branch)
