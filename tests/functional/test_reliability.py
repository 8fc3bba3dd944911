"""Reliability (docs/design.md#crash-safety-and-locking): crashes at chosen points, locks, bad input, schema evolution.

A failpoint (CHAINTABLE_FAILPOINT=<step>, safety.failpoint) stops an operation in the middle and
leaves the tables exactly as a killed process would: lock held, scratch tables and directories
left behind. Each test then reads every partition (each must read as before or as after, never
a mix), re-runs the same command and checks the final state equals a run that never crashed.
test_sigkill_* kills a real dbt process with SIGKILL.
"""

import os
import re
import subprocess
import sys
import textwrap

import pytest
from helpers import write_session_project

GROUPED = """
{{ config(materialized='chain_incremental', partition_by=['region', 'dt'],
          chain_partition_keys=['dt'], primary_key=['id', 'region', 'dt'],
          chain_partition={'dt': var('dt')}) }}
select id, v, region, dt from {{ target.schema }}.changes where dt = '{{ var("dt") }}'
"""
DAY2 = "20250802"
ROWS = [
    (1, "a", "CN", "20250801"),
    (2, "b", "US", "20250801"),
    (3, "c", "EU", "20250801"),
    (1, "a2", "CN", "20250802"),
    (2, "b2", "US", "20250802"),
    (3, "c2", "EU", "20250802"),
]


def full(p):
    return p.full_state()


def location(p, table, spec=""):
    rows = p.spark.sql(f"DESCRIBE FORMATTED {p.schema}.{table}{spec}").collect()
    return next(r[1] for r in rows if r[0] == "Location").replace("file:", "")


def orphan_files(p, table):
    """Data files under the table's directory that no partition references (garbage)."""
    referenced = set()
    for part in p.partitions(table):
        spec = ", ".join(f"{kv.split('=')[0]} = '{kv.split('=')[1]}'" for kv in part.split("/"))
        referenced.add(location(p, table, f" PARTITION ({spec})").rstrip("/"))
    out = []
    for root, _, files in os.walk(location(p, table)):
        for f in files:
            if f.endswith(".parquet") and root.rstrip("/") not in referenced:
                out.append(os.path.join(root, f))
    return out


def scratch_tables(p):
    return sorted(
        r[1] for r in p.spark.sql(f"SHOW TABLES IN {p.schema} LIKE 't__chain_*'").collect()
    )


@pytest.fixture
def grouped(project):
    p = project
    p.table("changes", "id int, v string, region string, dt string", ROWS)
    p.model("t", GROUPED)
    p.dbt("run", vars={"dt": "20250801"})
    p.dbt("run", vars={"dt": "20250802"})
    return p


def rewrite_day2(p):
    p.spark.sql(
        f"INSERT OVERWRITE TABLE {p.schema}.changes SELECT * FROM VALUES "
        "(1, 'a', 'CN', '20250801'), (2, 'b', 'US', '20250801'), (3, 'c', 'EU', '20250801'), "
        "(1, 'A2', 'CN', '20250802'), (2, 'B2', 'US', '20250802'), (3, 'C2', 'EU', '20250802') "
        "AS v(id, v, region, dt)"
    )


def test_crash_mid_publish_each_partition_before_or_after_then_rerun_completes(
    grouped, monkeypatch
):
    p = grouped
    before = full(p)
    rewrite_day2(p)
    monkeypatch.setenv("CHAINTABLE_FAILPOINT", "publish.first")
    p.dbt("run", vars={"dt": "20250802"}, expect_ok=False)
    assert "failpoint publish.first" in p.log_text()
    monkeypatch.delenv("CHAINTABLE_FAILPOINT")
    assert "t__chain_lock" in scratch_tables(p)  # as a killed process leaves it
    mid = full(p)
    after_rows = {
        "region=CN/dt=20250802": [(1, "A2")],
        "region=US/dt=20250802": [(2, "B2")],
        "region=EU/dt=20250802": [(3, "C2")],
    }
    switched = [k for k in after_rows if mid[k] == after_rows[k]]
    assert len(switched) == 1  # the crash came after the first partition's switch
    for k, v in mid.items():
        assert v in (before[k], after_rows.get(k)), k
    p.dbt("run", vars={"dt": "20250802"})
    assert "breaking the lock" in p.log_text()
    assert full(p) == {**before, **after_rows}
    assert scratch_tables(p) == []
    assert orphan_files(p, "t__delta") == []


