"""Compaction's execution (docs/design.md#compaction): under the chain's lock, the snapshot
partitions a plan names are written from their merged reads, published, and the view, the stale
marks and the cumulative delta follow. The policy (policy.py) says which days are due."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dbt.adapters.base.relation import BaseRelation

from dbt.adapters.chaintable.base import versions
from dbt.adapters.chaintable.base.failpoints import failpoint
from dbt.adapters.chaintable.base.keys import P_COMPACTED
from dbt.adapters.chaintable.base.partitions import (
    ChainPlanError,
    Values,
    format_partition,
    parse_flag,
    parse_partition_spec,
)
from dbt.adapters.chaintable.base.progress import Stopwatch
from dbt.adapters.chaintable.base.runner import logger
from dbt.adapters.chaintable.chain import generations, lineage
from dbt.adapters.chaintable.chain.catalog import Catalog, Loaded
from dbt.adapters.chaintable.chain.state import ChainState, ReadPlan
from dbt.adapters.chaintable.chain.tables import ChainTables
from dbt.adapters.chaintable.compaction import policy
from dbt.adapters.chaintable.compaction.plan import (
    plan_compaction,
    rows_per_group,
    stale_after_compaction,
    written_scan,
)
from dbt.adapters.chaintable.cumulative import sql as cumulative_sql
from dbt.adapters.chaintable.cumulative.accumulate import Accumulator
from dbt.adapters.chaintable.cumulative.plan import ordinal_sequence_type, served_days
from dbt.adapters.chaintable.read.render import Renderer
from dbt.adapters.chaintable.write.unit import Write, WriteUnit


class Compactor:
    def __init__(self, catalog: Catalog, unit: WriteUnit, accumulator: Accumulator):
        self.catalog, self.unit, self.accumulator = catalog, unit, accumulator
        self.publisher = unit.publisher
        self.run = catalog.runner.run

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
        with self.unit.locked(ChainTables.of(relation), "compact_chain"):
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
        write = Write("snapshot", tuple(written))
        loaded = self.unit.before_write(loaded, write)
        # merged rows land in a fresh directory, then each snapshot partition is switched to it;
        # the view's merged branch for a delta-only partition keeps reading the same rows until
        # the refresh below, because its snapshot branch excludes that partition
        snapshot = loaded.tables.snapshot
        source = renderer.merged(plan.chain, plan.writes, serving=served_days(loaded, plan.writes))
        known = self.publisher.create_pub(
            snapshot, loaded, source, written, versions.new_run_id(), by_key=True
        )
        failpoint("compact.staged")
        props = self.publisher.publish(
            snapshot,
            loaded.tables.pub,
            loaded.opts.partition_by,
            written,
            existing=loaded.snapshots,
            directories=known,
        )
        highest = self._scan_written(loaded, renderer, state, written)
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
        published = loaded.with_published("snapshot", written)
        self._record_compacted(published, props, plan.writes)
        loaded = self.unit.published(published, write)
        if loaded.opts.cumulative_delta:  # the new anchors' highest sequence, for the next runs
            self.accumulator.anchor_sequence_max(loaded, written, highest)
        return True

    def _record_compacted(
        self, published: Loaded, props: dict[str, str], writes: Sequence[ReadPlan]
    ) -> None:
        """Which reads the snapshot partitions just published (`published`: the catalog after
        it) equal (chain/lineage.py), with the tokens the publish gave them (`props`: the
        properties it left): after the publish, so a crash before leaves no record and the
        partition counts as a full write."""
        snapshot = published.tables.snapshot
        tokens = generations.tokens_of(props)
        entries = lineage.entries_of(props)
        recorded = lineage.record(
            published.state(), entries, writes, tokens, published.column_names
        )
        if recorded != entries:
            # a writer whose lease ran out may not record what a later one changed since
            self.publisher.lock.check_lease(str(published.tables.lock))
            value = json.dumps(recorded, separators=(",", ":"))
            self.catalog.set_properties(snapshot, {P_COMPACTED: value})

    def _scan_written(
        self, loaded: Loaded, renderer: Renderer, state: ChainState, written: list[Values]
    ) -> dict[Values, int | None] | None:
        """One scan of the snapshot partitions just `written`: logs the rows written per group
        and, where the cumulative delta records the new anchors' highest sequence for the next
        runs (Accumulator.anchor_sequence_max), gives each partition's (no entry: no rows),
        from the same scan. None: the count alone was scanned."""
        opts, fetch = loaded.opts, self.catalog.runner.fetch
        groups = len(opts.group_keys)
        kind = ordinal_sequence_type(opts, loaded.types) if opts.cumulative_delta else None
        highest = None
        if kind is None:
            rows = fetch(renderer.count_by_group(str(loaded.tables.snapshot), written))
            counts = rows_per_group(rows, groups, at=groups)
        else:
            rows = fetch(cumulative_sql.sequence_max(renderer, kind, written, count=True))
            counts, highest = written_scan(rows, groups, len(opts.partition_by))
        for group, n in counts.items():
            logger.info(f"  wrote {n} row(s) for {state.describe_group(group)}")
        return highest
