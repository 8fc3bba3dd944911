"""Merge engines, deletes and sequence order (docs/design.md#merge-order-and-engines): real dbt on real Spark, exact rows.

Every engine test runs three days (the first one writes the snapshot branch), reads each day
through the view `t` and the last one also through `chain_read` (a downstream model run by the
same `dbt run`), then compacts the middle day and checks that the snapshot written equals the
day's read before compaction and that no read changed (the last day is now merged over the
compacted snapshot: an anchor row is merged state, not raw input).
"""

import pytest
from helpers import READER, chain_model, read_days

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.merge import sql as merge

DAYS = ("20250801", "20250802", "20250803")


def run_days(p, config: str, ddl: str, rows, cols: str) -> dict[str, list[tuple]]:
    """Source table, the chain model `t` and a `reader` model reading the last day through
    chain_read; one dbt run per day. Returns {day: rows read through `t`}."""
    p.table("changes", ddl, rows)
    p.model("t", chain_model(config, cols))
    p.model("reader", READER)
    for day in DAYS:
        p.dbt("run", *(() if day == DAYS[-1] else ("--select", "t")), vars={"dt": day})
    reads = read_days(p, "t", cols)
    assert read_days(p, "reader", cols) == {DAYS[-1]: reads[DAYS[-1]]}
    return reads


def compact_and_compare(p, reads: dict[str, list[tuple]], cols: str) -> None:
    """Compaction writes exactly the merged read, and the reads merged over it do not move."""
    p.run_op("compact_chain", {"model": "t", "partition": {"dt": DAYS[1]}})
    assert read_days(p, "t__snapshot", cols) == {d: reads[d] for d in DAYS[:2]}
    assert read_days(p, "t", cols) == reads


def test_deduplicate_sequence_and_deletes(project):
    p = project
    cols = "id, v, seq, op"
    reads = run_days(
        p,
        "sequence_field='seq', rowkind_field='op'",
        "id int, v string, seq int, op string, dt string",
        [
            # snapshot day (merged on write): a -U/+U pair with equal sequence, a deleted key
            (1, "a", 1, "+I", "20250801"),
            (2, "b", 1, "+I", "20250801"),
            (3, "c", 1, "+I", "20250801"),
            (4, "d", 5, "+I", "20250801"),
            (5, "e0", 1, "-U", "20250801"),
            (5, "e", 1, "+U", "20250801"),
            (7, "g", 1, "+I", "20250801"),
            (7, "g", 2, "-D", "20250801"),
            # delete of an anchor-only key; a late row with a lower sequence loses to the anchor;
            # -U/+U pair with equal sequence: +U wins
            (2, "b", 2, "-D", "20250802"),
            (4, "d-late", 3, "+U", "20250802"),
            (1, "a", 2, "-U", "20250802"),
            (1, "a2", 2, "+U", "20250802"),
            (6, "x", 7, "+I", "20250802"),
            # equal sequence across partitions: the later partition wins (update, delete);
            # a lower sequence in a later partition loses; a deleted key comes back; an unknown
            # key's delete is a no-op
            (3, "c3", 1, "+U", "20250803"),
            (5, "e", 1, "-D", "20250803"),
            (6, "y", 6, "+U", "20250803"),
            (2, "b3", 3, "+I", "20250803"),
            (8, "h", 1, "-D", "20250803"),
        ],
        cols,
    )
    assert reads == {
        "20250801": [
            (1, "a", 1, "+I"),
            (2, "b", 1, "+I"),
            (3, "c", 1, "+I"),
            (4, "d", 5, "+I"),
            (5, "e", 1, "+U"),
        ],
        "20250802": [
            (1, "a2", 2, "+U"),
            (3, "c", 1, "+I"),
            (4, "d", 5, "+I"),
            (5, "e", 1, "+U"),
            (6, "x", 7, "+I"),
        ],
        "20250803": [
            (1, "a2", 2, "+U"),
            (2, "b3", 3, "+I"),
            (3, "c3", 1, "+U"),
            (4, "d", 5, "+I"),
            (6, "x", 7, "+I"),
        ],
    }
    # Delta rows are stored raw, with their row kind.
    assert p.rows("select id, op from {s}.t__delta where dt = '20250802'") == [
        (1, "+U"),
        (1, "-U"),
        (2, "-D"),
        (4, "+U"),
        (6, "+I"),
    ]
    compact_and_compare(p, reads, cols)


