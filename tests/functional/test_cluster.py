"""Beyond one machine: the same project on a Spark Thrift Server and a standalone cluster,
started from the pyspark wheel on 127.0.0.1 by servers.py and stopped by PID (the session
method on a Spark Connect server: test_shared_server.py, under its reader sessions).

The Thrift Server runs with ANSI mode on (Spark's default there); the in-process session method
runs with ANSI off (dbt-spark forces it). The chain history built on the server must read, every
partition, the rows the same history reads in a session (FULL_STATE), so both ANSI settings
give one answer.
"""

import os
import re
import subprocess
import sys
import textwrap
import uuid

import servers
from helpers import (
    CHANGES,
    CHILD_JVM_OPTS,
    EXPECTED_0803,
    EXPECTED_ROWS,
    MODEL,
    ThriftProject,
    normalized,
    row_lines,
    write_session_project,
)

from dbt.adapters.chaintable.chain.catalog import READER_GRACE_ENV

ONE_GROUP = """
{{ config(materialized='chain_incremental', partition_by=['dt'], primary_key=['id', 'dt'],
          sequence_field='seq', rowkind_field='op', chain_partition={'dt': var('dt')}) }}
select id, amount, note, op, seq, region, dt from {{ target.schema }}.changes
where dt = '{{ var("dt") }}' and region = 'CN'
"""
DOWNSTREAM = """
{{ config(materialized='table') }}
select region, count(*) as n, sum(amount) as total
from {{ chain_read(ref('t'), {'dt': '20250803'}) }} s group by region
"""
SCHEMA_YML = """
version: 2
models:
  - name: t
    columns:
      - name: id
        tests:
          - not_null
          - unique:
              config:
                where: "dt = '20250803' and region = 'CN'"
"""


# chain_status, expire_chain's dry run and a drop the guard refuses, in one run-operation: the
# refusal raises, so it comes last and the operation fails after logging the other two
CHECKS = """
{% macro status_plan_and_refused_drop() %}
  {% do chain_status(model='t') %}
  {% do expire_chain(model='t', now='2035-08-20 00:00:00', dry_run=true) %}
  {% do drop_chain_partition(model='t', partition='region=US,dt=20250801') %}
{% endmacro %}
"""


def build_history(p, create_source):
    """The chain's days, a compaction, the downstream model and the model's tests (one `dbt
    build` for day 4: t, its tests, then by_region); returns the log of CHECKS."""
    create_source(f"CREATE TABLE {p.schema}.changes USING parquet AS {CHANGES}")
    p.model("t", MODEL)
    p.model("by_region", DOWNSTREAM)
    p.file("models/schema.yml", SCHEMA_YML)
    p.file("macros/checks.sql", CHECKS)
    for d in ("20250801", "20250802", "20250803"):
        p.dbt("run", "--select", "t", vars={"dt": d})
    p.run_op("compact_chain", {"model": "t", "partition": {"dt": "20250802"}})
    assert "(result: true)" in p.log_text()
    res = p.dbt("build", vars={"dt": "20250804"})
    built = sorted((r.node.name[:9], str(r.status)) for r in res.result)
    assert built == [("by_region", "success"), ("not_null_", "pass"), ("t", "success")] + [
        ("unique_t_", "pass")
    ]
    p.dbt("run-operation", "status_plan_and_refused_drop", expect_ok=False)
    assert "refusing to drop snapshot" in p.log_text()
    status = next(m for m in p.logs if m.startswith("chain_status "))
    return status, "\n".join(m for m in p.logs if m != status)


def state_of(p):
    return {k: normalized(v) for k, v in p.full_state(cols="region, id, amount, note").items()}


# every partition's rows (region, id, amount, note) after build_history, as a session (ANSI off,
# dbt-spark's setting) reads them: the same history built in a session gave exactly these (and
# test_standalone_cluster_session_mode reads EXPECTED_ROWS of it in session mode on a cluster)
FULL_STATE = {
    "region=CN/dt=20250801": [("CN", "1", "10.50", "a"), ("CN", "2", "20.00", None)],
    "region=CN/dt=20250802": [("CN", "1", "11.00", "a2")],
    "region=CN/dt=20250803": [("CN", "1", "11.00", "a2")],
    "region=CN/dt=20250804": [("CN", "1", "11.00", "a2")],
    "region=EU/dt=20250803": [("EU", "5", "2.50", "e")],
    "region=EU/dt=20250804": [("EU", "5", "2.50", "e")],
    "region=US/dt=20250801": [("US", "3", "5.25", "c")],
    "region=US/dt=20250802": [("US", "3", "5.25", "c"), ("US", "4", "1.00", "new")],
    "region=US/dt=20250803": [("US", "3", "6.00", "c3"), ("US", "4", "1.00", "new")],
    "region=US/dt=20250804": [("US", "3", "6.00", "c3")],
}
SNAPSHOTS = [f"region={r}/dt={d}" for r in ("CN", "US") for d in ("20250801", "20250802")]


