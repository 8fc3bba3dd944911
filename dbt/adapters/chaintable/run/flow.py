"""One chain_incremental run: decide the branch, stage the model's rows, check them, plan the
partitions written, publish them, then record what they invalidate, refresh the view and expire.
Each step returns an immutable value the next one reads."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dbt.adapters.base.relation import BaseRelation
from dbt.adapters.events.logging import get_node_info
from dbt.adapters.events.types import AdapterEventWarning
from dbt_common.events.functions import warn_or_error
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base import versions
from dbt.adapters.chaintable.base.config import ModelSettings
from dbt.adapters.chaintable.base.failpoints import failpoint
from dbt.adapters.chaintable.base.keys import P_BRANCH, dropped_options
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.base.progress import Stopwatch
from dbt.adapters.chaintable.base.quoting import is_string_type
from dbt.adapters.chaintable.base.runner import logger
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.base.versions import version_location
from dbt.adapters.chaintable.chain.catalog import (
    METADATA_CACHE_TTL,
    Catalog,
    ChainTables,
    Loaded,
    listed,
    name_of,
)
from dbt.adapters.chaintable.chain.state import ChainState
from dbt.adapters.chaintable.compaction.compactor import Compactor
from dbt.adapters.chaintable.cumulative import plan as cumulative
from dbt.adapters.chaintable.cumulative.accumulate import Accumulator, Prebuilt
from dbt.adapters.chaintable.cumulative.plan import Build
from dbt.adapters.chaintable.expiration.expirer import Expirer
from dbt.adapters.chaintable.publish import safety
from dbt.adapters.chaintable.publish.publisher import Publisher
from dbt.adapters.chaintable.read.render import Renderer
from dbt.adapters.chaintable.run import checks
from dbt.adapters.chaintable.run import stage as stage_sql
from dbt.adapters.chaintable.view.writer import ViewWriter

Columns = Sequence[tuple[str, str]]


@dataclass(frozen=True)
class ChainRun:
    """What chain_prepare decided; the materialization hands it to chain_execute."""

    settings: ModelSettings
    tables: ChainTables
    branch: str
    full_refresh: bool
    exists: bool
    empty: bool = False  # dbt run --empty: refs and sources give no rows; no empty partitions
    view_exists: bool = False  # dbt's relation cache had the view when the run began

    @property
    def model(self) -> str:
        return self.settings.model

    @property
    def opts(self) -> ChainOptions:
        return self.settings.opts

    @property
    def publishes(self) -> bool:
        """Writes to an existing chain are published (crash safe); a first run or full refresh
        builds new tables, which a rerun rebuilds."""
        return self.exists and not self.full_refresh

    @property
    def target(self) -> BaseRelation:
        return self.tables.branch(self.branch)

    @property
    def relations(self) -> list[BaseRelation]:
        return [self.tables.view, self.tables.snapshot, self.tables.delta]


@dataclass(frozen=True)
class Stage:
    """Where the model's rows were staged: on an existing chain, a fresh directory below the
    target branch (`location`), in the target's file format: an external table's, or for a run
    of one partition of an unbucketed parquet or ORC table the bare directory."""

    run_id: str = ""
    location: str = ""
    provider: str = "parquet"
    # a run that can write one partition only (chain_partition gives every partition column)
    # stages its rows in a bare directory, published as that partition as it is; the lock
    # names it for recovery (a staging table costs its creation, a DESCRIBE and a DROP)
    partition: Values | None = None
    columns: tuple[tuple[str, str], ...] = ()  # the model's, of a bare directory

    @property
    def directory(self) -> str:
        return version_location(self.location, self.run_id)

    @property
    def bare(self) -> bool:
        return self.partition is not None

    def source(self, table: BaseRelation) -> str:
        """The staged rows as a relation: the bare directory's files or the staging table."""
        return S.files(self.directory, self.provider) if self.bare else str(table)


