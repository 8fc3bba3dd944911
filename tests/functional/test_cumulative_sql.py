"""The cumulative delta's SQL against the merge-on-read SQL, on random histories, for every engine
(property test on real Spark, no dbt): for every day of a chain, the day read from its anchor and
its cumulative delta (built day by day from the previous one, and built from scratch) equals
the day merged on read from the anchor and every delta, row for row."""

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
    ("op", "string"),
    ("seq", "int"),
    ("g", "string"),
    ("dt", "string"),
]
# keys across several blocks of the mask rows (cumulative.mask_key), negative ones too
KEYS = (-65, -64, -1, 0, 1, 63, 64, 127, 128, 2147483647)
DAYS = [f"2025010{d}" for d in range(1, 6)]  # 0101 the anchor, then four delta days
GROUPS = ("x", "y")

CASES = {
    "dedupe": dict(rowkind_field="op"),
    "dedupe-seq": dict(rowkind_field="op", sequence_field="seq"),
    "first-row": dict(rowkind_field="op", merge_engine="first-row"),
    "first-row-seq": dict(rowkind_field="op", sequence_field="seq", merge_engine="first-row"),
    "partial-update": dict(
        rowkind_field="op", merge_engine="partial-update", remove_record_on_delete=True
    ),
    "partial-update-seq": dict(
        rowkind_field="op",
        sequence_field="seq",
        merge_engine="partial-update",
        remove_record_on_delete=True,
    ),
    "partial-update-ignore-delete": dict(
        rowkind_field="op", merge_engine="partial-update", ignore_delete=True
    ),
    "aggregation-seq": dict(
        rowkind_field="op",
        sequence_field="seq",
        merge_engine="aggregation",
        aggregate_functions={"a": "max", "b": "sum"},
        ignore_retract=("a",),
    ),
    "aggregation-seq-commutative": dict(
        sequence_field="seq",
        merge_engine="aggregation",
        aggregate_functions={"a": "max", "b": "sum"},
    ),
    "aggregation-seq-ordered": dict(
        sequence_field="seq",
        merge_engine="aggregation",
        aggregate_functions={"a": "last_non_null_value", "b": "count"},
    ),
}


def options(case: str) -> ChainOptions:
    return ChainOptions(
        partition_by=("g", "dt"), chain_keys=("dt",), primary_key=("id", "g", "dt"), **CASES[case]
    )


def rows_for(
    rng: random.Random, opts: ChainOptions, day: str, anchor: bool, key_type: str
) -> list[tuple]:
    """Random rows of one day: a few keys, several rows per key with distinct sequence values
    (the same sequence twice for one key in one partition is refused before a write)."""
    out = []
    for g in GROUPS:
        for k in rng.sample(KEYS, 8 if anchor else rng.randint(0, 4)):
            key = k if key_type == "int" else f"k{k}"
            n = (
                1
                if anchor or not (opts.sequence_field or opts.rowkind_field)
                else rng.randint(1, 2)
            )
            for seq in rng.sample(range(1, 30), n):
                kind = "+I"
                if not anchor and opts.rowkind_field:
                    kind = rng.choice(["+I", "+U", "+U", "-D", "-U"])
                a = rng.choice(["p", "q", "r", None])
                b = rng.choice([1, 2, 5, None])
                out.append((key, a, b, kind, seq, g, day))
    if not opts.sequence_field and opts.rowkind_field:
        # without a sequence field a key's rows in one partition tie: keep one per key
        seen, kept = set(), []
        for r in out:
            if (r[0], r[5]) not in seen:
                seen.add((r[0], r[5]))
                kept.append(r)
        out = kept
    if not opts.sequence_field and not opts.rowkind_field:
        out = list({(r[0], r[5]): r for r in out}.values())
    return out


def insert(spark, table: str, rows: list[tuple]) -> None:
    if rows:
        values = ", ".join("(" + ", ".join(sql_value(v) for v in r) + ")" for r in rows)
        spark.sql(f"INSERT INTO {table} VALUES {values}")


# an integral key is read through mask rows, another through its keys (cumulative.mask_key)
PARAMS = [(c, "int") for c in sorted(CASES)] + [
    (c, "string") for c in ("dedupe-seq", "first-row", "partial-update", "aggregation-seq")
]


