"""Keeping the cumulative delta in step with the branches (docs/design.md#cumulative-delta):
before a write changes inputs in place, stop serving the days they feed; after it, build the
cumulative partitions of the days it added or changed, one chain day at a time."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.chaintable.base.failpoints import failpoint
from dbt.adapters.chaintable.base.keys import P_ANCHOR_SEQUENCE
from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.base.progress import Stopwatch
from dbt.adapters.chaintable.base.runner import logger
from dbt.adapters.chaintable.base.versions import version_location
from dbt.adapters.chaintable.chain import generations
from dbt.adapters.chaintable.chain.catalog import Catalog, Loaded
from dbt.adapters.chaintable.chain.sql import ChainSql
from dbt.adapters.chaintable.cumulative import plan as cumulative
from dbt.adapters.chaintable.cumulative import sql as cumulative_sql
from dbt.adapters.chaintable.cumulative.plan import Cumulative, served_days
from dbt.adapters.chaintable.merge.rules import value_columns


@dataclass(frozen=True)
class Prebuilt:
    """A cumulative partition (values + stamp) written before its delta was published
    (Accumulator.checked_build), and whether its build left the anchor out."""

    partition: Values
    anchorless: bool


# the view's refresh that stops reading `days` from the cumulative delta (view/writer.py): handed
# in by the adapter, since the view reads the cumulative delta and so stands above it
Unserve = Callable[[Loaded, Sequence[Values]], Loaded]


class Accumulator:
    def __init__(self, catalog: Catalog, unserve: Unserve):
        self.catalog, self.unserve = catalog, unserve
        self.run = catalog.runner.run

    def before_write(self, loaded: Loaded, branch: str, written: Sequence[Values]) -> Loaded:
        """Before `written` partitions of `branch` are published: the days they will feed that
        the cumulative delta serves now are read by merge instead (the view is refreshed
        without them) and their cumulative partitions dropped, so that no reader meets a
        cumulative partition built from inputs that changed in place. A daily run, which adds
        the newest day, serves nothing it feeds and costs nothing here."""
        if not loaded.cumulative:
            return loaded
        kept = Cumulative.of(loaded).kept_affected(branch, written)
        if kept:  # no view reads them: dropped at once
            self.run(cumulative_sql.drop(ChainSql.of(loaded), kept))
            gone = set(kept)
            loaded = loaded.with_cumulative([c for c in loaded.cumulative if c not in gone])
        future = loaded.with_published(branch, written)
        affected = set(Cumulative.of(future).affected(written))
        served = served_days(loaded, loaded.state().delta_only())
        unserve = sorted(affected & set(served))
        if not unserve:
            return loaded
        logger.info(
            f"{loaded.tables.view}: {len(unserve)} day(s) read by merge until their "
            "cumulative delta is rebuilt"
        )
        loaded = self.unserve(loaded, unserve)
        failpoint("cumulative.unserved")
        return loaded

    def _ensure_table(self, loaded: Loaded) -> Loaded:
        """t__cumulative exists with the mask column (cumulative.MASK_COLUMN); t__snapshot
        records that and the table's location (cumulative.P_LOCATION), so a daily run reads
        nothing more to know them. A table dropped since (cumulative_delta switched off and on
        again) is created again."""
        props, renderer, tables = loaded.props, ChainSql.of(loaded), loaded.tables
        if (
            loaded.cumulative is not None
            and props.get(cumulative.P_LAYOUT) == cumulative.LAYOUT
            and props.get(cumulative.P_LOCATION)
        ):
            return loaded
        if loaded.cumulative is None:
            self.run(cumulative_sql.create(renderer))
            loaded = loaded.with_cumulative([])
        elif cumulative.MASK_COLUMN not in {
            c.lower() for c, _ in self.catalog.describe(tables.cumulative)
        }:
            self.run(cumulative_sql.add_mask_column(renderer))
        record = {
            cumulative.P_LAYOUT: cumulative.LAYOUT,
            cumulative.P_LOCATION: self.catalog.location(tables.cumulative),
        }
        self.catalog.set_properties(tables.snapshot, record)
        return loaded.with_props(record)

    def checkable(self, loaded: Loaded, part: Values) -> cumulative.Build | None:
        """The build checked_build would run for delta `part`, or None when the run checks its
        stage and builds after the publish as usual: only a new newest day of a pick-one chain
        with a mask key (one integral key column) whose cumulative table is ready (the build
        must write nothing else), with one build."""
        opts = loaded.opts
        if (
            not cumulative.build_checks_rows(opts)
            # the tie test lives in the window the mask's blocks share (cumulative/sql.py, _rows)
            or cumulative.mask_key(opts, loaded.types) is None
            or loaded.cumulative is None
            or loaded.props.get(cumulative.P_LAYOUT) != cumulative.LAYOUT
            or not loaded.props.get(cumulative.P_LOCATION)
        ):
            return None
        state = loaded.state()
        group, chain = state.layout.split(part)
        key = state.sort_key(chain)
        for p in (*loaded.deltas, *loaded.snapshots):
            g, c = state.layout.split(p)
            if g == group and state.sort_key(c) >= key:
                return None  # a rewrite or a backfill: before_write and after_write
        future = loaded.with_published("delta", [part])
        cum = Cumulative.of(future)
        incremental = cumulative.incremental(opts, value_columns(opts, loaded.column_names))
        builds = cum.builds(cum.affected([part]), incremental)
        if len(builds) != 1 or any(c[:-1] == builds[0].partition[:-1] for c in loaded.cumulative):
            return None
        return builds[0]

    def checked_build(
        self,
        loaded: Loaded,
        build: cumulative.Build,
        part: Values,
        rows: Callable[[tuple[str, int] | None], str],
    ) -> tuple[Loaded, Prebuilt]:
        """Build (`checkable`) the cumulative partition of delta `part` before `part` is
        published, from its staged rows (`rows(above)`: stage.guarded_sql, which fails on a
        row the checks refuse) in one query that also fails on tied rows: it stands in for the
        checks' scan of the stage (docs/design.md#validation). Returns the catalog (an anchor's
        highest sequence may be recorded) and what after_write adds. A failed query raises
        DbtRuntimeError: the run then checks the stage, which names the row, and builds after
        the publish."""
        opts, b = loaded.opts, build
        group, chain = loaded.layout.split(part)
        with_anchor = cumulative.needs_anchor(opts)
        kind = cumulative.ordinal_sequence_type(opts, loaded.types)
        above: tuple[str, int] | None = None
        if with_anchor and kind and b.plan.anchor is not None and b.deltas == (chain,):
            loaded, highest = self._sequence_max(loaded, kind, [group + b.plan.anchor])
            high = highest.get(group + b.plan.anchor)
            if high is not None:  # every row must sort after the anchor's, or the query fails
                above = (kind, high)
        anchorless = {group} if above is not None else set()
        where = version_location(loaded.props[cumulative.P_LOCATION], b.stamp)
        self.run(
            cumulative_sql.build_into(
                ChainSql.of(loaded), b, where, with_anchor, anchorless, fresh=(part, rows(above))
            )
        )
        return loaded, Prebuilt(b.partition, bool(anchorless))

    def after_write(
        self,
        loaded: Loaded,
        written: Sequence[Values],
        lowest: Mapping[Values, float] | None = None,
        prebuilt: Prebuilt | None = None,
    ) -> Loaded:
        """Build the cumulative partitions of the days `written` feeds (`loaded` is the catalog
        after the publish). A failed build leaves those days read by merge: the write stays.
        `lowest`: the lowest sequence of delta partitions this run wrote (WritePlan).
        `prebuilt`: a partition checked_build wrote before the publish, only added here."""
        if not loaded.opts.cumulative_delta:
            return loaded
        cum = Cumulative.of(loaded)
        days = cum.affected(written)
        if not days:
            return loaded
        opts = loaded.opts
        incremental = cumulative.incremental(opts, value_columns(opts, loaded.column_names))
        builds = cum.builds(days, incremental)
        built = sum(1 for b in builds if b.previous is not None)
        clock = Stopwatch()
        ready = {prebuilt.partition} if prebuilt is not None else set()
        try:
            loaded = self._ensure_table(loaded)
            if prebuilt is not None and all(b.partition in ready for b in builds):
                anchorless = {b.plan.group for b in builds} if prebuilt.anchorless else set()
            else:
                loaded, anchorless = self._anchorless(loaded, builds, lowest or {})
            parts = self._build(loaded, builds, ready, anchorless, clock)
        except DbtRuntimeError as e:
            logger.warning(
                f"{loaded.tables.view}: building the cumulative delta failed, the "
                f"days stay read by merge: {e}"
            )
            return loaded.with_cumulative(self.catalog.cumulative_partitions(loaded.tables, opts))
        logger.info(
            f"{loaded.tables.view}: cumulative delta of {len(builds)} day(s) built "
            f"({built} from the day before"
            + (
                f"; {len(anchorless)} without reading the anchor: every changed row's "
                "sequence is above the anchor's highest"
                if anchorless
                else ""
            )
            + f") in {clock}"
        )
        return loaded.with_cumulative(sorted(parts))

    def _build(
        self,
        loaded: Loaded,
        builds: Sequence[cumulative.Build],
        ready: set[Values],
        anchorless: set[Values],
        clock: Stopwatch,
    ) -> set[Values]:
        """Write the partitions of `builds` day by day (but those `ready`, built before the
        publish: only added), and an empty one for a day whose deltas changed no key. Returns
        every partition of the cumulative delta after them."""
        renderer, opts = ChainSql.of(loaded), loaded.opts
        chains = sorted({b.plan.chain for b in builds}, key=loaded.state().sort_key)
        with_anchor = cumulative.needs_anchor(opts)
        root = loaded.props[cumulative.P_LOCATION]
        parts = set(loaded.cumulative or ())
        listed = True  # every partition built is in `parts`
        for i, chain in enumerate(chains, 1):
            todo = [b for b in builds if b.plan.chain == chain]
            if len(todo) == 1:  # one group's day (every day of a chain without groups)
                b = todo[0]
                where = version_location(root, b.stamp)
                if b.partition not in ready:
                    self.run(cumulative_sql.build_into(renderer, b, where, with_anchor, anchorless))
                self.run(
                    cumulative_sql.add_partition(renderer, b.partition, where, b.partition in parts)
                )
                parts.add(b.partition)
            else:  # many groups' day: one statement for all
                self.run(cumulative_sql.build(renderer, chain, todo, with_anchor, anchorless))
                listed = False
            failpoint("cumulative.built")
            if len(chains) > 1:  # a rebuild of many days: say how far it is
                logger.info(
                    f"{loaded.tables.view}: cumulative delta of day "
                    f"{loaded.layout.chain_path(chain)} built ({i} of {len(chains)} days, "
                    f"{len(todo)} partition(s), {clock})"
                )
        if not listed:  # the table exists now (_ensure_table): listed without asking
            parts = set(self.catalog.cumulative_partitions(loaded.tables, opts, True) or ())
        # a day whose deltas changed no key has no rows: still served
        empties = [b.partition for b in builds if b.partition not in parts]
        self.run(cumulative_sql.add_empty(renderer, empties))
        return parts | set(empties)

    def _anchorless(
        self, loaded: Loaded, builds: Sequence[cumulative.Build], lowest: Mapping[Values, float]
    ) -> tuple[Loaded, set[Values]]:
        """The groups of `builds` whose anchor no delta row of the build can lose to
        (cumulative.anchor_can_win), from the deltas' lowest sequences (`lowest`, of the rows
        this run wrote) and the anchors' highest (anchor_sequence_max)."""
        kind = cumulative.ordinal_sequence_type(loaded.opts, loaded.types)
        deltas_min: dict[Values, float] = {}
        for b in builds:
            mins = [lowest.get(b.plan.group + d) for d in b.deltas]
            if kind and b.plan.anchor is not None and mins and None not in mins:
                deltas_min[b.plan.group + b.plan.anchor] = min(m for m in mins if m is not None)
        if not deltas_min:
            return loaded, set()
        loaded, highest = self._sequence_max(loaded, kind, list(deltas_min))
        return loaded, {
            b.plan.group
            for b in builds
            if b.plan.anchor is not None
            and (a := b.plan.group + b.plan.anchor) in deltas_min
            and not cumulative.anchor_can_win(highest.get(a), deltas_min[a])
        }

    def anchor_sequence_max(
        self,
        loaded: Loaded,
        anchors: Sequence[Values],
        scanned: Mapping[Values, int | None] | None = None,
    ) -> tuple[Loaded, dict[Values, int | None]]:
        """The highest sequence of each snapshot partition of `anchors` (None: unknown). Taken
        from t__snapshot's record (P_ANCHOR_SEQUENCE) while the partition keeps the token it
        was scanned under (P_SNAPSHOT_GENERATIONS: every publish gives a new one) and the
        sequence field its name and kind; else one scan of the sequence column, recorded for
        the next run. `scanned`: the caller's scan of them gave their maxima already
        (cumulative.sequence_maxima: no entry for a partition with no rows), used in place of
        that scan."""
        kind = cumulative.ordinal_sequence_type(loaded.opts, loaded.types)
        return self._sequence_max(loaded, kind, anchors, scanned)

    def _sequence_max(
        self,
        loaded: Loaded,
        kind: str | None,
        anchors: Sequence[Values],
        scanned: Mapping[Values, int | None] | None = None,
    ) -> tuple[Loaded, dict[Values, int | None]]:
        """anchor_sequence_max, for a caller that knows the sequence's `kind` already."""
        if not kind or not anchors:
            return loaded, {}
        snapshot, lay, keys = loaded.tables.snapshot, loaded.layout, loaded.opts.partition_by
        # read now, not from `loaded`: a publish of this run may have given new tokens since;
        # and before any scan, so that an entry names the token its rows were scanned under
        props = self.catalog.properties(snapshot)
        recorded: dict[str, Any] = json.loads(props.get(P_ANCHOR_SEQUENCE) or "{}")
        tokens = generations.tokens_of(props)
        field = f"{loaded.opts.sequence_field}:{kind}"

        def token(part: Values) -> str | None:
            return generations.token_of(tokens, lay.path(part))

        def current(part: Values) -> bool:
            entry = recorded.get(lay.path(part))
            return isinstance(entry, list) and len(entry) == 3 and entry[:2] == [token(part), field]

        known = {a: recorded[lay.path(a)][2] for a in anchors if current(a)}  # past the budget
        missing = [a for a in anchors if a not in known]
        if missing:
            before = dict(recorded)
            if scanned is None:
                sql = cumulative_sql.sequence_max(ChainSql.of(loaded), kind, missing)
                highest = cumulative.sequence_maxima(self.catalog.runner.fetch(sql), len(keys))
            else:  # what the scan of `missing` alone would have given
                highest = {a: scanned[a] for a in missing if a in scanned}
            for part in missing:
                if part in highest:  # under the token the scan began with
                    recorded[lay.path(part)] = [token(part), field, highest[part]]
            present = {lay.path(p) for p in loaded.snapshots}
            recorded = {k: v for k, v in recorded.items() if k in present}
            recorded = generations.current_entries(recorded, tokens)
            if recorded != before:
                value = generations.dumps(recorded)
                self.catalog.set_properties(snapshot, {P_ANCHOR_SEQUENCE: value})
                loaded = loaded.with_props({P_ANCHOR_SEQUENCE: value})
        return loaded, {a: known[a] if a in known else highest.get(a) for a in anchors}
