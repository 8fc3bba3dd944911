"""Pure planning of chain reads and compaction (docs/design.md#read-rules, #compaction):
partitions in, plans out.

Nothing here talks to Spark; the adapter lists partitions, calls these functions and renders
the plans as SQL (sqlgen.py). Every rule about anchors and delta ranges lives here, once.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from dbt.adapters.chaintable.base.options import (
    ChainOptions,
)
from dbt.adapters.chaintable.base.partitions import (
    ChainPlanError,
    Layout,
    Values,
    format_partition,
    g_in,
    spark_value,
)


@dataclass(frozen=True)
class ReadPlan:
    """How to produce the full state of partition (group, chain).

    from_snapshot: read snapshot partition as is (rule 1). Otherwise merge the anchor snapshot
    partition (None: no earlier snapshot, rule 3) with the delta partitions `deltas` (ascending)."""

    group: Values
    chain: Values
    from_snapshot: bool
    anchor: Values | None = None
    deltas: tuple[Values, ...] = ()


@dataclass(frozen=True)
class CompactionPlan:
    chain: Values
    writes: tuple[ReadPlan, ...]
    kept: tuple[Values, ...]  # overwrite: groups with a snapshot and no delta at the partition
    message: str

    @property
    def written(self) -> bool:
        return bool(self.writes)


@dataclass(frozen=True)
class ChainState:
    """The partitions of both branches of one chain table, and the typed order of chain values."""

    opts: ChainOptions
    snapshots: frozenset[Values]
    deltas: frozenset[Values]
    chain_types: tuple[str, ...] = ()

    @classmethod
    def build(
        cls,
        opts: ChainOptions,
        snapshots: Iterable[Sequence[str]],
        deltas: Iterable[Sequence[str]],
        types: Mapping[str, str] | None = None,
    ) -> ChainState:
        types = {k.lower(): v for k, v in (types or {}).items()}
        chain_types = tuple(types.get(c.lower(), "string") for c in opts.chain_keys)
        return cls(
            opts,
            frozenset(tuple(p) for p in snapshots),
            frozenset(tuple(p) for p in deltas),
            chain_types,
        )

    def without(
        self, snapshots: Iterable[Values] = (), deltas: Iterable[Values] = ()
    ) -> ChainState:
        """The state once these partitions are dropped (the view is pointed at it first)."""
        return ChainState(
            self.opts,
            self.snapshots - {tuple(p) for p in snapshots},
            self.deltas - {tuple(p) for p in deltas},
            self.chain_types,
        )

    # ---- partition arithmetic --------------------------------------------------------------
    @property
    def n_group(self) -> int:
        return len(self.opts.group_keys)

    @cached_property
    def layout(self) -> Layout:
        return Layout.of(self.opts)

    def sort_key(self, chain: Values) -> tuple[Any, ...]:
        """Typed comparison of chain values (ints compare as ints, strings as strings)."""
        types = self.chain_types or ("string",) * len(chain)
        return tuple(spark_value(v, t) for v, t in zip(chain, types, strict=False))

    def spelled(self, chain: Values) -> Values:
        """Chain values as Spark spells them in partition names: an integral key given as
        '02' or ' 2' is partition `2`; other types are taken as given."""
        typed = self.sort_key(tuple(v.strip() for v in chain))
        return tuple(str(t) if isinstance(t, int) else v for v, t in zip(chain, typed, strict=True))

    def _by_group(self, parts: frozenset[Values]) -> dict[Values, list[Values]]:
        out: dict[Values, list[Values]] = {}
        for p in parts:
            g, c = self.layout.split(p)
            out.setdefault(g, []).append(c)
        for chains in out.values():
            chains.sort(key=self.sort_key)
        return out

    def snapshot_chains(self) -> dict[Values, list[Values]]:
        return self._by_group(self.snapshots)

    def delta_chains(self) -> dict[Values, list[Values]]:
        return self._by_group(self.deltas)

    @cached_property
    def _sorted(self) -> tuple[dict[Values, tuple[list[Any], tuple[Values, ...]]], ...]:
        """(snapshots, deltas): {group: (sort keys, chain values)} in chain order, built once per
        state so that planning every delta-only partition does not re-sort the history."""

        def build(parts: frozenset[Values]) -> dict[Values, tuple[list[Any], tuple[Values, ...]]]:
            keyed: dict[Values, list[tuple[Any, Values]]] = {}
            for p in parts:
                g, c = self.layout.split(p)
                keyed.setdefault(g, []).append((self.sort_key(c), c))
            out = {}
            for g, pairs in keyed.items():
                pairs.sort(key=lambda kc: kc[0])  # stable on equal keys, as _by_group
                out[g] = ([k for k, _ in pairs], tuple(c for _, c in pairs))
            return out

        return build(self.snapshots), build(self.deltas)

    def groups(self) -> list[Values]:
        return sorted({self.layout.split(p)[0] for p in self.snapshots | self.deltas})

    # ---- read rules (docs/design.md#read-rules) -----------------------------------------------
    def plan_read(self, group: Values, chain: Values, use_snapshot: bool = True) -> ReadPlan | None:
        """Rules 1-4 for one partition; None when the partition exists in neither branch.
        use_snapshot=False ignores a snapshot at `chain` itself (compaction with overwrite)."""
        group, chain = tuple(group), tuple(chain)
        if use_snapshot and group + chain in self.snapshots:
            return ReadPlan(group, chain, from_snapshot=True)
        if group + chain not in self.deltas:
            return None
        key = self.sort_key(chain)
        snaps, deltas_by_group = self._sorted
        skeys, schains = snaps.get(group, ([], ()))
        below = bisect_left(skeys, key)  # snapshots strictly before `chain`
        anchor = schains[below - 1] if below else None
        dkeys, dchains = deltas_by_group.get(group, ([], ()))
        lo = bisect_right(dkeys, self.sort_key(anchor)) if anchor else 0  # after the anchor
        deltas = tuple(dchains[lo : bisect_right(dkeys, key)])  # ... up to `chain` included
        return ReadPlan(group, chain, from_snapshot=False, anchor=anchor, deltas=deltas)

    def delta_only(self) -> list[ReadPlan]:
        """Merged reads of every delta-only partition, ordered by chain value then group."""
        plans = [self.plan_read(*self.layout.split(p)) for p in self.deltas - self.snapshots]
        return sorted(
            (p for p in plans if p is not None), key=lambda p: (self.sort_key(p.chain), p.group)
        )

    def view_branches(self) -> list[tuple[Values, list[ReadPlan]]]:
        """Delta-only reads grouped by chain value: the view gets one branch per chain value
        (all groups merged together), so its size does not grow with the number of groups."""
        out: dict[Values, list[ReadPlan]] = {}
        for plan in self.delta_only():
            out.setdefault(plan.chain, []).append(plan)
        return sorted(out.items(), key=lambda kv: self.sort_key(kv[0]))

    def view_layout(
        self, recent: int
    ) -> tuple[list[tuple[Values, list[ReadPlan]]], list[ReadPlan]]:
        """(literal branches, mapped reads). The delta-only chain values after the newest
        snapshot (of any group) keep a view branch each, at most the newest `recent` of them
        (literal partition values, pruned at planning time); the reads of older delta-only
        partitions go through one branch driven by a mapping table (target partition -> anchor
        and deltas), so the view's text stays bounded however long the history.
        The mapped set is everything up to the newest snapshot: a daily run, which only adds a
        newer partition, leaves it as it is (its mapping need not be rewritten) until a
        compaction moves the newest snapshot or more than `recent` days pass without one."""
        branches = self.view_branches()
        snaps, _ = self._sorted
        newest = max((keys[-1] for keys, _ in snaps.values() if keys), default=None)
        after = len(branches)
        for i, (chain, _) in enumerate(branches):
            if newest is None or self.sort_key(chain) > newest:
                after = i
                break
        cut = max(len(branches) - max(recent, 0), after)
        return branches[cut:], [p for _, plans in branches[:cut] for p in plans]

    def mapped_runs(self, mapped: Sequence[ReadPlan], cap: int) -> list[tuple[str, str]]:
        """Ranges (low, high) of the first chain key, oldest first, that hold the first value of
        every partition in `mapped` and no first value that only partitions read another way
        have (snapshot partitions, literal branches): the view filters its mapped branches by
        them, so a query of a stored day between mapped days folds those branches away at
        planning time. Past `cap` runs the oldest merge into one (a wider range prunes less,
        and the view's text stays bounded)."""
        inside = {p.chain[0] for p in mapped}
        firsts = inside | {self.layout.split(p)[1][0] for p in self.snapshots | self.deltas}
        runs: list[list[str]] = []
        last_inside = False
        for value in sorted(firsts, key=lambda v: self.sort_key((v,))):
            if value in inside and last_inside:
                runs[-1][1] = value
            elif value in inside:
                runs.append([value, value])
            last_inside = value in inside
        if len(runs) > cap > 0:
            runs = [[runs[0][0], runs[-cap][1]], *runs[len(runs) - cap + 1 :]]
        return [(low, high) for low, high in runs]

    def stored_in(self, runs: Sequence[tuple[str, str]]) -> bool:
        """Whether a snapshot partition's first chain value lies in one of `runs` (a value
        stored for one group and mapped for another, a stored hour of a mapped day, or a
        stored day inside the merged oldest run)."""
        bounds = [(self.sort_key((low,)), self.sort_key((high,))) for low, high in runs]
        firsts = {self.layout.split(p)[1][0] for p in self.snapshots}
        return any(
            low <= key <= high
            for key in (self.sort_key((v,)) for v in firsts)
            for low, high in bounds
        )

    # ---- partition specs ---------------------------------------------------------------------
    def _lowered(self, spec: Mapping[str, str]) -> dict[str, str]:
        """A spec's values by lower-case column (Spark's column names are case-insensitive); a
        key that is not a partition column is refused, not ignored."""
        cols = [c.lower() for c in self.opts.partition_by]
        unknown = [k for k in spec if k.lower() not in cols]
        if unknown:
            raise ChainPlanError(
                f"partition {dict(spec)} names {unknown}, which are not partition "
                f"columns {list(self.opts.partition_by)}"
            )
        return {k.lower(): v for k, v in spec.items()}

    def partition_of(self, spec: Mapping[str, str]) -> Values:
        """A spec naming every partition column -> that partition's values (group + chain), the
        chain spelled as Spark names its partitions; the group need not be known yet."""
        lowered = self._lowered(spec)
        missing = [c for c in self.opts.partition_by if c.lower() not in lowered]
        if missing:
            raise ChainPlanError(
                f"partition {dict(spec)} does not name every partition column: missing {missing}"
            )
        group, chain = self.layout.split(tuple(lowered[c.lower()] for c in self.opts.partition_by))
        return group + self.spelled(chain)

    def resolve_spec(self, spec: Mapping[str, str]) -> tuple[Values, list[Values]]:
        """A partition spec -> (chain values, matching known groups). The spec must name every
        chain key (one partition per group); group keys are optional filters."""
        lowered = self._lowered(spec)
        missing = [c for c in self.opts.chain_keys if c.lower() not in lowered]
        if missing:
            raise ChainPlanError(
                f"partition {dict(spec)} matches more than one partition: chain key(s) {missing} "
                "are not given; name exactly one chain partition"
            )
        chain = self.spelled(tuple(lowered[c.lower()] for c in self.opts.chain_keys))
        gfilter = {
            i: lowered[c.lower()]
            for i, c in enumerate(self.opts.group_keys)
            if c.lower() in lowered
        }
        groups = [g for g in self.groups() if all(g[i] == v for i, v in gfilter.items())]
        return chain, groups

    def plan_partition_read(self, spec: Mapping[str, str]) -> list[ReadPlan]:
        chain, groups = self.resolve_spec(spec)
        plans = (self.plan_read(g, chain) for g in groups)
        return [p for p in plans if p is not None]

    # ---- compaction (docs/design.md#compaction) ----------------------------------------------
    def before_history(self, part: Values, history: Mapping[Values, Values]) -> bool:
        """True when `part` is at or before the oldest snapshot expiration kept in its group:
        the full state there is that snapshot alone, so a delta written there (or a rebuild of
        that snapshot from deltas) would lose the expired history."""
        group, chain = self.layout.split(tuple(part))
        start = history.get(group)
        return start is not None and self.sort_key(chain) <= self.sort_key(start)

    def plan_compaction(
        self,
        spec: Mapping[str, str],
        overwrite: bool = False,
        history: Mapping[Values, Values] | None = None,
        only: Iterable[Values] | None = None,
    ) -> CompactionPlan:
        """`only`: of the groups the spec matches, these (the compaction policy's due ones)."""
        chain, groups = self.resolve_spec(spec)
        if only is not None:
            wanted = set(only)
            groups = [g for g in groups if g in wanted]
        history = history or {}
        label = format_partition(self.opts.chain_keys, chain)
        existing = tuple(g for g in groups if g + chain in self.snapshots)
        with_delta = [g for g in groups if g + chain in self.deltas]
        if existing and not overwrite:
            where = ", ".join(self.describe_group(g) for g in existing)
            return CompactionPlan(
                chain,
                (),
                (),
                (
                    f"snapshot branch already has partition {label} ({where}); nothing written "
                    "(use overwrite: true to recompute it)"
                ),
            )
        writes = tuple(
            p
            for p in (self.plan_read(g, chain, use_snapshot=False) for g in with_delta)
            if p is not None
        )
        # an overwrite with no anchor left after expiration would rebuild from deltas alone
        guarded = tuple(
            p.group
            for p in writes
            if p.anchor is None
            and g_in(p.group, existing)
            and self.before_history(p.group + chain, history)
        )
        writes = tuple(p for p in writes if p.group not in guarded)
        kept = tuple(g for g in existing if g + chain not in self.deltas or g in guarded)
        if guarded:
            label += (
                " (kept for "
                + ", ".join(self.describe_group(g) for g in guarded)
                + ": expiration dropped the history before it, it cannot be rebuilt)"
            )
        if not writes:
            return CompactionPlan(chain, (), kept, f"no data to compact for {label}")
        return CompactionPlan(
            chain,
            writes,
            kept,
            f"compacting {label} into the snapshot branch for {len(writes)} group(s)",
        )

    # ---- invalidation --------------------------------------------------------------------
    def stale_after_delta_write(self, written: Iterable[Values]) -> dict[Values, Values]:
        """Snapshots built on a delta partition that is being rewritten: the later snapshots of
        the same group that compaction wrote, each from the one before it. A snapshot with no
        delta at its own value was a full write (compaction writes a day only from its delta,
        SPEC 3): it was not built on the old delta, nor were the snapshots after it, built on
        it. {snapshot: delta}."""
        stale: dict[Values, Values] = {}
        snaps = self.snapshot_chains()
        for part in sorted(written):
            g, c = self.layout.split(part)
            for s in snaps.get(g, []):
                if self.sort_key(s) <= self.sort_key(c):
                    continue
                if g + s not in self.deltas:
                    break
                stale.setdefault(g + s, part)
        return stale

    def expirable(self, stale: Iterable[Values]) -> tuple[list[Values], list[Values], set[Values]]:
        """The snapshots and deltas expiration may visit, and the groups it may not touch at
        all. A stale snapshot is recompacted (overwrite) from its nearest earlier snapshot and
        the deltas after it, and the stale snapshots after it in its group are rebuilt from
        what follows it: in its group only the history before that anchor expires (the anchor
        is then the newest snapshot expiration can keep), and without such an anchor none of
        it."""
        first: dict[Values, Any] = {}  # group: sort key of its earliest stale snapshot
        for part in stale:
            g, c = self.layout.split(tuple(part))
            first[g] = min(first.get(g, self.sort_key(c)), self.sort_key(c))
        snaps = self._sorted[0]
        bound: dict[Values, Any] = {}  # group: sort key of that snapshot's anchor, or None
        for g, key in first.items():
            skeys = snaps.get(g, ([], ()))[0]
            below = bisect_left(skeys, key)  # snapshots strictly before it
            bound[g] = skeys[below - 1] if below else None

        def visits(p: Values, anchor_too: bool) -> bool:
            g, c = self.layout.split(p)
            if g not in bound:
                return True
            b = bound[g]
            return b is not None and (self.sort_key(c) <= b if anchor_too else self.sort_key(c) < b)

        held = {g for g, b in bound.items() if b is None}
        return (
            [p for p in sorted(self.snapshots) if visits(p, True)],
            [p for p in sorted(self.deltas) if visits(p, False)],
            held,
        )

    @staticmethod
    def stale_after_compaction(
        writes: Iterable[ReadPlan], stale: Mapping[Values, Any]
    ) -> dict[Values, Any]:
        """Stale marks after compacting `writes`: a snapshot rebuilt from a fresh anchor (or from
        deltas only) is no longer stale; one rebuilt on a stale anchor inherits its mark."""
        out = dict(stale)
        for p in writes:
            anchor = p.group + p.anchor if p.anchor is not None else None
            if anchor is not None and anchor in stale:
                out[p.group + p.chain] = stale[anchor]
            else:
                out.pop(p.group + p.chain, None)
        return out

    def describe_group(self, group: Values) -> str:
        if not group:
            return "all rows"
        return format_partition(self.opts.group_keys, group)
