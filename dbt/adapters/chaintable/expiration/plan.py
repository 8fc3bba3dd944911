"""Partition expiration of a chain table (docs/design.md#expiration), over the timestamps that
base/timestamps.py reads from partition values.

Pure Python: the adapter lists partitions, asks `plan_expiration` what to drop and renders the
plan as SQL. Expiration must never leave a delta partition without the snapshot it is read
from, which is why a snapshot goes only together with the deltas that lead up to the next one,
and the newest snapshot before the cutoff always stays as the anchor.
"""

from __future__ import annotations

import datetime as dt
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.base.timestamps import ExpirationConfigError
from dbt.adapters.chaintable.chain.state import ChainState

Partition = tuple[Values, Values]  # (group values, chain values)


# ---- plan -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ExpireSegment:
    """A snapshot dropped with the deltas read from it (time in [snapshot, next snapshot))."""

    snapshot: Values
    deltas: tuple[Values, ...]


@dataclass(frozen=True)
class GroupExpiration:
    group: Values
    anchor: Values | None  # the newest snapshot before the cutoff, kept; None: nothing expires
    segments: tuple[ExpireSegment, ...]
    orphan_deltas: tuple[Values, ...]  # older than the group's first snapshot
    # the oldest snapshot kept, where the group's history now starts: the anchor, or with
    # partition_expiration_max_num reached the snapshot after the last segment dropped
    kept_from: Values | None = None

    def dropped_deltas(self) -> list[Values]:
        return list(self.orphan_deltas) + [d for s in self.segments for d in s.deltas]

    def dropped_snapshots(self) -> list[Values]:
        return [s.snapshot for s in self.segments]


@dataclass(frozen=True)
class ExpirationPlan:
    cutoff: dt.datetime
    groups: tuple[GroupExpiration, ...]  # every group with snapshot partitions, sorted

    def is_empty(self) -> bool:
        return not any(g.segments for g in self.groups)

    def delta_drops(self) -> list[Partition]:
        return [(g.group, c) for g in self.groups for c in g.dropped_deltas()]

    def snapshot_drops(self) -> list[Partition]:
        return [(g.group, c) for g in self.groups for c in g.dropped_snapshots()]


def _by_group(partitions: Iterable[Partition]) -> dict[Values, set[Values]]:
    out: dict[Values, set[Values]] = {}
    for group, chain in partitions:
        out.setdefault(tuple(group), set()).add(tuple(chain))
    return out


def plan_expiration(
    snapshots: Iterable[Partition],
    deltas: Iterable[Partition],
    time_of: Callable[[Values, Values], dt.datetime],
    now: dt.datetime,
    expiration_time: dt.timedelta,
    max_num: int | None,
) -> ExpirationPlan:
    """What expiration drops (docs/design.md#expiration): only groups with snapshots are
    visited, so delta-only groups never expire. `max_num` None means no limit."""
    if max_num is not None and max_num < 1:
        raise ExpirationConfigError(f"partition_expiration_max_num must be >= 1, got {max_num}")
    cutoff = now - expiration_time
    deltas_by_group = _by_group(deltas)
    return ExpirationPlan(
        cutoff,
        tuple(
            _plan_group(group, snaps, deltas_by_group.get(group, set()), time_of, cutoff, max_num)
            for group, snaps in sorted(_by_group(snapshots).items())
        ),
    )


def _plan_group(
    group: Values,
    snapshots: Iterable[Values],
    deltas: Iterable[Values],
    time_of: Callable[[Values, Values], dt.datetime],
    cutoff: dt.datetime,
    max_num: int | None,
) -> GroupExpiration:
    """One group. Ties in time are broken by chain values so that every run plans the same.
    With `max_num` reached, the first snapshot kept bounds the last segment dropped, so the
    deltas read from it stay."""
    before = sorted((t, c) for t, c in ((time_of(group, c), c) for c in snapshots) if t < cutoff)
    if len(before) < 2:
        return GroupExpiration(group, None, (), ())
    timed_deltas = sorted((time_of(group, c), c) for c in deltas)

    def between(start: dt.datetime | None, end: dt.datetime) -> tuple[Values, ...]:
        return tuple(c for t, c in timed_deltas if (start is None or start <= t) and t < end)

    segments = tuple(
        ExpireSegment(snap, between(start, before[i + 1][0]))
        for i, (start, snap) in enumerate(before[:-1][:max_num])
    )
    return GroupExpiration(
        group, before[-1][1], segments, between(None, before[0][0]), before[len(segments)][1]
    )


