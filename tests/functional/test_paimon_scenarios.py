"""Paimon's own chain table scenarios (SparkChainTableITCase, CompactChainTableProcedureITCase),
written through dbt.

Paimon writes each branch with `INSERT OVERWRITE ... PARTITION`; here a write is a run of a
chain_incremental model forced to its branch with `chain_branch`, writing all of that branch's
partitions of the scenario: the delta branch first (before any snapshot exists), then the
snapshot branch, as Paimon does. Paimon's "main branch" (which shadows both branches for a
partition it holds) has no counterpart in chaintable, so its reads are left out; a partition
Paimon reads from main reads from the snapshot branch here. Rows and expected results are
Paimon's, exact, except where a comment says why."""

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
    (
        "snapshot",
        "20250814",
        [(1, 2, "1-1"), (2, 2, "1-1"), (3, 2, "1-1"), (4, 2, "1-1"), (5, 1, "1"), (6, 1, "1")],
    ),
]


def write_all(p, model, writes, columns, row_of, runs=None):
    """One source row per written row, tagged with its write; one dbt run per write in `runs`
    (all of them by default; run the others later with run_writes). A write is
    (branch, partition key, rows) or (branch, [(partition key, rows), ...]) for several."""

    def parts(write):
        return write[1] if len(write) == 2 else [(write[1], write[2])]

    rows = [
        (w,) + row_of(r, key)
        for w, write in enumerate(writes)
        for key, rs in parts(write)
        for r in rs
    ]
    p.table("writes", columns, rows)
    p.model("t", model)
    run_writes(p, writes, range(len(writes)) if runs is None else runs)


def run_writes(p, writes, runs):
    for w in runs:
        p.dbt("run", vars={"w": w, "branch": writes[w][0]})


def by_branch(writes):
    """(branch, key, rows) writes as one run per branch, writing all of its partitions."""
    return [
        (branch, [(key, rows) for b, key, rows in writes if b == branch])
        for branch in ("delta", "snapshot")
    ]


DAILY_MODEL = MODEL.format(
    part="['dt']", pk="['dt', 't1']", extra="sequence_field='t2',", cols="t1, t2, t3, dt"
)


def write_daily(p, writes):
    """Paimon's one-group daily table (t1 key, t2 sequence, t3 value, dt): one run per write."""
    write_all(
        p,
        DAILY_MODEL,
        writes,
        "w int, t1 bigint, t2 bigint, t3 string, dt string",
        lambda r, dt: r + (dt,),
    )


