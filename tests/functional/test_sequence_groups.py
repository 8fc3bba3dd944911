"""partial-update sequence groups through real dbt (docs/design.md#merge-order-and-engines): a
chain of an anchor and three deltas with out-of-order group sequences, read through the view `t`
and chain_read, with the cumulative delta on and off; compaction writes exactly the merged read;
bad configs stop the run naming the model and the column."""

import pytest
from helpers import READER, chain_model, read_days, served

DAYS = ("20250801", "20250802", "20250803", "20250804")


def run_chain(p, config: str, ddl: str, rows, cols: str, cumulative: bool) -> tuple[dict, str]:
    """Source `changes`, the chain model `t` and a `reader` (chain_read of the last day); one dbt
    run per day, the first writes the snapshot branch. Returns {day: rows read through `t`} and
    the log of the last run."""
    p.table("changes", ddl, rows)
    p.model("t", chain_model(f"{config}, cumulative_delta={str(cumulative).lower()}", cols))
    p.model("reader", READER)
    for day in DAYS:
        p.dbt("run", *(() if day == DAYS[-1] else ("--select", "t")), vars={"dt": day})
    log = p.log_text()
    reads = read_days(p, "t", cols)
    assert read_days(p, "reader", cols) == {DAYS[-1]: reads[DAYS[-1]]}
    assert served(p) == (list(DAYS[1:]) if cumulative else [])
    return reads, log


def compact_and_compare(p, reads: dict, cols: str) -> None:
    """The compacted day is its merged read, and the last day, merged over it, does not move."""
    p.run_op("compact_chain", {"model": "t", "partition": {"dt": DAYS[2]}})
    assert read_days(p, "t__snapshot", cols) == {d: reads[d] for d in (DAYS[0], DAYS[2])}
    assert read_days(p, "t", cols) == reads


DOC_COLS = "id, a, b, g_1, c, d, g_2, e, seq, op"
DOC_DDL = (
    "id int, a string, b string, g_1 int, c string, d string, g_2 int, e string, seq int, "
    "op string, dt string"
)
DOC_CONFIG = (
    "merge_engine='partial-update', sequence_field='seq', rowkind_field='op', "
    "sequence_groups={'g_1': ['a', 'b'], 'g_2': ['c', 'd']}"
)


@pytest.mark.parametrize("cumulative", [True, False])
def test_the_documented_example_across_the_anchor_and_deltas_and_within_one_delta(
    project, cumulative
):
    p = project
    n = None
    rows = [
        # key 1 is Paimon's example, one row a day; key 2 is the same example in one delta
        (1, "1", "1", 1, "1", "1", 1, "e1", 1, "+I", DAYS[0]),
        (3, "p", "p", 5, "q", "q", 5, "e3", 1, "+I", DAYS[0]),
        (1, "2", "2", 2, "2", "2", n, n, 2, "+U", DAYS[1]),
        (2, "1", "1", 1, "1", "1", 1, "x", 1, "+I", DAYS[1]),
        (2, "2", "2", 2, "2", "2", n, n, 2, "+U", DAYS[1]),
        (2, "3", "3", 1, "3", "3", 3, n, 3, "+U", DAYS[1]),
        # a -D newer in g_1 retracts a and b (its sequence stays); g_2 is untouched
        (3, n, n, 6, n, n, n, n, 2, "-D", DAYS[1]),
        (1, "3", "3", 1, "3", "3", 3, n, 3, "+U", DAYS[2]),
        # older than the retraction: g_1 stays as it is, e (in no group) takes its value
        (3, "late", "late", 4, n, n, n, "e3b", 3, "+U", DAYS[2]),
        # a tie in g_1 goes to the later row; a newer g_1 sets NULLs too; a key with only a
        # retraction is no row
        (2, "x", "x", 2, n, n, 2, n, 4, "+U", DAYS[3]),
        (1, n, n, 5, "z", "z", n, n, 4, "+U", DAYS[3]),
        (4, "r", "r", 1, n, n, n, n, 4, "-D", DAYS[3]),
    ]
    reads, log = run_chain(p, DOC_CONFIG, DOC_DDL, rows, DOC_COLS, cumulative)
    key3 = (3, n, n, 6, "q", "q", 5)
    assert reads == {
        DAYS[0]: [
            (1, "1", "1", 1, "1", "1", 1, "e1", 1, "+I"),
            (3, "p", "p", 5, "q", "q", 5, "e3", 1, "+I"),
        ],
        DAYS[1]: [
            (1, "2", "2", 2, "1", "1", 1, "e1", 2, "+U"),
            (2, "2", "2", 2, "3", "3", 3, "x", 3, "+U"),
            (*key3, "e3", 1, "+I"),
        ],
        DAYS[2]: [
            (1, "2", "2", 2, "3", "3", 3, "e1", 3, "+U"),
            (2, "2", "2", 2, "3", "3", 3, "x", 3, "+U"),
            (*key3, "e3b", 3, "+U"),
        ],
        DAYS[3]: [
            (1, n, n, 5, "3", "3", 3, "e1", 4, "+U"),
            (2, "x", "x", 2, "3", "3", 3, "x", 4, "+U"),
            (*key3, "e3b", 3, "+U"),
        ],
    }
    if cumulative:  # a late row can fall before earlier ones: each day from its anchor
        assert "cumulative delta of 1 day(s) built (0 from the day before)" in log
    props = dict(p.rows("show tblproperties {s}.t__delta"))
    assert props["fields.g_1.sequence-group"] == "a,b"
    assert props["fields.g_2.sequence-group"] == "c,d"
    compact_and_compare(p, reads, DOC_COLS)


