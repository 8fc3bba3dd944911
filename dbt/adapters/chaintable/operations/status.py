"""chain_status: a readable per-group table of both branches (pure: state in, text out)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.partitions import Values, format_partition
from dbt.adapters.chaintable.chain.state import ChainState
from dbt.adapters.chaintable.compaction.policy import Verdict


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
    expiration: Any = None,
    serving: Any = None,
    compaction: Sequence[Verdict] | None = None,
) -> str:
    """`serving`: the delta-only days (group + chain values) read from the cumulative delta;
    None when it is switched off. `compaction`: the policy's verdict per group (None: no
    chain_compaction configured)."""
    lines: list[str] = []
    rows = []
    for g in group_summaries(opts, state):
        rows.append(
            [
                state.describe_group(g["group"]),
                str(len(g["snapshots"])),
                str(len(g["deltas"])),
                _chain(opts, g["latest_snapshot"]),
                str(g["chain_length"]),
            ]
        )
    lines += _table(["group", "snapshots", "deltas", "latest snapshot", "chain length"], rows)
    lines.append("")
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
    lines += _table(
        ["group", "partition", "read from (anchor)", "deltas merged", "read as"],
        [row for _, row in sorted(detail, key=lambda kr: kr[0])],
    )
    if stale:
        lines += [
            "",
            "stale snapshots (built before a delta they include was rewritten; "
            "recompact with overwrite: true):",
        ]
        lines += [f"  {snap}  (delta {delta} rewritten)" for snap, delta in sorted(stale.items())]
    lines += [""]
    if opts.compaction is None or compaction is None:
        lines.append("compaction policy: none (compact_chain compacts the partition it is given)")
    else:
        lines.append(f"compaction policy: {opts.compaction.describe()}")
        lines += _table(
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
    if expiration is not None:
        lines += [""]
        if expiration.is_empty():
            lines.append(
                f"expiration (cutoff {expiration.cutoff:%Y-%m-%d %H:%M:%S}): nothing to drop"
            )
        else:
            from dbt.adapters.chaintable.expiration import plan as expire

            lines.append(
                f"expiration now (cutoff {expiration.cutoff:%Y-%m-%d %H:%M:%S}) would drop:"
            )
            lines += [
                "  " + x
                for x in expire.format_plan(
                    expiration, lambda g, c: format_partition(opts.partition_by, g + c)
                )
            ]
    return "\n".join(lines)