def daily(p):
    write_daily(p, by_branch(DAILY))


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
        (1, 2, "1-1", "20250814"),
        (2, 2, "1-1", "20250814"),
        (3, 2, "1-1", "20250814"),
        (4, 2, "1-1", "20250814"),
        (5, 1, "1", "20250814"),
        (6, 1, "1", "20250814"),
    ]
    # chain read 1: no earlier snapshot, the deltas up to the day
    assert q(p, "SELECT * FROM T where dt = '20250809'") == [
        (1, 1, "1", "20250809"),
        (2, 1, "1", "20250809"),
    ]
    # chain read 2: snapshot 20250810 + delta 20250811
    assert q(p, "SELECT * FROM T where dt = '20250811'") == [
        (1, 2, "1-1", "20250811"),
        (2, 2, "1-1", "20250811"),
        (3, 1, "1", "20250811"),
        (4, 1, "1", "20250811"),
    ]
    # chain read with a filter on a value column
    assert q(p, "SELECT * FROM T where dt = '20250811' and t1 = 1") == [(1, 2, "1-1", "20250811")]
    assert q(p, "SELECT * FROM T where dt = '20250811' and t1 = 4") == [(4, 1, "1", "20250811")]
    assert q(p, "SELECT * FROM T where dt = '20250811' and t1 = 7") == []
    assert q(p, "SELECT * FROM T where dt in ('20250811', '20250812') and t1 = 1") == [
        (1, 2, "1-1", "20250811"),
        (1, 2, "1-1", "20250812"),
    ]
    # snapshot read with a filter: the snapshot branch's 20250812 has no key 7 (its delta has)
    assert q(p, "SELECT * FROM T where dt = '20250812' and t1 = 7") == []
    # several partitions (20250810 from the snapshot branch: Paimon reads its main branch there)
    assert q(p, "SELECT * FROM T where dt in ('20250810', '20250811', '20250812')") == sorted(
        [
            (1, 2, "1-1", "20250810"),
            (2, 1, "1", "20250810"),
            (3, 1, "1", "20250810"),
            (1, 2, "1-1", "20250811"),
            (2, 2, "1-1", "20250811"),
            (3, 1, "1", "20250811"),
            (4, 1, "1", "20250811"),
            (1, 2, "1-1", "20250812"),
            (2, 2, "1-1", "20250812"),
            (3, 2, "1-1", "20250812"),
            (4, 2, "1-1", "20250812"),
        ]
    )
    # incremental read: the delta branch
    assert p.rows("SELECT * FROM {s}.t__delta where dt = '20250811'") == [
        (2, 2, "1-1", "20250811"),
        (4, 1, "1", "20250811"),
    ]
    assert p.rows(
        "SELECT * FROM {s}.t__delta where dt in ('20250810', '20250811', '20250812')"
    ) == sorted(
        [
            (1, 2, "1-1", "20250810"),
            (3, 1, "1", "20250810"),
            (2, 2, "1-1", "20250811"),
            (4, 1, "1", "20250811"),
            (3, 2, "1-1", "20250812"),
            (4, 2, "1-1", "20250812"),
            (7, 1, "d7", "20250812"),
        ]
    )
    # hybrid read
    assert p.rows(
        "select * from {s}.t where dt = '20250811' union all "
        "select * from {s}.t__delta where dt = '20250811'"
    ) == sorted(
        [
            (1, 2, "1-1", "20250811"),
            (2, 2, "1-1", "20250811"),
            (3, 1, "1", "20250811"),
            (4, 1, "1", "20250811"),
            (2, 2, "1-1", "20250811"),
            (4, 1, "1", "20250811"),
        ]
    )

    # rewriting delta 20250813 and 20250814 invalidates snapshot 20250814
    write_daily(p, [("delta", [("20250813", [(5, 2, "1")]), ("20250814", [(6, 2, "1")])])])
    assert p.rows("SELECT t1, t2, t3 FROM {s}.t__snapshot where dt = '20250814'") == []
    assert p.rows("SELECT t1, t2, t3 FROM {s}.t__delta where dt = '20250814'") == [(6, 2, "1")]
    # the day now reads snapshot 20250812 + deltas 20250813, 20250814
    assert q(p, "SELECT t1, t2, t3 FROM T where dt = '20250814'") == [
        (1, 2, "1-1"),
        (2, 2, "1-1"),
        (3, 2, "1-1"),
        (4, 2, "1-1"),
        (5, 2, "1"),
        (6, 2, "1"),
    ]


def test_paimon_group_partitions(project):
    """testChainTableWithMultiGroupPartition: two group keys (region, biz_type) over dt."""
    p = project
    groups = [("CN", "0"), ("CN", "1"), ("US", "1")]
    writes = [
        (
            branch,
            [
                (
                    (region, biz, dt),
                    [
                        (t1 + (10 if region == "US" else 0), t2, t3)
                        for t1, t2, t3 in rows
                        if t1 != 7
                    ],
                )
                for b, dt, rows in DAILY
                if b == branch
                for region, biz in groups
            ],
        )
        for branch in ("delta", "snapshot")
    ]  # one run per branch: every group and day
    model = MODEL.format(
        part="['region', 'biz_type', 'dt']",
        pk="['region', 'biz_type', 'dt', 't1']",
        extra="sequence_field='t2', chain_partition_keys=['dt'],",
        cols="t1, t2, t3, region, biz_type, dt",
    )
    cols = "w int, t1 bigint, t2 bigint, t3 string, region string, biz_type string, dt string"
    write_all(p, model, writes, cols, lambda r, key: r + key)
    cn = [(1, 2, "1-1"), (2, 2, "1-1"), (3, 1, "1"), (4, 1, "1")]
    us = [(t1 + 10, t2, t3) for t1, t2, t3 in cn]
    assert q(p, "SELECT * FROM T where dt = '20250811'") == sorted(
        [r + ("CN", "0", "20250811") for r in cn]
        + [r + ("CN", "1", "20250811") for r in cn]
        + [r + ("US", "1", "20250811") for r in us]
    )
    assert (
        q(p, "SELECT t1, t2, t3 FROM T where region = 'CN' and biz_type = '1' and dt = '20250811'")
        == cn
    )
    assert q(p, "SELECT t1, t2, t3 FROM T where region = 'US' and dt = '20250809'") == [
        (11, 1, "1"),
        (12, 1, "1"),
    ]
    assert q(p, "SELECT count(*) FROM T where dt = '20250814'") == [(18,)]
    assert p.rows(
        "SELECT t1, t2, t3 FROM {s}.t__delta where region = 'US' and dt = '20250811'"
    ) == [(12, 2, "1-1"), (14, 1, "1")]

    # rewriting two groups' deltas invalidates only those groups' snapshots
    # (docs/design.md#branches-and-relations)
    write_all(
        p,
        model,
        [
            (
                "delta",
                [
                    (("CN", "0", "20250813"), [(5, 2, "1")]),
                    (("CN", "0", "20250814"), [(6, 2, "1")]),
                    (("US", "1", "20250813"), [(15, 2, "1")]),
                    (("US", "1", "20250814"), [(16, 2, "1")]),
                ],
            )
        ],
        cols,
        lambda r, key: r + key,
    )
    assert p.rows(
        "SELECT region, biz_type FROM {s}.t__snapshot where dt = '20250814' "
        "group by region, biz_type"
    ) == [("CN", "1")]
    assert p.rows("SELECT t1 FROM {s}.t__delta where dt = '20250814'") == [(5,), (6,), (6,), (16,)]
    assert q(p, "SELECT t1, t2, t3 FROM T where region = 'US' and dt = '20250814'") == [
        (11, 2, "1-1"),
        (12, 2, "1-1"),
        (13, 2, "1-1"),
        (14, 2, "1-1"),
        (15, 2, "1"),
        (16, 2, "1"),
    ]


