"""Chain runs, reads, compaction and status end to end, exact rows."""

import os
import re

import pytest
from helpers import module_project, node_messages

from dbt.adapters.chaintable.base.keys import stale_from_properties

# the tests of the simple history share one (`simple`), and so do the invalid configs' cases
pytestmark = pytest.mark.xdist_group("chain_core")

SIMPLE = """
{{ config(materialized='chain_incremental', partition_by=['dt'], primary_key=['id', 'dt']) }}
select id, v, dt from {{ target.schema }}.changes where dt = '{{ var("dt") }}'
"""

GROUPED = """
{{ config(materialized='chain_incremental', partition_by=['region', 'dt'],
          chain_partition_keys=['dt'], primary_key=['id', 'region', 'dt'],
          chain_partition={'dt': var('dt')}) }}
select id, v, region, dt from {{ target.schema }}.changes where dt = '{{ var("dt") }}'
"""

HOURLY = """
{{ config(materialized='chain_incremental', partition_by=['dt', 'hour'],
          primary_key=['id', 'dt', 'hour']) }}
select id, v, dt, hour from {{ target.schema }}.changes
where dt = '{{ var("dt") }}' and hour = '{{ var("hour") }}'
"""


def day(p, d, m=None, **kw):
    """A run of day d: of model m only, where given."""
    p.dbt("run", *(("--select", m) if m else ()), vars={"dt": d, **kw})


def read(p, where, cols="id, v", m="t"):
    return p.rows(f"select {cols} from {{s}}.{m} where {where}")


SIMPLE_ROWS = [
    (1, "a", "20250801"),
    (2, "b", "20250801"),
    (3, "c", "20250801"),
    (2, "b2", "20250802"),
    (4, "d", "20250802"),
    (1, "a3", "20250803"),
    (3, "c4", "20250804"),
]
# the simple history's models: `t` for the tests that leave it as it is, and one for each test
# that changes its chain
SIMPLE_MODELS = ("t", "t_scan", "t_compact", "t_rerun", "t_contract")


def simple_model(m: str, config: str = "") -> str:
    """SIMPLE as model m, reading its own source table changes_<m>, with more config."""
    return SIMPLE.replace(".changes ", f".changes_{m} ").replace(
        "primary_key=['id', 'dt']", "primary_key=['id', 'dt']" + config
    )


@pytest.fixture(scope="module")
def simple(spark, spark_root, tmp_path_factory):
    """Days 0801 to 0803 of SIMPLE_ROWS in every model of SIMPLE_MODELS, one run of all of
    them a day."""
    with module_project(spark, spark_root, tmp_path_factory, "simple") as p:
        for m in SIMPLE_MODELS:
            p.table(f"changes_{m}", "id int, v string, dt string", SIMPLE_ROWS)
            p.model(m, simple_model(m))
        for d in ("20250801", "20250802", "20250803"):
            p.dbt("run", "--threads", "4", vars={"dt": d})  # the models side by side
        yield p


def test_single_key_chain_reads_every_day_full(simple):
    p = simple
    assert p.partitions("t__snapshot") == ["dt=20250801"]
    assert p.partitions("t__delta") == ["dt=20250802", "dt=20250803"]
    assert p.rows("select id, v from {s}.t__delta where dt = '20250803'") == [(1, "a3")]
    assert read(p, "dt = '20250801'") == [(1, "a"), (2, "b"), (3, "c")]
    assert read(p, "dt = '20250802'") == [(1, "a"), (2, "b2"), (3, "c"), (4, "d")]
    assert read(p, "dt = '20250803'", "id, v, dt") == [
        (1, "a3", "20250803"),
        (2, "b2", "20250803"),
        (3, "c", "20250803"),
        (4, "d", "20250803"),
    ]
    # A filter on a value column applies after the merge: key 1 at 0803 is 'a3', not 'a'.
    assert read(p, "dt = '20250803' and v = 'a'") == []
    assert p.rows("select count(*) from {s}.t") == [(3 + 4 + 4,)]


def scanned_partitions(p, query):
    """Partition values in the PartitionFilters of every scan of the physical plan; fails if a
    scan has no partition filter (it would read the whole history)."""
    plan = "\n".join(r[0] for r in p.spark.sql(f"EXPLAIN {query}").collect())
    scans = [line for line in plan.splitlines() if "FileScan" in line]
    assert scans, plan
    values = set()
    for scan in scans:
        filters = re.search(r"PartitionFilters: \[([^\]]*)\]", scan)
        assert filters and filters.group(1), f"scan without partition filter:\n{scan}"
        # the snapshot branch excludes the partitions the view merges (NOT dt IN (...)): those
        # values narrow the scan further, they never widen it
        kept = re.sub(r"NOT \(?\S+ IN \([^)]*\)\)?", "", filters.group(1))
        values |= set(re.findall(r"\b(\d{8})\b", kept))
    return sorted(values)


