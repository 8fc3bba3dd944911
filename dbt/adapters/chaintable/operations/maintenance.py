"""Operations on an existing chain: chain_read, compaction, expiration (explicit and at the end
of a run), dropping one partition, and chain_status."""

from __future__ import annotations

import datetime as dt
from typing import Any

from dbt.adapters.base.relation import BaseRelation

from dbt.adapters.chaintable.base import timestamps, versions
from dbt.adapters.chaintable.base.failpoints import failpoint
from dbt.adapters.chaintable.base.keys import BRANCHES, P_LAST_EXPIRE_CHECK, history_from_properties
from dbt.adapters.chaintable.base.partitions import (
    ChainPlanError,
    Values,
    format_partition,
    parse_flag,
    parse_partition_spec,
)
from dbt.adapters.chaintable.base.progress import Stopwatch
from dbt.adapters.chaintable.base.runner import logger
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.chain.catalog import Catalog, ChainTables, Loaded
from dbt.adapters.chaintable.chain.state import ReadPlan
from dbt.adapters.chaintable.compaction import policy
from dbt.adapters.chaintable.compaction.plan import plan_compaction, stale_after_compaction
from dbt.adapters.chaintable.cumulative.accumulate import Accumulator
from dbt.adapters.chaintable.cumulative.plan import served_days
from dbt.adapters.chaintable.expiration import plan as expire
from dbt.adapters.chaintable.expiration.plan import ExpirationPlan, expirable
from dbt.adapters.chaintable.operations import status as status_mod
from dbt.adapters.chaintable.publish.publisher import Publisher
from dbt.adapters.chaintable.read.render import Renderer
from dbt.adapters.chaintable.view.writer import ViewWriter

TS_FORMAT = "%Y-%m-%d %H:%M:%S"
NOW_FORMATS = (TS_FORMAT, "%Y-%m-%d %H:%M", "%Y-%m-%d", "%Y-%m-%dT%H:%M:%S")


def parse_now(now: str | None) -> dt.datetime:
    if not now:
        return dt.datetime.now().replace(microsecond=0)
    text = str(now).strip()
    for fmt in NOW_FORMATS:
        try:
            return dt.datetime.strptime(text, fmt)
        except ValueError:
            continue
    raise ChainPlanError(f"cannot parse now '{now}': expected 'yyyy-MM-dd HH:mm:ss'")