def test_paimon_partial_update(project):
    """testChainTableWithPartialUpdate: per column the latest non-null value by sequence."""
    p = project
    writes = by_branch(
        [
            ("delta", "20250809", [(3, 1, "c", "C"), (4, 1, "d", "D")]),
            ("delta", "20250810", [(1, 2, None, "A1"), (2, 2, "b1", None), (3, 1, "c", "C")]),
            ("delta", "20250811", [(1, 3, "a1", None), (2, 3, None, "B1"), (5, 1, "e", "E")]),
            ("delta", "20250812", [(1, 4, None, "A2"), (5, 2, "e1", None)]),
            ("snapshot", "20250810", [(1, 2, "a", "A1"), (2, 2, "b1", "B"), (3, 1, "c", "C")]),
            (
                "snapshot",
                "20250812",
                [(1, 4, "a1", "A2"), (2, 3, "b1", "B1"), (3, 1, "c", "C"), (5, 2, "e1", "E")],
            ),
        ]
    )
    model = MODEL.format(
        part="['dt']",
        pk="['dt', 'key']",
        extra="sequence_field='seq', merge_engine='partial-update',",
        cols="key, seq, v1, v2, dt",
    )
    write_all(
        p,
        model,
        writes,
        "w int, key bigint, seq bigint, v1 string, v2 string, dt string",
        lambda r, dt: r + (dt,),
    )
    assert q(p, "SELECT * FROM T where dt = '20250812'") == [
        (1, 4, "a1", "A2", "20250812"),
        (2, 3, "b1", "B1", "20250812"),
        (3, 1, "c", "C", "20250812"),
        (5, 2, "e1", "E", "20250812"),
    ]
    assert q(p, "SELECT * FROM T where dt = '20250809'") == [
        (3, 1, "c", "C", "20250809"),
        (4, 1, "d", "D", "20250809"),
    ]
    assert q(p, "SELECT * FROM T where dt = '20250811'") == [
        (1, 3, "a1", "A1", "20250811"),
        (2, 3, "b1", "B1", "20250811"),
        (3, 1, "c", "C", "20250811"),
        (5, 1, "e", "E", "20250811"),
    ]
    assert p.rows("SELECT * FROM {s}.t__delta where dt = '20250811'") == sorted(
        [
            (1, 3, "a1", None, "20250811"),
            (2, 3, None, "B1", "20250811"),
            (5, 1, "e", "E", "20250811"),
        ]
    )