def partitions_fetched(p, query):
    """Partitions Spark fetches from the metastore while planning `query` (pruning included)."""
    metrics = p.spark._jvm.org.apache.spark.metrics.source.HiveCatalogMetrics
    metrics.reset()
    p.spark.sql(query)._jdf.queryExecution().executedPlan()
    return metrics.METRIC_PARTITIONS_FETCHED().getCount()


def test_one_partition_query_scans_only_its_anchor_and_deltas(simple):
    p, m = simple, "t_scan"
    day(p, "20250804", m)
    q = f"SELECT * FROM {p.schema}.{m} WHERE dt = '{{}}'"
    # served from the cumulative delta: the anchor, then the day's cumulative partition (its
    # keys broadcast to the anchor's anti join, its rows), whatever the chain's length
    assert scanned_partitions(p, q.format("20250803")) == ["20250801", "20250803"]
    plan = "\n".join(r[0] for r in p.spark.sql("EXPLAIN " + q.format("20250803")).collect())
    assert f"{m}__cumulative" in plan and f"{m}__delta" not in plan
    assert (
        "BroadcastHashJoin" in plan
        and "LeftAnti" in plan
        and "Exchange hashpartitioning" not in plan
    )
    assert scanned_partitions(p, q.format("20250801")) == ["20250801"]
    assert partitions_fetched(p, q.format("20250801")) == 1
    assert partitions_fetched(p, q.format("20250803")) == 1 + 2
    assert read(p, "dt = '20250803'", m=m) == [(1, "a3"), (2, "b2"), (3, "c"), (4, "d")]
    # merged on read (cumulative_delta=false): planning prunes the other days' branches whole
    # (Renderer.merged's guard): the snapshot day asks the metastore for its own partition
    # only, not for the deltas of the three merged days' joins; the day 0803 for its anchor
    # (read twice: untouched and contested rows) and its two deltas (keys twice, rows once),
    # none of 0802's or 0804's
    p.model(m, simple_model(m, ", cumulative_delta=false"))
    day(p, "20250804", m)
    assert p.rows(f"show tables in {{s}} like '{m}__cumulative'") == []  # switched off: dropped
    assert scanned_partitions(p, q.format("20250803")) == ["20250801", "20250802", "20250803"]
    assert scanned_partitions(p, q.format("20250801")) == ["20250801"]
    assert partitions_fetched(p, q.format("20250801")) == 1
    assert partitions_fetched(p, q.format("20250803")) == 2 + 2 * 3
    assert read(p, "dt = '20250803'", m=m) == [(1, "a3"), (2, "b2"), (3, "c"), (4, "d")]
    p.run_op("compact_chain", {"model": m, "partition": {"dt": "20250803"}})
    assert scanned_partitions(p, q.format("20250804")) == ["20250803", "20250804"]


def test_compaction_new_existing_overwrite_nothing(simple):
    p, m = simple, "t_compact"
    before = read(p, "dt = '20250803'", m=m)
    p.run_op("compact_chain", {"model": m, "partition": {"dt": "20250803"}})
    assert "compact_chain" in p.log_text() and "result: true" in p.log_text()
    assert p.partitions(f"{m}__snapshot") == ["dt=20250801", "dt=20250803"]
    assert p.rows(f"select id, v from {{s}}.{m}__snapshot where dt = '20250803'") == before
    assert read(p, "dt = '20250803'", m=m) == before
    assert p.partitions(f"{m}__delta") == ["dt=20250802", "dt=20250803"]  # deltas never removed
    # Existing partition without overwrite: nothing written, reported false.
    p.run_op("compact_chain", {"model": m, "partition": "dt=20250803"})
    assert "already has partition dt=20250803" in p.log_text() and "result: false" in p.log_text()
    # Nothing to compact.
    p.run_op("compact_chain", {"relation": f"{p.schema}.{m}", "partition": 'dt="20250809"'})
    assert "no data to compact" in p.log_text() and "result: false" in p.log_text()
    # Overwrite recomputes from the strictly earlier anchor plus deltas.
    p.spark.sql(
        f"INSERT OVERWRITE TABLE {p.schema}.{m}__snapshot PARTITION (dt='20250803') "
        "SELECT 99, 'corrupt'"
    )
    assert read(p, "dt = '20250803'", m=m) == [(99, "corrupt")]
    p.run_op("compact_chain", {"model": m, "partition": {"dt": "20250803"}, "overwrite": True})
    assert read(p, "dt = '20250803'", m=m) == before
    # Later deltas now anchor on the compacted day.
    day(p, "20250804", m)
    assert read(p, "dt = '20250804'", m=m) == [(1, "a3"), (2, "b2"), (3, "c4"), (4, "d")]