@pytest.mark.parametrize("point", ["run.staged", "publish.done", "run.view"])
def test_crash_at_each_step_of_a_new_day(grouped, monkeypatch, point):
    p = grouped
    p.spark.sql(
        f"INSERT INTO {p.schema}.changes VALUES (1, 'a3', 'CN', '20250803'), "
        "(4, 'd', 'US', '20250803')"
    )
    before = full(p)
    monkeypatch.setenv("CHAINTABLE_FAILPOINT", point)
    p.dbt("run", vars={"dt": "20250803"}, expect_ok=False)
    monkeypatch.delenv("CHAINTABLE_FAILPOINT")
    mid = full(p)
    for k in before:
        assert mid[k] == before[k], k  # existing days are untouched at every step
    day3 = {k: v for k, v in mid.items() if k.endswith("20250803")}
    expected3 = {
        "region=CN/dt=20250803": [(1, "a3")],
        "region=US/dt=20250803": [(2, "b2"), (4, "d")],
        "region=EU/dt=20250803": [(3, "c2")],
    }
    # a new day reads as before (no rows: the view does not know it yet) or complete
    assert all(v in ([], expected3[k]) for k, v in day3.items()), day3
    p.dbt("run", vars={"dt": "20250803"})
    assert full(p) == {**before, **expected3}
    assert scratch_tables(p) == []
    assert orphan_files(p, "t__delta") == []


def crash(p, monkeypatch, point, *args, **kwargs):
    """The dbt command stopped at failpoint `point` (the tables left as a killed process
    leaves them)."""
    monkeypatch.setenv("CHAINTABLE_FAILPOINT", point)
    try:
        p.dbt(*args, expect_ok=False, **kwargs)
    finally:
        monkeypatch.delenv("CHAINTABLE_FAILPOINT")
    assert f"failpoint {point}" in p.log_text()


def test_crash_rewriting_the_one_partition_of_a_stage_without_partitions(project, monkeypatch):
    """chain_partition names every partition column: the run stages its one partition in a
    bare directory, which the lock names, and publishes it as that partition. A crash before
    the switch (run.staged) leaves the day as before and the rerun deletes the unpublished
    directory; a crash after it (publish.first) leaves the day as after, and the rerun keeps
    the published directory and deletes the one switched away from (which the lock recorded
    before the switch). Day 2 is written again for each."""
    p = project
    rows = [(1, "a", "20250801"), (2, "b", "20250801"), (1, "a2", DAY2)]
    p.table("changes", "id int, v string, dt string", rows)
    p.model(
        "t",
        """
        {{ config(materialized='chain_incremental', partition_by=['dt'], primary_key=['id', 'dt'],
                  chain_partition_keys=['dt'], chain_partition={'dt': var('dt')}) }}
        select id, v, dt from {{ target.schema }}.changes where dt = '{{ var("dt") }}'
        """,
    )
    p.dbt("run", vars={"dt": "20250801"})
    p.dbt("run", vars={"dt": DAY2})
    assert full(p)["dt=20250802"] == [(1, "a2"), (2, "b")]
    for n, point in enumerate(["run.staged", "publish.first"]):
        before = full(p)
        p.spark.sql(
            f"INSERT OVERWRITE TABLE {p.schema}.changes SELECT * FROM VALUES (1, 'a', '20250801'), "
            f"(2, 'b', '20250801'), (2, 'B{n}', '20250802') AS v(id, v, dt)"
        )
        after = {**before, "dt=20250802": [(1, "a"), (2, f"B{n}")]}
        old_dir = location(p, "t__delta", " PARTITION (dt = '20250802')").rstrip("/")
        crash(p, monkeypatch, point, "run", vars={"dt": DAY2})
        assert scratch_tables(p) == ["t__chain_lock"]  # no staging table
        # what the rerun must delete: the unpublished directory, or the one switched away from
        left = {os.path.dirname(f) for f in orphan_files(p, "t__delta")}
        now = location(p, "t__delta", " PARTITION (dt = '20250802')").rstrip("/")
        assert len(left) == 1
        if point == "run.staged":
            assert now == old_dir and left != {old_dir}
        else:
            assert left == {old_dir}
        assert full(p) == (before if point == "run.staged" else after)
        p.dbt("run", vars={"dt": DAY2})
        assert "breaking the lock" in p.log_text()
        assert full(p) == after
        assert scratch_tables(p) == []
        assert orphan_files(p, "t__delta") == []
        delta_dir = location(p, "t__delta", " PARTITION (dt = '20250802')")
        assert "/_chain_v/" in delta_dir and not delta_dir.rstrip("/").endswith("dt=20250802")