def test_paimon_drop_snapshot_partition(project):
    """testDropSnapshotPartition: a snapshot no later delta depends on can go; the first
    snapshot, anchor of the deltas after it with no snapshot before it, cannot."""
    p = project
    writes = by_branch(
        [
            ("delta", "20260101", [(1, 1, "1"), (2, 1, "1")]),
            ("delta", "20260102", [(1, 2, "1-1"), (3, 1, "1")]),
            ("delta", "20260103", [(2, 2, "1-1"), (4, 1, "1")]),
            ("delta", "20260104", [(3, 2, "1-1"), (4, 2, "1-1")]),
            ("delta", "20260105", [(5, 1, "1"), (6, 1, "1")]),
            ("snapshot", "20260101", [(1, 2, "1-1"), (2, 1, "1"), (3, 1, "1")]),
            ("snapshot", "20260103", [(1, 2, "1-1"), (2, 2, "1-1"), (3, 2, "1-1"), (4, 2, "1-1")]),
            (
                "snapshot",
                "20260105",
                [
                    (1, 2, "1-1"),
                    (2, 2, "1-1"),
                    (3, 2, "1-1"),
                    (4, 2, "1-1"),
                    (5, 1, "1"),
                    (6, 1, "1"),
                ],
            ),
        ]
    )
    write_daily(p, writes)
    p.run_op("drop_chain_partition", {"model": "t", "partition": {"dt": "20260105"}})
    assert p.partitions("t__snapshot") == ["dt=20260101", "dt=20260103"]
    p.run_op(
        "drop_chain_partition", {"model": "t", "partition": {"dt": "20260101"}}, expect_ok=False
    )
    assert "dt=20260101" in p.log_text()
    assert p.partitions("t__snapshot") == ["dt=20260101", "dt=20260103"]
    # 20260105 reads snapshot 20260103 + delta 20260104, 20260105 again
    assert q(p, "SELECT t1, t2, t3 FROM T where dt = '20260105'") == [
        (1, 2, "1-1"),
        (2, 2, "1-1"),
        (3, 2, "1-1"),
        (4, 2, "1-1"),
        (5, 1, "1"),
        (6, 1, "1"),
    ]


def test_paimon_first_write_to_delta_with_a_date_column(project):
    """testChainTableCacheInvalidation: a table whose only write is one delta partition reads
    it in full; the partition column is named `date` and every column is a string."""
    p = project
    model = MODEL.format(
        part="['date']",
        pk="['date', 't1']",
        extra="sequence_field='t2',",
        cols="t1, t2, t3, `date`",
    )
    write_all(
        p,
        model,
        [("delta", "20260224", [("1", "1", "1")])],
        "w int, t1 string, t2 string, t3 string, date string",
        lambda r, d: r + (d,),
    )
    assert p.partitions("t__snapshot") == []
    assert p.partitions("t__delta") == ["date=20260224"]
    assert p.rows("SELECT * FROM {s}.t") == [("1", "1", "1", "20260224")]
    p.run_op("compact_chain", {"model": "t", "partition": {"date": "20260224"}})
    assert p.partitions("t__snapshot") == ["date=20260224"]
    assert p.rows("SELECT * FROM {s}.t") == [("1", "1", "1", "20260224")]


def test_paimon_minute_level_partitions(project):
    """testChainTableWithMinuteLevelPartitions: chain keys (dt, hr_min) whose values hold a
    ':' (Hive escapes it in partition paths), a pattern and formatter down to the minute. Past
    Paimon's read: the day compacted with Paimon's quoted partition string, then read again."""
    p = project
    model = MODEL.format(
        part="['dt', 'hr_min']",
        pk="['dt', 'hr_min', 't1']",
        extra="sequence_field='t2', partition_timestamp_pattern='$dt $hr_min:00', "
        "partition_timestamp_formatter='yyyyMMdd HH:mm:ss',",
        cols="t1, t2, t3, dt, hr_min",
    )
    writes = [
        ("snapshot", ("20250810", "01:01"), [(3, 1, "3")]),
        ("snapshot", ("20250810", "03:30"), [(4, 1, "4")]),
        ("delta", ("20250810", "03:35"), [(5, 1, "5")]),
        ("delta", ("20250810", "03:40"), [(6, 1, "6")]),
        ("delta", ("20250810", "03:45"), [(7, 1, "7")]),
    ]
    cols = "w int, t1 bigint, t2 bigint, t3 string, dt string, hr_min string"
    # Paimon writes the snapshots first
    write_all(p, model, by_branch(writes)[::-1], cols, lambda r, key: r + key)
    assert p.partitions("t__delta") == [
        "dt=20250810/hr_min=03%3A35",
        "dt=20250810/hr_min=03%3A40",
        "dt=20250810/hr_min=03%3A45",
    ]
    day = "SELECT * FROM T WHERE dt = '20250810' AND hr_min = '03:40'"
    expected = [(4, 1, "4", "20250810", "03:40"), (5, 1, "5", "20250810", "03:40")]
    expected.append((6, 1, "6", "20250810", "03:40"))
    assert q(p, day) == expected
    assert compacted(p, 'dt="20250810", hr_min="03:40"')
    assert p.partitions("t__snapshot") == [
        "dt=20250810/hr_min=01%3A01",
        "dt=20250810/hr_min=03%3A30",
        "dt=20250810/hr_min=03%3A40",
    ]
    assert q(p, day) == expected
    assert q(p, "SELECT t1 FROM T WHERE hr_min = '03:45'") == [(4,), (5,), (6,), (7,)]


