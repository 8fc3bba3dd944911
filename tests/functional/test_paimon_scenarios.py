"""Paimon's own chain table scenarios (SparkChainTableITCase), written through dbt.

Paimon writes each branch with `INSERT OVERWRITE ... PARTITION`; here a write is a run of a
chain_incremental model forced to its branch with `chain_branch`, the delta branch first (before
any snapshot exists), then the snapshot branch, as Paimon does: one run per partition in the
one-group scenario, one run per branch (all its partitions) in the others. Paimon's "main
branch" (which shadows both branches for a partition it holds) has no counterpart in chaintable,
so its reads are left out; a partition Paimon reads from main reads from the snapshot branch
here. Rows and expected results are Paimon's, exact, except where a comment says why."""
import pytest

MODEL = """
{{{{ config(materialized='chain_incremental', partition_by={part}, {extra}
          primary_key={pk}, chain_branch=var('branch')) }}}}
select {cols} from {{{{ target.schema }}}}.writes where w = {{{{ var('w') }}}}
"""

DAILY = [  # (branch, dt, rows (t1, t2, t3)): SparkChainTableITCase.testChainTable
    ("delta", "20250809", [(1, 1, "1"), (2, 1, "1")]),
    ("delta", "20250810", [(1, 2, "1-1"), (3, 1, "1")]),
    ("delta", "20250811", [(2, 2, "1-1"), (4, 1, "1")]),
    ("delta", "20250812", [(3, 2, "1-1"), (4, 2, "1-1"), (7, 1, "d7")]),
    ("delta", "20250813", [(5, 1, "1"), (6, 1, "1")]),
    ("delta", "20250814", [(5, 2, "1-1"), (6, 2, "1-1")]),
    ("snapshot", "20250810", [(1, 2, "1-1"), (2, 1, "1"), (3, 1, "1")]),
    ("snapshot", "20250812", [(1, 2, "1-1"), (2, 2, "1-1"), (3, 2, "1-1"), (4, 2, "1-1")]),
    ("snapshot", "20250814", [(1, 2, "1-1"), (2, 2, "1-1"), (3, 2, "1-1"), (4, 2, "1-1"),
                              (5, 1, "1"), (6, 1, "1")]),
]


def write_all(p, model, writes, columns, row_of):
    """One source row per written row, tagged with its write; one dbt run per write. A write is
    (branch, partition key, rows) or (branch, [(partition key, rows), ...]) for several."""
    def parts(write):
        return write[1] if len(write) == 2 else [(write[1], write[2])]
    rows = [(w,) + row_of(r, key) for w, write in enumerate(writes)
            for key, rs in parts(write) for r in rs]
    p.table("writes", columns, rows)
    p.model("t", model)
    for w, write in enumerate(writes):
        p.dbt("run", vars={"w": w, "branch": write[0]})


def by_branch(writes):
    """(branch, key, rows) writes as one run per branch, writing all of its partitions."""
    return [(branch, [(key, rows) for b, key, rows in writes if b == branch])
            for branch in ("delta", "snapshot")]


def daily(p):
    model = MODEL.format(part="['dt']", pk="['dt', 't1']", extra="sequence_field='t2',",
                         cols="t1, t2, t3, dt")
    write_all(p, model, DAILY, "w int, t1 bigint, t2 bigint, t3 string, dt string",
              lambda r, dt: r + (dt,))


def q(p, sql):
    """Rows of `sql` over the chain view, written as Paimon's test writes it: FROM T."""
    assert "FROM T " in sql
    return p.rows(sql.replace("FROM T ", "FROM {s}.t ", 1))