BUCKETED = """
{{ config(materialized='chain_incremental', partition_by=['dt'], primary_key=['id', 'dt'],
          clustered_by=['id'], buckets=2) }}
select id, v, dt from {{ target.schema }}.changes where dt = '{{ var("dt") }}'
"""


def test_compaction_of_a_bucketed_chain_writes_its_buckets(project):
    """A one-group compaction is written with a static partition spec: into a bucketed table
    too, and a recompaction replaces it with the same rows."""
    p = project
    p.table(
        "changes",
        "id int, v string, dt string",
        [(i, f"v{i}", "20250801") for i in range(1, 9)]
        + [(2, "x", "20250802"), (9, "n", "20250802"), (5, "y", "20250803")],
    )
    p.model("t", BUCKETED)
    for d in ("20250801", "20250802", "20250803"):
        day(p, d)
    before = p.full_state()
    expected = sorted([(i, f"v{i}") for i in (1, 3, 4, 6, 7, 8)] + [(2, "x"), (5, "y"), (9, "n")])
    assert before["dt=20250803"] == expected
    for overwrite in (False, True):
        p.run_op(
            "compact_chain", {"model": "t", "partition": {"dt": "20250803"}, "overwrite": overwrite}
        )
        assert p.partitions("t__snapshot") == ["dt=20250801", "dt=20250803"]
        assert p.rows("select id, v from {s}.t__snapshot where dt = '20250803'") == expected
        assert p.full_state() == before
    info: dict = {}  # the partition's own rows come first (then the table's Location)
    for r in p.spark.sql(
        f"DESCRIBE FORMATTED {p.schema}.t__snapshot PARTITION (dt = '20250803')"
    ).collect():
        info.setdefault(str(r[0]).strip(), str(r[1]).strip())
    assert info["Num Buckets"] == "2" and "_chain_v" in info["Location"]
    files = [
        f for f in os.listdir(info["Location"].removeprefix("file:")) if f.endswith(".parquet")
    ]
    assert files and all(re.search(r"_0000[01]\.c000", f) for f in files), files


def file_orders(p, table: str, where: str) -> dict[str, list[int]]:
    """{file: its ids in the order they are stored} for the partitions of `table` that
    `where` selects; a file small enough to be one split is read in order by one task."""
    out: dict[str, list[int]] = {}
    for f, i in p.spark.sql(
        f"SELECT input_file_name(), id FROM {p.schema}.{table} WHERE {where}"
    ).collect():
        out.setdefault(f, []).append(i)
    return out


def test_compaction_writes_each_snapshot_file_sorted_by_key(project):
    """The compacted snapshot is shuffled and sorted by key (benchmarks/README.md, "Compaction
    output layout"), whichever order its anchor's files hold: each group of a compaction
    covering every group (a dynamic write) and a compaction of one group (a static one)."""
    p = project
    first = [(i, f"v{i}", r, "20250801") for r in ("CN", "US") for i in range(40, 0, -1)]
    p.table(
        "changes",
        "id int, v string, region string, dt string",
        first
        + [(7, "x", "CN", "20250802"), (45, "n", "US", "20250802"), (3, "y", "US", "20250802")],
    )
    p.model("t", GROUPED)
    for d in ("20250801", "20250802"):
        day(p, d)
    anchor = file_orders(p, "t__snapshot", "dt = '20250801'")
    assert any(ids != sorted(ids) for ids in anchor.values()), anchor  # stored descending
    before = p.full_state(cols="id, v, region")
    p.run_op("compact_chain", {"model": "t", "partition": {"dt": "20250802"}})
    p.run_op(
        "compact_chain",
        {"model": "t", "partition": {"region": "CN", "dt": "20250802"}, "overwrite": True},
    )
    assert "result: true" in p.log_text()
    assert p.partitions("t__snapshot") == [
        "region=CN/dt=20250801",
        "region=CN/dt=20250802",
        "region=US/dt=20250801",
        "region=US/dt=20250802",
    ]
    assert p.full_state(cols="id, v, region") == before
    assert len(before["region=US/dt=20250802"]) == 41
    compacted = file_orders(p, "t__snapshot", "dt = '20250802'")
    assert sum(len(ids) for ids in compacted.values()) == 40 + 41
    assert all(ids == sorted(ids) for ids in compacted.values()), compacted