# ---- manual drop guard and rendering ----------------------------------------------------------
def check_snapshot_drop(
    group: Values,
    chain: Values,
    snapshots_of_group: Iterable[Values],
    deltas_of_group: Iterable[Values],
    sort_key: Callable[[Values], Any],
) -> str | None:
    """Refuse (return why) dropping a snapshot that later deltas are read from when no earlier
    snapshot could anchor them instead: they would silently lose the full state before them.
    A delta depends on it when it is the delta's nearest strictly earlier snapshot (read rule 2).
    A delta at the next snapshot's value counts too, though that snapshot shadows it (Paimon's
    drop check counts only the deltas before it): a recompaction of that snapshot with
    overwrite, or a rewrite of the delta, which drops the snapshot, reads that day from the
    snapshot dropped here."""
    key = sort_key(chain)
    others = [sort_key(s) for s in snapshots_of_group if sort_key(s) != key]
    if any(k < key for k in others):
        return None
    following = min((k for k in others if k > key), default=None)
    dependents = sorted(
        (
            d
            for d in deltas_of_group
            if key < sort_key(d) and (following is None or sort_key(d) <= following)
        ),
        key=sort_key,
    )
    if not dependents:
        return None
    where = f" of group {_label(group)}" if group else ""
    return (
        f"refusing to drop snapshot partition {_label(chain)}{where}: delta partition(s) "
        f"{', '.join(_label(d) for d in dependents)} are read from it and no earlier snapshot "
        "in the group can anchor them; compact a later partition first"
    )


def _label(values: Values) -> str:
    return "/".join(values)


def format_plan(
    plan: ExpirationPlan, render_partition: Callable[[Values, Values], str]
) -> list[str]:
    """One line per kept anchor, dropped segment and set of orphan deltas, for logs and dry
    runs. Groups that lose nothing are left out: the lines list what changes."""

    def render(group: Values, chains: Iterable[Values]) -> str:
        return ", ".join(render_partition(group, c) for c in chains) or "no deltas"

    lines = []
    for g in plan.groups:
        if not g.segments:
            continue
        assert g.anchor is not None  # a group with segments keeps its anchor
        lines.append(f"keep anchor snapshot {render_partition(g.group, g.anchor)}")
        if g.orphan_deltas:
            lines.append(
                "drop deltas older than the first snapshot: " + render(g.group, g.orphan_deltas)
            )
        lines += [
            f"drop snapshot {render_partition(g.group, s.snapshot)} "
            f"with {render(g.group, s.deltas)}"
            for s in g.segments
        ]
    return lines


def expirable(
    state: ChainState, stale: Iterable[Values]
) -> tuple[list[Values], list[Values], set[Values]]:
    """The snapshots and deltas expiration may visit, and the groups it may not touch at
    all. A stale snapshot is recompacted (overwrite) from its nearest earlier snapshot and
    the deltas after it, and the stale snapshots after it in its group are rebuilt from
    what follows it: in its group only the history before that anchor expires (the anchor
    is then the newest snapshot expiration can keep), and without such an anchor none of
    it."""
    first: dict[Values, Any] = {}  # group: sort key of its earliest stale snapshot
    for part in stale:
        g, c = state.layout.split(tuple(part))
        first[g] = min(first.get(g, state.sort_key(c)), state.sort_key(c))
    snaps = state.sorted_chains[0]
    bound: dict[Values, Any] = {}  # group: sort key of that snapshot's anchor, or None
    for g, key in first.items():
        skeys = snaps.get(g, ([], ()))[0]
        below = bisect_left(skeys, key)  # snapshots strictly before it
        bound[g] = skeys[below - 1] if below else None

    def visits(p: Values, anchor_too: bool) -> bool:
        g, c = state.layout.split(p)
        if g not in bound:
            return True
        b = bound[g]
        return b is not None and (state.sort_key(c) <= b if anchor_too else state.sort_key(c) < b)

    held = {g for g, b in bound.items() if b is None}
    return (
        [p for p in sorted(state.snapshots) if visits(p, True)],
        [p for p in sorted(state.deltas) if visits(p, False)],
        held,
    )
