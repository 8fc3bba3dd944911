"""chain_status: a readable per-group table of both branches (pure: state in, text out)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.partitions import Values, format_partition
from dbt.adapters.chaintable.chain.state import ChainState
from dbt.adapters.chaintable.compaction.policy import Verdict
from dbt.adapters.chaintable.expiration.plan import ExpirationPlan, format_plan


def _chain(opts: ChainOptions, chain: Values | None) -> str:
    return format_partition(opts.chain_keys, chain) if chain else "-"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=False)]

    def line(row: Sequence[str]) -> str:
        return "  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=False)).rstrip()

    return [line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows]


def group_summaries(opts: ChainOptions, state: ChainState) -> list[dict[str, Any]]:
    snaps, deltas = state.snapshot_chains(), state.delta_chains()
    out = []
    for group in state.groups():
        s, d = snaps.get(group, []), deltas.get(group, [])
        last = s[-1] if s else None
        since = [c for c in d if last is None or state.sort_key(c) > state.sort_key(last)]
        out.append(
            {
                "group": group,
                "snapshots": s,
                "deltas": d,
                "latest_snapshot": last,
                "chain_length": len(since),
            }
        )
    return out


def render(
    opts: ChainOptions,
    state: ChainState,
    stale: Mapping[str, str],
    expiration: ExpirationPlan | None = None,
    serving: Any = None,
    compaction: Sequence[Verdict] | None = None,
) -> str:
    """`serving`: the delta-only days (group + chain values) read from the cumulative delta;
    None when it is switched off. `compaction`: the policy's verdict per group (None: no
    chain_compaction configured)."""
    lines = _groups(opts, state) + [""] + _reads(opts, state, serving)
    if stale:
        lines += [
            "",
            "stale snapshots (built before a delta they include was rewritten; "
            "recompact with overwrite: true):",
        ]
        lines += [f"  {snap}  (delta {delta} rewritten)" for snap, delta in sorted(stale.items())]
    lines += [""] + _compaction(opts, state, compaction)
    if expiration is not None:
        lines += [""] + _expiration(opts, expiration)
    return "\n".join(lines)


def _groups(opts: ChainOptions, state: ChainState) -> list[str]:
    rows = [
        [
            state.describe_group(g["group"]),
            str(len(g["snapshots"])),
            str(len(g["deltas"])),
            _chain(opts, g["latest_snapshot"]),
            str(g["chain_length"]),
        ]
        for g in group_summaries(opts, state)
    ]
    return _table(["group", "snapshots", "deltas", "latest snapshot", "chain length"], rows)


def _reads(opts: ChainOptions, state: ChainState, serving: Any) -> list[str]:
    """How each partition is read: as a snapshot, or merged from its anchor and deltas."""
    detail = []  # (group, typed chain order) and the row
    for plan in state.delta_only():
        if serving is None:
            how = "merge (cumulative_delta off)"
        elif plan.group + plan.chain in serving:
            how = "cumulative delta"
        else:
            how = "merge (no cumulative delta built for these inputs)"
        row = [
            state.describe_group(plan.group),
            _chain(opts, plan.chain),
            _chain(opts, plan.anchor) if plan.anchor else "(none: all deltas)",
            str(len(plan.deltas)),
            how,
        ]
        detail.append(((plan.group, state.sort_key(plan.chain)), row))
    for p in state.snapshots:
        group, chain = state.layout.split(p)
        row = [state.describe_group(group), _chain(opts, chain), "snapshot", "-", "snapshot"]
        detail.append(((group, state.sort_key(chain)), row))
    return _table(
        ["group", "partition", "read from (anchor)", "deltas merged", "read as"],
        [row for _, row in sorted(detail, key=lambda kr: kr[0])],
    )


def _compaction(
    opts: ChainOptions, state: ChainState, compaction: Sequence[Verdict] | None
) -> list[str]:
    if opts.compaction is None or compaction is None:
        return ["compaction policy: none (compact_chain compacts the partition it is given)"]
    return [f"compaction policy: {opts.compaction.describe()}"] + _table(
        ["group", "newest day", "chain length", "due now", "why"],
        [
            [
                state.describe_group(v.group),
                _chain(opts, v.newest),
                str(v.chain_length),
                "yes" if v.due else "no",
                v.reason,
            ]
            for v in compaction
        ],
    )


def _expiration(opts: ChainOptions, expiration: ExpirationPlan) -> list[str]:
    cutoff = f"{expiration.cutoff:%Y-%m-%d %H:%M:%S}"
    if expiration.is_empty():
        return [f"expiration (cutoff {cutoff}): nothing to drop"]
    return [f"expiration now (cutoff {cutoff}) would drop:"] + [
        "  " + x
        for x in format_plan(expiration, lambda g, c: format_partition(opts.partition_by, g + c))
    ]