def test_a_bucketed_chain_stages_a_run_of_one_partition_in_bucket_files(project):
    """A run of one partition stages it in a bare directory, unless the table has buckets: the
    files published as the partition must be the bucket files a staging table lays out."""
    p = project
    rows = [(i, f"v{i}", "20250801") for i in range(1, 9)] + [(2, "x", "20250802")]
    p.table("changes", "id int, v string, dt string", rows + [(9, "n", "20250802")])
    p.model("t", BUCKETED.replace("buckets=2", "buckets=2, chain_partition={'dt': var('dt')}"))
    for d in ("20250801", "20250802"):
        day(p, d)
    expected = sorted([(i, f"v{i}") for i in (1, 3, 4, 5, 6, 7, 8)] + [(2, "x"), (9, "n")])
    assert read(p, "dt = '20250802'") == expected
    info: dict = {}  # the partition's own rows come first (then the table's Location)
    for r in p.spark.sql(
        f"DESCRIBE FORMATTED {p.schema}.t__delta PARTITION (dt = '20250802')"
    ).collect():
        info.setdefault(str(r[0]).strip(), str(r[1]).strip())
    assert "_chain_v" in info["Location"]
    files = [
        f for f in os.listdir(info["Location"].removeprefix("file:")) if f.endswith(".parquet")
    ]
    assert files and all(re.search(r"_0000[01]\.c000", f) for f in files), files
    # staged in a table (the cumulative delta's build alone writes a directory)
    assert re.search(r"INSERT OVERWRITE DIRECTORY '[^']*/t__delta/", p.log_text()) is None
    assert "CREATE TABLE" in p.log_text() and "t__chain_stage" in p.log_text()


def test_idempotent_rerun_and_delta_rewrite_invalidates_snapshot(simple):
    p, m = simple, "t_rerun"
    day(p, "20250803", m)
    assert p.rows(f"select id, v from {{s}}.{m}__delta where dt = '20250803'") == [(1, "a3")]
    assert read(p, "dt = '20250803'", m=m) == [(1, "a3"), (2, "b2"), (3, "c"), (4, "d")]
    p.run_op("compact_chain", {"model": m, "partition": {"dt": "20250803"}})
    p.run_op("compact_chain", {"model": m, "partition": {"dt": "20250802"}})
    # Backfill: rewrite delta 0802 with new content.
    p.spark.sql(f"INSERT INTO {p.schema}.changes_{m} VALUES (5, 'e', '20250802')")
    day(p, "20250802", m)
    assert p.partitions(f"{m}__snapshot") == ["dt=20250801", "dt=20250803"]  # 0802 invalidated
    assert read(p, "dt = '20250802'", m=m) == [(1, "a"), (2, "b2"), (3, "c"), (4, "d"), (5, "e")]
    p.run_op("chain_status", {"model": m})
    assert "dt=20250803  (delta dt=20250802 rewritten)" in p.log_text()
    p.run_op("compact_chain", {"model": m, "partition": {"dt": "20250803"}, "overwrite": True})
    assert (5, "e") in read(p, "dt = '20250803'", m=m)
    p.run_op("chain_status", {"model": m})
    assert "stale" not in p.log_text()


def test_group_partitions_and_empty_days(project):
    p = project
    p.table(
        "changes",
        "id int, v string, region string, dt string",
        [
            (1, "a", "CN", "20250801"),
            (2, "b", "US", "20250801"),
            (1, "a2", "CN", "20250802"),
            (3, "c", "EU", "20250803"),
            (2, "b3", "US", "20250803"),
        ],
    )
    p.model("t", GROUPED)
    for d in ("20250801", "20250802", "20250803", "20250804"):
        day(p, d)
    # Every known group gets a (possibly empty) delta each day: each day reads as a full day.
    assert p.partitions("t__delta") == [
        "region=CN/dt=20250802",
        "region=CN/dt=20250803",
        "region=CN/dt=20250804",
        "region=EU/dt=20250803",
        "region=EU/dt=20250804",
        "region=US/dt=20250802",
        "region=US/dt=20250803",
        "region=US/dt=20250804",
    ]
    full = "id, v, region"
    assert read(p, "dt = '20250802'", full) == [(1, "a2", "CN"), (2, "b", "US")]
    assert read(p, "dt = '20250804'", full) == [(1, "a2", "CN"), (2, "b3", "US"), (3, "c", "EU")]
    assert read(p, "dt = '20250804' and region = 'US'", full) == [(2, "b3", "US")]
    # Partial spec: compacts every group.
    p.run_op("compact_chain", {"model": "t", "partition": {"dt": "20250803"}})
    assert [x for x in p.partitions("t__snapshot") if "20250803" in x] == [
        "region=CN/dt=20250803",
        "region=EU/dt=20250803",
        "region=US/dt=20250803",
    ]
    assert read(p, "dt = '20250804'", full) == [(1, "a2", "CN"), (2, "b3", "US"), (3, "c", "EU")]
    # One group only.
    p.run_op("compact_chain", {"model": "t", "partition": {"region": "US", "dt": "20250804"}})
    assert [x for x in p.partitions("t__snapshot") if "20250804" in x] == ["region=US/dt=20250804"]
    assert p.rows("select id, v from {s}.t__snapshot where region = 'US' and dt = '20250804'") == [
        (2, "b3")
    ]
    assert read(p, "dt = '20250804'", full) == [(1, "a2", "CN"), (2, "b3", "US"), (3, "c", "EU")]
    p.run_op("chain_status", {"model": "t"})
    assert "region=CN" in p.log_text() and "chain length" in p.log_text()


