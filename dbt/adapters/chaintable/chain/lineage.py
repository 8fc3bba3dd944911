"""Which snapshot partitions are compactions of the chain as it stands, pure
(docs/design.md#history-by-business-day).

A snapshot partition compact_chain wrote holds the merged read of its anchor and deltas at that
time (SPEC 3). It still equals the merged read of the current ones while none of them changed:
the compaction records, on t__snapshot (P_COMPACTED), the partition's token and its anchor's
(P_SNAPSHOT_GENERATIONS: every publish of a snapshot partition gives it a new one) and the delta
partitions it read. A later write of the partition or of its anchor changes a token; a delta
written in between marks it stale; a snapshot added in between is another anchor; a delta
dropped or added changes the list. The record is written after the publish, so a crash leaves
none: a partition without one is taken for a full write, which nothing is known to equal.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from dbt.adapters.chaintable.base.keys import P_COMPACTED, P_SNAPSHOT_GENERATIONS
from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.chain.catalog import Loaded
from dbt.adapters.chaintable.chain.state import ChainState, ReadPlan


def _deltas_digest(state: ChainState, plan: ReadPlan) -> str:
    paths = ",".join(state.layout.path(plan.group + d) for d in plan.deltas)
    return hashlib.sha1(paths.encode()).hexdigest()[:16]


def _entry(state: ChainState, plan: ReadPlan, tokens: Mapping[str, str]) -> list[Any]:
    """[the snapshot's token, its anchor's path ("" for none), the anchor's token, a digest of
    the delta partitions read] of snapshot plan.group + plan.chain, merged by `plan`."""
    lay = state.layout
    anchor = lay.path(plan.group + plan.anchor) if plan.anchor is not None else ""
    return [
        tokens.get(lay.path(plan.group + plan.chain)),
        anchor,
        tokens.get(anchor) if anchor else None,
        _deltas_digest(state, plan),
    ]


# the entries kept: the newest compactions of each group, and of all groups. An entry is
# ~110 characters, twice that in the hex mirror a redacted value gets (base/properties.py), and
# Derby's metastore holds a property value of at most 32,672 (measured). A compaction without
# an entry counts as a full write: a range across it compares that group's days in full.
PER_GROUP = 4
IN_ALL = 100


def record(
    state: ChainState,
    entries: Mapping[str, Any],
    writes: Iterable[ReadPlan],
    tokens: Mapping[str, str],
) -> dict[str, Any]:
    """The entries once the snapshot partitions of `writes` (the compaction's read plans) are
    published (`state`, `tokens`: after the publish): theirs set, those of partitions no longer
    in the snapshot branch dropped, the newest PER_GROUP of a group and IN_ALL in all kept."""
    lay = state.layout
    out = {k: v for k, v in entries.items() if lay.parse(k) in state.snapshots}
    for plan in writes:
        out[lay.path(plan.group + plan.chain)] = _entry(state, plan, tokens)
    by_group: dict[Values, list[tuple[Any, str]]] = {}
    for path in out:
        group, chain = lay.split(lay.parse(path))
        by_group.setdefault(group, []).append((state.sort_key(chain), path))
    newest = [kp for kps in by_group.values() for kp in sorted(kps, reverse=True)[:PER_GROUP]]
    kept = {path for _, path in sorted(newest, reverse=True)[:IN_ALL]}
    return {k: v for k, v in sorted(out.items()) if k in kept}


def compacted(
    state: ChainState,
    entries: Mapping[str, Any],
    tokens: Mapping[str, str],
    stale: Mapping[str, str],
) -> dict[Values, Values | None]:
    """{snapshot partition (group + chain): its anchor's chain values, None for none} of the
    snapshot partitions that equal the merged read of their current anchor and deltas."""
    lay, out = state.layout, {}
    for path, entry in entries.items():
        part = lay.parse(path)
        if part not in state.snapshots or path in stale:
            continue
        group, chain = lay.split(part)
        plan = state.plan_read(group, chain, use_snapshot=False)
        if plan is None:  # its own delta is gone: a compaction always has one
            continue
        if entry == _entry(state, plan, tokens):
            out[part] = plan.anchor
    return out


def compacted_of(loaded: Loaded) -> dict[Values, Values | None]:
    """`compacted` of a chain as the catalog gave it (t__snapshot's properties)."""
    entries = json.loads(loaded.props.get(P_COMPACTED) or "{}")
    tokens = json.loads(loaded.props.get(P_SNAPSHOT_GENERATIONS) or "{}")
    return compacted(loaded.state(), entries, tokens, loaded.stale())
