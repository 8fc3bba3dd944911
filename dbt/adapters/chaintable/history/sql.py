"""SQL of the history macros (docs/design.md#history-by-business-day): chain_changes and chain_history over a HistoryPlan.

Every state read here is the chain's own read of a day (Renderer.partition_read, the
cumulative delta where it serves the day), so each engine, row kind, sequence group and group
partition counts as it does in chain_read. A read restricted to the keys a delta touched is a
semi join on the merge keys, which Spark can push through the relabelling projection, the union
of a served read and the merge's windows and aggregates (partitioned by those keys). Which
groups and days are read whole is history/plan.py's decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.base.quoting import cols_sql, q, string
from dbt.adapters.chaintable.chain.state import ReadPlan
from dbt.adapters.chaintable.cumulative import read as cumulative_read
from dbt.adapters.chaintable.history.plan import HistoryPlan, Segment
from dbt.adapters.chaintable.read.render import Renderer

CHANGE = "ct__change"  # insert | update | delete
BEFORE = "ct__before"  # the state on `from`, a struct of the model's columns
TO_PREFIX = "ct__to_"  # + chain key: the first day a version no longer was the state
ON = "__ct_on"  # a side of the changes' outer join has the key
DAY = "__ct_i"  # index of a day in the plan's days
NEW = "__ct_new"  # a row starts a version
VERSION = "__ct_v"
LAST = "__ct_last"  # the last day index of a version
UPTO = "__ct_upto"  # the last day index a row is known to be the state on
TOUCHED = "__ct_touched"  # a key a delta of the segment has


def _keys(r: Renderer) -> list[str]:
    return list(r.opts.merge_keys)


def _values(r: Renderer) -> list[str]:
    """The columns a state is compared on: neither merge keys nor chain keys (relabelled)."""
    skip = {c.lower() for c in (*r.opts.merge_keys, *r.opts.chain_keys)}
    return [c for c in r.columns if c.lower() not in skip]


def _on(keys: Sequence[str], left: str, right: str) -> str:
    return " AND ".join(f"{left}.{q(k)} = {right}.{q(k)}" for k in keys) or "true"


def _same(columns: Sequence[str], left: str, right: str) -> str:
    return " AND ".join(f"{left}{q(c)} <=> {right}{q(c)}" for c in columns) or "true"


def _keys_sql(r: Renderer, parts: Sequence[Values], extra: str = "") -> str:
    """The distinct merge keys of delta partitions `parts` (with `extra` columns)."""
    cols = [c for c in (cols_sql(_keys(r)), extra) if c] or ["1 AS __ct_one"]
    return f"SELECT DISTINCT {', '.join(cols)} FROM {r.delta} WHERE {r.partitions_predicate(parts)}"


def candidate_keys(r: Renderer, plan: HistoryPlan) -> str | None:
    """The merge keys of the delta rows in (from, to] of the incremental groups."""
    return _keys_sql(r, plan.candidates) if plan.candidates else None


def _join(read: str, keys_sql: str, kind: str, keys: Sequence[str]) -> str:
    return (
        f"SELECT __hs.* FROM ({read}) __hs LEFT {kind} JOIN ({keys_sql}) __hk "
        f"ON {_on(keys, '__hs', '__hk')}"
    )


def day_state(
    r: Renderer, plan: HistoryPlan, i: int, serving: Mapping[Values, str], keys_sql: str | None
) -> str:
    """The state on plan.days[i] of the full groups and of the incremental groups' candidate
    keys, in table order (chain keys relabelled to the day)."""
    parts = []
    inc = plan.of_groups(i, plan.incremental)
    if inc and keys_sql is not None:
        parts.append(_touched_read(r, plan, i, inc, serving, keys_sql))
    full = plan.of_groups(i, plan.full)
    if full:
        parts.append(r.partition_read(full, serving))
    if not parts:
        return r.partition_read([])
    return "\nUNION ALL\n".join(f"SELECT * FROM ({p}) __d{n}" for n, p in enumerate(parts))


def _touched_read(
    r: Renderer,
    plan: HistoryPlan,
    i: int,
    plans: Sequence[ReadPlan],
    serving: Mapping[Values, str],
    keys_sql: str,
) -> str:
    """Day i's state of its incremental groups' candidate keys (`keys_sql`). On `to` a
    serving C partition holds each of them whose state is not its anchor's row: C holds every
    key a delta in (anchor, to] touched but one whose anchor row wins (deduplicate and
    first-row, cumulative/sql.py), and a key only deltas before the anchor touched (a
    compaction inside the range, history/plan.py) has its anchor's row. So a served group's
    keys come from C's live rows, and from the anchor only the keys C does not hold. That set
    is small on most days (none of a day's keys but those whose anchor row won): Spark
    broadcasts it before the anchor's scan runs, and when it is empty drops the join, the scan
    with it (10M rows, a day's changes: the executed plan reads no anchor for `to`). No hint
    forces the broadcast: across a compaction the set holds every key changed before it."""
    served = [p for p in plans if p.group + p.chain in serving] if i == len(plan.days) - 1 else []
    rest = [p for p in plans if p not in served]
    keys = _keys(r)
    reads = [_join(r.partition_read(rest, serving), keys_sql, "SEMI", keys)] if rest else []
    if served:
        chain = served[0].chain
        live = _join(cumulative_read.live(r, served, serving), keys_sql, "SEMI", keys)
        reads.append(f"SELECT {r.relabel(chain)} FROM ({live}) __m")
        anchors = [p.group + p.anchor for p in served if p.anchor is not None]
        if anchors:
            held = cumulative_read.held_keys(r, served, serving)
            groups = {p.group for p in served}
            own = [c for g in plan.segments if g.group in groups for c in g.candidates]
            missing = _join(_keys_sql(r, own), held, "ANTI", keys)
            rows = (
                f"SELECT __a.* FROM ({r.select(r.snapshot, anchors)}) __a "
                f"LEFT SEMI JOIN ({missing}) __hm ON {_on(keys, '__a', '__hm')}"
            )
            reads.append(f"SELECT {r.relabel(chain)} FROM ({rows}) __m")
    return "\nUNION ALL\n".join(reads)


# ---- chain_changes ----------------------------------------------------------------------------
def changes(r: Renderer, plan: HistoryPlan, serving: Mapping[Values, str]) -> str:
    """One row per key whose state on `to` differs from its state on `from`."""
    keys_sql = candidate_keys(r, plan)
    to_state = day_state(r, plan, len(plan.days) - 1, serving, keys_sql)
    from_state = day_state(r, plan, 0, serving, keys_sql)
    end = dict(zip(r.opts.chain_keys, plan.days[-1], strict=True))
    lower = {c.lower(): c for c in end}

    def out(c: str) -> str:
        if c.lower() in lower:
            return f"{r.lit(c, end[lower[c.lower()]])} AS {q(c)}"
        return f"CASE WHEN __t.{ON} THEN __t.{q(c)} ELSE __f.{q(c)} END AS {q(c)}"

    before = ", ".join(f"{string(c)}, __f.{q(c)}" for c in r.columns)
    kind = (
        f"CASE WHEN __f.{ON} IS NULL THEN 'insert' WHEN __t.{ON} IS NULL THEN 'delete' "
        f"ELSE 'update' END AS {CHANGE}"
    )
    return (
        f"SELECT {', '.join(out(c) for c in r.columns)},\n  {kind},\n"
        f"  CASE WHEN __f.{ON} THEN named_struct({before}) END AS {BEFORE}\n"
        f"FROM (SELECT *, true AS {ON} FROM ({to_state}) __t0) __t\n"
        f"FULL OUTER JOIN (SELECT *, true AS {ON} FROM ({from_state}) __f0) __f\n"
        f"ON {_on(_keys(r), '__t', '__f')}\n"
        f"WHERE __t.{ON} IS NULL OR __f.{ON} IS NULL "
        f"OR NOT ({_same(_values(r), '__t.', '__f.')})"
    )


# ---- chain_history ----------------------------------------------------------------------------
def history(r: Renderer, plan: HistoryPlan, serving: Mapping[Values, str]) -> str:
    """Every version of every key over the plan's days. Each group's segment (days
    with one base) is read in full on its first day, and on its other days for the keys its
    deltas touched only. Every row carries the last day it is known to hold for (`__ct_upto`):
    its own day, or for a key no delta of the segment touched, the segment's last day. Per key
    in day order, a row continues the version before it when that one held up to the day
    before with the same values; the version's last day is its rows' highest `__ct_upto`."""
    days = [_day_rows(r, plan, i, serving) for i in range(len(plan.days))]
    stacked = "\nUNION ALL\n".join(
        f"SELECT *, {i} AS {DAY} FROM ({d}) __h{i}" for i, d in enumerate(days) if d
    )
    keys = _keys(r)
    by = f"PARTITION BY {cols_sql(keys)} " if keys else ""
    window = f"({by}ORDER BY {DAY})"
    same_as_before = " AND ".join(
        [f"lag({UPTO}) OVER {window} = {DAY} - 1"]
        + [f"lag({q(c)}) OVER {window} <=> {q(c)}" for c in _values(r)]
    )
    marked = f"SELECT *, CASE WHEN {same_as_before} THEN 0 ELSE 1 END AS {NEW} FROM ({stacked}) __a"
    numbered = (
        f"SELECT *, sum({NEW}) OVER ({by}ORDER BY {DAY} "
        f"ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS {VERSION} FROM ({marked}) __b"
    )
    by_version = f"PARTITION BY {cols_sql([*keys, VERSION])}"
    spans = f"SELECT *, max({UPTO}) OVER ({by_version}) AS {LAST} FROM ({numbered}) __c"
    return (
        f"SELECT {cols_sql(r.columns)}, {', '.join(_ends(r, plan, LAST))}\n"
        f"FROM ({spans}) __v WHERE {NEW} = 1"
    )


def _ends(r: Renderer, plan: HistoryPlan, last: str) -> list[str]:
    """`ct__to_<chain key>` of a version whose last day has index `last`: the next day, NULL
    when the last day is `to`."""
    out = []
    for n, c in enumerate(r.opts.chain_keys):
        whens = " ".join(f"WHEN {i} THEN {r.lit(c, day[n])}" for i, day in enumerate(plan.days[1:]))
        typed = f"CAST(NULL AS {r.type_of(c)})"
        value = f"CASE {last} {whens} ELSE {typed} END" if whens else typed
        out.append(f"{value} AS {q(TO_PREFIX + c)}")
    return out


def _day_rows(r: Renderer, plan: HistoryPlan, i: int, serving: Mapping[Values, str]) -> str:
    """The rows day i contributes, each with its `__ct_upto`: the full state of the groups
    whose segment starts that day (one part per segment end), and the touched keys of the
    groups inside a segment; "" when there are none."""
    parts = []
    starting: dict[int, list[Segment]] = {}
    for seg in plan.segments:
        if seg.start == i:
            starting.setdefault(seg.end, []).append(seg)
    for end, segs in sorted(starting.items()):
        read = r.partition_read(plan.of_groups(i, [s.group for s in segs]), serving)
        cands = [c for s in segs for c in s.candidates]
        if end == i or not cands:
            parts.append(f"SELECT *, {end} AS {UPTO} FROM ({read}) __hs")
            continue
        flagged = _keys_sql(r, cands, f"true AS {TOUCHED}")
        parts.append(
            f"SELECT __hs.*, CASE WHEN __hk.{TOUCHED} THEN {i} ELSE {end} END AS {UPTO} "
            f"FROM ({read}) __hs LEFT OUTER JOIN ({flagged}) __hk "
            f"ON {_on(_keys(r), '__hs', '__hk')}"
        )
    inside = [s for s in plan.segments if s.start < i <= s.end and s.candidates]
    if inside:
        read = r.partition_read(plan.of_groups(i, [s.group for s in inside]), serving)
        cands = [c for s in inside for c in s.candidates]
        touched = _join(read, _keys_sql(r, cands), "SEMI", _keys(r))
        parts.append(f"SELECT *, {i} AS {UPTO} FROM ({touched}) __ht")
    return "\nUNION ALL\n".join(parts)