def test_partial_update_assembles_rows_and_removes_on_delete(project):
    p = project
    cols = "id, name, city, age, seq, op"
    reads = run_days(
        p,
        "merge_engine='partial-update', sequence_field='seq', rowkind_field='op', "
        "partial_update_remove_record_on_delete=true",
        "id int, name string, city string, age int, seq int, op string, dt string",
        [
            (1, "n1", None, None, 1, "+I", "20250801"),
            (2, "n2", "c2", 2, 1, "+I", "20250801"),
            (3, "n3", "c3", 3, 1, "+I", "20250801"),
            (4, "n4", "c4", 4, 1, "+I", "20250801"),
            (5, "n5", None, 5, 5, "+I", "20250801"),
            # key 1 gets its city; key 2 (anchor only) is deleted; key 3 too; key 4's -U is
            # ignored, its +U sets the name only; key 5's late name loses to the anchor's
            # higher sequence, its city fills the gap
            (1, None, "c1", None, 2, "+U", "20250802"),
            (2, None, None, None, 2, "-D", "20250802"),
            (3, None, None, None, 2, "-D", "20250802"),
            (4, "n4", "c4", 4, 2, "-U", "20250802"),
            (4, "n4b", None, None, 2, "+U", "20250802"),
            (5, "late", "c5", None, 3, "+U", "20250802"),
            # key 1's age completes it; key 3 restarts from nothing after its delete
            (1, None, None, 30, 3, "+U", "20250803"),
            (3, None, "c3b", None, 3, "+I", "20250803"),
        ],
        cols,
    )
    assert reads == {
        "20250801": [
            (1, "n1", None, None, 1, "+I"),
            (2, "n2", "c2", 2, 1, "+I"),
            (3, "n3", "c3", 3, 1, "+I"),
            (4, "n4", "c4", 4, 1, "+I"),
            (5, "n5", None, 5, 5, "+I"),
        ],
        "20250802": [
            (1, "n1", "c1", None, 2, "+U"),
            (4, "n4b", "c4", 4, 2, "+U"),
            (5, "n5", "c5", 5, 5, "+I"),
        ],
        "20250803": [
            (1, "n1", "c1", 30, 3, "+U"),
            (3, None, "c3b", None, 3, "+I"),
            (4, "n4b", "c4", 4, 2, "+U"),
            (5, "n5", "c5", 5, 5, "+I"),
        ],
    }
    compact_and_compare(p, reads, cols)


def test_aggregation_with_retractions_and_anchor_state(project):
    p = project
    cols = "id, total, cnt, prod, hi, names, last, seq, op"
    reads = run_days(
        p,
        "merge_engine='aggregation', sequence_field='seq', rowkind_field='op', "
        "aggregate_functions={'total': 'sum', 'cnt': 'count', 'prod': 'product', "
        "'hi': 'max', 'names': 'listagg'}, ignore_retract=['hi', 'names', 'last']",
        "id int, total int, cnt int, prod int, hi int, names string, last string, seq int, "
        "op string, dt string",
        [
            # snapshot day: raw rows are aggregated on write (count counts non-null values)
            (1, 10, 7, 2, 5, "a", "l1", 1, "+I", "20250801"),
            (1, 5, 7, 3, 9, "b", None, 2, "+I", "20250801"),
            (2, 1, 1, 4, 1, None, "l2", 1, "+I", "20250801"),
            # key 1: -U/+U pair; key 2: retracted entirely (stays, as in Paimon)
            (1, 5, 7, 3, 9, "b", None, 3, "-U", "20250802"),
            (1, 6, 7, 3, 2, "c", "l1b", 3, "+U", "20250802"),
            (2, 1, 1, 4, 0, "z", None, 1, "-D", "20250802"),
            # after compacting 0802, key 1's anchor carries count 2: a NULL adds nothing
            (1, 1, None, 2, 20, None, None, 4, "+I", "20250803"),
            (3, 7, 1, 5, 3, "n", "l3", 1, "+I", "20250803"),
        ],
        cols,
    )
    assert reads == {
        "20250801": [(1, 15, 2, 6, 9, "a,b", "l1", 2, "+I"), (2, 1, 1, 4, 1, None, "l2", 1, "+I")],
        "20250802": [
            (1, 16, 2, 6, 9, "a,b,c", "l1b", 3, "+U"),
            (2, 0, 0, 1, 1, None, "l2", 1, "+I"),
        ],
        "20250803": [
            (1, 17, 2, 12, 20, "a,b,c", "l1b", 4, "+I"),
            (2, 0, 0, 1, 1, None, "l2", 1, "+I"),
            (3, 7, 1, 5, 3, "n", "l3", 1, "+I"),
        ],
    }
    compact_and_compare(p, reads, cols)