AGG_COLS = "id, a, b, g_1, c, d, g_2, g_3, e"


@pytest.mark.parametrize("cumulative", [True, False])
def test_functions_in_groups_and_a_two_column_sequence(project, cumulative):
    """No sequence or rowkind field: the cumulative delta of a day is built from the day
    before's. b (max) and d (sum) aggregate every row of their group whatever its order."""
    p = project
    n = None
    rows = [
        (1, "a1", 5, 1, "c1", 10, 1, 1, "e1", DAYS[0]),
        # g_2, g_3 NULL: c and d untouched; key 2's g_1 NULL: a and b never set
        (1, "a2", 3, 2, "c2", 1, n, n, n, DAYS[1]),
        (2, "n", 1, n, "m", 2, 1, n, "f", DAYS[1]),
        # an older g_1 still counts for max(b); (2, 1) beats (1, 1); (1, 0) beats (1, NULL)
        (1, "a0", 9, 1, "c3", 4, 2, 1, n, DAYS[2]),
        (2, "n2", 2, 3, "m2", 3, 1, 0, n, DAYS[2]),
        # a tie in g_1: the later row's a (NULL); (1, 5) is older than (2, 1): c stays, d's sum too
        (1, n, n, 2, n, n, 1, 5, "e4", DAYS[3]),
    ]
    reads, log = run_chain(
        p,
        "merge_engine='partial-update', sequence_groups={'g_1': 'a,b', 'g_2,g_3': ['c', 'd']}, "
        "aggregate_functions={'b': 'max', 'd': 'sum'}",
        "id int, a string, b int, g_1 int, c string, d int, g_2 int, g_3 bigint, e string, "
        "dt string",
        rows,
        AGG_COLS,
        cumulative,
    )
    assert reads == {
        DAYS[0]: [(1, "a1", 5, 1, "c1", 10, 1, 1, "e1")],
        DAYS[1]: [(1, "a2", 5, 2, "c1", 10, 1, 1, "e1"), (2, n, n, n, "m", 2, 1, n, "f")],
        DAYS[2]: [(1, "a2", 9, 2, "c3", 14, 2, 1, "e1"), (2, "n2", 2, 3, "m2", 5, 1, 0, "f")],
        DAYS[3]: [(1, n, 9, 2, "c3", 14, 2, 1, "e4"), (2, "n2", 2, 3, "m2", 5, 1, 0, "f")],
    }
    if cumulative:  # the last day was built from the day before's cumulative delta
        assert "cumulative delta of 1 day(s) built (1 from the day before)" in log
    compact_and_compare(p, reads, AGG_COLS)


