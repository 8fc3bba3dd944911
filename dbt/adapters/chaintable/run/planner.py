"""What a run writes: the staged rows checked (or left to the cumulative build that checks them),
the tables brought to the model's config (changes.py computes what changes), and the partitions
written, with the model's and the empty ones."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base.keys import P_BRANCH, P_CHANGES_COLUMNS
from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.base.quoting import is_string_type
from dbt.adapters.chaintable.base.runner import logger
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.chain.catalog import Catalog, Loaded
from dbt.adapters.chaintable.chain.tables import listed
from dbt.adapters.chaintable.cumulative import plan as cumulative
from dbt.adapters.chaintable.cumulative.accumulate import Accumulator, Prebuilt
from dbt.adapters.chaintable.cumulative.plan import Build
from dbt.adapters.chaintable.history.stored import changes_table
from dbt.adapters.chaintable.run import checks
from dbt.adapters.chaintable.run import stage as stage_sql
from dbt.adapters.chaintable.run.changes import ChangeSet, change_set, full_refresh_reason
from dbt.adapters.chaintable.run.model import (
    ChainRun,
    Columns,
    Stage,
    WritePlan,
    before_history,
    create_sql,
    empty_partitions,
    table_order,
)


class RunPlanner:
    def __init__(self, catalog: Catalog, accumulator: Accumulator):
        self.catalog, self.accumulator = catalog, accumulator
        self.run = catalog.runner.run

    def stored_properties(self, run: ChainRun) -> dict[str, str]:
        """The snapshot branch's properties, read under the lock (current), before the model's
        rows are staged: a config change of how stored partitions are read is refused first."""
        if not run.publishes:
            return {}
        props = self.catalog.properties(run.tables.snapshot)
        reason = full_refresh_reason(run.opts, str(run.tables.snapshot), props)
        if reason:
            raise ChainConfigError(
                f"chain_incremental model '{run.model}': {reason}; run with --full-refresh to "
                "rebuild the chain table"
            )
        return props

    @classmethod
    def _refuse_expired_history(
        cls, run: ChainRun, loaded: Loaded, staged: Sequence[Values]
    ) -> None:
        """A delta at or before the oldest snapshot expiration kept would change history that
        is gone."""
        if run.branch != "delta":
            return
        early = before_history(loaded, staged)
        if early:
            raise ChainConfigError(
                f"chain_incremental model '{run.model}': delta partition "
                f"{run.settings.layout.path(early[0])} is at or before the oldest "
                "snapshot that expiration kept in its group; the history it would change is "
                "gone, so the day cannot be rewritten (write it with chain_branch='snapshot' "
                "as a full state instead); nothing was written"
            )

    def plan(
        self,
        run: ChainRun,
        stage: Stage,
        stored: Mapping[str, str],
        names: frozenset[str] | None,
    ) -> WritePlan:
        """Check the staged rows (refused: nothing published; a daily run whose cumulative
        build can check them leaves that to the build: checked_build), create the branches on
        a first run, and decide the partitions this run writes (the model's and the empty ones).
        `stored`: the snapshot branch's properties read under the lock; `names`: the chain's
        tables as the lock's recovery listed them."""
        tables, cat = run.tables, self.catalog
        # a bare directory holds the model's columns as DESCRIBE QUERY gave them
        stage_cols = list(stage.columns) if stage.bare else cat.describe(tables.stage)
        deferred = self._may_defer_checks(run, stage, stage_cols)
        staged: list[Values]
        lowest: dict[Values, float]
        if deferred and stage.partition is not None:
            staged, lowest = [stage.partition], {}
        else:
            staged, lowest = self.check_stage(run, stage, stage_cols)
        added_at = None
        old = None
        if run.full_refresh and run.exists:
            old = cat.load(tables.view)
            logger.info(
                f"full refresh of '{run.model}': dropping {len(old.snapshots)} snapshot "
                f"and {len(old.deltas)} delta partitions"
            )
        if not run.publishes:
            loaded = self._create_branches(run, stage_cols, old)
        else:
            stored_cols = cat.describe(tables.snapshot)
            changes = self._changes(run, stage, stage_cols, stored, stored_cols, deferred)
            # the catalog as this run leaves it (the options below), listed once
            loaded = cat.loaded(tables, changes.properties_after(stored), stored_cols, names)
            if deferred and (
                changes.changes_tables
                or before_history(loaded, staged)
                or (checked_by := self.accumulator.checkable(loaded, staged[0])) is None
            ):
                # the run changes the tables before it publishes, or the build cannot check
                # the rows: the stage's own checks, as on any other run, before anything
                deferred = False
                staged, lowest = self.check_stage(run, stage, stage_cols)
            self._refuse_expired_history(run, loaded, staged)  # before anything changes
            loaded, added_at = self.evolve(run, loaded, changes, names)
        return self.write_plan(
            run,
            loaded,
            stage_cols,
            staged,
            lowest,
            added_at,
            checked_by if deferred and run.publishes else None,
            stage.groups,
        )

    def _changes(
        self,
        run: ChainRun,
        stage: Stage,
        stage_cols: Columns,
        stored: Mapping[str, str],
        stored_cols: Columns,
        deferred: bool,
    ) -> ChangeSet:
        """The run's change set; a change of columns it refuses is told after the stage's
        checks when they were deferred (bad rows are told first, as on any other run)."""
        tables = run.tables
        try:
            return change_set(
                run.settings,
                (str(tables.snapshot), str(tables.delta)),
                stored,
                stored_cols,
                table_order(stage_cols, run.opts),
            )
        except ChainConfigError:
            if deferred:
                checks.check_stage(
                    self.catalog,
                    run.settings,
                    stage.source(tables.stage),
                    stage_cols,
                    stage.rewritten,
                )
            raise

    def write_plan(
        self,
        run: ChainRun,
        loaded: Loaded,
        stage_cols: Columns,
        staged: Sequence[Values],
        lowest: Mapping[Values, float],
        added_at: float | None,
        checked_by: Build | None = None,
        groups: tuple[Values, ...] | None = None,
    ) -> WritePlan:
        """The plan of the partitions a run writes: the staged ones and the empty ones
        (`groups`: those of a full chain's output, empty_partitions)."""
        state = loaded.state()
        empties = [] if run.empty else empty_partitions(run.settings, state, staged, groups)
        if run.branch == "delta":
            # a group whose kept history starts at or after this day has no day here to mark
            # "no changes": its day is that snapshot or expired, and an empty delta would drop
            # the snapshot, the group's only record of its history
            before = before_history(loaded, empties)
            if before:
                logger.info(
                    f"'{run.model}': no empty delta partition for "
                    f"{[run.settings.layout.path(p) for p in before]}: at or before the oldest "
                    "snapshot that expiration kept in the group"
                )
                empties = [p for p in empties if p not in before]
        written = sorted(set(staged) | set(empties))
        if checked_by is not None:
            logger.info(
                f"'{run.model}': {len(written)} partition(s) to the {run.branch} branch, "
                "its rows checked as its cumulative delta is built"
            )
        else:
            logger.info(
                f"'{run.model}': {len(staged)} partition(s) with rows, {len(empties)} empty "
                f"partition(s) to the {run.branch} branch"
                + (" (--empty or --sample: no empty partitions)" if run.empty else "")
            )
        return WritePlan(
            loaded,
            tuple(stage_cols),
            tuple(staged),
            tuple(empties),
            tuple(written),
            columns_added_at=added_at,
            lowest_sequence={**lowest, **dict.fromkeys(empties, math.inf)},
            checked_by=checked_by,
        )

    def check_stage(
        self, run: ChainRun, stage: Stage, stage_cols: Columns
    ) -> tuple[list[Values], dict[Values, float]]:
        """The stage's own checks (checks.check_stage) and its partitions' times."""
        staged, lowest = checks.check_stage(
            self.catalog, run.settings, stage.source(run.tables.stage), stage_cols, stage.rewritten
        )
        checks.check_partition_times(run.settings, staged)
        return staged, lowest

    def _may_defer_checks(self, run: ChainRun, stage: Stage, stage_cols: Columns) -> bool:
        """Whether the stage's checks may wait for the cumulative build of the run's partition
        (Accumulator.checkable decides once the catalog is listed): a daily run of one delta
        partition, staged bare, of a pick-one chain. A chain_partition value of a column that
        is not a string is checked for its spelling by the stage's own checks."""
        opts, spec = run.opts, run.settings.chain_partition
        if not (
            run.publishes
            and run.branch == "delta"
            and stage.partition is not None
            and not run.empty
            and cumulative.build_checks_rows(opts)
            and spec
        ):
            return False
        types = {c.lower(): t for c, t in stage_cols}
        if not all(is_string_type(types.get(c.lower(), "")) for c in spec):
            return False
        checks.check_chain_partition(run.settings, spec)
        try:
            checks.check_partition_times(run.settings, [stage.partition])
        except ChainConfigError:
            return False  # told after the stage's checks, which may refuse its rows first
        return True

    def checked_build(
        self, run: ChainRun, stage: Stage, plan: WritePlan
    ) -> tuple[WritePlan, Prebuilt | None]:
        """Run the cumulative build that checks the staged rows (plan.checked_by), before the
        publish. If its query fails, the stage's own checks name the row that broke a rule
        (nothing was written); if none did (a row at or below the anchor's highest sequence,
        or a failure of its own), the run goes on as any other: checked, built after."""
        if plan.checked_by is None or stage.partition is None:
            return plan, None
        part, names = stage.partition, list(plan.loaded.column_names)
        inside = checks.chain_partition_predicate(run.settings, plan.stage_columns)
        source = stage.source(run.tables.stage)

        def rows(above: tuple[str, int] | None) -> str:
            return stage_sql.guarded_sql(run.opts, names, S.select_all(source), inside, above)

        try:
            loaded, prebuilt = self.accumulator.checked_build(
                plan.loaded, plan.checked_by, part, rows
            )
        except DbtRuntimeError as e:
            logger.info(
                f"'{run.model}': the build stopped at a row it cannot take (see the checks "
                "below) or failed; the staged rows are checked, then built after the publish"
            )
            logger.debug(f"'{run.model}': the build's error: {e}")
            staged, lowest = self.check_stage(run, stage, plan.stage_columns)
            return (
                self.write_plan(
                    run,
                    plan.loaded,
                    plan.stage_columns,
                    staged,
                    lowest,
                    plan.columns_added_at,
                    groups=stage.groups,
                ),
                None,
            )
        return replace(plan, loaded=loaded), prebuilt

    def _create_branches(
        self, run: ChainRun, stage_cols: Columns, old: Loaded | None = None
    ) -> Loaded:
        """A first run or full refresh: the chain's tables dropped and its branches created
        with the model's columns; returns the new catalog. `old`: the chain a full refresh
        replaces (its stored changes go too: their record goes with the branches)."""
        tables, props = run.tables, run.opts.to_properties()
        self.run(S.drop_view(str(tables.view)))
        for rel in (tables.snapshot, tables.delta, tables.cmap, tables.cumulative):
            self.run(S.drop_table(str(rel)))
        if old is not None and old.props.get(P_CHANGES_COLUMNS):
            self.run(S.drop_table(str(changes_table(tables))))
        ordered = table_order(stage_cols, run.opts)
        for branch in ("snapshot", "delta"):
            self.run(create_sql(run, tables.branch(branch), ordered, {**props, P_BRANCH: branch}))
        return self.catalog.load(tables.view)

    def evolve(
        self, run: ChainRun, loaded: Loaded, changes: ChangeSet, names: frozenset[str] | None
    ) -> tuple[Loaded, float | None]:
        """Apply `changes` to the branches; returns the catalog after it and, when columns were
        added, the time.monotonic() of the ADD COLUMNS (the view waits for other sessions'
        cached schemas from then: Finisher)."""
        tables, cat = run.tables, self.catalog
        added_at = None
        if changes.add_columns:
            # the cumulative delta too: the view reads it until it is refreshed
            for rel in (tables.snapshot, tables.delta, tables.cumulative):
                if rel is not tables.cumulative or cat.exists(rel, listed(names, rel)):
                    self.run(S.add_columns(str(rel), changes.add_columns))
            added_at = time.monotonic()
            loaded = replace(loaded, columns=tuple(cat.describe(tables.snapshot)))
        if changes.message:
            logger.info(changes.message)
        if changes.set_properties:  # a config option changed
            for rel in (tables.snapshot, tables.delta):
                cat.set_properties(rel, changes.set_properties)
        if changes.unset_properties:
            for rel in (tables.snapshot, tables.delta):
                self.run(S.unset_properties(str(rel), changes.unset_properties))
        return loaded, added_at
