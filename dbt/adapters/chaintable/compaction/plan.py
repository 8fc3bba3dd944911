"""Compaction's plan (docs/design.md#compaction): which snapshot partitions to write from which
reads, and the stale marks once they are written. Pure, over the chain's state."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbt.adapters.chaintable.base.partitions import Values, format_partition, g_in
from dbt.adapters.chaintable.chain.state import ChainState, ReadPlan
from dbt.adapters.chaintable.cumulative.plan import sequence_maxima


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


def rows_per_group(rows: Iterable[Sequence[Any]], groups: int, at: int) -> dict[Values, int]:
    """The rows written per group, from a scan's rows: the `groups` group values first, a row
    count at index `at`, summed over a group's rows (a scan by partition gives one per
    partition), in the order the groups first come. Without groups there is always one count,
    0 when the scan gave no row, as a count(*) without GROUP BY gives (read/render.py,
    count_by_group). A connection may give the counts back as int, Decimal or str."""
    counts: dict[Values, int] = {(): 0} if groups == 0 else {}
    for row in rows:
        group = tuple(str(v) for v in row[:groups])
        counts[group] = counts.get(group, 0) + int(row[at])
    return counts


def written_scan(
    rows: Iterable[Sequence[Any]], groups: int, keys: int
) -> tuple[dict[Values, int], dict[Values, int | None]]:
    """The rows of the one scan of the partitions a compaction wrote (cumulative/sql.py,
    sequence_max with count: `keys` partition values, `groups` of them the group's, then the
    row count and the highest sequence) split into the rows written per group (rows_per_group)
    and each partition's highest sequence (sequence_maxima)."""
    rows = list(rows)
    return rows_per_group(rows, groups, keys), sequence_maxima(rows, keys)