def test_thrift_gives_the_same_rows_as_session(thrift_server, tmp_path, monkeypatch):
    """The history of build_history through a Thrift Server (ANSI on) reads, partition by
    partition, as it reads in a session (FULL_STATE), before and after an expiration and a
    compaction that leaves a delta-only day behind the newest snapshot."""
    # no reader of another session here: deletions need not wait the default 15 s for one
    # (tests/functional/test_shared_server.py tests the grace with readers)
    monkeypatch.setenv(READER_GRACE_ENV, "1")
    remote = ThriftProject(tmp_path / "thrift_proj", thrift_server, "r_" + uuid.uuid4().hex[:8])
    remote.sql(f"CREATE DATABASE {remote.schema}")
    try:
        status_r, dry_r = build_history(remote, remote.sql)
        full_r = state_of(remote)
        assert full_r == FULL_STATE
        assert sorted(
            full_r["region=CN/dt=20250803"]
            + full_r["region=US/dt=20250803"]
            + full_r["region=EU/dt=20250803"]
        ) == sorted((r, str(i), a, n) for r, i, a, n in EXPECTED_0803)
        assert normalized(remote.rows("select * from {s}.by_region")) == [
            ("CN", "1", "11.00"),
            ("EU", "1", "2.50"),
            ("US", "2", "7.00"),
        ]
        assert remote.partitions("t__snapshot") == SNAPSHOTS
        assert "region=CN  2" in status_r and "dt=20250802" in status_r
        assert "drop snapshot region=CN/dt=20250801" in dry_r
        # expiration for real (the drop guard refused in build_history), reads unchanged
        remote.run_op("expire_chain", {"model": "t", "now": "2035-08-20 00:00:00"})
        after_r = state_of(remote)
        assert after_r == {k: v for k, v in FULL_STATE.items() if k in after_r}
        assert "region=CN/dt=20250801" not in after_r
        assert [r for r in remote.sql(f"SHOW TABLES IN {remote.schema}") if "chain_" in r[1]] == []
        # compacting 0804 leaves 0803 a delta-only day behind the newest snapshot: the refresh
        # creates the mapping table and reads 0803 through it; every day reads as before
        remote.run_op("compact_chain", {"model": "t", "partition": {"dt": "20250804"}})
        assert "(result: true)" in remote.log_text()
        assert len(remote.partitions("t__chain_map")) == 1
        assert "__chain_map" in remote.sql(f"SHOW CREATE TABLE {remote.schema}.t")[0][0]
        assert state_of(remote) == after_r
    finally:
        remote.sql(f"DROP DATABASE IF EXISTS {remote.schema} CASCADE")
        remote.conn.close()


