"""A chain model's batches (docs/design.md#batches): dbt's microbatch runner calls the adapter's
`incremental` materialization once per batch; each batch is a chain run with chain_partition
set to the batch's partition, or is skipped, or is refused after an earlier failed batch."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from dbt.adapters.base.relation import BaseRelation
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.chaintable.base.config import lease_of
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.partitions import Layout
from dbt.adapters.chaintable.base.runner import logger
from dbt.adapters.chaintable.batch import plan
from dbt.adapters.chaintable.batch.plan import Batch, BatchSpec, Ledger
from dbt.adapters.chaintable.chain.catalog import Catalog
from dbt.adapters.chaintable.chain.tables import ChainTables
from dbt.adapters.chaintable.publish.lock import ChainLockedError
from dbt.adapters.chaintable.run.flow import RunFlow
from dbt.adapters.chaintable.run.model import ChainRun, RunResult


@dataclass(frozen=True)
class BatchRun:
    """What chain_prepare_batch decided; the materialization hands it to chain_execute_batch."""

    batch: Batch
    invocation: str
    run: ChainRun | None  # None: skipped
    skipped: str = ""
    view: BaseRelation | None = None

    @property
    def writes(self) -> bool:
        return self.run is not None

    @property
    def view_exists(self) -> bool:
        return self.run is not None and self.run.view_exists

    @property
    def full_refresh(self) -> bool:
        return self.run is not None and self.run.full_refresh

    @property
    def relations(self) -> list[BaseRelation]:
        return self.run.relations if self.run is not None else [r for r in [self.view] if r]


@dataclass(frozen=True)
class BatchCall:
    """What each batch of a model's run is prepared with: the materialization's arguments.
    `run_args`: --full-refresh and --empty; `node` and `grants_probe` as chain_prepare takes
    them; `rewrite`: var chain_rewrite."""

    model: str
    relation: BaseRelation
    opts: ChainOptions
    config: Mapping[str, Any]
    args: Mapping[str, Any]
    rewrite: Any
    full_refresh: bool
    run_args: tuple[bool, bool]
    existing: Callable[[], BaseRelation | None]
    drop: Callable[[BaseRelation], None]
    node: Mapping[str, Any] | None = None
    grants_probe: str | None = None


def _message(error: Exception) -> str:
    return str(getattr(error, "msg", "") or error)


class Batches:
    def __init__(self, catalog: Catalog, runs: RunFlow):
        self.catalog, self.runs = catalog, runs
        self.ledger = Ledger()

    def prepare(
        self, call: BatchCall, batch: Mapping[str, Any] | None, invocation: str
    ) -> BatchRun:
        """The batch dbt names (model.batch), its chain run or why it is skipped; refused after
        an earlier batch of the invocation failed (plan.Ledger)."""
        model = call.model
        spec = BatchSpec.of(model, call.opts, call.config)
        if not batch or not batch.get("event_time_start"):
            raise DbtRuntimeError(
                f"chain model '{model}' with batches runs under dbt's microbatch runner only "
                "(dbt run or build), which names each batch"
            )
        one = spec.batch(batch["event_time_start"])
        self.ledger.begin(invocation, one)
        run = self.prepare_one(call, one, invocation)
        if not run.writes:
            self.ledger.finish(invocation, one)
        return replace(run, invocation=invocation)

    def prepare_one(self, call: BatchCall, one: Batch, invocation: str) -> BatchRun:
        """One batch's chain run (chain_partition: the batch's), or why it is skipped; for
        dbt's batches and chain_incremental's loop (batch/loop.py) alike. A skipped day is
        read through the view (_refresh_view)."""
        relation, config, full_refresh = call.relation, call.config, call.full_refresh
        try:
            reason = self._skip_reason(call, one)
            if reason:
                logger.info(reason)
                if self.ledger.view_behind(invocation, one.model):
                    self._refresh_view(call)
                    self.ledger.view_refreshed(invocation, one.model)
                return BatchRun(one, "", None, reason, view=relation)
            logger.info(f"{one.describe()}: writing")
            # dbt gives a range's later batches should_full_refresh() = false after the first
            # rebuilt the chain; only a config's full_refresh: false ignores the flag
            flag, empty = call.run_args
            flag = flag and (full_refresh or config.get("full_refresh") is False)
            run = self.runs.prepare(
                relation,
                model=one.model,
                config={**config, "chain_partition": dict(one.partition)},
                full_refresh=full_refresh,
                full_refresh_flag=flag,
                empty=empty,
                existing=call.existing,
                drop=call.drop,
                node=call.node,
                grants_probe=call.grants_probe,
            )
        except Exception as e:
            raise DbtRuntimeError(f"{one.describe()}: {_message(e)}") from e
        return BatchRun(one, "", run)

    def _skip_reason(self, call: BatchCall, one: Batch) -> str | None:
        """Only a range skips (plan.skip_reason); it lists both branches' partitions."""
        tables = ChainTables.of(call.relation)
        if (
            not plan.ranged(call.args)
            or call.full_refresh
            or not self.catalog.branches_exist(tables)
        ):
            return None
        layout = Layout.of(call.opts)
        parts = [
            layout.parse(path)
            for table in (tables.snapshot, tables.delta)
            for path in self.catalog.partition_paths(table)
        ]
        spec = BatchSpec.of(call.model, call.opts, call.config)
        held = plan.holds(spec, parts, one)
        return plan.skip_reason(one, held, True, call.rewrite, False)

    def _refresh_view(self, call: BatchCall) -> None:
        """Point the view at the chain's state, under the chain's lock as every writer does: a
        batch that failed after its publish left its day unread (tests/functional/
        test_batches.py). The view records what it reads only in its text (the recent days are
        literal branches of it), so checking it would derive that text again: refreshing it
        costs the same (0.4 s measured, once per model and invocation) and is the step a run
        ends with."""
        tables = ChainTables.of(call.relation)
        lease = lease_of(call.model, call.config.get("chain_lock_lease"))
        operation = f"view refresh of model '{call.model}'"
        try:
            with self.runs.unit.locked(tables, operation, lease=lease):
                self.runs.unit.views.refresh(self.catalog.load(tables.view))
        except ChainLockedError as e:  # its holder refreshes the view when it is done
            logger.warning(f"{e}; the view is refreshed by the writer that holds it")

    def execute(self, run: BatchRun, compiled_code: str) -> RunResult:
        if run.run is None:
            return RunResult(f"SKIPPED: {run.batch.where} held", 0)
        try:
            result = self.runs.execute(run.run, compiled_code)
        except Exception as e:
            raise DbtRuntimeError(f"{run.batch.describe()}: {_message(e)}") from e
        self.ledger.finish(run.invocation, run.batch)
        return RunResult(f"{result.message} ({run.batch.where})", result.rows_affected)