class Maintenance:
    def __init__(
        self, catalog: Catalog, publisher: Publisher, views: ViewWriter, accumulator: Accumulator
    ):
        self.catalog, self.publisher, self.views = catalog, publisher, views
        self.accumulator = accumulator
        self.run = catalog.runner.run

    # ---- reads --------------------------------------------------------------------------------
    def read_sql(self, relation: BaseRelation, partition: Any) -> str:
        """Full state of one partition (all groups, or the groups the spec names) as a SELECT."""
        loaded = self.catalog.load(relation)
        plans = loaded.state().plan_partition_read(parse_partition_spec(partition))
        return Renderer.of(loaded).partition_read(plans, served_days(loaded, plans))

    def status(self, relation: BaseRelation, now: str | None = None) -> str:
        loaded = self.catalog.load(relation)
        plan = (
            self.expiration_plan(loaded, parse_now(now)) if loaded.opts.expiration_enabled else None
        )
        state = loaded.state()
        serving = served_days(loaded, state.delta_only()) if loaded.opts.cumulative_delta else None
        verdicts = self.compaction_verdicts(loaded) if loaded.opts.compaction else None
        return status_mod.render(loaded.opts, state, loaded.stale(), plan, serving, verdicts)

    # ---- compaction ---------------------------------------------------------------------------
    def compact(self, relation: BaseRelation, partition: Any, overwrite: bool) -> bool:
        """compact_chain: the partition given, or with none what the policy says is due."""
        rewrite = parse_flag(overwrite, "overwrite")
        due = partition is None or partition in ("", {})
        if due and rewrite:
            raise ChainPlanError(
                f"compact_chain {relation}: overwrite needs a partition (without one it compacts "
                "what the compaction policy says is due, which has no snapshot to overwrite)"
            )
        with self.publisher.locked(ChainTables.of(relation), "compact_chain"):
            if due:
                return self.compact_due(self.catalog.load(relation), "compact_chain")
            return self._compact(relation, parse_partition_spec(partition), rewrite)

    def compaction_verdicts(self, loaded: Loaded) -> list[policy.Verdict]:
        """Per group, whether its newest day is due under the model's chain_compaction."""
        assert loaded.opts.compaction is not None
        state = loaded.state()
        plans = policy.needs_counts(loaded.opts.compaction, state)
        return policy.decide(loaded.opts.compaction, state, self._counts(loaded, plans))

    def _counts(self, loaded: Loaded, plans: list[ReadPlan]) -> dict[Values, policy.Counts]:
        """The ratio trigger's counts of `plans` (newest days): the distinct keys of the day's
        deltas since its anchor (policy.Counts), and the anchor's rows. Counted from the deltas
        whether or not the cumulative delta serves the day: its rows leave out the keys whose
        delta rows lose to the anchor, so counting them would make the policy, and through it
        what later days read, depend on the cache."""
        if not plans:
            return {}
        renderer, fetch = Renderer.of(loaded), self.catalog.runner.fetch

        def by_group(sql: str) -> dict[Values, int]:
            return {tuple(str(v) for v in row[:-1]): int(row[-1]) for row in fetch(sql)}

        deltas = [p.group + d for p in plans for d in p.deltas]
        changed = by_group(renderer.keys_by_group(str(loaded.tables.delta), deltas))
        anchors = [p.group + p.anchor for p in plans if p.anchor is not None]
        rows = (
            by_group(renderer.count_by_group(str(loaded.tables.snapshot), anchors))
            if anchors
            else {}
        )
        return {
            p.group: policy.Counts(changed.get(p.group, 0), rows.get(p.group, 0)) for p in plans
        }

    def compact_due(self, loaded: Loaded, who: str) -> bool:
        """Compact each group's newest day that the policy says is due (one compaction per
        day, all its due groups), under the caller's lock; True when anything was written.
        `loaded` is the catalog as it is now."""
        name, rule = loaded.tables.view, loaded.opts.compaction
        if rule is None:
            raise ChainPlanError(
                f"{who} {name}: give the partition to compact (e.g. partition: {{dt: "
                "'20250811'}), or configure chain_compaction on the model to compact what it "
                "says is due"
            )
        state = loaded.state()
        verdicts = self.compaction_verdicts(loaded)
        due = policy.due_by_day(verdicts, state)
        for v in verdicts:
            day = format_partition(loaded.opts.chain_keys, v.newest) if v.newest else "-"
            logger.info(
                f"  {state.describe_group(v.group)}: newest day {day}: "
                f"{'due' if v.due else 'not due'} ({v.reason})"
            )
        if not due:
            logger.info(f"{who} {name}: no compaction due ({rule.describe()})")
            return False
        n_groups = sum(len(g) for _, g in due)
        logger.info(
            f"{who} {name}: compacting {n_groups} group(s) due under "
            f"chain_compaction ({rule.describe()})"
        )
        clock = Stopwatch()
        for chain, groups in due:
            spec = dict(zip(loaded.opts.chain_keys, chain, strict=True))
            self._compact(name, spec, overwrite=False, only=groups)
        logger.info(f"{who} {name}: compacted {n_groups} group(s) on {len(due)} day(s) in {clock}")
        return True

    def _compact(
        self,
        relation: BaseRelation,
        spec: dict[str, str],
        overwrite: bool,
        only: list[Values] | None = None,
    ) -> bool:
        clock = Stopwatch()
        loaded = self.catalog.load(relation)
        state, renderer, lay = loaded.state(), Renderer.of(loaded), loaded.layout
        plan = plan_compaction(
            state, spec, overwrite=bool(overwrite), history=loaded.history(), only=only
        )
        logger.info(f"compact_chain {relation}: {plan.message}")
        if not plan.written:
            return False
        for p in plan.writes:
            anchor = lay.chain_path(p.anchor) if p.anchor else "none"
            logger.info(
                f"  {state.describe_group(p.group)}: anchor {anchor} + {len(p.deltas)} "
                f"delta partition(s) -> snapshot {lay.chain_path(p.chain)}"
            )
        written = [p.group + p.chain for p in plan.writes]
        loaded = self.accumulator.before_write(loaded, "snapshot", written)
        # merged rows land in a fresh directory, then each snapshot partition is switched to it;
        # the view's merged branch for a delta-only partition keeps reading the same rows until
        # the refresh below, because its snapshot branch excludes that partition
        snapshot = loaded.tables.snapshot
        source = renderer.merged(plan.chain, plan.writes, serving=served_days(loaded, plan.writes))
        self.publisher.create_pub(
            snapshot, loaded, source, written, versions.new_run_id(), by_key=True
        )
        failpoint("compact.staged")
        self.publisher.publish(
            snapshot,
            loaded.tables.pub,
            loaded.opts.partition_by,
            written,
            existing=loaded.snapshots,
        )
        for row in self.catalog.runner.fetch(renderer.count_by_group(str(snapshot), written)):
            group = tuple(str(v) for v in row[:-1])
            logger.info(f"  wrote {row[-1]} row(s) for {state.describe_group(group)}")
        logger.info(
            f"compact_chain {relation}: {len(written)} snapshot partition(s) published "
            f"({clock} since the start)"
        )
        stale = loaded.stale()
        by_values = {lay.parse(k): v for k, v in stale.items()}
        after = {lay.path(k): v for k, v in stale_after_compaction(plan.writes, by_values).items()}
        if after != stale:
            self.catalog.set_stale(loaded.tables, after)
        # the publish added or switched exactly `written` in the snapshot branch (under the lock)
        loaded = self.accumulator.after_write(loaded.with_published("snapshot", written), written)
        loaded = self.views.refresh(loaded)
        if loaded.opts.cumulative_delta:  # the new anchors' highest sequence, for the next runs
            self.accumulator.anchor_sequence_max(loaded, written)
        return True

    # ---- expiration ---------------------------------------------------------------------------
    def expiration_plan(self, loaded: Loaded, now: dt.datetime) -> ExpirationPlan:
        opts, state = loaded.opts, loaded.state()
        if not opts.expiration_enabled:
            raise ChainConfigError(
                f"{loaded.tables.view}: partition_expiration_time is not configured"
            )
        assert opts.timestamp_pattern and opts.timestamp_formatter and opts.expiration_time

        pattern, formatter = opts.timestamp_pattern, opts.timestamp_formatter

        def time_of(group: Values, chain: Values) -> dt.datetime:
            return timestamps.partition_time(
                pattern, formatter, dict(zip(opts.partition_by, group + chain, strict=True))
            )

        # a group with stale snapshots keeps the partitions they must be rebuilt from until
        # they are recompacted (ChainState.expirable)
        stale = [loaded.layout.parse(k) for k in loaded.stale()]
        snapshots, deltas, held = expirable(state, stale)
        for g in sorted({state.layout.split(p)[0] for p in stale}):
            kept = (
                "not expired"
                if g in held
                else "only its history before the snapshot the first of them is rebuilt from "
                "expires"
            )
            logger.info(
                f"{loaded.tables.view}: {state.describe_group(g)} has stale snapshots "
                f"(chain_status lists them); {kept} until they are recompacted"
            )
        return expire.plan_expiration(
            [state.layout.split(p) for p in snapshots],
            [state.layout.split(p) for p in deltas],
            time_of,
            now,
            timestamps.parse_duration(opts.expiration_time),
            opts.max_num,
        )

    def expire(self, relation: BaseRelation, now: str | None, dry_run: bool) -> list[str]:
        if parse_flag(dry_run, "dry_run"):
            loaded = self.catalog.load(relation)
            return self._apply_expiration(
                loaded, self.expiration_plan(loaded, parse_now(now)), dry_run=True
            )
        with self.publisher.locked(ChainTables.of(relation), "expire_chain"):
            loaded = self.catalog.load(relation)
            plan = self.expiration_plan(loaded, parse_now(now))
            return self._apply_expiration(loaded, plan, dry_run=False)

    def _apply_expiration(self, loaded: Loaded, plan: ExpirationPlan, dry_run: bool) -> list[str]:
        lay = loaded.layout

        def path(group: Values, chain: Values) -> str:
            return lay.path(group + chain)

        lines = expire.format_plan(plan, path)
        verb = "would drop" if dry_run else "dropping"
        header = f"expire_chain {loaded.tables.view} (cutoff {plan.cutoff:%Y-%m-%d %H:%M:%S}): " + (
            "nothing to expire"
            if plan.is_empty()
            else f"{verb} "
            f"{len(plan.snapshot_drops())} snapshot and {len(plan.delta_drops())} "
            "delta partition(s)"
        )
        if dry_run or plan.is_empty():
            return [header, *lines]
        clock = Stopwatch()
        renderer = Renderer.of(loaded)
        deltas = [g + c for g, c in plan.delta_drops()]
        snaps = [g + c for g, c in plan.snapshot_drops()]
        # The view stops reading the expired partitions first; then deltas go before snapshots:
        # a crash in between leaves extra snapshots, never deltas without their anchor.
        history = history_from_properties(loaded.props)
        for g in plan.groups:
            if g.segments:
                assert g.kept_from is not None  # a group with segments keeps its anchor
                history[lay.group_path(g.group)] = lay.chain_path(g.kept_from)
        self.catalog.set_history(loaded.tables, history)
        self.views.refresh(loaded, loaded.state().without(snapshots=snaps, deltas=deltas))
        self.catalog.retire(
            "expired partitions", renderer.drop_partitions(str(loaded.tables.delta), deltas)
        )
        failpoint("expire.deltas")
        self.run(renderer.drop_partitions(str(loaded.tables.snapshot), snaps))
        stale = loaded.stale()
        dropped = {lay.path(p) for p in snaps}
        if any(k in dropped for k in stale):
            self.catalog.set_stale(
                loaded.tables, {k: v for k, v in stale.items() if k not in dropped}
            )
        for line in [header, *lines]:
            logger.info(line)
        logger.info(
            f"expire_chain {loaded.tables.view}: {len(snaps)} snapshot and {len(deltas)} delta "
            f"partition(s) dropped in {clock}"
        )
        return [header, *lines]

    def auto_expire(self, relation: BaseRelation) -> None:
        """Runs at the end of a chain run when the check interval has elapsed since the last
        check; the last check time lives in the table's properties (survives processes)."""
        loaded = self.catalog.load(relation)
        opts = loaded.opts
        now = dt.datetime.now().replace(microsecond=0)
        last = loaded.props.get(P_LAST_EXPIRE_CHECK)
        interval = (
            timestamps.parse_duration(opts.check_interval)
            if opts.check_interval
            else dt.timedelta(0)
        )
        if last and now - dt.datetime.strptime(last, TS_FORMAT) < interval:
            logger.info(
                f"{relation}: partition expiration checked at {last}; next check after "
                f"{opts.check_interval}"
            )
            return
        self._apply_expiration(loaded, self.expiration_plan(loaded, now), dry_run=False)
        self.catalog.set_properties(
            loaded.tables.snapshot, {P_LAST_EXPIRE_CHECK: now.strftime(TS_FORMAT)}
        )

    # ---- dropping one partition ---------------------------------------------------------------
    def drop_partition(self, relation: BaseRelation, partition: Any, branch: str) -> str:
        """Drop one partition of a branch, refusing a snapshot that later deltas depend on."""
        with self.publisher.locked(ChainTables.of(relation), "drop_chain_partition"):
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
            error = expire.check_snapshot_drop(
                group,
                chain,
                state.snapshot_chains().get(group, []),
                state.delta_chains().get(group, []),
                state.sort_key,
            )
            if error:
                raise ChainPlanError(f"drop_chain_partition {relation} {label}: {error}")
        gone = {"snapshots" if branch == "snapshot" else "deltas": [values]}
        self.views.refresh(loaded, state.without(**gone))
        self.catalog.retire(
            "the dropped partition",
            Renderer.of(loaded).drop_partitions(str(loaded.tables.branch(branch)), [values]),
        )
        return f"{relation}: dropped {branch} partition {label}"