# ---- compaction: Paimon's CompactChainTableProcedureITCase ------------------------------------
def compacted(p, partition, overwrite=False):
    args = {"model": "t", "partition": partition}
    if overwrite:
        args["overwrite"] = True
    p.run_op("compact_chain", args)
    return "(result: true)" in p.log_text()


def test_paimon_compact_basic(project):
    """testCompactChainTableBasic: the compacted day equals its merged read; the anchor's own
    snapshot is unchanged."""
    p = project
    writes = by_branch(
        [
            ("snapshot", "20260222", [(0, 1, "0")]),
            ("snapshot", "20260223", [(1, 1, "1")]),
            ("delta", "20260224", [(2, 2, "2")]),
        ]
    )[::-1]  # the snapshot run first: the basic scenario writes both snapshots before the delta
    write_daily(p, writes)
    assert not compacted(p, {"dt": "20260221"})  # no snapshot and no delta at or before it
    assert "no data to compact" in p.log_text()
    assert p.partitions("t__snapshot") == ["dt=20260222", "dt=20260223"]
    assert q(p, "SELECT * FROM T WHERE dt = '20260224'") == [
        (1, 1, "1", "20260224"),
        (2, 2, "2", "20260224"),
    ]
    assert compacted(p, "dt=20260224")
    assert q(p, "SELECT * FROM T WHERE dt = '20260224'") == [
        (1, 1, "1", "20260224"),
        (2, 2, "2", "20260224"),
    ]
    assert p.rows("SELECT * FROM {s}.t__snapshot WHERE dt = '20260223'") == [
        (1, 1, "1", "20260223")
    ]
    assert p.rows("SELECT * FROM {s}.t__snapshot WHERE dt = '20260224'") == [
        (1, 1, "1", "20260224"),
        (2, 2, "2", "20260224"),
    ]


def test_paimon_compact_overwrite_recomputes_from_the_earlier_anchor(project):
    """testCompactChainTableOverwrite: snapshot 20260225 exists, so a compaction without
    overwrite writes nothing; with overwrite the day is rebuilt from snapshot 20260224 and the
    delta, and the newer snapshot row (3, 2, '3-1') is replaced by the anchor's (3, 1, '3').
    (Paimon's main-branch row, never read in that test, is left out.)"""
    p = project
    writes = by_branch(
        [
            ("delta", "20260225", [(4, 2, "4")]),
            ("snapshot", "20260223", [(2, 1, "2")]),
            ("snapshot", "20260224", [(3, 1, "3")]),
            ("snapshot", "20260225", [(3, 2, "3-1")]),
        ]
    )
    write_daily(p, writes)
    assert not compacted(p, "dt=20260225")
    assert q(p, "SELECT * FROM T WHERE dt = '20260225'") == [(3, 2, "3-1", "20260225")]
    assert compacted(p, "dt=20260225", overwrite=True)
    assert p.rows("SELECT * FROM {s}.t__snapshot WHERE dt = '20260225'") == [
        (3, 1, "3", "20260225"),
        (4, 2, "4", "20260225"),
    ]
    assert p.rows("SELECT * FROM {s}.t__snapshot WHERE dt <> '20260225'") == [
        (2, 1, "2", "20260223"),
        (3, 1, "3", "20260224"),
    ]