def test_first_row_keeps_the_first(project):
    p = project
    cols = "id, v, op"
    reads = run_days(
        p,
        "merge_engine='first-row', rowkind_field='op'",
        "id int, v string, op string, dt string",
        [
            (1, "a", "+I", "20250801"),
            (2, "b", "+I", "20250801"),
            (1, "a2", "+U", "20250802"),
            (3, "c", "+I", "20250802"),
            (2, "b", "-D", "20250802"),
            (3, "c3", "+U", "20250803"),
            (4, "d", "+I", "20250803"),
            (4, "d", "-U", "20250803"),
        ],
        cols,
    )
    first = [(1, "a", "+I"), (2, "b", "+I"), (3, "c", "+I"), (4, "d", "+I")]
    assert reads == {"20250801": first[:2], "20250802": first[:3], "20250803": first}
    compact_and_compare(p, reads, cols)


@pytest.mark.parametrize(
    "config,rows,message",
    [
        (
            "merge_engine='partial-update', rowkind_field='op'",
            [(1, "a", 1, "+I"), (2, "b", 1, "-D")],
            "cannot take -U/-D rows; set partial_update_ignore_delete or "
            "partial_update_remove_record_on_delete; got a '-D' row for key (id=2, dt='20250801')",
        ),
        (
            "merge_engine='aggregation', rowkind_field='op', aggregate_functions={'n': 'sum'}",
            [(1, "a", 1, "+I"), (1, "a", 1, "-U"), (1, "b", 2, "+U")],
            "(v: last_non_null_value); only sum, product, count can, list other columns in "
            "ignore_retract; got a '-U' row for key (id=1, dt='20250801')",
        ),
        (
            "rowkind_field='op'",
            [(1, "a", 1, "+I"), (2, "b", 1, "D")],
            "rowkind_field 'op' must be one of ['+I', '-U', '+U', '-D'], got 'D' for key (id=2",
        ),
        (
            "merge_engine='aggregation', aggregate_functions={'n': 'sum', 'v': 'listagg'}",
            [(1, "a", 1, "+I"), (1, "b", 1, "+I"), (2, "c", 1, "+I"), (2, "c", 1, "+I")],
            "2 rows for key (id=1, dt='20250801') in one partition that "
            "differ in order-sensitive columns",
        ),
        (
            "sequence_field='n'",
            [(1, "a", 1, "+I"), (1, "b", 1, "+I")],
            "2 rows for key (id=1, dt='20250801', n=1) in one partition with the same sequence value",
        ),
    ],
)
def test_refused_rows_fail_before_writing(project, config, rows, message):
    p = project
    p.table(
        "changes",
        "id int, v string, n int, op string, dt string",
        [r + ("20250801",) for r in rows],
    )
    p.model("t", chain_model(config, "id, v, n, op"))
    p.dbt("run", vars={"dt": "20250801"}, expect_ok=False)
    assert message in p.log_text() and "model 't'" in p.log_text()
    assert p.rows(f"show tables in {p.schema} like 't*'") == []


# ---- the merge SQL itself, under ANSI mode on and off (thrift servers default to ANSI on) -------
MERGE_COLS = ["id", "v", "n", "seq", "op", "dt"]
ANCHOR_ROWS = [
    (1, "a", 1, 1, "+I", "0801"),
    (2, "b", 2, 1, "+I", "0801"),
    (3, "c", 3, 1, "+I", "0801"),
]
DELTA_ROWS = [
    (2, "b", 2, 2, "-D", "0802"),
    (1, None, 5, 2, "+U", "0802"),
    (1, "a", 1, 2, "-U", "0802"),
    (4, "d", None, 1, "+I", "0803"),
    (3, "c", 3, 1, "-U", "0803"),
    (3, "c3", None, 1, "+U", "0803"),
]


