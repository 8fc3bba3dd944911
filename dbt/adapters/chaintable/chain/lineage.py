"""Which snapshot partitions are compactions of the chain as it stands, pure
(docs/design.md#history-by-business-day).

A snapshot partition compact_chain wrote holds the merged read of its anchor and deltas at that
time (docs/design.md#compaction). It still equals the merged read of the current ones while none of them changed:
the compaction records, on t__snapshot (P_COMPACTED), the partition's token and its anchor's
(P_SNAPSHOT_GENERATIONS: every publish of a snapshot partition gives it a new one) and the delta
partitions it read under which options and columns. A later write of the partition or of its
anchor changes a token; a run that writes a delta at or before it drops its entry before it
publishes (and marks it stale after); a snapshot added in between is another anchor; a delta
dropped or added changes the list; a run's new options or columns change the digest. The
record is written after the publish, so a crash leaves none: a partition without one is taken
for a full write, which nothing is known to equal.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dbt.adapters.chaintable.base.keys import P_COMPACTED
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.chain import generations
from dbt.adapters.chaintable.chain.catalog import Loaded
from dbt.adapters.chaintable.chain.state import ChainState, ReadPlan


def merge_inputs(opts: ChainOptions, columns: Sequence[str]) -> tuple[Any, ...]:
    """What a merged read's rows depend on besides its partitions: the merge options and the
    columns (a run may change either without a full refresh)."""
    inputs: tuple[Any, ...] = (
        opts.primary_key,
        opts.sequence_field,
        opts.rowkind_field,
        opts.merge_engine,
        sorted(opts.aggregate_functions.items()),
        sorted(opts.ignore_retract),
        opts.remove_record_on_delete,
        opts.ignore_delete,
        tuple(columns),
    )
    if opts.sequence_groups:  # only then: the stamps of chains without groups stay as they were
        inputs += (opts.sequence_groups,)
    return inputs


def _digest(state: ChainState, plan: ReadPlan, columns: Sequence[str]) -> str:
    """The delta partitions `plan` reads, the merge options and the columns."""
    paths = ",".join(state.layout.path(plan.group + d) for d in plan.deltas)
    text = f"{merge_inputs(state.opts, columns)!r}|{paths}"
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _entry(
    state: ChainState, plan: ReadPlan, tokens: Mapping[str, str], columns: Sequence[str]
) -> list[Any]:
    """[the snapshot's token, its anchor's path ("" for none), the anchor's token, a digest of
    the delta partitions read, the options and the columns] of snapshot plan.group +
    plan.chain, merged by `plan`."""
    lay = state.layout
    anchor = lay.path(plan.group + plan.anchor) if plan.anchor is not None else ""
    return [
        generations.token_of(tokens, lay.path(plan.group + plan.chain)),
        anchor,
        generations.token_of(tokens, anchor) if anchor else None,
        _digest(state, plan, columns),
    ]


# The entries kept: the newest compactions of each group (PER_GROUP), then of all groups as
# many as fit in generations.BUDGET characters (a metastore's limit on a property value). A
# compaction without an entry counts as a full write: a range across it compares that group's
# days in full.
PER_GROUP = 4


def record(
    state: ChainState,
    entries: Mapping[str, Any],
    writes: Iterable[ReadPlan],
    tokens: Mapping[str, str],
    columns: Sequence[str],
) -> dict[str, Any]:
    """The entries once the snapshot partitions of `writes` (the compaction's read plans) are
    published (`state`, `tokens`: after the publish): theirs set, those of partitions no longer
    in the snapshot branch dropped, the newest kept (PER_GROUP, generations.BUDGET)."""
    lay = state.layout
    out = {k: v for k, v in entries.items() if lay.parse(k) in state.snapshots}
    for plan in writes:
        out[lay.path(plan.group + plan.chain)] = _entry(state, plan, tokens, columns)
    by_group: dict[Values, list[tuple[Any, str]]] = {}
    for path in out:
        group, chain = lay.split(lay.parse(path))
        by_group.setdefault(group, []).append((state.sort_key(chain), path))
    newest = [kp for kps in by_group.values() for kp in sorted(kps, reverse=True)[:PER_GROUP]]
    ranked = ((path, out[path]) for _, path in sorted(newest, reverse=True))
    kept = generations.fitted(ranked, generations.BUDGET)
    return dict(sorted(kept.items()))


def voided_by_deltas(
    state: ChainState, entries: Mapping[str, Any], written: Iterable[Values]
) -> dict[str, Any] | None:
    """The entries without those a write of delta partitions `written` voids, before it is
    published (a crash after the publish leaves no entry of inputs it changed; the stale marks
    come only after it): every compaction of a written partition's group at or after its
    day. None when none is voided (a run of a new newest day)."""
    lay, key = state.layout, state.sort_key
    firsts: dict[Values, Any] = {}
    for part in written:
        group, chain = lay.split(tuple(part))
        if group not in firsts or key(chain) < firsts[group]:
            firsts[group] = key(chain)
    out = {}
    for path, entry in entries.items():
        group, chain = lay.split(lay.parse(path))
        if group not in firsts or key(chain) < firsts[group]:
            out[path] = entry
    return out if len(out) < len(entries) else None


def compacted(
    state: ChainState,
    entries: Mapping[str, Any],
    tokens: Mapping[str, str],
    stale: Mapping[str, str],
    columns: Sequence[str],
) -> dict[Values, Values | None]:
    """{snapshot partition (group + chain): its anchor's chain values, None for none} of the
    snapshot partitions that equal the merged read of their current anchor and deltas under
    the current options and columns."""
    lay, out = state.layout, {}
    for path, entry in entries.items():
        part = lay.parse(path)
        if part not in state.snapshots or path in stale:
            continue
        group, chain = lay.split(part)
        plan = state.plan_read(group, chain, use_snapshot=False)
        if plan is None:  # its own delta is gone: a compaction always has one
            continue
        if entry == _entry(state, plan, tokens, columns):
            out[part] = plan.anchor
    return out


def entries_of(props: Mapping[str, str]) -> dict[str, Any]:
    return dict(json.loads(props.get(P_COMPACTED) or "{}"))


def compacted_of(loaded: Loaded) -> dict[Values, Values | None]:
    """`compacted` of a chain as the catalog gave it (t__snapshot's properties)."""
    tokens = generations.tokens_of(loaded.props)
    return compacted(
        loaded.state(), entries_of(loaded.props), tokens, loaded.stale(), loaded.column_names
    )