def test_multi_key_hourly_chain(project):
    p = project
    p.table(
        "changes",
        "id int, v string, dt string, hour string",
        [
            (1, "a", "20250801", "22"),
            (2, "b", "20250801", "22"),
            (1, "a23", "20250801", "23"),
            (3, "c", "20250802", "00"),
        ],
    )
    p.model("t", HOURLY)
    for d, h in (("20250801", "22"), ("20250801", "23"), ("20250802", "00")):
        day(p, d, hour=h)
    assert read(p, "dt = '20250802' and hour = '00'") == [(1, "a23"), (2, "b"), (3, "c")]
    assert read(p, "dt = '20250801' and hour = '23'") == [(1, "a23"), (2, "b")]
    p.run_op("compact_chain", {"model": "t", "partition": 'dt="20250801",hour="23"'})
    assert p.partitions("t__snapshot") == ["dt=20250801/hour=22", "dt=20250801/hour=23"]
    assert read(p, "dt = '20250802' and hour = '00'") == [(1, "a23"), (2, "b"), (3, "c")]
    p.run_op("compact_chain", {"model": "t", "partition": {"dt": "20250801"}}, expect_ok=False)
    assert "more than one partition" in p.log_text()


def test_downstream_ref_dbt_test_and_chain_read(simple):
    p = simple
    p.model(
        "downstream",
        """
        select * from {{ chain_read(ref('t'), {'dt': '20250802'}) }}
        """,
    )
    p.file(
        "models/downstream.yml",
        """
        version: 2
        models:
          - name: t
            columns:
              - name: id
                data_tests:
                  - unique:
                      config: {where: "dt = '20250803'"}
                  - not_null
        """,
    )
    p.dbt("run", "--select", "downstream", vars={"dt": "20250803"})
    assert p.rows("select id, v, dt from {s}.downstream") == [
        (1, "a", "20250802"),
        (2, "b2", "20250802"),
        (3, "c", "20250802"),
        (4, "d", "20250802"),
    ]
    res = p.dbt("test", "--select", "t", vars={"dt": "20250803"})
    assert sorted(r.status for r in res.result.results) == ["pass", "pass"]


def test_full_refresh_rewrites_snapshot_and_is_incremental(project):
    p = project
    p.table("changes", "id int, v string, dt string", [(1, "a", "20250801"), (1, "b", "20250802")])
    p.model(
        "t",
        """
        {{ config(materialized='chain_incremental', partition_by=['dt'], primary_key=['id', 'dt']) }}
        select id, v || '{{ "-inc" if is_incremental() else "-full" }}' as v, dt
        from {{ target.schema }}.changes where dt = '{{ var("dt") }}'
        """,
    )
    day(p, "20250801")
    day(p, "20250802")
    assert read(p, "dt = '20250802'") == [(1, "b-inc")]
    p.dbt("run", "--full-refresh", vars={"dt": "20250802"})
    assert p.partitions("t__snapshot") == ["dt=20250802"] and p.partitions("t__delta") == []
    assert read(p, "dt = '20250802'") == [(1, "b-full")]


INVALID = [  # (config, the error its model must fail with)
    ("partition_by=['dt'], primary_key=['id']", "must contain every partition column"),
    ("primary_key=['id', 'dt']", "partition_by is required"),
    (
        "partition_by=['region', 'dt'], chain_partition_keys=['region'], primary_key=['id','region','dt']",
        "contiguous suffix",
    ),
    (
        "partition_by=['dt'], primary_key=['id','dt'], partition_expiration_time='30 d'",
        "partition_timestamp_pattern",
    ),
    (
        "partition_by=['dt'], primary_key=['id','dt'], merge_engine='first-row', sequence_field='v'",
        "first-row",
    ),
    (
        "partition_by=['dt'], primary_key=['id','dt'], merge_engine='aggregation', sequence_field='v', "
        "aggregate_functions={'v': 'max'}",
        "sequence_field",
    ),
    ("partition_by=['dt'], primary_key=['id','dt'], sequence_field='nope'", "'nope'"),
]