@dataclass(frozen=True)
class WritePlan:
    loaded: Loaded  # the catalog as the plan read it: only the publish changes it, by `written`
    stage_columns: tuple[tuple[str, str], ...]
    staged: tuple[Values, ...]  # partitions with rows
    empties: tuple[Values, ...]  # chain_partition's "no changes" partitions
    written: tuple[Values, ...]
    columns_added_at: float | None = None  # time.monotonic() of a schema change's ADD COLUMNS
    # per written partition whose rows all have one, the lowest sequence as an integer (an
    # empty partition: infinity); checks.check_stage
    lowest_sequence: Mapping[Values, float] = field(default_factory=dict)
    # the cumulative build that checks the staged rows in place of checks.check_stage
    # (Accumulator.checkable); `staged` then holds the run's partition, rows or none
    checked_by: Build | None = None


# the longest a run waits for other sessions' cached schemas to expire before its view reads
# new columns (a server keeping them longer is told so in the log)
MAX_SCHEMA_WAIT = 120.0


def table_order(cols: Columns, opts: ChainOptions) -> list[tuple[str, str]]:
    """Spark keeps partition columns last, in partition_by order."""
    by_name = {c.lower(): (c, t) for c, t in cols}
    parts = [by_name[p.lower()] for p in opts.partition_by]
    pset = {p.lower() for p in opts.partition_by}
    return [(c, t) for c, t in cols if c.lower() not in pset] + parts


def snapshot_write_needs_merge(opts: ChainOptions) -> bool:
    """A model's rows written to the snapshot branch are raw input: they need merging when a
    key may have several rows in a partition (allowed with a sequence or rowkind field;
    otherwise the stage checks refuse them) and always for aggregation (count counts rows)."""
    return bool(opts.rowkind_field or opts.sequence_field or opts.merge_engine == "aggregation")


def empty_partitions(
    settings: ModelSettings, state: ChainState, staged: Sequence[Values]
) -> list[Values]:
    """With chain_partition, every known group without rows gets an empty partition there."""
    spec, opts = settings.chain_partition, settings.opts
    if not spec:
        return []
    chain = tuple(spec[c] for c in opts.chain_keys)
    groups = set(state.groups()) | {state.layout.split(p)[0] for p in staged}
    gfilter = {i: spec[c] for i, c in enumerate(opts.group_keys) if c in spec}
    if len(gfilter) == state.n_group:
        groups.add(tuple(spec[c] for c in opts.group_keys))
    targets = {g + chain for g in groups if all(g[i] == v for i, v in gfilter.items())}
    return sorted(targets - set(staged))


