"""One chain_incremental run: decide the branch, stage the model's rows, check them, plan the
partitions written, publish them, then record what they invalidate, refresh the view and expire.
Each step returns an immutable value the next one reads."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from dbt.adapters.base.relation import BaseRelation
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.chaintable.base import conventions, versions
from dbt.adapters.chaintable.base.config import ModelSettings
from dbt.adapters.chaintable.base.failpoints import failpoint
from dbt.adapters.chaintable.base.keys import P_COMPACTED
from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.base.progress import Stopwatch
from dbt.adapters.chaintable.base.runner import logger
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.chain import lineage
from dbt.adapters.chaintable.chain.catalog import Catalog, Loaded
from dbt.adapters.chaintable.chain.tables import ChainTables
from dbt.adapters.chaintable.cumulative.accumulate import Accumulator
from dbt.adapters.chaintable.publish import safety
from dbt.adapters.chaintable.run.finish import Finisher
from dbt.adapters.chaintable.run.model import ChainRun, RunResult, invalidated_snapshots
from dbt.adapters.chaintable.run.planner import RunPlanner
from dbt.adapters.chaintable.run.stager import Stager
from dbt.adapters.chaintable.write.unit import Write, WriteUnit


class RunFlow:
    def __init__(
        self, catalog: Catalog, unit: WriteUnit, accumulator: Accumulator, finisher: Finisher
    ):
        self.catalog, self.unit, self.accumulator = catalog, unit, accumulator
        self.publisher = publisher = unit.publisher
        self.stager = Stager(catalog, publisher)
        self.planner = RunPlanner(catalog, accumulator)
        self.finisher = finisher

    # ---- before the model's SQL runs ------------------------------------------------------------
    def prepare(
        self,
        relation: BaseRelation,
        model: str,
        config: Mapping[str, Any],
        full_refresh: bool,
        full_refresh_flag: bool,
        empty: bool,
        existing: Callable[[], BaseRelation | None],
        drop: Callable[[BaseRelation], None],
        node: Mapping[str, Any] | None = None,
        grants_probe: str | None = None,
    ) -> ChainRun:
        """Validate the config and decide which branch this run writes
        (docs/design.md#branches-and-relations). `empty` is dbt's --empty or --sample
        (chain_incremental.sql): the model's refs and sources give no rows, or a sample of them,
        so the run checks and creates the relations and writes only what the model still
        returns; it adds none of chain_partition's empty "no changes" partitions (they would
        replace the day's real deltas with nothing) and expires nothing.
        `existing` finds what `relation` is in dbt's cache, `drop` drops it. `node`: the model
        as dbt has it (its contract's constraints); `grants_probe`: dbt's statement that shows
        the view's grants, when the model configures some (base/conventions.py)."""
        settings = ModelSettings.from_config(model, config)
        conventions.check_constraints(model, settings.opts.primary_key, node)
        if settings.grants and grants_probe:
            self._probe_grants(model, grants_probe)
        tables = ChainTables.of(relation)
        exists = self.catalog.branches_exist(tables)
        if exists and full_refresh_flag and not full_refresh:
            loaded = self.catalog.load(relation)
            logger.info(
                f"chain_incremental model '{model}': full_refresh is false in its "
                f"config, so --full-refresh is ignored; it would have dropped "
                f"{len(loaded.snapshots)} snapshot and {len(loaded.deltas)} delta "
                "partitions"
            )
        current = existing()
        if current is not None and not current.is_view:
            if not full_refresh:
                raise ChainConfigError(
                    f"chain_incremental model '{model}': {relation} exists as a {current.type}, "
                    "not a chain view; run with --full-refresh to replace it"
                )
            drop(current)
        branch = self._branch(settings, tables, exists, full_refresh)
        logger.info(
            f"chain_incremental model '{model}': writing the {branch} branch"
            + (" (full refresh)" if full_refresh and exists else "")
        )
        return ChainRun(
            settings,
            tables,
            branch,
            full_refresh,
            exists,
            empty=bool(empty),
            view_exists=current is not None and current.is_view,
        )

    def _branch(
        self, settings: ModelSettings, tables: ChainTables, exists: bool, full_refresh: bool
    ) -> str:
        """chain_branch forces the branch, on a first run too: deltas may come before any
        snapshot (read rule 3 reads a group without one), as in Paimon, where a delta branch is
        written whether or not the snapshot branch holds anything yet. A chain whose branches
        hold no partition (`dbt run --empty` created them) gets its first load."""
        if settings.chain_branch:
            return settings.chain_branch
        first = not exists or full_refresh or self._unwritten(tables)
        return "snapshot" if first else "delta"

    def _probe_grants(self, model: str, probe: str) -> None:
        """Refuse grants before anything is written where the server has no grant statements
        (Spark's own catalog: README, dbt conventions); any other error (the view does not
        exist yet) leaves them to dbt's apply_grants after the run."""
        try:
            self.catalog.runner.fetch(probe)
        except DbtRuntimeError as e:
            if conventions.grants_unsupported(str(e)):
                raise ChainConfigError(
                    f"chain_incremental model '{model}': grants cannot be applied: this Spark "
                    f"has no grant statements (`{' '.join(probe.split())}` is refused: "
                    f"{conventions.first_line(str(e))}); remove grants from the model or run "
                    "it on a catalog with access control; nothing was written"
                ) from None

    def is_incremental(
        self, relation: BaseRelation, config: Mapping[str, Any], full_refresh: bool
    ) -> bool:
        if full_refresh or dict(config).get("chain_branch") == "snapshot":
            return False
        tables = ChainTables.of(relation)
        forced = dict(config).get("chain_branch") == "delta"
        return self.catalog.branches_exist(tables) and (forced or not self._unwritten(tables))

    def _unwritten(self, tables: ChainTables) -> bool:
        """Both branches exist and hold no partition: only `dbt run --empty` ran, so the next
        run is the chain's first load (tests/functional/test_dbt_features.py). The snapshot
        branch is listed first: a chain with history has a partition there, but one whose
        first run wrote deltas only (chain_branch)."""
        return not any(self.catalog.partition_paths(t) for t in (tables.snapshot, tables.delta))

    # ---- the run ----------------------------------------------------------------------------------
    def execute(self, run: ChainRun, compiled_code: str) -> RunResult:
        """The whole run under the table's lock: stage the model's rows, check them, publish
        them partition by partition, then invalidate, refresh the view and expire."""
        clock = Stopwatch()
        single = Stager.single_partition(run)
        run_id = versions.new_run_id()
        # a run of one partition stages it in a bare directory, which the lock names from the
        # start (for the recovery after a crash: a published directory is kept)
        bare = (
            {
                safety.P_STAGE_RUN: run_id,
                safety.P_TARGET: str(run.target),
                safety.P_PARTITION: json.dumps(
                    dict(zip(run.opts.partition_by, single, strict=True))
                ),
            }
            if single is not None
            else None
        )
        operation = f"run of model '{run.model}'"
        lease = run.settings.lock_lease
        with self.unit.locked(run.tables, operation, bare, lease) as names:
            stored = self.planner.stored_properties(run)
            stage = self.stager.stage(run, compiled_code, run_id, single, bare)
            failpoint("run.staged")
            plan = self.planner.plan(run, stage, stored, names)
            prebuilt = None
            if run.publishes:
                write = Write(run.branch, plan.written)
                plan = replace(plan, loaded=self.unit.before_write(plan.loaded, write))
                plan, prebuilt = self.planner.checked_build(run, stage, plan)
                invalidated = invalidated_snapshots(run, plan)
                # snapshots to drop or mark stale after the publish: named on the lock first,
                # for whoever recovers from a crash in between (a new newest day has none)
                if invalidated or (
                    run.branch == "delta"
                    and plan.loaded.state().stale_after_delta_write(plan.written)
                ):
                    self.publisher.lock.invalidating(
                        run.tables, stage.run_id, run.opts.partition_by, plan.written, invalidated
                    )
                if run.branch == "delta":
                    self._void_compactions(plan.loaded, plan.written)
            stage_dropped = self.finisher.write(run, stage, plan)
            rows = self.finisher.rows_written(run, plan)
            logger.info(
                f"'{run.model}': {len(plan.written)} partition(s) written to the {run.branch} "
                f"branch ({clock} since the run started)"
            )
            loaded = self.finisher.finish(run, plan, stage_dropped, prebuilt)
            compacted = self.finisher.maintain(run, loaded)
        message = f"OK: {len(plan.written)} {run.branch} partition(s)" + compacted
        return RunResult(message, rows)

    def _void_compactions(self, loaded: Loaded, written: Sequence[Values]) -> None:
        """Before a delta write is published, the records of compactions it changes an input of
        go (chain/lineage.py): a crash after the publish leaves none that the stale marks, set
        after it, would have voided. A run of a new newest day changes none."""
        entries = lineage.entries_of(loaded.props)
        if not entries:  # no compaction recorded: no chain state built on a run's path
            return
        kept = lineage.voided_by_deltas(loaded.state(), entries, written)
        if kept is not None:
            value = json.dumps(kept, separators=(",", ":"))
            self.catalog.set_properties(loaded.tables.snapshot, {P_COMPACTED: value})