@pytest.fixture(scope="module")
def invalid_runs(spark, spark_root, tmp_path_factory):
    """One `dbt run` of a model per config of INVALID (model bad<i>): {model: its error}, and
    the tables of the schema after it."""
    with module_project(spark, spark_root, tmp_path_factory, "invalid") as p:
        p.table(
            "changes", "id int, v string, region string, dt string", [(1, "a", "CN", "20250801")]
        )
        for i, (config, _) in enumerate(INVALID):
            p.model(
                f"bad{i}",
                f"""
                {{{{ config(materialized='chain_incremental', {config}) }}}}
                select * from {{{{ target.schema }}}}.changes
                """,
            )
        messages = node_messages(p.dbt("run", expect_ok=False))
        yield messages, [r[1] for r in p.rows("show tables in {s}")]


@pytest.mark.parametrize("i", range(len(INVALID)), ids=[m for _, m in INVALID])
def test_invalid_configs_fail_before_writing(invalid_runs, i):
    messages, tables = invalid_runs
    model, message = f"bad{i}", INVALID[i][1]
    assert message in messages[model] and f"'{model}'" in messages[model]
    assert [t for t in tables if t.startswith(f"{model}__")] == []


def test_bad_rows_refused_and_nothing_written(simple):
    p = simple
    p.spark.sql(
        f"INSERT INTO {p.schema}.changes_t VALUES (null, 'x', '20250805'), "
        "(7, 'x', '20250806'), (7, 'y', '20250806')"
    )
    p.dbt("run", "--select", "t", vars={"dt": "20250805"}, expect_ok=False)
    assert "NULL in primary key column(s) ['id']" in p.log_text()
    p.dbt("run", "--select", "t", vars={"dt": "20250806"}, expect_ok=False)
    assert "2 rows for key (id=7, dt='20250806')" in p.log_text()
    assert p.partitions("t__delta") == ["dt=20250802", "dt=20250803"]


INT_DAYS = """
{{ config(materialized='chain_incremental', partition_by=['region', 'd'],
          chain_partition_keys=['d'], primary_key=['id', 'region', 'd'],
          chain_partition=var('spec')) }}
select id, v, region, d from {{ target.schema }}.changes where d = {{ var('spec')['d'] }}
{% if 'region' in var('spec') %} and region = '{{ var('spec')['region'] }}' {% endif %}
"""


def test_chain_partition_spelt_otherwise_than_spark_names_the_partition_is_refused(project):
    """On an int chain key chain_partition '02' lets the rows of day 2 through the typed
    check, but Spark names their partition d=2. Both stage layouts (a group key given or not)
    refuse the run with the partition named and write nothing; the rows are not lost to an
    empty partition '02' cast over them."""
    p = project
    p.table(
        "changes",
        "id int, v string, region string, d int",
        [(1, "a", "CN", 1), (2, "b", "US", 1), (1, "a2", "CN", 2), (3, "c", "US", 2)],
    )
    p.model("t", INT_DAYS)
    p.dbt("run", vars={"spec": {"d": "1"}})
    for spec in ({"d": "02"}, {"region": "CN", "d": "02"}):
        p.dbt("run", vars={"spec": spec}, expect_ok=False)
        assert "its rows are in partition region=CN/d=2, which chain_partition" in p.log_text()
        assert "nothing was written" in p.log_text()
        assert p.partitions("t__delta") == []
    p.dbt("run", vars={"spec": {"d": "2"}})
    assert p.partitions("t__delta") == ["region=CN/d=2", "region=US/d=2"]
    assert p.rows("select id, v, region from {s}.t where d = 2") == [
        (1, "a2", "CN"),
        (2, "b", "US"),
        (3, "c", "US"),
    ]
    # a day without rows is named from chain_partition alone: Spark is asked for the typed
    # value first, and '03' (which it holds as 3) is refused the same way
    for spec in ({"d": "03"}, {"region": "CN", "d": "03"}):
        p.dbt("run", vars={"spec": spec}, expect_ok=False)
        assert (
            f"chain_partition {spec} gives column 'd' (int) the value '03', which Spark holds "
            "as '3'; give chain_partition the value as SHOW PARTITIONS prints it; nothing was "
            "written"
        ) in p.log_text()
        assert p.partitions("t__delta") == ["region=CN/d=2", "region=US/d=2"]
    p.dbt("run", vars={"spec": {"d": "3"}})
    assert p.partitions("t__delta") == [
        "region=CN/d=2", "region=CN/d=3", "region=US/d=2", "region=US/d=3"
    ]  # fmt: skip
    assert p.rows("select id, v, region from {s}.t where d = 3") == [
        (1, "a2", "CN"),
        (2, "b", "US"),
        (3, "c", "US"),
    ]


