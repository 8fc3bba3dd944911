"""Pure planning of the history macros (SPEC §8, docs/design.md#history-by-business-day):
which days a range covers, how each group's days are read, and which keys can have changed.

A group is *incremental* over a range when every day of the range reads from the same base
(the snapshot partition its read starts from: the day itself when it is stored, else its
anchor; or no snapshot at all): then its state on a day differs from its state on `from` only
for keys with a delta row in (from, day], since a key's merge sees the same rows otherwise
(docs/design.md#read-rules, rules 2-3; the merge is per key). Any other group (a snapshot
partition inside the range, from a compaction or a full write; a group without a partition on
one of the days; a group that starts inside the range) is read in full on each day.
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
class HistoryPlan:
    """How a range [from, to] of a chain is read.

    days: the chain values of the range a selected group has a partition at, in chain order
    (the first is `from`, the last `to`). reads[i]: the read plans of days[i], one per group
    that has that day. incremental: the groups read through `candidates` (the delta
    partitions in (from, to] whose keys may have changed); full: the groups read in full."""

    days: tuple[Values, ...]
    reads: tuple[tuple[ReadPlan, ...], ...]
    incremental: tuple[Values, ...]
    full: tuple[Values, ...]
    candidates: tuple[Values, ...]

    def of_groups(self, i: int, groups: Sequence[Values]) -> list[ReadPlan]:
        """Day i's read plans of `groups`."""
        wanted = set(groups)
        return [p for p in self.reads[i] if p.group in wanted]


def _base(plan: ReadPlan | None) -> tuple[bool, Values | None]:
    """(read at all, the snapshot partition the read starts from)."""
    if plan is None:
        return False, None
    return True, plan.chain if plan.from_snapshot else plan.anchor


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
) -> HistoryPlan:
    """The plan of a range. `history`: {group: oldest snapshot expiration kept} (Loaded.history):
    a `from` before it was expired in that group. `every_day`: plan each readable day of the
    range (chain_history); otherwise `from` and `to` only (chain_changes)."""
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
    incremental, full = _split(groups, days, reads)
    deltas = state.delta_chains()
    candidates = tuple(
        g + c for g in incremental for c in deltas.get(g, []) if key(start) < key(c) <= key(end)
    )
    return HistoryPlan(tuple(days), reads, tuple(incremental), tuple(full), candidates)


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


def _split(
    groups: Sequence[Values], days: Sequence[Values], reads: Sequence[Sequence[ReadPlan]]
) -> tuple[list[Values], list[Values]]:
    by_day = [{p.group: p for p in plans} for plans in reads]
    incremental: list[Values] = []
    full: list[Values] = []
    for g in groups:
        bases = {_base(plans.get(g)) for plans in by_day}
        only = next(iter(bases))
        (incremental if len(bases) == 1 and only[0] else full).append(g)
    return incremental, full


def _name(state: ChainState, chain: Values) -> str:
    return format_partition(state.opts.chain_keys, chain)


def _of_groups(state: ChainState, groups: Sequence[Values]) -> str:
    if not state.opts.group_keys:
        return ""
    return " for " + ", ".join(state.describe_group(g) for g in groups)
