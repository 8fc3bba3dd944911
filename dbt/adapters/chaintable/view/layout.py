"""Which reads the view spells out and which go through its mapping table
(docs/design.md#branches-and-relations): pure, over the chain's state."""

from __future__ import annotations

from collections.abc import Sequence

from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.chain.state import ChainState, ReadPlan


def view_branches(state: ChainState) -> list[tuple[Values, list[ReadPlan]]]:
    """Delta-only reads grouped by chain value, oldest first: the view gets one branch per
    chain value (all groups merged together). Its partition lists still name each group;
    view/fit.py keeps the text within the metastore's limit however many there are."""
    out: dict[Values, list[ReadPlan]] = {}
    for plan in state.delta_only():
        out.setdefault(plan.chain, []).append(plan)
    return sorted(out.items(), key=lambda kv: state.sort_key(kv[0]))


def view_cut(
    state: ChainState, branches: Sequence[tuple[Values, Sequence[ReadPlan]]], recent: int
) -> int:
    """How many of `branches` (view_branches) `view_layout` maps: the others keep a literal
    branch each."""
    snaps, _ = state.sorted_chains
    newest = max((keys[-1] for keys, _ in snaps.values() if keys), default=None)
    after = len(branches)
    for i, (chain, _) in enumerate(branches):
        if newest is None or state.sort_key(chain) > newest:
            after = i
            break
    return max(len(branches) - max(recent, 0), after)


def view_layout(
    state: ChainState, recent: int
) -> tuple[list[tuple[Values, list[ReadPlan]]], list[ReadPlan]]:
    """(literal branches, mapped reads). The delta-only chain values after the newest
    snapshot (of any group) keep a view branch each, at most the newest `recent` of them
    (literal partition values, pruned at planning time); the reads of older delta-only
    partitions go through one branch driven by a mapping table (target partition -> anchor
    and deltas), so the view's text stays bounded however long the history.
    The mapped set is everything up to the newest snapshot: a daily run, which only adds a
    newer partition, leaves it as it is (its mapping need not be rewritten) until a
    compaction moves the newest snapshot or more than `recent` days pass without one."""
    branches = view_branches(state)
    return split_layout(branches, view_cut(state, branches, recent))


def split_layout(
    branches: Sequence[tuple[Values, list[ReadPlan]]], cut: int
) -> tuple[list[tuple[Values, list[ReadPlan]]], list[ReadPlan]]:
    """(literal branches, mapped reads) with the oldest `cut` of `branches` mapped."""
    return list(branches[cut:]), [p for _, plans in branches[:cut] for p in plans]


def mapped_runs(state: ChainState, mapped: Sequence[ReadPlan], cap: int) -> list[tuple[str, str]]:
    """Ranges (low, high) of the first chain key, oldest first, that hold the first value of
    every partition in `mapped` and no first value that only partitions read another way
    have (snapshot partitions, literal branches): the view filters its mapped branches by
    them, so a query of a stored day between mapped days folds those branches away at
    planning time. Past `cap` runs the oldest merge into one (a wider range prunes less,
    and the view's text stays bounded)."""
    inside = {p.chain[0] for p in mapped}
    firsts = inside | {state.layout.split(p)[1][0] for p in state.snapshots | state.deltas}
    runs: list[list[str]] = []
    last_inside = False
    for value in sorted(firsts, key=lambda v: state.sort_key((v,))):
        if value in inside and last_inside:
            runs[-1][1] = value
        elif value in inside:
            runs.append([value, value])
        last_inside = value in inside
    if len(runs) > cap > 0:
        runs = [[runs[0][0], runs[-cap][1]], *runs[len(runs) - cap + 1 :]]
    return [(low, high) for low, high in runs]


def stored_in(state: ChainState, runs: Sequence[tuple[str, str]]) -> bool:
    """Whether a snapshot partition's first chain value lies in one of `runs` (a value
    stored for one group and mapped for another, a stored hour of a mapped day, or a
    stored day inside the merged oldest run)."""
    bounds = [(state.sort_key((low,)), state.sort_key((high,))) for low, high in runs]
    firsts = {state.layout.split(p)[1][0] for p in state.snapshots}
    return any(
        low <= key <= high for key in (state.sort_key((v,)) for v in firsts) for low, high in bounds
    )