def test_paimon_compact_hourly(project):
    """testCompactChainTableMultiplePartitions: dt + hr chain keys, Paimon's partition strings
    (with spaces), skip without overwrite, rebuild with it. Each batch writes its deltas before
    its snapshots: a run that writes delta P after snapshot P exists invalidates snapshot P."""
    p = project
    batch1 = [
        ("delta", ("20250810", "21"), [(1, 1, "1"), (2, 1, "1")]),
        ("delta", ("20250810", "22"), [(1, 2, "1-1"), (3, 1, "1")]),
        ("delta", ("20250810", "23"), [(2, 2, "1-1"), (4, 1, "1")]),
        ("snapshot", ("20250810", "20"), [(0, 1, "0")]),
        ("snapshot", ("20250810", "22"), [(1, 1, "1"), (2, 1, "1")]),
    ]
    batch2 = [
        ("delta", ("20250811", "00"), [(3, 2, "1-1"), (4, 2, "1-1")]),
        ("delta", ("20250811", "01"), [(5, 1, "1"), (6, 1, "1")]),
        ("delta", ("20250811", "02"), [(5, 2, "1-1"), (6, 2, "1-1")]),
        (
            "snapshot",
            ("20250811", "00"),
            [(1, 2, "1-1"), (2, 2, "1-1"), (3, 2, "1-1"), (4, 2, "1-1")],
        ),
        (
            "snapshot",
            ("20250811", "02"),
            [(1, 2, "1-1"), (2, 2, "1-1"), (3, 2, "1-1"), (4, 2, "1-1"), (5, 1, "1"), (6, 1, "1")],
        ),
    ]
    model = MODEL.format(
        part="['dt', 'hr']",
        pk="['dt', 'hr', 't1']",
        extra="sequence_field='t2',",
        cols="t1, t2, t3, dt, hr",
    )
    cols = "w int, t1 bigint, t2 bigint, t3 string, dt string, hr string"
    writes = by_branch(batch1) + by_branch(batch2)
    write_all(p, model, writes, cols, lambda r, key: r + key, runs=(0, 1))  # batch 1

    assert compacted(p, "dt = 20250810, hr = 23")
    assert q(p, "SELECT t1, t2, t3 FROM T WHERE dt = '20250810' AND hr = '23'") == [
        (1, 1, "1"),
        (2, 2, "1-1"),
        (4, 1, "1"),
    ]

    run_writes(p, writes, (2, 3))  # batch 2
    six = [(1, 2, "1-1"), (2, 2, "1-1"), (3, 2, "1-1"), (4, 2, "1-1")]
    assert not compacted(p, "dt=20250811,hr=02")
    assert q(p, "SELECT t1, t2, t3 FROM T WHERE dt = '20250811' AND hr = '02'") == six + [
        (5, 1, "1"),
        (6, 1, "1"),
    ]
    assert compacted(p, "dt=20250811,hr=02", overwrite=True)
    assert q(p, "SELECT t1, t2, t3 FROM T WHERE dt = '20250811' AND hr = '02'") == six + [
        (5, 2, "1-1"),
        (6, 2, "1-1"),
    ]
    assert q(p, "SELECT t1, t2, t3 FROM T WHERE dt = '20250811' AND hr = '00'") == six
    assert p.rows("SELECT t1, t2, t3 FROM {s}.t__snapshot WHERE dt = '20250810' AND hr = '23'") == [
        (1, 1, "1"),
        (2, 2, "1-1"),
        (4, 1, "1"),
    ]
    assert p.rows("SELECT t1, t2, t3 FROM {s}.t__snapshot WHERE dt = '20250810' AND hr = '22'") == [
        (1, 1, "1"),
        (2, 1, "1"),
    ]


def test_paimon_compact_groups_with_overwrite(project):
    """testCompactChainTableWithGroupPartition: compacting (dt, hr) = (20250810, 22) with
    overwrite over five regions. CN (snapshot at 22 and a delta at 22) is rebuilt from its
    snapshot at 21; US (deltas only) and UK (anchor at 21) are written; FR (a snapshot at 22, no
    delta) keeps its snapshot; CA (no delta after its anchor) gets nothing."""
    p = project
    writes = by_branch(
        [
            ("delta", ("CN", "20250810", "22"), [(4, 1, "1")]),
            ("delta", ("US", "20250810", "22"), [(11, 1, "1")]),
            ("delta", ("UK", "20250810", "22"), [(22, 1, "1")]),
            ("snapshot", ("CN", "20250810", "20"), [(1, 1, "1")]),
            ("snapshot", ("CN", "20250810", "21"), [(2, 1, "1")]),
            ("snapshot", ("CN", "20250810", "22"), [(3, 1, "1")]),
            ("snapshot", ("UK", "20250810", "21"), [(21, 1, "1")]),
            ("snapshot", ("FR", "20250810", "22"), [(31, 1, "1")]),
            ("snapshot", ("CA", "20250810", "21"), [(41, 1, "1")]),
        ]
    )
    model = MODEL.format(
        part="['region', 'dt', 'hr']",
        pk="['region', 'dt', 'hr', 't1']",
        extra="sequence_field='t2', chain_partition_keys=['dt', 'hr'],",
        cols="t1, t2, t3, region, dt, hr",
    )
    write_all(
        p,
        model,
        writes,
        "w int, t1 bigint, t2 bigint, t3 string, region string, dt string, hr string",
        lambda r, key: r + key,
    )
    snap = "SELECT t1, region FROM {s}.t__snapshot WHERE dt = '20250810' AND hr = '%s'"
    assert p.rows(snap % "22") == [(3, "CN"), (31, "FR")]
    # Paimon runs this with 'dynamic-partition-overwrite' true and false: here the session's
    # mode is static, which must not make the compaction's dynamic write wipe other partitions
    p.spark.sql("SET spark.sql.sources.partitionOverwriteMode=STATIC")
    assert compacted(p, "dt=20250810,hr=22", overwrite=True)
    assert p.rows(snap % "21") == [(2, "CN"), (21, "UK"), (41, "CA")]
    hr22 = [(2, "CN"), (4, "CN"), (11, "US"), (21, "UK"), (22, "UK"), (31, "FR")]
    assert p.rows(snap % "22") == hr22
    assert q(p, "SELECT t1, region FROM T WHERE dt = '20250810' AND hr = '22'") == hr22


