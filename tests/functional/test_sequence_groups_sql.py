"""partial-update sequence groups (docs/design.md#merge-order-and-engines) on real Spark, no dbt:
on random chains (an anchor and four delta days, out-of-order and NULL group sequences, ties,
retractions, aggregate functions in groups), every day merged on read equals the rule written
out in Python below, and the day read from its anchor and its cumulative delta (built day by day
from the previous one where that is exact, and built from scratch) equals the day merged on
read, row for row."""

from __future__ import annotations

import random

import pytest
from helpers import chain_tables, sql_value, stored_partitions

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.chain.state import ChainState
from dbt.adapters.chaintable.cumulative import plan as cumulative
from dbt.adapters.chaintable.cumulative import sql as cumulative_sql

COLUMNS = [
    ("id", "int"),
    ("a", "string"),
    ("b", "int"),
    ("g1", "int"),
    ("c", "string"),
    ("d", "int"),
    ("g2", "int"),
    ("g3", "bigint"),
    ("e", "string"),
    ("op", "string"),
    ("seq", "int"),
    ("g", "string"),
    ("dt", "string"),
]
NAMES = [c for c, _ in COLUMNS]
DAYS = [f"2025010{d}" for d in range(1, 6)]  # 0101 the anchor, then four delta days
GROUPS = ("x", "y")
SEQUENCE_GROUPS = {"g1": ["a", "b"], "g2,g3": ["c", "d"]}

CASES = {
    # D's rows always follow the state's: built day by day
    "plain": dict(aggregate_functions={"b": "max", "d": "sum"}),
    "sequence-field-and-retractions": dict(
        sequence_field="seq", rowkind_field="op", aggregate_functions={"d": "sum"}
    ),
    "retractions": dict(rowkind_field="op", aggregate_functions={"d": "count"}),
    "ignore-delete": dict(rowkind_field="op", partial_update_ignore_delete=True),
    "ordered-functions": dict(
        aggregate_functions={
            "a": "listagg",
            "b": "first_value",
            "c": "last_non_null_value",
            "d": "first_non_null_value",
        }
    ),
}
INCREMENTAL = {"plain", "ignore-delete"}


def options(case: str) -> ChainOptions:
    return ChainOptions.from_config(
        "t",
        {
            "partition_by": ["g", "dt"],
            "chain_partition_keys": ["dt"],
            "primary_key": ["id", "g", "dt"],
            "merge_engine": "partial-update",
            "sequence_groups": SEQUENCE_GROUPS,
            **CASES[case],
        },
    )


# ---- the rule, written out ----------------------------------------------------------------------
def _low(v):
    """NULL lowest."""
    return (0, 0) if v is None else (1, v)


def merge_key(opts: ChainOptions, rows: list[dict]) -> dict | None:
    """The merged row of one key's rows (each with `anchor` and `pos`, its chain position)."""
    retract = {id(r): not r["anchor"] and r["op"] in ("-U", "-D") for r in rows}
    if opts.ignore_delete:
        rows = [r for r in rows if not retract[id(r)]]
    rows = sorted(
        rows,
        key=lambda r: (
            _low(r["seq"]) if opts.sequence_field else (0, 0),
            r["pos"],
            0 if retract[id(r)] else 1,
        ),
    )
    inserts = [r for r in rows if not retract[id(r)]]
    if not inserts:
        return None
    out = {c: rows[-1][c] for c in ("id", "g")}
    for c in ("e", "op", "seq"):
        values = [r[c] for r in inserts if r[c] is not None]
        out[c] = values[-1] if values else None
    for seq_key, members in SEQUENCE_GROUPS.items():
        seq = seq_key.split(",")
        counted = [
            (i, r) for i, r in enumerate(rows) if r["anchor"] or any(r[s] is not None for s in seq)
        ]
        ordered = [
            r for _, r in sorted(counted, key=lambda ir: ([_low(ir[1][s]) for s in seq], ir[0]))
        ]
        winner = ordered[-1] if ordered else None
        for s in seq:
            out[s] = winner[s] if winner else None
        for m in members:
            fn = opts.aggregate_functions.get(m)
            if fn is None:
                out[m] = None if winner is None or retract[id(winner)] else winner[m]
            else:
                out[m] = aggregate(fn, m, ordered, retract)
    return out


def aggregate(fn: str, col: str, rows: list[dict], retract: dict) -> object:
    added = [r[col] for r in rows if not retract[id(r)]]
    present = [v for v in added if v is not None]
    if fn == "sum":
        terms = [(-r[col] if retract[id(r)] else r[col]) for r in rows if r[col] is not None]
        return sum(terms) if terms else None
    if fn == "count":
        return sum(
            (r[col] or 0) if r["anchor"] else 0 if r[col] is None else -1 if retract[id(r)] else 1
            for r in rows
        )
    if fn == "max":
        return max(present) if present else None
    if fn == "listagg":
        return ",".join(present) if present else None
    if fn == "first_value":
        return added[0] if added else None
    if fn == "first_non_null_value":
        return present[0] if present else None
    if fn == "last_non_null_value":
        return present[-1] if present else None
    raise AssertionError(fn)


