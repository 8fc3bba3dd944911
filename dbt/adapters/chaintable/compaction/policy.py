"""The compaction policy, model config `chain_compaction` (docs/design.md#compaction-policy):
which groups' newest day is due for compaction, and why. Pure: options, chain state and row
counts in, verdicts out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dbt.adapters.chaintable.base.compaction_policy import CompactionPolicy
from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.chain.state import ChainState, ReadPlan


@dataclass(frozen=True)
class Counts:
    """What the ratio trigger weighs for a group's newest day: the keys changed since its
    anchor, i.e. the distinct primary keys with a row in any delta after the anchor up to the
    day (whatever the merge made of them: a late row that loses to the anchor, a delete), and
    the anchor's rows. The same with the cumulative delta on or off."""

    changed_keys: int
    anchor_rows: int


@dataclass(frozen=True)
class Verdict:
    group: Values
    newest: Values | None  # the group's newest day (None: the group has no partition)
    plan: ReadPlan | None  # how the newest day is read when it is delta-only
    chain_length: int  # deltas merged into the newest day (0 when it is a snapshot)
    counts: Counts | None
    due: bool
    reason: str


def newest_days(state: ChainState) -> dict[Values, tuple[Values, ReadPlan | None]]:
    """{group: (newest chain value, its read plan when it is delta-only, else None)}."""
    out: dict[Values, tuple[Values, ReadPlan | None]] = {}
    snaps, deltas = state.snapshot_chains(), state.delta_chains()
    for group in state.groups():
        chains = [*snaps.get(group, []), *deltas.get(group, [])]
        newest = max(chains, key=state.sort_key)
        plan = state.plan_read(group, newest)
        out[group] = (newest, plan if plan is not None and not plan.from_snapshot else None)
    return out


def needs_counts(policy: CompactionPolicy, state: ChainState) -> list[ReadPlan]:
    """The newest days whose ratio must be measured: the ratio is configured and the length
    trigger alone does not make the day due."""
    if policy.max_cumulative_ratio is None:
        return []
    out = []
    for _, plan in newest_days(state).values():
        if plan is None:
            continue
        if policy.max_chain_length is not None and len(plan.deltas) >= policy.max_chain_length:
            continue
        out.append(plan)
    return out


def decide(
    policy: CompactionPolicy,
    state: ChainState,
    counts: Mapping[Values, Counts],
) -> list[Verdict]:
    """One verdict per group, in group order. The newest day is due when it is delta-only and
    its chain since the anchor holds max_chain_length deltas or more, or when its changed keys
    exceed max_cumulative_ratio of the anchor's rows (a group without an anchor: any change).
    `counts` holds every plan needs_counts returned, by group."""
    out = []
    for group, (newest, plan) in sorted(newest_days(state).items()):
        if plan is None:
            out.append(Verdict(group, newest, None, 0, None, False, "newest day is a snapshot"))
            continue
        length = len(plan.deltas)
        reasons, not_due = [], []
        if policy.max_chain_length is not None:
            text = f"chain length {length}"
            if length >= policy.max_chain_length:
                reasons.append(f"{text} >= max_chain_length {policy.max_chain_length}")
            else:
                not_due.append(f"{text} < {policy.max_chain_length}")
        c = counts.get(group)
        if policy.max_cumulative_ratio is not None and not reasons:
            if c is None:
                raise KeyError(f"no counts for group {group}")
            limit = policy.max_cumulative_ratio * c.anchor_rows
            text = f"{c.changed_keys} changed key(s) since the anchor"
            base = f"of {c.anchor_rows} anchor row(s)" if plan.anchor else "(no anchor)"
            if c.changed_keys > limit:
                reasons.append(
                    f"{text} > max_cumulative_ratio {policy.max_cumulative_ratio:g} {base}"
                )
            else:
                not_due.append(f"{text} <= {policy.max_cumulative_ratio:g} {base}")
        due = bool(reasons)
        out.append(
            Verdict(group, newest, plan, length, c, due, "; ".join(reasons if due else not_due))
        )
    return out


def due_by_day(verdicts: Sequence[Verdict], state: ChainState) -> list[tuple[Values, list[Values]]]:
    """The due groups by newest day, oldest day first: one compaction per day."""
    days: dict[Values, list[Values]] = {}
    for v in verdicts:
        if v.due and v.newest is not None:
            days.setdefault(v.newest, []).append(v.group)
    return [(chain, sorted(days[chain])) for chain in sorted(days, key=state.sort_key)]