def test_paimon_chain_table_reads(project):
    p = project
    daily(p)
    assert p.partitions("t__delta") == sorted(f"dt={d}" for _, d, _ in DAILY[:6])
    assert p.partitions("t__snapshot") == ["dt=20250810", "dt=20250812", "dt=20250814"]

    # snapshot read
    assert q(p, "SELECT * FROM T where dt = '20250814'") == [
        (1, 2, "1-1", "20250814"), (2, 2, "1-1", "20250814"), (3, 2, "1-1", "20250814"),
        (4, 2, "1-1", "20250814"), (5, 1, "1", "20250814"), (6, 1, "1", "20250814")]
    # chain read 1: no earlier snapshot, the deltas up to the day
    assert q(p, "SELECT * FROM T where dt = '20250809'") == [
        (1, 1, "1", "20250809"), (2, 1, "1", "20250809")]
    # chain read 2: snapshot 20250810 + delta 20250811
    assert q(p, "SELECT * FROM T where dt = '20250811'") == [
        (1, 2, "1-1", "20250811"), (2, 2, "1-1", "20250811"), (3, 1, "1", "20250811"),
        (4, 1, "1", "20250811")]
    # chain read with a filter on a value column
    assert q(p, "SELECT * FROM T where dt = '20250811' and t1 = 1") == [(1, 2, "1-1", "20250811")]
    assert q(p, "SELECT * FROM T where dt = '20250811' and t1 = 4") == [(4, 1, "1", "20250811")]
    assert q(p, "SELECT * FROM T where dt = '20250811' and t1 = 7") == []
    assert q(p, "SELECT * FROM T where dt in ('20250811', '20250812') and t1 = 1") == [
        (1, 2, "1-1", "20250811"), (1, 2, "1-1", "20250812")]
    # snapshot read with a filter: the snapshot branch's 20250812 has no key 7 (its delta has)
    assert q(p, "SELECT * FROM T where dt = '20250812' and t1 = 7") == []
    # several partitions (20250810 from the snapshot branch: Paimon reads its main branch there)
    assert q(p, "SELECT * FROM T where dt in ('20250810', '20250811', '20250812')") == sorted([
        (1, 2, "1-1", "20250810"), (2, 1, "1", "20250810"), (3, 1, "1", "20250810"),
        (1, 2, "1-1", "20250811"), (2, 2, "1-1", "20250811"), (3, 1, "1", "20250811"),
        (4, 1, "1", "20250811"),
        (1, 2, "1-1", "20250812"), (2, 2, "1-1", "20250812"), (3, 2, "1-1", "20250812"),
        (4, 2, "1-1", "20250812")])
    # incremental read: the delta branch
    assert p.rows("SELECT * FROM {s}.t__delta where dt = '20250811'") == [
        (2, 2, "1-1", "20250811"), (4, 1, "1", "20250811")]
    assert p.rows("SELECT * FROM {s}.t__delta where dt in ('20250810', '20250811', '20250812')") == sorted([
        (1, 2, "1-1", "20250810"), (3, 1, "1", "20250810"), (2, 2, "1-1", "20250811"),
        (4, 1, "1", "20250811"), (3, 2, "1-1", "20250812"), (4, 2, "1-1", "20250812"),
        (7, 1, "d7", "20250812")])
    # hybrid read
    assert p.rows("select * from {s}.t where dt = '20250811' union all "
                  "select * from {s}.t__delta where dt = '20250811'") == sorted([
        (1, 2, "1-1", "20250811"), (2, 2, "1-1", "20250811"), (3, 1, "1", "20250811"),
        (4, 1, "1", "20250811"), (2, 2, "1-1", "20250811"), (4, 1, "1", "20250811")])

    # rewriting delta 20250813 and 20250814 invalidates snapshot 20250814
    p.table("writes", "w int, t1 bigint, t2 bigint, t3 string, dt string",
            [(99, 5, 2, "1", "20250813"), (99, 6, 2, "1", "20250814")])
    p.dbt("run", vars={"w": 99, "branch": "delta"})
    assert p.rows("SELECT t1, t2, t3 FROM {s}.t__snapshot where dt = '20250814'") == []
    assert p.rows("SELECT t1, t2, t3 FROM {s}.t__delta where dt = '20250814'") == [(6, 2, "1")]
    # the day now reads snapshot 20250812 + deltas 20250813, 20250814
    assert q(p, "SELECT t1, t2, t3 FROM T where dt = '20250814'") == [
        (1, 2, "1-1"), (2, 2, "1-1"), (3, 2, "1-1"), (4, 2, "1-1"), (5, 2, "1"), (6, 2, "1")]