@pytest.mark.parametrize(
    ("config", "ddl", "message"),
    [
        (
            "sequence_groups={'g_1': ['a', 'b'], 'g_2': ['b']}",
            "id int, a string, b string, g_1 int, g_2 int",
            "chain_incremental model 't': column 'b' is in two sequence groups: 'g_1' and 'g_2'",
        ),
        (
            "sequence_groups={'g_1': ['a', 'id']}",
            "id int, a string, b string, g_1 int, g_2 int",
            "chain_incremental model 't': sequence group 'g_1' contains column 'id', a primary "
            "key column",
        ),
        (
            "sequence_groups={'g_1': ['a', 'dt']}",
            "id int, a string, b string, g_1 int, g_2 int",
            "chain_incremental model 't': sequence group 'g_1' contains column 'dt', a "
            "partition column",
        ),
        (
            "sequence_groups={'g_1': ['a', 'b']}",
            "id int, a string, b string, g_1 string, g_2 int",
            "chain_incremental model 't': sequence_groups sequence column 'g_1' has type "
            "string; a group's sequence must be a number, a date or a timestamp",
        ),
        (
            "sequence_groups={'g_1': ['a', 'x']}",
            "id int, a string, b string, g_1 int, g_2 int",
            "chain_incremental model 't': sequence_groups column 'x' is not in the model's columns",
        ),
    ],
)
def test_bad_sequence_groups_stop_the_run_before_anything_is_written(project, config, ddl, message):
    p = project
    p.table("changes", f"{ddl}, dt string", [(1, "a", "b", 1, 2, "20250801")])
    p.model("t", chain_model(f"merge_engine='partial-update', {config}", "id, a, b, g_1, g_2"))
    p.dbt("run", vars={"dt": "20250801"}, expect_ok=False)
    assert message in p.log_text()
    assert p.rows(f"show tables in {p.schema} like 't*'") == []


def test_sequence_groups_with_another_engine_are_refused(project):
    p = project
    p.table("changes", "id int, a string, g_1 int, dt string", [(1, "a", 1, "20250801")])
    p.model("t", chain_model("sequence_groups={'g_1': ['a']}", "id, a, g_1"))
    p.dbt("run", vars={"dt": "20250801"}, expect_ok=False)
    assert (
        "chain_incremental model 't': sequence_groups needs merge_engine 'partial-update', "
        "not 'deduplicate'"
    ) in p.log_text()


def test_a_group_taken_out_of_the_config_leaves_the_stored_options(project):
    """The options every operation reads from the catalog follow the config: a group and a
    function taken out of it are removed from both branches' TBLPROPERTIES, so compaction
    merges as the view does."""
    p = project
    cols = "id, a, b, g_1, c, d, g_2"
    p.table(
        "changes",
        "id int, a string, b string, g_1 int, c string, d int, g_2 int, dt string",
        [(1, "a", "b", 1, "c", 1, 1, DAYS[0]), (1, "a2", None, 2, None, 5, None, DAYS[1])],
    )
    first = (
        "sequence_groups={'g_1': ['a', 'b'], 'g_2': ['c', 'd']}, aggregate_functions={'d': 'sum'}"
    )
    for day, groups in ((DAYS[0], first), (DAYS[1], "sequence_groups={'g_1': ['a', 'b']}")):
        p.model("t", chain_model(f"merge_engine='partial-update', {groups}", cols))
        p.dbt("run", vars={"dt": day})
    for branch in ("snapshot", "delta"):
        props = dict(p.rows(f"show tblproperties {{s}}.t__{branch}"))
        assert props["fields.g_1.sequence-group"] == "a,b"
        assert "fields.g_2.sequence-group" not in props
        assert "fields.d.aggregate-function" not in props
    # c, d and g_2 are plain columns now: d is the latest value, not a sum
    reads = read_days(p, "t", cols)
    assert reads[DAYS[1]] == [(1, "a2", None, 2, "c", 5, 1)]
    p.run_op("compact_chain", {"model": "t", "partition": {"dt": DAYS[1]}})
    assert read_days(p, "t__snapshot", cols) == reads