@pytest.mark.parametrize(
    "point", ["cumulative.unserved", "publish.first", "publish.done", "cumulative.built"]
)
def test_crash_while_a_rewrite_rebuilds_the_cumulative_delta(grouped, monkeypatch, point):
    """Day 2 written again while day 3 is read from the cumulative delta: at every step each
    day reads as before or as after (never day 3 from a cumulative delta of the old day 2),
    and the rerun serves both days from the cumulative delta again."""
    p = grouped
    p.spark.sql(f"INSERT INTO {p.schema}.changes VALUES (4, 'd', 'US', '20250803')")
    p.dbt("run", vars={"dt": "20250803"})
    p.run_op("chain_status", {"model": "t"})
    served = r"dt=2025080[23] +dt=20250801 +\d +cumulative delta"
    assert len(re.findall(served, p.log_text())) == 6  # 3 regions x days 2 and 3
    before = full(p)
    rewrite_day2(p)
    after = {
        **before,
        "region=CN/dt=20250802": [(1, "A2")],
        "region=US/dt=20250802": [(2, "B2")],
        "region=EU/dt=20250802": [(3, "C2")],
        "region=CN/dt=20250803": [(1, "A2")],
        "region=US/dt=20250803": [(2, "B2"), (4, "d")],
        "region=EU/dt=20250803": [(3, "C2")],
    }
    monkeypatch.setenv("CHAINTABLE_FAILPOINT", point)
    p.dbt("run", vars={"dt": "20250802"}, expect_ok=False)
    assert f"failpoint {point}" in p.log_text()
    monkeypatch.delenv("CHAINTABLE_FAILPOINT")
    mid = full(p)
    for k, v in mid.items():
        assert v in (before[k], after[k]), (k, v)
    for region in ("CN", "US", "EU"):  # a day 3 never mixes the new day 2 with the old one
        day2, day3 = mid[f"region={region}/dt=20250802"], mid[f"region={region}/dt=20250803"]
        assert (day2 == before[f"region={region}/dt=20250802"]) == (
            day3 == before[f"region={region}/dt=20250803"]
        ), region
    p.dbt("run", vars={"dt": "20250802"})
    assert full(p) == after
    p.run_op("chain_status", {"model": "t"})
    assert len(re.findall(served, p.log_text())) == 6
    assert scratch_tables(p) == []