# ---- from Paimon's Flink chain table ITCase (batch reads of its scenarios) -------------------
KSV = "k bigint, seq bigint, v string, op string, dt string"
WITH_OPS = MODEL.format(
    part="['dt']",
    pk="['dt', 'k']",
    extra="sequence_field='seq', rowkind_field='op',",
    cols="k, seq, v, op, dt",
)


def test_paimon_deletes_across_the_chain(project):
    """testStreamingReadWithMergeSnapshot: a -D and a -U of snapshot keys on one day, a +U and
    a +I on the next, written in one delta run; the -U (seq 2) removes key 2 until its +U (seq 3).
    First, a compaction of a chain with no rows at all writes nothing (CompactChainTable's
    "compact empty partition")."""
    p = project
    writes = [
        ("snapshot", []),  # a first run with no rows: the relations, no partition
        ("snapshot", [("20250808", [(1, 1, "snap_1", "+I"), (2, 1, "snap_2", "+I")])]),
        (
            "delta",
            [
                ("20250809", [(1, 2, "snap_1", "-D"), (2, 2, "snap_2", "-U")]),
                ("20250810", [(2, 3, "delta_2", "+U"), (3, 1, "delta_3", "+I")]),
            ],
        ),
    ]
    write_all(p, WITH_OPS, writes, "w int, " + KSV, lambda r, dt: r + (dt,), runs=(0,))
    assert p.partitions("t__snapshot") == [] and p.partitions("t__delta") == []
    assert not compacted(p, "dt=20250808")
    assert "no data to compact" in p.log_text()
    run_writes(p, writes, (1, 2))
    assert q(p, "SELECT k, seq, v, dt FROM T WHERE dt = '20250810'") == [
        (2, 3, "delta_2", "20250810"),
        (3, 1, "delta_3", "20250810"),
    ]
    assert q(p, "SELECT k, seq, v, dt FROM T WHERE dt = '20250809'") == []
    compacted(p, {"dt": "20250809"})  # the merged day has no row: whatever it writes, it reads so
    assert q(p, "SELECT k, seq, v, dt FROM T WHERE dt = '20250809'") == []
    assert compacted(p, {"dt": "20250810"})
    assert p.rows("SELECT k, seq, v, op FROM {s}.t__snapshot WHERE dt = '20250810'") == [
        (2, 3, "delta_2", "+U"),
        (3, 1, "delta_3", "+I"),
    ]