def test_empty_run_writes_no_partition(project):
    """`dbt run --empty` (sources and refs give no rows) checks and creates the relations but
    writes nothing: on an existing chain it must not replace the day's deltas with
    chain_partition's empty "no changes" partitions (that would silently lose the day)."""
    p = project
    p.table(
        "changes",
        "id int, v string, region string, dt string",
        [(1, "a", "CN", "20250801"), (2, "b", "US", "20250801"), (1, "a2", "CN", "20250802")],
    )
    p.file(
        "models/sources.yml",
        f"""
        version: 2
        sources: [{{name: src, schema: {p.schema}, tables: [{{name: changes}}]}}]
        """,
    )
    p.model("t", GROUPED.replace("{{ target.schema }}.changes", "{{ source('src', 'changes') }}"))
    p.dbt("run", "--empty", vars={"dt": "20250801"})  # first run: empty relations, no partition
    assert p.partitions("t__snapshot") == [] and p.partitions("t__delta") == []
    assert p.rows("select count(*) from {s}.t") == [(0,)]
    p.dbt("run", "--full-refresh", vars={"dt": "20250801"})
    day(p, "20250802")
    before = p.full_state(cols="id, v, region")
    p.dbt("run", "--empty", vars={"dt": "20250802"})
    log = p.log_text()
    assert p.full_state(cols="id, v, region") == before
    assert read(p, "dt = '20250802'", "id, v, region") == [(1, "a2", "CN"), (2, "b", "US")]
    assert (
        "0 partition(s) with rows, 0 empty partition(s) to the delta branch (--empty or --sample: "
        "no empty partitions)" in log
    )
    # a new day under --empty gets no partition either: the day stays unwritten, not "no changes"
    p.dbt("run", "--empty", vars={"dt": "20250803"})
    assert p.partitions("t__delta") == ["region=CN/dt=20250802", "region=US/dt=20250802"]


def test_enforced_contract_is_checked_before_writing(simple):
    """A model contract (`contract: {enforced: true}`, often set project-wide) holds for chain
    models too: dbt's own column/type check runs before the run writes anything."""
    p, m = simple, "t_contract"
    p.model(m, simple_model(m, ", contract={'enforced': true}"))
    contract = """
        version: 2
        models:
          - name: t_contract
            columns:
              - {{name: id, data_type: int}}
              - {{name: v, data_type: {v}}}
              - {{name: dt, data_type: string}}
        """
    p.file("models/contract.yml", contract.format(v="string"))
    day(p, "20250804", m)
    assert p.partitions(f"{m}__delta") == ["dt=20250802", "dt=20250803", "dt=20250804"]
    p.file("models/contract.yml", contract.format(v="int"))
    p.spark.sql(f"INSERT INTO {p.schema}.changes_{m} VALUES (2, 'b5', '20250805')")
    p.dbt("run", "--select", m, vars={"dt": "20250805"}, expect_ok=False)
    log = p.log_text()
    assert "enforced contract" in log and "data type mismatch" in log, log[-3000:]
    assert p.partitions(f"{m}__delta") == ["dt=20250802", "dt=20250803", "dt=20250804"]
    assert read(p, "dt = '20250804'", m=m) == [(1, "a3"), (2, "b2"), (3, "c4"), (4, "d")]


TYPED = """
{{ config(materialized='chain_incremental', partition_by=['dt', 'hour'],
          primary_key=['id', 'dt', 'hour']) }}
select id, v, dt, hour from {{ target.schema }}.changes
where dt = date'{{ var("dt") }}' and hour = {{ var("hour") }}
"""


def stale_marks(p, m="t") -> dict[str, str]:
    """{stale snapshot: the rewritten delta}, as the chain keeps them (chain_status lists them)."""
    props = dict(r[:2] for r in p.rows(f"show tblproperties {{s}}.{m}__snapshot"))
    return stale_from_properties(props)