@pytest.mark.parametrize("point, switched", [("publish.first", 1), ("publish.done", 3)])
def test_crash_rewriting_a_compacted_day_then_another_command_recovers(
    grouped, monkeypatch, point, switched
):
    """A rewritten delta P invalidates snapshot P. A crash after the publish, before that
    snapshot is dropped, must not leave it in front of the new delta: whoever takes the lock
    next (here the next day's run, not a rerun) drops it, for each group whose delta the run
    published (publish.first: the first of three; the other two keep snapshot and delta)."""
    p = grouped
    p.run_op("compact_chain", {"model": "t", "partition": {"dt": "20250802"}})
    before = full(p)
    rewrite_day2(p)
    p.spark.sql(f"INSERT INTO {p.schema}.changes VALUES (4, 'd', 'US', '20250803')")
    monkeypatch.setenv("CHAINTABLE_FAILPOINT", point)
    p.dbt("run", vars={"dt": "20250802"}, expect_ok=False)
    monkeypatch.delenv("CHAINTABLE_FAILPOINT")
    p.dbt("run", vars={"dt": "20250803"})
    assert "breaking the lock" in p.log_text()
    assert "which the unfinished run's rewritten delta partition(s) invalidate" in p.log_text()
    new = {"CN": [(1, "A2")], "EU": [(3, "C2")], "US": [(2, "B2")]}
    done = sorted(new)[:switched]  # published in partition order
    day2 = {
        f"region={r}/dt=20250802": rows if r in done else before[f"region={r}/dt=20250802"]
        for r, rows in new.items()
    }
    day3 = {k.replace("20250802", "20250803"): v for k, v in day2.items()}
    day3["region=US/dt=20250803"] = day3["region=US/dt=20250803"] + [(4, "d")]
    assert full(p) == {**before, **day2, **day3}
    snapshots = [f"region={r}/dt=20250802" for r in sorted(new)]
    assert [s in p.partitions("t__snapshot") for s in snapshots] == [
        r not in done for r in sorted(new)
    ]
    assert set(scratch_tables(p)) <= {"t__chain_map"}  # the view's mapping table stays


@pytest.mark.parametrize("point", ["compact.staged", "publish.first", "publish.done"])
def test_crash_during_compaction(grouped, monkeypatch, point):
    p = grouped
    before = full(p)
    overwrite = point == "publish.first"  # a switch of existing partitions: recompaction
    if overwrite:
        p.run_op("compact_chain", {"model": "t", "partition": {"dt": "20250802"}})
    monkeypatch.setenv("CHAINTABLE_FAILPOINT", point)
    p.run_op(
        "compact_chain",
        {"model": "t", "partition": {"dt": "20250802"}, "overwrite": overwrite},
        expect_ok=False,
    )
    monkeypatch.delenv("CHAINTABLE_FAILPOINT")
    assert full(p) == before  # merged reads equal the snapshot being published, at every step
    p.run_op("compact_chain", {"model": "t", "partition": {"dt": "20250802"}, "overwrite": True})
    assert "breaking the lock" in p.log_text()
    assert full(p) == before
    assert sorted(p.partitions("t__snapshot")) == sorted(
        [f"region={r}/dt={d}" for r in ("CN", "EU", "US") for d in ("20250801", "20250802")]
    )
    assert scratch_tables(p) == []
    assert orphan_files(p, "t__snapshot") == []
    # idempotent: compacting again with overwrite gives the same state
    p.run_op("compact_chain", {"model": "t", "partition": {"dt": "20250802"}, "overwrite": True})
    assert full(p) == before and orphan_files(p, "t__snapshot") == []