class RunFlow:
    def __init__(
        self,
        catalog: Catalog,
        publisher: Publisher,
        views: ViewWriter,
        accumulator: Accumulator,
        compactor: Compactor,
        expirer: Expirer,
    ):
        self.catalog, self.publisher, self.views = catalog, publisher, views
        self.accumulator, self.compactor, self.expirer = accumulator, compactor, expirer
        self.run = catalog.runner.run

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
    ) -> ChainRun:
        """Validate the config and decide which branch this run writes
        (docs/design.md#branches-and-relations). `empty` is dbt's --empty: the model's refs and
        sources give no rows, so the run checks and creates the relations and writes only what
        the model still returns; it adds none of chain_partition's empty "no changes"
        partitions (they would replace the day's real deltas with nothing) and expires nothing.
        `existing` finds what `relation` is in dbt's cache, `drop` drops it."""
        settings = ModelSettings.from_config(model, config)
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
        # chain_branch forces the branch, on a first run too: deltas may come before any
        # snapshot (read rule 3 reads a group without one), as in Paimon, where a delta branch
        # is written whether or not the snapshot branch holds anything yet
        branch = settings.chain_branch or ("snapshot" if (not exists or full_refresh) else "delta")
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

    def is_incremental(
        self, relation: BaseRelation, config: Mapping[str, Any], full_refresh: bool
    ) -> bool:
        if full_refresh or dict(config).get("chain_branch") == "snapshot":
            return False
        return self.catalog.branches_exist(ChainTables.of(relation))

    # ---- the run ----------------------------------------------------------------------------------
    def execute(self, run: ChainRun, compiled_code: str) -> str:
        """The whole run under the table's lock: stage the model's rows, check them, publish
        them partition by partition, then invalidate, refresh the view and expire."""
        clock = Stopwatch()
        single = self._single_partition(run)
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
        with self.publisher.locked(run.tables, operation, bare, lease) as names:
            stored = self._stored_properties(run)
            stage = self._stage(run, compiled_code, run_id, single, bare)
            failpoint("run.staged")
            plan = self._plan(run, stage, stored, names)
            prebuilt = None
            if run.publishes:
                plan = replace(
                    plan,
                    loaded=self.accumulator.before_write(plan.loaded, run.branch, plan.written),
                )
                plan, prebuilt = self._checked_build(run, stage, plan)
                invalidated = self._invalidated(run, plan)
                # snapshots to drop or mark stale after the publish: named on the lock first,
                # for whoever recovers from a crash in between (a new newest day has none)
                if invalidated or (
                    run.branch == "delta"
                    and plan.loaded.state().stale_after_delta_write(plan.written)
                ):
                    self.publisher.invalidating(
                        run.tables, stage.run_id, run.opts.partition_by, plan.written, invalidated
                    )
            stage_dropped = self._write(run, stage, plan)
            logger.info(
                f"'{run.model}': {len(plan.written)} partition(s) written to the {run.branch} "
                f"branch ({clock} since the run started)"
            )
            loaded = self._finish(run, plan, stage_dropped, prebuilt)
            compacted = self._maintain(run, loaded)
        return f"OK: {len(plan.written)} {run.branch} partition(s)" + compacted

    def _stored_properties(self, run: ChainRun) -> dict[str, str]:
        """The snapshot branch's properties, read under the lock (current), before the model's
        rows are staged: a config change of how stored partitions are read is refused first."""
        if not run.publishes:
            return {}
        props = self.catalog.properties(run.tables.snapshot)
        stored = ChainOptions.from_properties(str(run.tables.snapshot), props)
        changed = run.opts.structural_differences(stored)
        if changed:
            desc = "; ".join(f"{k} {a} -> {b}" for k, (a, b) in changed.items())
            raise ChainConfigError(
                f"chain_incremental model '{run.model}': {desc} changes how stored partitions "
                "are read; run with --full-refresh to rebuild the chain table"
            )
        return props

    def _create(
        self,
        run: ChainRun,
        rel: BaseRelation,
        cols: Columns,
        props: Mapping[str, str],
        location: str | None = None,
        as_select: str | None = None,
        provider: str | None = None,
        partition_by: Sequence[str] | None = None,
    ) -> str:
        s = run.settings
        return S.create_table(
            str(rel),
            cols,
            s.opts.partition_by if partition_by is None else partition_by,
            {**s.tblproperties, **props},
            file_format=provider or s.file_format,
            location=location or s.location_of(name_of(rel)),
            clustered_by=s.clustered_by,
            buckets=s.buckets,
            as_select=as_select,
        )

    def _stage(
        self,
        run: ChainRun,
        compiled_code: str,
        run_id: str,
        single: Values | None,
        bare: Mapping[str, str] | None,
    ) -> Stage:
        """The model's rows, once. On an existing chain they go to a fresh directory below the
        target branch: `single`, the one partition the run can write (_single_partition), in a
        bare directory (`bare`: what the lock records of it); else an external table
        partitioned and bucketed like the target. After the checks the partitions are
        published as they are (safety.py). A first run or full refresh stages a plain table."""
        cols = self.catalog.describe_query(compiled_code)
        run.opts.validate_columns(run.model, [c for c, _ in cols], dict(cols))  # first
        # no stage is left over: taking the lock ran the recovery, which drops it
        if not run.publishes:
            self.run(S.create_scratch_as(str(run.tables.stage), compiled_code))
            return Stage()
        info = self.catalog.formatted(run.target)
        provider = info.get("Provider", "parquet")
        bucketed = bool(run.settings.buckets) or int(info.get("Num Buckets") or 0) > 0
        if single is not None and (provider.lower() not in safety.BY_NAME_FORMATS or bucketed):
            # files that must not hold the partition columns, or bucket files: a staging table
            # lays them out, in a directory of its own (the one the lock names stays unwritten)
            single, run_id = None, versions.new_run_id()
        stage = Stage(run_id, info["Location"], provider, single, tuple(cols))
        if stage.bare:
            self.run(S.write_directory(stage.directory, provider, compiled_code))
            self.publisher.staged(run.tables, bare or {})
            return stage
        self.run(
            self._create(
                run,
                run.tables.stage,
                [],
                {safety.P_TARGET: str(run.target)},
                location=stage.directory,
                as_select=compiled_code,
                provider=provider,
            )
        )
        return stage

    @staticmethod
    def _invalidated(run: ChainRun, plan: WritePlan) -> list[Values]:
        """The snapshot partitions a delta write of `plan` invalidates: the same partitions
        (a rewritten delta P invalidates snapshot P)."""
        if run.branch != "delta" or not run.publishes:
            return []
        snapshots = set(plan.loaded.snapshots)
        return [p for p in plan.written if p in snapshots]

    @staticmethod
    def _before_history(loaded: Loaded, parts: Sequence[Values]) -> list[Values]:
        """The partitions of `parts` at or before the oldest snapshot that expiration kept in
        their group (planner.before_history): history that is gone."""
        state, history = loaded.state(), loaded.history()
        return [p for p in parts if state.before_history(p, history)]

    @classmethod
    def _refuse_expired_history(
        cls, run: ChainRun, loaded: Loaded, staged: Sequence[Values]
    ) -> None:
        """A delta at or before the oldest snapshot expiration kept would change history that
        is gone."""
        if run.branch != "delta":
            return
        early = cls._before_history(loaded, staged)
        if early:
            raise ChainConfigError(
                f"chain_incremental model '{run.model}': delta partition "
                f"{run.settings.layout.path(early[0])} is at or before the oldest "
                "snapshot that expiration kept in its group; the history it would change is "
                "gone, so the day cannot be rewritten (write it with chain_branch='snapshot' "
                "as a full state instead); nothing was written"
            )

    @staticmethod
    def _single_partition(run: ChainRun) -> Values | None:
        """The one partition a run of an existing chain can write, when chain_partition gives
        every partition column and the stage is published as it is (no merge of a snapshot
        write); else None (a stage partitioned like its target). Its target must also read
        columns by name and have no buckets (_stage)."""
        spec, opts = run.settings.chain_partition, run.opts
        if not run.publishes or not spec or any(c not in spec for c in opts.partition_by):
            return None
        if run.branch == "snapshot" and snapshot_write_needs_merge(opts):
            return None
        return tuple(str(spec[c]) for c in opts.partition_by)

    def _plan(
        self,
        run: ChainRun,
        stage: Stage,
        stored: Mapping[str, str],
        names: frozenset[str] | None,
    ) -> WritePlan:
        """Check the staged rows (refused: nothing published; a daily run whose cumulative
        build can check them leaves that to the build: _checked_build), create the branches on
        a first run, and decide the partitions this run writes (the model's and the empty ones).
        `stored`: the snapshot branch's properties read under the lock; `names`: the chain's
        tables as the lock's recovery listed them."""
        tables, opts, cat = run.tables, run.opts, self.catalog
        # a bare directory holds the model's columns as DESCRIBE QUERY gave them
        stage_cols = list(stage.columns) if stage.bare else cat.describe(tables.stage)
        deferred = self._may_defer_checks(run, stage, stage_cols)
        staged: list[Values]
        lowest: dict[Values, float]
        if deferred and stage.partition is not None:
            staged, lowest = [stage.partition], {}
        else:
            staged, lowest = self._check_stage(run, stage, stage_cols)
        props = opts.to_properties()
        added_at = None
        if run.full_refresh and run.exists:
            old = cat.load(tables.view)
            logger.info(
                f"full refresh of '{run.model}': dropping {len(old.snapshots)} snapshot "
                f"and {len(old.deltas)} delta partitions"
            )
        if not run.publishes:
            self.run(S.drop_view(str(tables.view)))
            for rel in (tables.snapshot, tables.delta, tables.cmap, tables.cumulative):
                self.run(S.drop_table(str(rel)))
            ordered = table_order(stage_cols, opts)
            for branch in ("snapshot", "delta"):
                self.run(
                    self._create(run, tables.branch(branch), ordered, {**props, P_BRANCH: branch})
                )
            loaded = cat.load(tables.view)
        else:
            columns = table_order(stage_cols, opts)
            stored_cols = cat.describe(tables.snapshot)
            try:
                added, message = checks.schema_change(
                    run.settings, str(tables.delta), columns, stored_cols
                )
            except ChainConfigError:
                if deferred:  # bad rows are told first, as on any other run
                    checks.check_stage(cat, run.settings, stage.source(tables.stage), stage_cols)
                raise
            dropped = dropped_options(stored, props)
            kept = {k: v for k, v in stored.items() if k not in dropped}
            # the catalog as this run leaves it (the options below), listed once
            loaded = cat.loaded(tables, {**kept, **props}, stored_cols, names)
            changes = added or dropped or any(stored.get(k) != v for k, v in props.items())
            if deferred and (
                changes
                or self._before_history(loaded, staged)
                or (checked_by := self.accumulator.checkable(loaded, staged[0])) is None
            ):
                # the run changes the tables before it publishes, or the build cannot check
                # the rows: the stage's own checks, as on any other run, before anything
                deferred = False
                staged, lowest = self._check_stage(run, stage, stage_cols)
            self._refuse_expired_history(run, loaded, staged)  # before anything changes
            if added:
                # the cumulative delta too: the view reads it until it is refreshed
                for rel in (tables.snapshot, tables.delta, tables.cumulative):
                    if rel is not tables.cumulative or cat.exists(rel, listed(names, rel)):
                        self.run(S.add_columns(str(rel), added))
                added_at = time.monotonic()
                loaded = replace(loaded, columns=tuple(cat.describe(tables.snapshot)))
            if message:
                logger.info(message)
            if any(stored.get(k) != v for k, v in props.items()):  # a config option changed
                for rel in (tables.snapshot, tables.delta):
                    cat.set_properties(rel, props)
            if dropped:
                for rel in (tables.snapshot, tables.delta):
                    self.run(S.unset_properties(str(rel), dropped))
        return self._written(
            run,
            loaded,
            stage_cols,
            staged,
            lowest,
            added_at,
            checked_by if deferred and run.publishes else None,
        )

    def _written(
        self,
        run: ChainRun,
        loaded: Loaded,
        stage_cols: Columns,
        staged: Sequence[Values],
        lowest: Mapping[Values, float],
        added_at: float | None,
        checked_by: Build | None = None,
    ) -> WritePlan:
        """The plan of the partitions a run writes: the staged ones and the empty ones."""
        state = loaded.state()
        empties = [] if run.empty else empty_partitions(run.settings, state, staged)
        if run.branch == "delta":
            # a group whose kept history starts at or after this day has no day here to mark
            # "no changes": its day is that snapshot or expired, and an empty delta would drop
            # the snapshot, the group's only record of its history
            before = self._before_history(loaded, empties)
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
                + (" (--empty: no empty partitions)" if run.empty else "")
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

    def _check_stage(
        self, run: ChainRun, stage: Stage, stage_cols: Columns
    ) -> tuple[list[Values], dict[Values, float]]:
        """The stage's own checks (checks.check_stage) and its partitions' times."""
        staged, lowest = checks.check_stage(
            self.catalog, run.settings, stage.source(run.tables.stage), stage_cols
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

    def _checked_build(
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
            staged, lowest = self._check_stage(run, stage, plan.stage_columns)
            return (
                self._written(
                    run, plan.loaded, plan.stage_columns, staged, lowest, plan.columns_added_at
                ),
                None,
            )
        return replace(plan, loaded=loaded), prebuilt

    def _write(self, run: ChainRun, stage: Stage, plan: WritePlan) -> bool:
        """Write or publish the planned partitions; True when no staging table is left (the
        publish dropped it, or the rows were staged in a bare directory)."""
        tables, opts, loaded = run.tables, run.opts, plan.loaded
        renderer = Renderer.of(loaded)
        target = run.target
        before = loaded.snapshots if run.branch == "snapshot" else loaded.deltas
        source = renderer.select_all(str(tables.stage))
        merge = run.branch == "snapshot" and snapshot_write_needs_merge(opts)
        if merge:
            source = renderer.batch_merge(source)
        if not run.publishes:  # first run / full refresh: the tables are new, nothing to protect
            for part in plan.empties:
                self.run(renderer.empty_partition(str(target), part))
            self.run(renderer.insert_overwrite(str(target), source))
            return False
        if merge:  # the stage holds raw rows: publish the merged ones from a table of their own
            self.publisher.create_pub(target, loaded, source, plan.written, stage.run_id + "-m")
            self.publisher.publish(
                target, tables.pub, opts.partition_by, plan.written, existing=before
            )
            return False
        if stage.bare:  # its directory is the one partition, rows or none
            if stage.partition not in plan.written:  # --empty: nothing to publish
                self.publisher.gc(tables, [stage.directory])
                return True
            self.publisher.publish(
                target,
                None,
                opts.partition_by,
                plan.written,
                existing=before,
                directories={stage.partition: stage.directory},
            )
            return True
        stage_renderer = Renderer(
            opts,
            [c for c, _ in table_order(plan.stage_columns, opts)],
            dict(plan.stage_columns),
            str(tables.stage),
            "",
        )
        for part in plan.empties:
            self.run(stage_renderer.empty_partition(str(tables.stage), part))
        self.publisher.publish(
            target, tables.stage, opts.partition_by, plan.written, existing=before
        )
        return True

    def _await_cached_schemas(self, run: ChainRun, plan: WritePlan) -> None:
        """After new columns, before the view reads them: a session of a shared server that read
        the chain before keeps the branches' old schema cached, and a view naming a new column
        fails there (UNRESOLVED_COLUMN) until that cache expires. The old view names none, so
        the run waits out the server's cache time first (docs/design.md#crash-safety-and-locking)."""
        if plan.columns_added_at is None:
            return
        ttl = self.catalog.metadata_cache_ttl()
        if ttl is None:
            logger.info(
                f"'{run.model}': new columns; sessions of a shared server that read "
                f"{run.tables.view} before keep its old columns until they reconnect or run "
                f"REFRESH TABLE, unless the server sets {METADATA_CACHE_TTL} (README: running "
                "on a cluster)"
            )
            return
        wait = min(ttl, MAX_SCHEMA_WAIT) + 0.5 - (time.monotonic() - plan.columns_added_at)
        if ttl > MAX_SCHEMA_WAIT:
            logger.warning(
                f"'{run.model}': {METADATA_CACHE_TTL} is {ttl:.0f}s; the run waits "
                f"{MAX_SCHEMA_WAIT:.0f}s at most, so sessions that read the chain before may "
                "fail on the new columns for the rest of that time"
            )
        if wait > 0:
            logger.info(
                f"'{run.model}': waiting {wait:.1f}s for other sessions' cached schemas "
                f"({METADATA_CACHE_TTL} = {ttl:g}s) before the view reads the new columns"
            )
            time.sleep(wait)
        else:  # the run's own work since the ADD COLUMNS took longer than the cache lives
            logger.info(
                f"'{run.model}': other sessions' cached schemas ({METADATA_CACHE_TTL} = "
                f"{ttl:g}s) expired while the run wrote; the view reads the new columns"
            )

    def _finish(
        self,
        run: ChainRun,
        plan: WritePlan,
        stage_dropped: bool,
        prebuilt: Prebuilt | None = None,
    ) -> Loaded:
        """After the publish: record stale snapshots, point the view at the new state, then drop
        the snapshots a rewritten delta invalidates (the view no longer reads them) and the
        stage. Returns the catalog as it now is."""
        tables, lay = run.tables, plan.loaded.layout
        # a publish switched or added exactly `plan.written` in the target branch and changed no
        # properties or columns; a first run's new tables are read again
        loaded = (
            plan.loaded.with_published(run.branch, plan.written)
            if run.publishes
            else self.catalog.load(tables.view)
        )
        stale = loaded.stale()
        invalidated: list[Values] = []
        if run.branch == "delta":
            invalidated = self._invalidated(run, plan)  # dropped below
            stale = loaded.stale_after_delta_write(plan.written, invalidated)
        else:
            written = {lay.path(p) for p in plan.written}
            stale = {k: v for k, v in stale.items() if k not in written}
        if stale != loaded.stale():
            self.catalog.set_stale(tables, stale)
        # the snapshots a rewritten delta invalidates are dropped below: no day is built on them
        loaded = self.accumulator.after_write(
            loaded.without(snapshots=invalidated),
            plan.written,
            plan.lowest_sequence if run.branch == "delta" else {},  # of delta rows only
            prebuilt,
        )
        self._await_cached_schemas(run, plan)
        # a publish keeps the view; a first run or full refresh dropped it
        loaded = self.views.refresh(loaded, view_exists=run.view_exists and run.publishes)
        failpoint("run.view")
        if invalidated:
            logger.info(
                f"'{run.model}': rewritten delta partition(s) invalidate snapshot "
                f"partition(s) {[lay.path(p) for p in invalidated]}"
            )
            self.catalog.retire(
                "invalidated snapshot partitions",
                Renderer.of(loaded).drop_partitions(str(tables.snapshot), invalidated),
            )
        self.publisher.invalidated(tables)  # the lock forgets what it named for recovery
        if not stage_dropped:
            self.publisher.drop_scratch(tables)
        return loaded

    def _maintain(self, run: ChainRun, loaded: Loaded) -> str:
        """After the day is published: compact what the inline compaction policy says is due,
        then expire when configured and due (so a new anchor counts at once). A failed
        compaction leaves the day published and readable: the run warns (an error under
        --warn-error) and expires nothing this time; the next run or compact_chain retries.
        Returns what the run's result message adds."""
        if run.empty:
            return ""
        rule = run.opts.compaction
        if rule is not None and rule.mode == "inline":
            try:
                self.compactor.compact_due(loaded, f"'{run.model}'")
            except DbtRuntimeError as e:
                self.publisher.recover(run.tables)  # the failed write leaves nothing behind
                warn_or_error(
                    AdapterEventWarning(
                        name=logger.name,
                        base_msg=(
                            f"chain_incremental model '{run.model}': the inline compaction "
                            f"failed; the run's {run.branch} partition(s) are published and "
                            "readable, and the next run (or compact_chain with no partition) "
                            f"retries what is due: {e}"
                        ),
                        args=[],
                        node_info=get_node_info(),
                    )
                )
                return "; compaction failed"
        if run.opts.expiration_enabled:
            self.expirer.auto_expire(run.tables.view)
        return ""
