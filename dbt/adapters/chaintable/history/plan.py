"""Pure planning of the history macros (docs/design.md#history-by-business-day):
which days a range covers, how each group's days are read, and which keys can have changed.

A group's days split into segments: runs of consecutive days of the range that read from the
same base (the snapshot partition a read starts from: the day itself when it is stored, else
its anchor; or no snapshot at all; a snapshot that compaction wrote from reads that still
stand counts as that read, chain/lineage.py). Within a segment a group's state on a day
differs from its state on the segment's first day only for keys with a delta row in (first
day, day], since a key's merge sees the same rows otherwise (docs/design.md#read-rules, rules
2-3; the merge is per key). A new segment starts with a snapshot partition inside the range
(a full write, or a compaction whose inputs changed since) and after a day the group has no
partition at (no rows that day, rule 4). A group whose one segment spans the range is
*incremental*; chain_changes compares the other groups' two days in full.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbt.adapters.chaintable.base.partitions import (
    ChainPlanError,
    Values,
    format_partition,
    parse_partition_spec,
)
from dbt.adapters.chaintable.chain.state import ChainState, ReadPlan


@dataclass(frozen=True)
class Segment:
    """Days start..end (indexes into HistoryPlan.days, both included) on which a group reads
    from one base: its state on a later day of the segment differs from its state on `start`
    only for the keys of `candidates`, its delta partitions (group + chain) in (start, end]."""

    group: Values
    start: int
    end: int
    candidates: tuple[Values, ...]


@dataclass(frozen=True)
class HistoryPlan:
    """How a range [from, to] of a chain is read.

    days: the chain values of the range a selected group has a partition at, in chain order
    (the first is `from`, the last `to`). reads[i]: the read plans of days[i], one per group
    that has that day. segments: each group's runs of days with one base, in order (a day the
    group has no partition at is in none). incremental: the groups whose one segment spans
    the range, read through `candidates` (their delta partitions in (from, to]); full: the
    others, whose days chain_changes compares in full."""

    days: tuple[Values, ...]
    reads: tuple[tuple[ReadPlan, ...], ...]
    segments: tuple[Segment, ...]

    @property
    def incremental(self) -> tuple[Values, ...]:
        last = len(self.days) - 1
        return tuple(s.group for s in self.segments if s.start == 0 and s.end == last)

    @property
    def full(self) -> tuple[Values, ...]:
        inc = set(self.incremental)
        return tuple(sorted({s.group for s in self.segments} - inc))

    @property
    def candidates(self) -> tuple[Values, ...]:
        inc = set(self.incremental)
        return tuple(c for s in self.segments if s.group in inc for c in s.candidates)

    def restricted(self, groups: Sequence[Values]) -> HistoryPlan:
        """The plan of the same days for `groups` only."""
        wanted = set(groups)
        return HistoryPlan(
            self.days,
            tuple(tuple(p for p in plans if p.group in wanted) for plans in self.reads),
            tuple(s for s in self.segments if s.group in wanted),
        )

    def of_groups(self, i: int, groups: Sequence[Values]) -> list[ReadPlan]:
        """Day i's read plans of `groups`."""
        wanted = set(groups)
        return [p for p in self.reads[i] if p.group in wanted]


def _base(plan: ReadPlan, compacted: Mapping[Values, Values | None]) -> Values | None:
    """The snapshot partition a read starts from (None: none, rule 3). A snapshot partition
    that equals the merged read of its anchor and deltas (`compacted`, chain/lineage.py) is
    that read: its base is its anchor's, so a compaction inside a range starts no segment."""
    base = plan.chain if plan.from_snapshot else plan.anchor
    while base is not None and plan.group + base in compacted:  # each anchor strictly earlier
        base = compacted[plan.group + base]
    return base


def _day(state: ChainState, day: Any, what: str) -> tuple[Values, list[Values]]:
    """A day as chain_read's `partition` takes it (a dict or Paimon's `dt=20250808`)."""
    if day is None:
        raise ChainPlanError(f"give the {what} day, e.g. {{'dt': '20250801'}} or 'dt=20250801'")
    spec = parse_partition_spec(day)
    chain, groups = state.resolve_spec(spec)
    if not groups:
        raise ChainPlanError(f"{what} {spec} names no group of the chain")
    return chain, groups