def test_crash_during_expiration(project, monkeypatch):
    p = project
    p.table(
        "changes",
        "id int, v string, dt string",
        [
            (1, "a", "20250101"),
            (1, "b", "20250110"),
            (2, "c", "20250201"),
            (2, "d", "20250210"),
            (3, "e", "20250301"),
            (3, "f", "20250315"),
        ],
    )
    p.model(
        "t",
        """
        {{ config(materialized='chain_incremental', partition_by=['dt'], primary_key=['id', 'dt'],
                  partition_timestamp_pattern='$dt', partition_timestamp_formatter='yyyyMMdd',
                  partition_expiration_time='30 d', partition_expiration_check_interval='1000 d') }}
        select id, v, dt from {{ target.schema }}.changes where dt = '{{ var("dt") }}'
        """,
    )
    for d in ("20250101", "20250110", "20250201", "20250210", "20250301", "20250315"):
        p.dbt("run", vars={"dt": d})
        if d in ("20250201", "20250301"):
            p.run_op("compact_chain", {"model": "t", "partition": {"dt": d}})
    before = full(p)
    monkeypatch.setenv("CHAINTABLE_FAILPOINT", "expire.deltas")
    p.run_op("expire_chain", {"model": "t", "now": "2025-04-20 00:00:00"}, expect_ok=False)
    monkeypatch.delenv("CHAINTABLE_FAILPOINT")
    # deltas of the expired segments are gone, their snapshots still there; the view already
    # reads the state after expiration, every kept partition as before
    assert p.partitions("t__delta") == ["dt=20250301", "dt=20250315"]
    assert len(p.partitions("t__snapshot")) == 3
    kept = ["dt=20250301", "dt=20250315"]
    assert {k: v for k, v in full(p).items() if k in kept} == {k: before[k] for k in kept}
    # the view stopped reading the expired days before anything was dropped: the snapshots
    # still in the table read as gone too, so no query planned later reads files deleted after
    for gone in ("20250101", "20250110", "20250201", "20250210"):
        assert p.rows(f"select id, v from {{s}}.t where dt = '{gone}'") == []
    p.run_op("expire_chain", {"model": "t", "now": "2025-04-20 00:00:00"})
    assert p.partitions("t__snapshot") == ["dt=20250301"]
    assert full(p) == {k: before[k] for k in kept}
    # expiration kept 0301 as the oldest full state: a delta at or before it is refused
    p.spark.sql(f"INSERT INTO {p.schema}.changes VALUES (9, 'x', '20250301')")
    p.dbt("run", vars={"dt": "20250301"}, expect_ok=False)
    assert "dt=20250301 is at or before the oldest snapshot that expiration kept" in p.log_text()
    assert full(p) == {k: before[k] for k in kept}
    # refused with a new column and another option: the branches keep their columns and options
    model = p.root / "models" / "t.sql"
    model.write_text(
        model.read_text()
        .replace(
            "check_interval='1000 d'",
            "check_interval='1000 d', on_schema_change='append_new_columns', partition_expiration_max_num=3",
        )
        .replace("select id, v, dt", "select id, v, 'x' as w, dt")
    )
    props = {b: p.rows(f"show tblproperties {{s}}.t__{b}") for b in ("snapshot", "delta")}
    p.dbt("run", vars={"dt": "20250301"}, expect_ok=False)
    assert "dt=20250301 is at or before the oldest snapshot that expiration kept" in p.log_text()
    for b in ("snapshot", "delta"):
        assert p.spark.table(f"{p.schema}.t__{b}").columns == ["id", "v", "dt"]
        assert p.rows(f"show tblproperties {{s}}.t__{b}") == props[b]
    assert full(p) == {k: before[k] for k in kept}
    # a day without rows there: chain_partition's empty delta would drop snapshot 0301, the
    # only record of the history before it, so none is written
    model.write_text(
        model.read_text()
        .replace("'x' as w, ", "")
        .replace("max_num=3", "max_num=3, chain_partition={'dt': var('dt')}")
        .replace("""where dt = '{{ var("dt") }}'""", """where dt = '{{ var("dt") }}' and id < 0""")
    )
    p.dbt("run", vars={"dt": "20250301"})
    assert (
        "no empty delta partition for ['dt=20250301']: at or before the oldest snapshot that "
        "expiration kept in the group" in p.log_text()
    )
    assert p.partitions("t__snapshot") == ["dt=20250301"]
    assert p.partitions("t__delta") == ["dt=20250301", "dt=20250315"]
    assert full(p) == {k: before[k] for k in kept}


