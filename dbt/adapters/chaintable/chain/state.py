"""Pure planning of chain reads (docs/design.md#read-rules): partitions in, plans out.

Nothing here talks to Spark; the adapter lists partitions, asks the state how each partition is
read and renders the plans as SQL (read/render.py). Every rule about anchors and delta ranges
lives here, once; the view, compaction and expiration plan over this state in their packages.
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

    def chains(self) -> dict[Values, list[Values]]:
        """Each group's published days (either branch), in chain order."""
        return self._by_group(self.snapshots | self.deltas)

    @cached_property
    def sorted_chains(self) -> tuple[dict[Values, tuple[list[Any], tuple[Values, ...]]], ...]:
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
        snaps, deltas_by_group = self.sorted_chains
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

    # ---- invalidation --------------------------------------------------------------------
    def stale_after_delta_write(self, written: Iterable[Values]) -> dict[Values, Values]:
        """Snapshots built on a delta partition that is being rewritten: the later snapshots of
        the same group that compaction wrote, each from the one before it. A snapshot with no
        delta at its own value was a full write (compaction writes a day only from its delta,
        docs/design.md#compaction): it was not built on the old delta, nor were the snapshots
        after it, built on it. {snapshot: delta}. A full chain's write never changes a later
        day's state (it compares the next held day again, run/full.py): nothing is stale."""
        stale: dict[Values, Values] = {}
        if self.opts.chain_input == "full":
            return stale
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

    def describe_group(self, group: Values) -> str:
        if not group:
            return "all rows"
        return format_partition(self.opts.group_keys, group)
