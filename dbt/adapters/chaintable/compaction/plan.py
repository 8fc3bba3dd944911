"""Compaction's plan (docs/design.md#compaction): which snapshot partitions to write from which
reads, and the stale marks once they are written. Pure, over the chain's state."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dbt.adapters.chaintable.base.partitions import Values, format_partition, g_in
from dbt.adapters.chaintable.chain.state import ChainState, ReadPlan


@dataclass(frozen=True)
class CompactionPlan:
    chain: Values
    writes: tuple[ReadPlan, ...]
    kept: tuple[Values, ...]  # overwrite: groups with a snapshot and no delta at the partition
    message: str

    @property
    def written(self) -> bool:
        return bool(self.writes)


def plan_compaction(
    state: ChainState,
    spec: Mapping[str, str],
    overwrite: bool = False,
    history: Mapping[Values, Values] | None = None,
    only: Iterable[Values] | None = None,
) -> CompactionPlan:
    """`only`: of the groups the spec matches, these (the compaction policy's due ones)."""
    chain, groups = state.resolve_spec(spec)
    if only is not None:
        wanted = set(only)
        groups = [g for g in groups if g in wanted]
    history = history or {}
    label = format_partition(state.opts.chain_keys, chain)
    existing = tuple(g for g in groups if g + chain in state.snapshots)
    with_delta = [g for g in groups if g + chain in state.deltas]
    if existing and not overwrite:
        where = ", ".join(state.describe_group(g) for g in existing)
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
        for p in (state.plan_read(g, chain, use_snapshot=False) for g in with_delta)
        if p is not None
    )
    # an overwrite with no anchor left after expiration would rebuild from deltas alone
    guarded = tuple(
        p.group
        for p in writes
        if p.anchor is None
        and g_in(p.group, existing)
        and state.before_history(p.group + chain, history)
    )
    writes = tuple(p for p in writes if p.group not in guarded)
    kept = tuple(g for g in existing if g + chain not in state.deltas or g in guarded)
    if guarded:
        label += (
            " (kept for "
            + ", ".join(state.describe_group(g) for g in guarded)
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