def test_paimon_groups_with_deletes_and_a_delta_only_group(project):
    """testStreamingReadWithMergeSnapshotAndGroup: CN and UK anchored on snapshots of different
    days, US with deltas only; one delta run writes three groups at three days. A key deleted
    in US comes back with a later +I of a higher sequence."""
    p = project
    model = MODEL.format(
        part="['region', 'dt']",
        pk="['region', 'dt', 'k']",
        extra="sequence_field='seq', rowkind_field='op', chain_partition_keys=['dt'],",
        cols="k, seq, v, op, region, dt",
    )
    writes = [
        (
            "snapshot",
            [
                (("CN", "20250809"), [(1, 1, "cn_snap_1", "+I"), (2, 1, "cn_snap_2", "+I")]),
                (("UK", "20250808"), [(21, 1, "uk_snap_21", "+I"), (22, 1, "uk_snap_22", "+I")]),
            ],
        ),
        (
            "delta",
            [
                (("CN", "20250810"), [(1, 2, "cn_snap_1", "-D"), (3, 1, "cn_delta_3", "+I")]),
                (("US", "20250811"), [(11, 1, "us_delta_11", "+I"), (12, 1, "us_delta_12", "+I")]),
                (("UK", "20250809"), [(21, 2, "uk_snap_21", "-D")]),
            ],
        ),
        ("delta", [(("US", "20250812"), [(11, 2, "us_delta_11", "-D")])]),
        ("delta", [(("US", "20250813"), [(11, 3, "us_delta_11", "+I")])]),
    ]
    write_all(
        p,
        model,
        writes,
        "w int, k bigint, seq bigint, v string, op string, region string, dt string",
        lambda r, key: r + key,
    )
    assert q(
        p,
        "SELECT k, seq, v, region, dt FROM T WHERE (region = 'CN' AND dt = '20250810') "
        "OR (region = 'UK' AND dt = '20250809') OR (region = 'US' AND dt = '20250812')",
    ) == [
        (2, 1, "cn_snap_2", "CN", "20250810"),
        (3, 1, "cn_delta_3", "CN", "20250810"),
        (12, 1, "us_delta_12", "US", "20250812"),
        (22, 1, "uk_snap_22", "UK", "20250809"),
    ]
    assert q(p, "SELECT k, seq, v FROM T WHERE region = 'US' AND dt = '20250813'") == [
        (11, 3, "us_delta_11"),
        (12, 1, "us_delta_12"),
    ]


def test_paimon_full_scan_filtered_on_the_key(project):
    """testStreamingReadPKFilterDoesNotAffectPartitionDiscovery (its batch query): a full scan
    with a filter on the key reads every partition; snapshot 20250808 shadows the delta of the
    same day though the delta's row has the higher sequence. The delta is written first: a run
    writing delta P after snapshot P exists would invalidate the snapshot
    (docs/design.md#branches-and-relations)."""
    p = project
    writes = by_branch(
        [
            ("snapshot", "20250808", [(1, 1, "v1"), (2, 1, "v2")]),
            ("snapshot", "20250809", [(3, 1, "v3"), (4, 1, "v4")]),
            ("delta", "20250808", [(1, 2, "delta_v1")]),
        ]
    )
    write_daily(p, writes)
    assert q(p, "SELECT * FROM T WHERE t1 = 1") == [(1, 1, "v1", "20250808")]
    assert q(p, "SELECT t1, t3 FROM T WHERE dt = '20250809'") == [(3, "v3"), (4, "v4")]


def test_paimon_rewrites_then_compaction(project):
    """testChainTableWithDeletionVectors, its row-level DELETE and UPDATE as partition rewrites:
    snapshot 20260223 loses key 3 and delta 20260224 becomes one row, then 20260224 is
    compacted from the nearest anchor (key 6 of 20260222 must not come back)."""
    p = project
    writes = [
        (
            "snapshot",
            [
                ("20260222", [(1, 1, "1"), (6, 1, "1")]),
                ("20260223", [(1, 2, "2"), (2, 2, "2"), (3, 1, "1")]),
            ],
        ),
        ("delta", [("20260224", [(4, 1, "1"), (5, 1, "1")])]),
        ("snapshot", [("20260223", [(1, 2, "2"), (2, 2, "2")])]),
        ("delta", [("20260224", [(5, 5, "5")])]),
    ]
    write_daily(p, writes)
    assert q(p, "SELECT t1, t2, t3 FROM T WHERE dt = '20260224'") == [
        (1, 2, "2"),
        (2, 2, "2"),
        (5, 5, "5"),
    ]
    assert compacted(p, "dt=20260224")
    assert p.rows("SELECT t1, t2, t3 FROM {s}.t__snapshot WHERE dt = '20260223'") == [
        (1, 2, "2"),
        (2, 2, "2"),
    ]
    assert p.rows("SELECT t1, t2, t3 FROM {s}.t__delta WHERE dt = '20260224'") == [(5, 5, "5")]
    assert p.rows("SELECT t1, t2, t3 FROM {s}.t__snapshot WHERE dt = '20260224'") == [
        (1, 2, "2"),
        (2, 2, "2"),
        (5, 5, "5"),
    ]