def test_a_live_writer_holds_the_lock(grouped):
    p = grouped
    before = full(p)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        import socket

        owner = f"{socket.gethostname()}:{holder.pid}:other-invocation"
        p.spark.sql(
            f"CREATE VIEW {p.schema}.t__chain_lock TBLPROPERTIES ("
            f"'chaintable.lock.owner' = '{owner}', "
            "'chaintable.lock.since' = '2999-01-01 00:00:00', "
            "'chaintable.lock.operation' = 'run of model \\'t\\'') AS SELECT 1 AS locked"
        )
        rewrite_day2(p)
        p.dbt("run", vars={"dt": "20250802"}, expect_ok=False)
        assert f"is locked: run of model 't' by process {holder.pid}" in p.log_text()
        p.run_op("compact_chain", {"model": "t", "partition": {"dt": "20250802"}}, expect_ok=False)
        assert "is locked" in p.log_text()
        assert full(p) == before and p.partitions("t__snapshot")[0].endswith("20250801")
    finally:
        holder.kill()
        holder.wait()
    p.dbt("run", vars={"dt": "20250802"})  # the holder has exited: its lock is broken
    assert f"process {holder.pid} on" in p.log_text() and "has exited" in p.log_text()
    assert full(p)["region=CN/dt=20250802"] == [(1, "A2")]


def test_bad_partition_value_and_schema_change_refused(project):
    p = project
    p.table(
        "changes", "id int, v string, dt string", [(1, "a", "20250801"), (2, "b", "2025-08-02")]
    )
    p.model(
        "t",
        """
        {{ config(materialized='chain_incremental', partition_by=['dt'], primary_key=['id', 'dt'],
                  partition_timestamp_pattern='$dt', partition_timestamp_formatter='yyyyMMdd',
                  on_schema_change=var('osc', 'fail')) }}
        select id, v, dt {{ var('extra', '') }} from {{ target.schema }}.changes
        where dt = '{{ var("dt") }}'
        """,
    )
    p.dbt("run", vars={"dt": "20250801"})
    p.dbt("run", vars={"dt": "2025-08-02"}, expect_ok=False)
    assert "partition dt=2025-08-02" in p.log_text() and "yyyyMMdd" in p.log_text()
    assert p.partitions("t__delta") == []
    p.spark.sql(f"INSERT INTO {p.schema}.changes VALUES (3, 'c', '20250803')")
    p.dbt("run", vars={"dt": "20250803", "extra": ", v as w"}, expect_ok=False)
    assert "added ['w']" in p.log_text() and "on_schema_change=fail" in p.log_text()
    assert p.partitions("t__delta") == []
    # append_new_columns: both branches and the view gain the column; old days read null
    p.dbt("run", vars={"dt": "20250803", "extra": ", upper(v) as w", "osc": "append_new_columns"})
    assert p.rows("select id, v, w from {s}.t where dt = '20250803'") == [
        (1, "a", None),
        (3, "c", "C"),
    ]
    assert p.rows("select id, w from {s}.t where dt = '20250801'") == [(1, None)]
    assert [c.name for c in p.spark.table(f"{p.schema}.t__snapshot").schema][-2:] == ["w", "dt"]


def test_full_refresh_false_refuses_and_says_what_it_would_drop(grouped):
    p = grouped
    p.model("t", GROUPED.replace("chain_partition=", "full_refresh=false, chain_partition="))
    before = full(p)
    p.dbt("run", "--full-refresh", vars={"dt": "20250802"})
    assert (
        "full_refresh is false in its config, so --full-refresh is ignored; it would have "
        "dropped 3 snapshot and 3 delta partitions" in p.log_text()
    )
    assert full(p) == before


