"""Expiration's execution (docs/design.md#expiration): the plan (plan.py) for a time `now`,
applied under the chain's lock, on request or at the end of a run once the check interval has
passed."""

from __future__ import annotations

import datetime as dt

from dbt.adapters.base.relation import BaseRelation

from dbt.adapters.chaintable.base import timestamps
from dbt.adapters.chaintable.base.failpoints import failpoint
from dbt.adapters.chaintable.base.keys import P_LAST_EXPIRE_CHECK, history_from_properties
from dbt.adapters.chaintable.base.partitions import ChainPlanError, Values, parse_flag
from dbt.adapters.chaintable.base.progress import Stopwatch
from dbt.adapters.chaintable.base.runner import logger
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.chain.catalog import Catalog, Loaded
from dbt.adapters.chaintable.chain.tables import ChainTables
from dbt.adapters.chaintable.expiration.plan import (
    ExpirationPlan,
    expirable,
    format_plan,
    plan_expiration,
)
from dbt.adapters.chaintable.read.render import Renderer
from dbt.adapters.chaintable.write.unit import WriteUnit

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


class Expirer:
    def __init__(self, catalog: Catalog, unit: WriteUnit):
        self.catalog, self.unit, self.views = catalog, unit, unit.views
        self.run = catalog.runner.run

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
        # they are recompacted (expiration/plan.py, expirable)
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
        return plan_expiration(
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
        with self.unit.locked(ChainTables.of(relation), "expire_chain"):
            loaded = self.catalog.load(relation)
            plan = self.expiration_plan(loaded, parse_now(now))
            return self._apply_expiration(loaded, plan, dry_run=False)

    def _apply_expiration(self, loaded: Loaded, plan: ExpirationPlan, dry_run: bool) -> list[str]:
        lay = loaded.layout

        def path(group: Values, chain: Values) -> str:
            return lay.path(group + chain)

        lines = format_plan(plan, path)
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