def test_paimon_group_partitions(project):
    """testChainTableWithMultiGroupPartition: two group keys (region, biz_type) over dt."""
    p = project
    groups = [("CN", "0"), ("CN", "1"), ("US", "1")]
    writes = [(branch, [((region, biz, dt), [(t1 + (10 if region == "US" else 0), t2, t3)
                                             for t1, t2, t3 in rows if t1 != 7])
                        for b, dt, rows in DAILY if b == branch for region, biz in groups])
              for branch in ("delta", "snapshot")]  # one run per branch: every group and day
    model = MODEL.format(part="['region', 'biz_type', 'dt']", pk="['region', 'biz_type', 'dt', 't1']",
                         extra="sequence_field='t2', chain_partition_keys=['dt'],",
                         cols="t1, t2, t3, region, biz_type, dt")
    write_all(p, model, writes,
              "w int, t1 bigint, t2 bigint, t3 string, region string, biz_type string, dt string",
              lambda r, key: r + key)
    cn = [(1, 2, "1-1"), (2, 2, "1-1"), (3, 1, "1"), (4, 1, "1")]
    us = [(t1 + 10, t2, t3) for t1, t2, t3 in cn]
    assert q(p, "SELECT * FROM T where dt = '20250811'") == sorted(
        [r + ("CN", "0", "20250811") for r in cn] + [r + ("CN", "1", "20250811") for r in cn]
        + [r + ("US", "1", "20250811") for r in us])
    assert q(p, "SELECT t1, t2, t3 FROM T where region = 'CN' and biz_type = '1' and dt = '20250811'") == cn
    assert q(p, "SELECT t1, t2, t3 FROM T where region = 'US' and dt = '20250809'") == [
        (11, 1, "1"), (12, 1, "1")]
    assert q(p, "SELECT count(*) FROM T where dt = '20250814'") == [(18,)]
    assert p.rows("SELECT t1, t2, t3 FROM {s}.t__delta where region = 'US' and dt = '20250811'") == [
        (12, 2, "1-1"), (14, 1, "1")]

    # rewriting two groups' deltas invalidates only those groups' snapshots (SPEC §1)
    p.table("writes", "w int, t1 bigint, t2 bigint, t3 string, region string, biz_type string, dt string",
            [(99, 5, 2, "1", "CN", "0", "20250813"), (99, 6, 2, "1", "CN", "0", "20250814"),
             (99, 15, 2, "1", "US", "1", "20250813"), (99, 16, 2, "1", "US", "1", "20250814")])
    p.dbt("run", vars={"w": 99, "branch": "delta"})
    assert p.rows("SELECT region, biz_type FROM {s}.t__snapshot where dt = '20250814' "
                  "group by region, biz_type") == [("CN", "1")]
    assert p.rows("SELECT t1 FROM {s}.t__delta where dt = '20250814'") == [(5,), (6,), (6,), (16,)]
    assert q(p, "SELECT t1, t2, t3 FROM T where region = 'US' and dt = '20250814'") == [
        (11, 2, "1-1"), (12, 2, "1-1"), (13, 2, "1-1"), (14, 2, "1-1"), (15, 2, "1"), (16, 2, "1")]


def test_paimon_partial_update(project):
    """testChainTableWithPartialUpdate: per column the latest non-null value by sequence."""
    p = project
    writes = by_branch([
        ("delta", "20250809", [(3, 1, "c", "C"), (4, 1, "d", "D")]),
        ("delta", "20250810", [(1, 2, None, "A1"), (2, 2, "b1", None), (3, 1, "c", "C")]),
        ("delta", "20250811", [(1, 3, "a1", None), (2, 3, None, "B1"), (5, 1, "e", "E")]),
        ("delta", "20250812", [(1, 4, None, "A2"), (5, 2, "e1", None)]),
        ("snapshot", "20250810", [(1, 2, "a", "A1"), (2, 2, "b1", "B"), (3, 1, "c", "C")]),
        ("snapshot", "20250812", [(1, 4, "a1", "A2"), (2, 3, "b1", "B1"), (3, 1, "c", "C"),
                                  (5, 2, "e1", "E")]),
    ])
    model = MODEL.format(part="['dt']", pk="['dt', 'key']",
                         extra="sequence_field='seq', merge_engine='partial-update',",
                         cols="key, seq, v1, v2, dt")
    write_all(p, model, writes, "w int, key bigint, seq bigint, v1 string, v2 string, dt string",
              lambda r, dt: r + (dt,))
    assert q(p, "SELECT * FROM T where dt = '20250812'") == [
        (1, 4, "a1", "A2", "20250812"), (2, 3, "b1", "B1", "20250812"),
        (3, 1, "c", "C", "20250812"), (5, 2, "e1", "E", "20250812")]
    assert q(p, "SELECT * FROM T where dt = '20250809'") == [
        (3, 1, "c", "C", "20250809"), (4, 1, "d", "D", "20250809")]
    assert q(p, "SELECT * FROM T where dt = '20250811'") == [
        (1, 3, "a1", "A1", "20250811"), (2, 3, "b1", "B1", "20250811"),
        (3, 1, "c", "C", "20250811"), (5, 1, "e", "E", "20250811")]
    assert p.rows("SELECT * FROM {s}.t__delta where dt = '20250811'") == sorted([
        (1, 3, "a1", None, "20250811"), (2, 3, None, "B1", "20250811"), (5, 1, "e", "E", "20250811")])