SIGKILL_SCRIPT = """
import json, os, sys
from dbt.cli.main import dbtRunner
proj, step = sys.argv[1], sys.argv[2]
args = ["--project-dir", proj, "--profiles-dir", proj]
def run(*a, **vars):
    res = dbtRunner().invoke(list(a) + args + ["--vars", json.dumps(vars)])
    return res.success
# dbt's multiprocessing context is 'spawn': a child it starts imports this script again
if __name__ == "__main__":
    if step == "crash":
        if not (run("run", dt="20250801") and run("run", dt="20250802")):
            sys.exit(1)
        # day 2 differs now, so the rerun's effect is visible; its run is killed mid-publish
        model = os.path.join(proj, "models", "t.sql")
        with open(model) as f:
            text = f.read().replace("'a2'", "'A2'").replace("'b2'", "'B2'")
        with open(model, "w") as f:
            f.write(text)
        os.environ["CHAINTABLE_FAILPOINT"] = "publish.first:kill"
        run("run", dt="20250802")
        sys.exit(3)  # not reached: the failpoint SIGKILLs this process
    if step == "rerun":
        ok = run("run", dt="20250802")
        ok = ok and run("run-operation", "dump")
        sys.exit(0 if ok else 1)
"""


def test_sigkill_mid_publish_then_rerun(tmp_path):
    """A real crash: a dbt process (its own embedded Spark and metastore) SIGKILLed between
    two partition switches; another process re-runs the day and gets the full result."""
    root = tmp_path
    params = {
        "spark.sql.warehouse.dir": str(root / "wh"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'ms'};create=true",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
    }
    model = textwrap.dedent("""
        {{ config(materialized='chain_incremental', partition_by=['region', 'dt'],
                  chain_partition_keys=['dt'], primary_key=['id', 'region', 'dt']) }}
        select * from values (1, 'a', 'CN', '20250801'), (2, 'b', 'US', '20250801'),
            (1, 'a2', 'CN', '20250802'), (2, 'b2', 'US', '20250802') as s(id, v, region, dt)
        where dt = '{{ var("dt") }}'
        """)
    proj = write_session_project(root, params, model)
    (proj / "macros" / "dump.sql").write_text(
        textwrap.dedent("""
        {% macro dump() %}
          {% set rows = run_query("select concat_ws('|', region, dt, cast(id as string), v) from "
                                  ~ target.schema ~ ".t order by 1") %}
          {% for r in rows.rows %}{{ log("ROW " ~ r[0], info=True) }}{% endfor %}
          {% set left = run_query("show tables in " ~ target.schema ~ " like 't__chain_*'") %}
          {{ log("SCRATCH " ~ (left.rows | length), info=True) }}
        {% endmacro %}
        """)
    )
    script = root / "k.py"
    script.write_text(SIGKILL_SCRIPT)
    env = {**os.environ, "DERBY_SYSTEM_HOME": str(root), "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("CHAINTABLE_FAILPOINT", None)

    def step(name):
        return subprocess.run(
            [sys.executable, str(script), str(proj), name],
            env=env,
            cwd=root,
            capture_output=True,
            text=True,
            timeout=600,
        )

    # days 1 and 2, then day 2 changed and run again, killed mid-publish: one process (a
    # process of its own for the days before the crash proves nothing more)
    crashed = step("crash")
    assert crashed.returncode == -9, crashed.stdout[-3000:]
    out = step("rerun")
    assert out.returncode == 0, out.stdout[-3000:]
    assert "breaking the lock" in out.stdout
    rows = [line.split("ROW ", 1)[1] for line in out.stdout.splitlines() if " ROW " in line]
    assert rows == ["CN|20250801|1|a", "CN|20250802|1|A2", "US|20250801|2|b", "US|20250802|2|B2"]
    assert "SCRATCH 0" in out.stdout