def test_thrift_refuses_bad_rows_and_keeps_the_chain(thrift_server, tmp_path):
    p = ThriftProject(tmp_path / "bad", thrift_server, "b_" + uuid.uuid4().hex[:8])
    p.sql(f"CREATE DATABASE {p.schema}")
    try:
        p.sql(f"CREATE TABLE {p.schema}.changes USING parquet AS {CHANGES}")
        p.model("t", MODEL)
        # u (a chain without groups, checked at the end) is run with t on days 1 and 3
        p.model("u", ONE_GROUP)
        p.dbt("run", vars={"dt": "20250801"})
        p.sql(
            f"INSERT INTO {p.schema}.changes VALUES "
            "(9, 1.00, 'x', '+I', 1, 'CN', '20250802'), (9, 2.00, 'y', '+I', 1, 'CN', '20250802')"
        )
        p.dbt("run", "--select", "t", vars={"dt": "20250802"}, expect_ok=False)
        assert "2 rows for key (id=9, region='CN', dt='20250802', seq=1)" in p.log_text()
        assert p.partitions("t__delta") == []
        assert p.rows("select count(*) from {s}.t where dt = '20250801'") == [(3,)]
        # an enforced contract is checked over the server too: refused, then met
        contract = textwrap.dedent("""
            version: 2
            models:
              - name: t
                config: {{contract: {{enforced: true}}}}
                columns:
                  - {{name: id, data_type: int}}
                  - {{name: amount, data_type: '{amount}'}}
                  - {{name: note, data_type: string}}
                  - {{name: op, data_type: string}}
                  - {{name: seq, data_type: int}}
                  - {{name: region, data_type: string}}
                  - {{name: dt, data_type: string}}
            """)
        p.file("models/schema.yml", contract.format(amount="int"))
        p.dbt("run", "--select", "t", vars={"dt": "20250803"}, expect_ok=False)
        assert "enforced contract" in p.log_text() and "| amount " in p.log_text()
        assert p.partitions("t__delta") == []
        p.file("models/schema.yml", contract.format(amount="decimal(10,2)"))
        p.dbt("run", vars={"dt": "20250803"})  # t and u
        assert p.partitions("t__delta") == [
            "region=CN/dt=20250803",
            "region=EU/dt=20250803",
            "region=US/dt=20250803",
        ]
        # a chain without groups: its day's cumulative delta is written by the server to a
        # directory of its own and added as the partition (t, with groups, overwrites the
        # table for all of them at once); both read CN's day 3 alike
        p.run_op("chain_status", {"model": "u"})
        assert re.search(r"dt=20250803 +dt=20250801 +1 +cumulative delta", p.log_text())
        (part,) = p.partitions("u__cumulative")
        spec = ", ".join(f"{k} = '{v}'" for k, v in (kv.split("=") for kv in part.split("/")))
        described = p.sql(f"DESCRIBE FORMATTED {p.schema}.u__cumulative PARTITION ({spec})")
        # the partition's Location comes first, the table's after it
        location = next(r[1] for r in described if str(r[0]).strip() == "Location")
        assert "/u__cumulative/_chain_v/" in location
        cn = "select id, amount, note from {s}.%s where dt = '20250803' and region = 'CN'"
        assert p.rows(cn % "u") == p.rows(cn % "t") != []
    finally:
        p.sql(f"DROP DATABASE IF EXISTS {p.schema} CASCADE")
        p.conn.close()


STANDALONE_SCRIPT = """
import json, sys
from dbt.cli.main import dbtRunner
proj = sys.argv[1]
args = ["--project-dir", proj, "--profiles-dir", proj]
def run(*a, **vars):
    res = dbtRunner().invoke(list(a) + args + ["--vars", json.dumps(vars)])
    if not res.success:
        raise SystemExit(f"dbt {a} failed: {res.exception}")
# dbt's multiprocessing context is 'spawn': a child it starts imports this script again
if __name__ == "__main__":
    run("run", dt="20250801")
    run("run", dt="20250802")
    run("run", dt="20250803")
    run("run-operation", "compact_chain", "--args", json.dumps({"model": "t", "partition": {"dt": "20250802"}}))
    run("run", dt="20250804")
    # the rows through the session dbt ran on (the cluster's driver): no dbt invocation of its own
    # for them
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.getOrCreate()
    for r in spark.sql(
        "select concat_ws('|', region, dt, cast(id as string), cast(amount as string), "
        "coalesce(note, 'NULL')) from s.t where dt in ('20250803', '20250804') order by 1"
    ).collect():
        print("  ROW " + r[0])
"""


def run_project_in_subprocess(root, params):
    """The chain history of STANDALONE_SCRIPT in a dbt process of its own (the pytest process
    already holds a local SparkSession); returns the ROW lines of dt 20250803 and 20250804."""
    proj = write_session_project(
        root, params, MODEL.replace("from {{ target.schema }}.changes", f"from ({CHANGES}) src")
    )
    script = root / "s.py"
    script.write_text(STANDALONE_SCRIPT)
    env = {
        **os.environ,
        "DERBY_SYSTEM_HOME": str(root),
        "SPARK_LOCAL_IP": servers.HOST,
        "PYSPARK_PYTHON": sys.executable,
    }
    out = subprocess.run(
        [sys.executable, str(script), str(proj)],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    return row_lines(out.stdout)


def test_standalone_cluster_session_mode(tmp_path_factory):
    """session method with spark.master = spark://127.0.0.1:<port>: a Master and one Worker."""
    root = tmp_path_factory.mktemp("standalone")
    cluster = servers.start_standalone(root / "cluster")
    try:
        params = {
            "spark.master": cluster.url,
            "spark.sql.warehouse.dir": str(root / "wh"),
            "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'ms'};create=true",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.executor.memory": "1g",
            # the executor is started by the worker, not through spark-submit (conftest.py)
            "spark.executor.extraJavaOptions": CHILD_JVM_OPTS,
            "spark.driver.host": servers.HOST,
        }
        rows = run_project_in_subprocess(root, params)
        assert rows == EXPECTED_ROWS
        # the work ran on the cluster's executor, not in a local master
        worker_dirs = list((root / "cluster" / "work").glob("app-*"))
        assert worker_dirs, "no application ran on the standalone worker"
    finally:
        cluster.stop()
    assert not cluster.alive()