@pytest.mark.parametrize(
    "config,expected",
    [
        ({}, [(1, None, 5, 2, "+U"), (3, "c3", None, 1, "+U"), (4, "d", None, 1, "+I")]),
        (
            {"merge_engine": "partial-update", "partial_update_remove_record_on_delete": True},
            [(1, "a", 5, 2, "+U"), (3, "c3", 3, 1, "+U"), (4, "d", None, 1, "+I")],
        ),
        (
            {"merge_engine": "partial-update", "partial_update_ignore_delete": True},
            [
                (1, "a", 5, 2, "+U"),
                (2, "b", 2, 1, "+I"),
                (3, "c3", 3, 1, "+U"),
                (4, "d", None, 1, "+I"),
            ],
        ),
        (
            {
                "merge_engine": "aggregation",
                "aggregate_functions": {"n": "sum"},
                "ignore_retract": ["v"],
            },
            [
                (1, "a", 5, 2, "+U"),
                (2, "b", 0, 2, "+I"),
                (3, "c3", 0, 1, "+U"),
                (4, "d", None, 1, "+I"),
            ],
        ),
        (
            {
                "merge_engine": "aggregation",
                "aggregate_functions": {"n": "count", "v": "listagg"},
                "ignore_retract": ["v"],
            },
            [
                (1, "a", 1, 2, "+U"),
                (2, "b", 1, 2, "+I"),
                (3, "c,c3", 2, 1, "+U"),
                (4, "d", 0, 1, "+I"),
            ],
        ),
        (
            {
                "merge_engine": "aggregation",
                "aggregate_functions": {"n": "product"},
                "ignore_retract": ["v"],
            },
            [
                (1, "a", 5, 2, "+U"),
                (2, "b", 1, 2, "+I"),
                (3, "c3", 1, 1, "+U"),
                (4, "d", None, 1, "+I"),
            ],
        ),
        (
            {"merge_engine": "aggregation", "aggregate_functions": {"n": "max"}},
            "aggregate functions cannot retract",
        ),
        (
            # n orders v: key 2's -D ties the anchor's n and is later, so v goes; key 1's +U
            # (n 5) sets v to its NULL; key 3's -U wins (its +U has no n); key 4 has no n
            {"merge_engine": "partial-update", "sequence_groups": {"n": ["v"]}},
            [
                (1, None, 5, 2, "+U"),
                (2, None, 2, 1, "+I"),
                (3, None, 3, 1, "+U"),
                (4, None, None, 1, "+I"),
            ],
        ),
        (
            {"merge_engine": "first-row"},
            [
                (1, "a", 1, 1, "+I"),
                (2, "b", 2, 1, "+I"),
                (3, "c", 3, 1, "+I"),
                (4, "d", None, 1, "+I"),
            ],
        ),
    ],
)
def test_merge_sql_under_ansi_on_and_off(spark, config, expected):
    opts = ChainOptions.from_config(
        "t",
        {
            "partition_by": ["dt"],
            "primary_key": ["id", "dt"],
            "rowkind_field": "op",
            **({} if config.get("merge_engine") == "first-row" else {"sequence_field": "seq"}),
            **config,
        },
    )
    ddl = "id int, v string, n int, seq int, op string, dt string"
    spark.createDataFrame(ANCHOR_ROWS, ddl).createOrReplaceTempView("merge_anchor")
    spark.createDataFrame(DELTA_ROWS, ddl).createOrReplaceTempView("merge_delta")
    types = dict(c.split() for c in ddl.split(", "))
    sql = merge.merge_sql(
        opts, MERGE_COLS, "SELECT * FROM merge_anchor", "SELECT * FROM merge_delta", types
    )
    before = spark.conf.get("spark.sql.ansi.enabled")
    try:
        for ansi in ("true", "false"):
            spark.conf.set("spark.sql.ansi.enabled", ansi)
            if isinstance(expected, str):
                with pytest.raises(Exception, match=expected):
                    spark.sql(sql).collect()
                continue
            df = spark.sql(f"SELECT id, v, n, seq, op FROM ({sql}) __x")
            assert [f.dataType.simpleString() for f in df.schema.fields] == [
                "int",
                "string",
                "int",
                "int",
                "string",
            ]
            assert sorted(tuple(r) for r in df.collect()) == expected, ansi
    finally:
        spark.conf.set("spark.sql.ansi.enabled", before)