def plan_history(
    state: ChainState,
    from_day: Any,
    to_day: Any,
    history: Mapping[Values, Values] | None = None,
    every_day: bool = True,
    compacted: Mapping[Values, Values | None] | None = None,
) -> HistoryPlan:
    """The plan of a range. `history`: {group: oldest snapshot expiration kept} (Loaded.history):
    a `from` before it was expired in that group. `every_day`: plan each readable day of the
    range (chain_history); otherwise `from` and `to` only (chain_changes). `compacted`: the
    snapshot partitions that equal their merged read (chain/lineage.py), {group + chain: its
    anchor's chain values}."""
    start, from_groups = _day(state, from_day, "from")
    end, to_groups = _day(state, to_day, "to")
    groups = sorted(set(from_groups) & set(to_groups))
    if not groups:
        raise ChainPlanError(f"from {from_day!r} and to {to_day!r} share no group")
    key = state.sort_key
    if key(start) >= key(end):
        raise ChainPlanError(
            f"from ({_name(state, start)}) must be a day before to ({_name(state, end)})"
        )
    for g in groups:
        kept = (history or {}).get(g)
        if kept is not None and key(start) < key(kept):
            raise ChainPlanError(
                f"from day {_name(state, start)} of {state.describe_group(g)} was expired: "
                f"its oldest readable day is {_name(state, kept)}"
            )
    days = _days_between(state, groups, start, end)
    for day, name in ((start, "from"), (end, "to")):
        if day not in days:
            raise ChainPlanError(
                f"{name} day {_name(state, day)} is not a published day of the chain"
                + _of_groups(state, groups)
                + " (never written, dropped or expired)"
            )
    if not every_day:
        days = [start, end]
    reads = tuple(
        tuple(p for p in (state.plan_read(g, d) for g in groups) if p is not None) for d in days
    )
    segments = _segments(state, groups, days, reads, compacted or {})
    return HistoryPlan(tuple(days), reads, tuple(segments))


def _days_between(
    state: ChainState, groups: Sequence[Values], start: Values, end: Values
) -> list[Values]:
    wanted, key = set(groups), state.sort_key
    found = set()
    for part in state.snapshots | state.deltas:
        g, c = state.layout.split(part)
        if g in wanted and key(start) <= key(c) <= key(end):
            found.add(c)
    return sorted(found, key=key)


def _segments(
    state: ChainState,
    groups: Sequence[Values],
    days: Sequence[Values],
    reads: Sequence[Sequence[ReadPlan]],
    compacted: Mapping[Values, Values | None],
) -> list[Segment]:
    by_day = [{p.group: p for p in plans} for plans in reads]
    deltas, key = state.delta_chains(), state.sort_key
    out = []
    for g in groups:
        runs: list[list[int]] = []  # [start, end] of each run of days with one base
        bases: list[Values | None] = []
        for i, plans in enumerate(by_day):
            plan = plans.get(g)
            if plan is None:
                continue
            base = _base(plan, compacted)
            if runs and runs[-1][1] == i - 1 and bases[-1] == base:
                runs[-1][1] = i
            else:
                runs.append([i, i])
                bases.append(base)
        for start, end in runs:
            lo, hi = key(days[start]), key(days[end])
            cands = tuple(g + c for c in deltas.get(g, []) if lo < key(c) <= hi)
            out.append(Segment(g, start, end, cands))
    return out


def _name(state: ChainState, chain: Values) -> str:
    return format_partition(state.opts.chain_keys, chain)


def _of_groups(state: ChainState, groups: Sequence[Values]) -> str:
    if not state.opts.group_keys:
        return ""
    named = ", ".join(state.describe_group(g) for g in groups[:5])
    return f" for {named}" + (f" and {len(groups) - 5} more groups" if len(groups) > 5 else "")