def test_paimon_drop_snapshot_partition(project):
    """testDropSnapshotPartition: a snapshot no later delta depends on can go; the first
    snapshot, anchor of the deltas after it with no snapshot before it, cannot."""
    p = project
    writes = by_branch([
        ("delta", "20260101", [(1, 1, "1"), (2, 1, "1")]),
        ("delta", "20260102", [(1, 2, "1-1"), (3, 1, "1")]),
        ("delta", "20260103", [(2, 2, "1-1"), (4, 1, "1")]),
        ("delta", "20260104", [(3, 2, "1-1"), (4, 2, "1-1")]),
        ("delta", "20260105", [(5, 1, "1"), (6, 1, "1")]),
        ("snapshot", "20260101", [(1, 2, "1-1"), (2, 1, "1"), (3, 1, "1")]),
        ("snapshot", "20260103", [(1, 2, "1-1"), (2, 2, "1-1"), (3, 2, "1-1"), (4, 2, "1-1")]),
        ("snapshot", "20260105", [(1, 2, "1-1"), (2, 2, "1-1"), (3, 2, "1-1"), (4, 2, "1-1"),
                                  (5, 1, "1"), (6, 1, "1")]),
    ])
    model = MODEL.format(part="['dt']", pk="['dt', 't1']", extra="sequence_field='t2',",
                         cols="t1, t2, t3, dt")
    write_all(p, model, writes, "w int, t1 bigint, t2 bigint, t3 string, dt string",
              lambda r, dt: r + (dt,))
    p.run_op("drop_chain_partition", {"model": "t", "partition": {"dt": "20260105"}})
    assert p.partitions("t__snapshot") == ["dt=20260101", "dt=20260103"]
    p.run_op("drop_chain_partition", {"model": "t", "partition": {"dt": "20260101"}},
             expect_ok=False)
    assert "dt=20260101" in p.log_text()
    assert p.partitions("t__snapshot") == ["dt=20260101", "dt=20260103"]
    # 20260105 reads snapshot 20260103 + delta 20260104, 20260105 again
    assert q(p, "SELECT t1, t2, t3 FROM T where dt = '20260105'") == [
        (1, 2, "1-1"), (2, 2, "1-1"), (3, 2, "1-1"), (4, 2, "1-1"), (5, 1, "1"), (6, 1, "1")]


def test_paimon_first_write_to_delta_with_a_date_column(project):
    """testChainTableCacheInvalidation: a table whose only write is one delta partition reads
    it in full; the partition column is named `date` and every column is a string."""
    p = project
    model = MODEL.format(part="['date']", pk="['date', 't1']", extra="sequence_field='t2',",
                         cols="t1, t2, t3, `date`")
    write_all(p, model, [("delta", "20260224", [("1", "1", "1")])],
              "w int, t1 string, t2 string, t3 string, date string", lambda r, d: r + (d,))
    assert p.partitions("t__snapshot") == []
    assert p.partitions("t__delta") == ["date=20260224"]
    assert p.rows("SELECT * FROM {s}.t") == [("1", "1", "1", "20260224")]
    p.run_op("compact_chain", {"model": "t", "partition": {"date": "20260224"}})
    assert p.partitions("t__snapshot") == ["date=20260224"]
    assert p.rows("SELECT * FROM {s}.t") == [("1", "1", "1", "20260224")]