def test_date_and_int_chain_keys(project):
    """Chain keys typed date and int (not zero-padded strings): the chain orders hour 9 < 10 <
    11 by value, and every statement naming one partition (compaction's static write, the
    snapshot a rewritten delta invalidates, drop_chain_partition) takes the typed values."""
    p = project
    p.spark.sql(
        f"CREATE TABLE {p.schema}.changes (id int, v string, dt date, hour int) USING parquet"
    )
    p.spark.sql(f"""INSERT INTO {p.schema}.changes VALUES
        (1, 'a', date'2025-08-01', 9), (2, 'b', date'2025-08-01', 9),
        (1, 'a10', date'2025-08-01', 10), (3, 'c', date'2025-08-01', 11),
        (2, 'b2', date'2025-08-02', 0)""")
    p.model("t", TYPED)
    hours = (("2025-08-01", 9), ("2025-08-01", 10), ("2025-08-01", 11), ("2025-08-02", 0))
    for d, h in hours:
        p.dbt("run", vars={"dt": d, "hour": h})

    def at(d, h):
        return p.rows(f"select id, v from {{s}}.t where dt = date'{d}' and hour = {h}")

    assert p.partitions("t__snapshot") == ["dt=2025-08-01/hour=9"]
    assert [at(d, h) for d, h in hours] == [
        [(1, "a"), (2, "b")],
        [(1, "a10"), (2, "b")],
        [(1, "a10"), (2, "b"), (3, "c")],
        [(1, "a10"), (2, "b2"), (3, "c")],
    ]
    p.run_op("compact_chain", {"model": "t", "partition": {"dt": "2025-08-01", "hour": "10"}})
    p.run_op("compact_chain", {"model": "t", "partition": 'dt="2025-08-01",hour="11"'})
    assert p.partitions("t__snapshot") == [
        "dt=2025-08-01/hour=10",
        "dt=2025-08-01/hour=11",
        "dt=2025-08-01/hour=9",
    ]
    assert at("2025-08-01", 11) == [(1, "a10"), (2, "b"), (3, "c")]
    assert at("2025-08-02", 0) == [(1, "a10"), (2, "b2"), (3, "c")]
    # rewriting delta hour 10 drops snapshot hour 10 and leaves hour 11 stale
    p.spark.sql(f"INSERT INTO {p.schema}.changes VALUES (4, 'd', date'2025-08-01', 10)")
    p.dbt("run", vars={"dt": "2025-08-01", "hour": 10})
    assert p.partitions("t__snapshot") == ["dt=2025-08-01/hour=11", "dt=2025-08-01/hour=9"]
    assert at("2025-08-01", 10) == [(1, "a10"), (2, "b"), (4, "d")]
    # the marks chain_status lists (test_idempotent_rerun_and_delta_rewrite_invalidates_snapshot
    # reads them there), read from the snapshot branch's properties
    assert stale_marks(p) == {"dt=2025-08-01/hour=11": "dt=2025-08-01/hour=10"}
    # rewriting delta hour 11 drops the stale snapshot hour 11, and its mark with it
    p.dbt("run", vars={"dt": "2025-08-01", "hour": 11})
    assert p.partitions("t__snapshot") == ["dt=2025-08-01/hour=9"]
    assert stale_marks(p) == {}
    # an int hour given zero-padded (Paimon's string form) names the partition Spark calls 11;
    # the relation given with backticks, as Paimon's procedures take it
    p.run_op(
        "compact_chain",
        {
            "relation": f"`{p.schema}`.`t`",
            "partition": 'dt="2025-08-01",hour="011"',
            "overwrite": True,
        },
    )
    assert p.partitions("t__snapshot") == ["dt=2025-08-01/hour=11", "dt=2025-08-01/hour=9"]
    assert at("2025-08-02", 0) == [(1, "a10"), (2, "b2"), (3, "c"), (4, "d")]
    p.run_op(
        "drop_chain_partition", {"model": "t", "partition": {"dt": "2025-08-01", "HOUR": "011"}}
    )
    assert p.partitions("t__snapshot") == ["dt=2025-08-01/hour=9"]
    assert at("2025-08-02", 0) == [(1, "a10"), (2, "b2"), (3, "c"), (4, "d")]


def test_location_root_with_a_quote_and_a_space(project, tmp_path):
    """Both branches live below location_root, however its path is spelled; a delta run
    publishes below it too (its stage directory sits inside the delta branch)."""
    root = tmp_path / "my 'lake' root"
    project.table(
        "changes",
        "id int, v string, dt string",
        [(1, "a", "20250801"), (2, "b", "20250801"), (1, "a2", "20250802")],
    )
    project.model(
        "t",
        SIMPLE.replace(
            "primary_key=['id', 'dt']", f"primary_key=['id', 'dt'], location_root={str(root)!r}"
        ),
    )
    day(project, "20250801")
    day(project, "20250802")
    for branch in ("snapshot", "delta"):
        loc = {
            r[0]: r[1]
            for r in project.spark.sql(f"DESCRIBE FORMATTED {project.schema}.t__{branch}").collect()
        }["Location"]
        assert loc.endswith(f"/my 'lake' root/t__{branch}"), loc
    assert (root / "t__snapshot" / "dt=20250801").is_dir()
    assert any((root / "t__delta").rglob("dt=20250802"))
    assert read(project, "dt = '20250802'") == [(1, "a2"), (2, "b")]