def write_history(spark, tables, rng, opts, key_type) -> list[tuple[str, str]]:
    """The anchor in one insert, the four delta days in another (drawn in the same order as
    day by day); the (g, dt) partitions of the deltas."""
    insert(spark, tables["snapshot"], rows_for(rng, opts, DAYS[0], anchor=True, key_type=key_type))
    rows = [
        r for day in DAYS[1:] for r in rows_for(rng, opts, day, anchor=False, key_type=key_type)
    ]
    insert(spark, tables["delta"], rows)
    return [(g, day) for day in DAYS[1:] for g in GROUPS]


def collect_each(spark, queries: list[str]) -> list[list[tuple]]:
    """The rows of each query (sorted as helpers.collect sorts them), in one Spark job: each
    query is an arm of one union, tagged with its index."""
    union = " union all ".join(f"select {i} as __q, * from ({q})" for i, q in enumerate(queries))
    out: list[list[tuple]] = [[] for _ in queries]
    for row in spark.sql(union).collect():
        out[row[0]].append(tuple(row)[1:])
    return [
        sorted(rows, key=lambda r: tuple("" if v is None else str(v) for v in r)) for rows in out
    ]


def masks_are_their_keys_bits(spark, table: str, mode: str) -> None:
    """One mask per block of a partition's keys (id >> 6), its keys' bits, on every day."""
    masks, keys = collect_each(
        spark,
        [
            f"SELECT dt, g, id >> 6, ct__mask FROM {table} WHERE ct__mask IS NOT NULL",
            f"SELECT dt, g, id >> 6, bit_or(shiftleft(1L, CAST(id & 63 AS INT))) "
            f"FROM {table} GROUP BY dt, g, id >> 6",
        ],
    )
    assert masks == keys, mode


@pytest.mark.parametrize("case,key_type", PARAMS)
def test_reads_through_the_cumulative_delta_equal_merge_on_read(spark, schema, case, key_type):
    rng = random.Random(case)
    opts = options(case)
    columns = [(c, key_type if c == "id" else t) for c, t in COLUMNS]
    cols = [c for c, _ in columns]
    types = dict(columns)
    assert cumulative.mask_key(opts, types) == ("id" if key_type == "int" else None)
    tables, r = chain_tables(spark, schema, opts, columns)
    deltas = write_history(spark, tables, rng, opts, key_type)
    state = ChainState.build(opts, [(g, DAYS[0]) for g in GROUPS], deltas, types)
    digest = cumulative.options_digest(opts, cols)
    value_cols = ["a", "b"]
    incremental = cumulative.incremental(opts, value_cols)
    assert incremental == (
        case not in ("partial-update-seq", "aggregation-seq", "aggregation-seq-ordered")
    )
    # an engine that cannot build a day from the day before builds every day from scratch in
    # both modes (the same builds): one pass covers it
    first = ""  # the incremental pass's build of the first day after the anchor
    for mode in ("incremental", "scratch") if incremental else ("scratch",):
        cum = cumulative.Cumulative(state, stored_partitions(spark, tables["cumulative"]), digest)
        builds = cum.builds(list(deltas), incremental and mode == "incremental")
        reads: dict[str, list[str]] = {}  # each day merged on read, and read through its build
        for day in DAYS[1:]:
            todo = [b for b in builds if b.plan.chain == (day,)]
            if mode == "incremental" and day != DAYS[1]:
                assert all(b.previous == (DAYS[DAYS.index(day) - 1],) for b in todo)
            else:
                assert all(b.previous is None for b in todo)
            sql = cumulative_sql.build(r, (day,), todo, cumulative.needs_anchor(opts))
            if first and day == DAYS[1]:
                # built from its anchor and its delta in both modes: the same statement, whose
                # partitions the incremental pass built and read
                assert sql == first
                continue
            first = first or sql
            spark.sql(sql)
            plans = state.plan_partition_read({"dt": day})
            serving = {p.group + p.chain: cumulative.stamp(p, digest) for p in plans}
            served = r.merged((day,), plans, serving=serving)
            assert ("shiftright" in served) == (key_type == "int")
            reads[day] = [r.merged((day,), plans), served]
        # a day's cumulative partition is written once, by its own build: read after the
        # last build, each day reads as right after its own
        got = collect_each(spark, [q for pair in reads.values() for q in pair])
        for i, day in enumerate(reads):
            assert got[2 * i + 1] == got[2 * i], (mode, day)
        assert any(got), mode
        if key_type == "int":
            masks_are_their_keys_bits(spark, tables["cumulative"], mode)
        if mode == "incremental":  # the days the scratch pass builds again
            spark.sql(
                f"ALTER TABLE {tables['cumulative']} DROP IF EXISTS "
                + ", ".join(f"PARTITION (g='{g}', dt='{d}')" for g in GROUPS for d in DAYS[2:])
            )