def expected_day(opts: ChainOptions, anchor: list[dict], deltas: list[list[dict]], day: str):
    rows = [dict(r, anchor=True, pos=0) for r in anchor]
    rows += [dict(r, anchor=False, pos=i + 1) for i, d in enumerate(deltas) for r in d]
    keys: dict[tuple, list[dict]] = {}
    for r in rows:
        keys.setdefault((r["id"], r["g"]), []).append(r)
    out = []
    for key_rows in keys.values():
        merged = merge_key(opts, key_rows)
        if merged is not None:
            out.append(tuple(merged[c] if c != "dt" else day for c in NAMES))
    return sort_rows(out)


# ---- random chains ------------------------------------------------------------------------------
def rows_for(rng: random.Random, opts: ChainOptions, day: str, anchor: bool) -> list[dict]:
    out = []
    for g in GROUPS:
        for key in rng.sample(range(1, 9), 8 if anchor else rng.randint(0, 5)):
            n = 1 if anchor or not opts.sequence_field else rng.randint(1, 2)
            for seq in rng.sample(range(1, 30), n):
                kind = "+I"
                if not anchor and opts.rowkind_field:
                    kind = rng.choice(["+I", "+U", "+U", "-D", "-U"])
                if "count" in opts.aggregate_functions.values() and anchor:
                    d = rng.choice([0, 1, 2])
                else:
                    d = rng.choice([1, 2, 5, None])
                out.append(
                    {
                        "id": key,
                        "a": rng.choice(["p", "q", "r", None]),
                        "b": rng.choice([1, 2, 5, None]),
                        "g1": rng.choice([1, 2, 3, None]),
                        "c": rng.choice(["s", "t", None]),
                        "d": d,
                        "g2": rng.choice([1, 2, None]),
                        "g3": rng.choice([1, 2, None]),
                        "e": rng.choice(["u", "v", None]),
                        "op": kind,
                        "seq": seq if opts.sequence_field else None,
                        "g": g,
                        "dt": day,
                    }
                )
    if not opts.sequence_field:
        # without a sequence field a key's rows in one partition tie: keep one per key
        out = list({(r["id"], r["g"]): r for r in out}.values())
    return out


def insert(spark, table: str, rows: list[dict]) -> None:
    if rows:
        values = ", ".join("(" + ", ".join(sql_value(r[c]) for c in NAMES) + ")" for r in rows)
        spark.sql(f"INSERT INTO {table} VALUES {values}")


def sort_rows(rows) -> list[tuple]:
    return sorted(rows, key=lambda r: tuple("" if v is None else str(v) for v in r))


@pytest.mark.parametrize("case", sorted(CASES))
def test_merge_and_cumulative_delta_follow_the_group_rule(spark, schema, case):
    rng = random.Random(case)
    opts = options(case)
    types = dict(COLUMNS)
    tables, r = chain_tables(spark, schema, opts, COLUMNS)
    anchor = rows_for(rng, opts, DAYS[0], anchor=True)
    insert(spark, tables["snapshot"], anchor)
    written, deltas = [], []
    for day in DAYS[1:]:
        rows = rows_for(rng, opts, day, anchor=False)
        insert(spark, tables["delta"], rows)
        written.append(rows)
        deltas += [(g, day) for g in GROUPS]
    state = ChainState.build(opts, [(g, DAYS[0]) for g in GROUPS], deltas, types)
    digest = cumulative.options_digest(opts, NAMES)
    incremental = cumulative.incremental(opts, ["a", "b", "c", "d", "e"])
    assert incremental == (case in INCREMENTAL)
    for mode in ("incremental", "scratch"):
        cum = cumulative.Cumulative(state, stored_partitions(spark, tables["cumulative"]), digest)
        builds = cum.builds(list(deltas), incremental and mode == "incremental")
        for i, day in enumerate(DAYS[1:]):
            todo = [b for b in builds if b.plan.chain == (day,)]
            from_previous = incremental and mode == "incremental" and i > 0
            assert todo and all((b.previous is not None) == from_previous for b in todo)
            spark.sql(cumulative_sql.build(r, (day,), todo, cumulative.needs_anchor(opts)))
            plans = state.plan_partition_read({"dt": day})
            serving = {p.group + p.chain: cumulative.stamp(p, digest) for p in plans}
            on_read = sort_rows(tuple(x) for x in spark.sql(r.merged((day,), plans)).collect())
            assert on_read == expected_day(opts, anchor, written[: i + 1], day), (mode, day)
            served = spark.sql(r.merged((day,), plans, serving=serving)).collect()
            assert sort_rows(tuple(x) for x in served) == on_read, (mode, day)
        if mode == "incremental":
            spark.sql(
                f"ALTER TABLE {tables['cumulative']} DROP IF EXISTS PARTITION (g='x'), "
                "PARTITION (g='y')"
            )
