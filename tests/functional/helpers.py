"""What more than one functional test uses: the dbt projects (on this process's session and on
a Thrift Server), the shared history of the cluster and server tests, and the reads that compare
a chain's days."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import textwrap
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import servers

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.cumulative import sql as cumulative_sql
from dbt.adapters.chaintable.read.render import Renderer

# The JVMs a test starts beside this process's session (dbt in a subprocess, the Thrift, Spark
# Connect and standalone servers; spark-submit reads SPARK_SUBMIT_OPTS) compile with C1 only, in
# a code cache large enough to keep what they compiled: each lives for one test or a few, and on
# two cores the C2 compiler's CPU is taken from the other test worker. The session of conftest's
# `spark` fixture keeps the JVM's default tiers: it runs for the whole suite, where C2's code pays off.
# Measured on this suite (two workers, 2 cores): with C1 in every JVM the whole suite ran 2433 s
# against 2325 s, while the tests of these JVMs gained (Spark Connect in session mode 171 ->
# 112 s, the standalone cluster 150 -> 100 s, the SIGKILLed dbt process 141 -> 106 s).
# scripts/test.sh names a class data sharing archive of a Spark driver's classes
# (scripts/jvm_archive.py): every JVM the tests start, this process's session included, maps them
_ARCHIVE = os.environ.get("CHAINTABLE_JVM_ARCHIVE", "")
SHARED_CLASSES = (
    f"-XX:SharedArchiveFile={_ARCHIVE}" if _ARCHIVE and Path(_ARCHIVE).is_file() else ""
)
# Every JVM of the tests collects with the serial collector: their heaps are small, and G1's
# concurrent threads took CPU from the other test worker (test_chain_core.py alone: the session
# JVM's CPU 231 -> 192 s)
SERIAL_GC = "-XX:+UseSerialGC"
# Derby, the embedded metastore's database, compiles every SQL text the metastore sends it into
# a class, and keeps 100 of them by default: the metastore sends more than 100 kinds
DERBY_STATEMENTS = "-Dderby.language.statementCacheSize=2000"
# A JVM collects its whole heap each time its loaded classes pass the metaspace's first mark
# (~20 MB): a Spark driver loads ~100 MB of them, three full collections in its first 20 s
# (-Xlog:gc); from 256 MB on, none
METASPACE = "-XX:MetaspaceSize=256m"
COMMON_JVM_OPTS = f"{SERIAL_GC} {METASPACE} {DERBY_STATEMENTS} {SHARED_CLASSES}".strip()
# The session's C2 compiles only methods called ~40,000 times (the default: 5,000-15,000). Its
# queries each run a new shape over a few rows, so the profile is flat: in a run of
# test_chain_core.py alone (127 s) the JVM made 65,000 compilations and spent 92 s compiling
# (Java Flight Recorder). With these thresholds the machine's CPU for that file fell from
# 182 and 198 s to 163 and 174 s at the same wall time; raising C1's thresholds too, or C1 only,
# cost more (178-188 s, 219 s)
HOT_C2 = (
    "-XX:Tier4InvocationThreshold=40000 -XX:Tier4MinInvocationThreshold=10000 "
    "-XX:Tier4CompileThreshold=50000 -XX:Tier4BackEdgeThreshold=200000"
)
SESSION_JVM_OPTS = f"{HOT_C2} {COMMON_JVM_OPTS}"
CHILD_JVM_OPTS = f"-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=512m {COMMON_JVM_OPTS}".strip()


def session_params(root: Path) -> dict[str, str]:
    return {
        "spark.sql.warehouse.dir": str(root / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.memory": "2g",
        # the embedded metastore's objects cached between its calls: every statement looks its
        # tables up again, and only this JVM writes this Derby catalog (the tests on a metastore
        # service or a server do not use these parameters). test_expiration.py: JVM CPU 158 ->
        # 146 s
        "spark.hadoop.datanucleus.cache.level2.type": "soft",
        # without Hadoop's native library every permission Hive copies onto a new table or
        # partition directory is an `ls -ld` and a `chmod` process (test_chain_core.py: ~500
        # of the JVM's 2,600 processes in 140 s)
        "spark.hadoop.hive.warehouse.subdir.inherit.perms": "false",
        # the tests' queries read a few rows each, nearly every one a new shape: compiling the
        # code of each costs more than it saves. With Derby's larger statement cache
        # (DERBY_STATEMENTS), test_chain_core.py alone took 178 and 170 s of the machine's CPU
        # against 189 and 185 s, runs interleaved. The benchmarks keep Spark's default
        "spark.sql.codegen.wholeStage": "false",
        # and every expression interpreted, not compiled (Spark's fallback when compiling fails):
        # runs interleaved, test_paimon_scenarios.py took 141 and 146 s of the machine's CPU
        # against 132 and 135 s, test_expiration.py 120 and 120 s against 114 and 114 s. The
        # servers and the dbt processes of the tests keep compiling (servers.py), so compiled
        # code still runs under test
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
        # a hash map's memory comes in pages, 8 MB each by default here: every broadcast of a
        # merged read (a few rows) took at least one, and the old generation filled with them
        # until a full collection (test_merge_engines.py alone: 11 full collections for room,
        # 4.8 s of pauses with all others, 91 and 87 s of the machine's CPU; with 1 MB pages none
        # for room, 1.2-1.9 s, 81 and 81 s)
        "spark.buffer.pageSize": "1m",
    }


PROJECT_NAME = "chain_test"  # the name of Project's dbt_project.yml: its files carry _MARK
_MARK = "chaintable-tests vars "  # the comment Project.dbt keeps at the end of parsed files


class Project:
    """A throwaway dbt project on the shared Spark catalog."""

    def __init__(self, root: Path, spark, profile_output: dict[str, Any], schema: str):
        self.root, self.spark, self.schema = root, spark, schema
        self.output = {**profile_output, "schema": schema}
        (root / "models").mkdir(parents=True, exist_ok=True)
        (root / "seeds").mkdir(exist_ok=True)
        (root / "dbt_project.yml").write_text(
            textwrap.dedent(f"""
            name: {PROJECT_NAME}
            version: '1.0'
            config-version: 2
            profile: chain_test
            model-paths: [models]
            seed-paths: [seeds]
            macro-paths: [macros]
            """)
        )
        (root / "profiles.yml").write_text(
            json.dumps({"chain_test": {"target": "t", "outputs": {"t": self.output}}})
        )
        self.logs: list[str] = []
        # dbt's JSON artifacts (manifest.json with every macro, run_results.json), written only
        # for the tests that read them (dbt retry reads run_results.json). test_merge_engines.py
        # alone, runs alternated: this process's CPU 8.0 and 7.7 s without them, 9.0 and 9.3 s
        # with them
        self.artifacts = False

    def model(self, name: str, sql: str) -> None:
        (self.root / "models" / f"{name}.sql").write_text(textwrap.dedent(sql))

    def file(self, rel: str, text: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))

    def dbt(self, *args: str, vars: dict[str, Any] | None = None, expect_ok: bool = True):
        from dbt.cli.main import dbtRunner

        self.logs = []

        def collect(event) -> None:
            msg = getattr(event.info, "msg", "")
            if msg:
                self.logs.append(str(msg))

        argv = list(args) + ["--project-dir", str(self.root), "--profiles-dir", str(self.root)]
        if not self.artifacts:
            argv.append("--no-write-json")
        if vars is not None:
            argv += ["--vars", json.dumps(vars)]
        self._mark_parsed_files(json.dumps(vars, sort_keys=True))
        res = dbtRunner(callbacks=[collect]).invoke(argv)
        if expect_ok and not res.success:
            raise AssertionError(
                f"dbt {' '.join(args)} failed: {res.exception}\n" + self.log_text()[-6000:]
            )
        if not expect_ok:
            assert not res.success, f"dbt {' '.join(args)} unexpectedly succeeded"
        return res

    def _mark_parsed_files(self, stamp: str) -> None:
        """Every file dbt parses with the vars (not macros, not seeds) ends with a comment naming
        them, so that partial parsing (partial_parse_across_vars) reparses it when they change."""
        digest = f"{_MARK}{hashlib.sha1(stamp.encode()).hexdigest()[:12]}"
        for path in sorted(self.root.rglob("*")):
            parts = path.relative_to(self.root).parts
            if parts[0] in ("target", "logs", "macros", "seeds", "dbt_packages") or not (
                path.suffix in (".sql", ".yml", ".yaml", ".md") and path.is_file()
            ):
                continue
            if path.name in ("dbt_project.yml", "profiles.yml", "packages.yml"):
                continue
            yml = path.suffix in (".yml", ".yaml")
            mark = f"# {digest}\n" if yml else "{# " + digest + " #}\n"
            text = path.read_text()
            if text.endswith(mark):
                continue
            lines = text.splitlines(keepends=True)
            if lines and _MARK in lines[-1]:
                lines.pop()
            body = "".join(lines)
            path.write_text(body + ("" if not body or body.endswith("\n") else "\n") + mark)

    def log_text(self) -> str:
        return "\n".join(self.logs)

    def run_op(self, macro: str, args: dict[str, Any], expect_ok: bool = True):
        return self.dbt("run-operation", macro, "--args", json.dumps(args), expect_ok=expect_ok)

    def rows(self, sql: str) -> list[tuple]:
        return sorted(tuple(r) for r in self.spark.sql(sql.format(s=self.schema)).collect())

    def full_state(self, view: str = "t", cols: str = "id, v") -> dict[str, list[tuple]]:
        """{partition path: rows} for every partition of both branches, each read through the
        chain view one partition at a time (a partition the view does not read gives [])."""
        parts = sorted(
            set(self.partitions(f"{view}__snapshot")) | set(self.partitions(f"{view}__delta"))
        )
        wheres = {
            part: " and ".join(
                f"{kv.split('=')[0]} = '{kv.split('=')[1]}'" for kv in part.split("/")
            )
            for part in parts
        }
        return reads_by_part(self, view, wheres, cols)

    def partitions(self, table: str) -> list[str]:
        return sorted(
            r[0] for r in self.spark.sql(f"SHOW PARTITIONS {self.schema}.{table}").collect()
        )

    def table(self, name: str, columns: str, rows: Iterable[tuple]) -> None:
        """A source table the models read from."""
        self.spark.sql(f"DROP TABLE IF EXISTS {self.schema}.{name}")
        self.spark.createDataFrame(list(rows), columns).write.saveAsTable(f"{self.schema}.{name}")


def session_output(spark_root: Path) -> dict[str, Any]:
    """The profile output of a dbt project on this process's session."""
    return {
        "type": "chaintable",
        "method": "session",
        "host": "localhost",
        "server_side_parameters": session_params(spark_root),
    }


@contextlib.contextmanager
def schema_project(spark, spark_root: Path, root: Path, prefix: str = "t_"):
    """A project in `root` on this process's session, in a schema of its own dropped after."""
    schema = prefix + uuid.uuid4().hex[:10]
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {schema}")
    try:
        yield Project(root, spark, session_output(spark_root), schema)
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS {schema} CASCADE")


def module_project(spark, spark_root: Path, tmp_path_factory, name: str):
    """schema_project for the history a module's tests share (a module-scoped fixture; mark
    the module `pytest.mark.xdist_group`)."""
    return schema_project(spark, spark_root, tmp_path_factory.mktemp(name) / "proj", "m_")


def node_messages(res) -> dict[str, str]:
    """{model: its result's message} of a dbt run (each node's own error, where it failed)."""
    return {r.node.name: str(r.message) for r in res.result.results}


MODEL = """
{{ config(materialized='chain_incremental', partition_by=['region', 'dt'],
          chain_partition_keys=['dt'], primary_key=['id', 'region', 'dt'],
          sequence_field='seq', rowkind_field='op', chain_partition={'dt': var('dt')},
          partition_timestamp_pattern='$dt', partition_timestamp_formatter='yyyyMMdd',
          partition_expiration_time='3650 d') }}
select id, amount, note, op, seq, region, dt from {{ target.schema }}.changes
where dt = '{{ var("dt") }}'
"""


# decimals, timestamps-as-sequence ints, deletes of anchor-only keys, -U/+U pairs, nulls
CHANGES = """
SELECT * FROM VALUES
  (1, CAST(10.50 AS DECIMAL(10,2)), 'a', '+I', 1, 'CN', '20250801'),
  (2, CAST(20.00 AS DECIMAL(10,2)), NULL, '+I', 1, 'CN', '20250801'),
  (3, CAST(5.25 AS DECIMAL(10,2)), 'c', '+I', 1, 'US', '20250801'),
  (1, CAST(10.50 AS DECIMAL(10,2)), 'a', '-U', 5, 'CN', '20250802'),
  (1, CAST(11.00 AS DECIMAL(10,2)), 'a2', '+U', 5, 'CN', '20250802'),
  (2, CAST(20.00 AS DECIMAL(10,2)), NULL, '-D', 6, 'CN', '20250802'),
  (4, CAST(1.00 AS DECIMAL(10,2)), 'new', '+I', 7, 'US', '20250802'),
  (1, CAST(99.00 AS DECIMAL(10,2)), 'late', '+U', 4, 'CN', '20250803'),
  (3, CAST(6.00 AS DECIMAL(10,2)), 'c3', '+U', 8, 'US', '20250803'),
  (5, CAST(2.50 AS DECIMAL(10,2)), 'e', '+I', 9, 'EU', '20250803'),
  (4, CAST(1.00 AS DECIMAL(10,2)), 'new', '-D', 10, 'US', '20250804')
AS v(id, amount, note, op, seq, region, dt)
"""


EXPECTED_0803 = [  # key 1's late row (seq 4) loses to day 2's seq 5; key 2 deleted
    ("CN", 1, "11.00", "a2"),
    ("EU", 5, "2.50", "e"),
    ("US", 3, "6.00", "c3"),
    ("US", 4, "1.00", "new"),
]


# the ROW lines of `dump` (write_session_project) after days 0801-0804 of MODEL over CHANGES
EXPECTED_ROWS = sorted(
    [f"{r}|20250803|{i}|{a}|{n}" for r, i, a, n in EXPECTED_0803]
    + ["CN|20250804|1|11.00|a2", "EU|20250804|5|2.50|e", "US|20250804|3|6.00|c3"]
)


class ThriftProject(Project):
    """A project on the Thrift Server; reads go through the server too (PyHive)."""

    def __init__(self, root, server, schema):
        # dbt-spark sleeps a poll interval each time it finds a statement still running, so a
        # statement costs up to one interval more; a run on the server is a few dozen short
        # statements, so the tests poll every 10 ms
        output = servers.thrift_output(server.port, schema, poll_interval=0.01)
        super().__init__(root, None, output, schema)
        from pyhive import hive

        self.conn = hive.connect(host=servers.HOST, port=server.port, username="dbt")

    def sql(self, sql):
        cur = self.conn.cursor()
        cur.execute(sql)
        try:
            return [tuple(r) for r in cur.fetchall()]
        except Exception:
            return []

    def rows(self, sql):
        return sorted(self.sql(sql.format(s=self.schema)))

    def partitions(self, table):
        return sorted(r[0] for r in self.sql(f"SHOW PARTITIONS {self.schema}.{table}"))


# the reader grace of the tests with readers of other sessions: shorter than the default 15 s
# to keep them short; an unloaded read takes well under 1 s
READER_GRACE = 3.0


def beyond_the_grace(failures: list[tuple[float, str]]) -> list[tuple[float, str]]:
    """The failed reads (seconds the read ran, error) the reader grace does not cover: every
    failure but a query that ran longer than the grace and then missed a file deleted after it
    (a query planned before a change reads what the change stopped pointing at for the grace,
    not longer; on a loaded 2-core machine one tiny read took 7.9 s)."""
    return [
        (took, error)
        for took, error in failures
        if not (took > READER_GRACE and "FAILED_READ_FILE.FILE_NOT_EXIST" in error)
    ]


def normalized(rows):
    return sorted(tuple(str(v) if v is not None else None for v in r) for r in rows)


def write_session_project(root, params, model):
    """A dbt project (profile `s`, schema `s`, method session) in root/proj with model `t`
    and a `dump` macro that logs each row of a query as a ROW line."""
    proj = root / "proj"
    (proj / "models").mkdir(parents=True)
    (proj / "macros").mkdir()
    (proj / "dbt_project.yml").write_text(
        "name: s\nversion: '1.0'\nconfig-version: 2\nprofile: s\nmodel-paths: [models]\n"
        "macro-paths: [macros]\n"
    )
    (proj / "profiles.yml").write_text(
        json.dumps(
            {
                "s": {
                    "target": "t",
                    "outputs": {
                        "t": {
                            "type": "chaintable",
                            "method": "session",
                            "host": "localhost",
                            "schema": "s",
                            "server_side_parameters": params,
                        }
                    },
                }
            }
        )
    )
    (proj / "models" / "t.sql").write_text(model)
    (proj / "macros" / "dump.sql").write_text(
        textwrap.dedent("""
        {% macro dump(query=none) %}
          {% set rows = run_query(query or ("select concat_ws('|', region, dt, "
             ~ "cast(id as string), cast(amount as string), coalesce(note, 'NULL')) from "
             ~ target.schema ~ ".t where dt in ('20250803', '20250804') order by 1")) %}
          {% for r in rows.rows %}{{ log("ROW " ~ r[0], info=True) }}{% endfor %}
        {% endmacro %}
        """)
    )
    return proj


def row_lines(out: str) -> list[str]:
    return [line.split("ROW ", 1)[1] for line in out.splitlines() if " ROW " in line]


def reads_by_part(p, view, wheres: dict[str, str], cols: str) -> dict[str, list[tuple]]:
    """{part: rows} of `view` read with each part's filter, each read its own arm of one union
    (one Spark job for all the parts: each arm is planned and pruned as its own query is)."""
    out: dict[str, list[tuple]] = {part: [] for part in wheres}
    if not wheres:
        return out
    union = " union all ".join(
        f"select {i} as __part, {cols} from {{s}}.{view} where {where}"
        for i, where in enumerate(wheres.values())
    )
    names = list(wheres)
    for row in p.rows(union):  # a Project or a ThriftProject
        out[names[int(row[0])]].append(tuple(row[1:]))
    return {part: sorted(rows) for part, rows in out.items()}


def state(p, view, cols="id, v"):
    parts = sorted(set(p.partitions(f"{view}__snapshot")) | set(p.partitions(f"{view}__delta")))
    return reads_by_part(p, view, {part: f"dt = '{part.split('=')[1]}'" for part in parts}, cols)


def chain_reads(p, view, days, cols="id, v"):
    """{day: rows} of each of `days` read through chain_read, in one compiled query."""
    if not days:
        return {}
    union = " union all ".join(
        f"select '{d}' as __day, {cols} from "
        f"{{{{ chain_read(ref('{view}'), {{'dt': '{d}'}}) }}}} __r{i}"
        for i, d in enumerate(days)
    )
    p.file("analyses/r.sql", union)
    p.dbt("compile", "--select", "r", vars={"dt": days[-1]})
    sql = (p.root / "target" / "compiled" / "chain_test" / "analyses" / "r.sql").read_text()
    out: dict[str, list[tuple]] = {d: [] for d in days}
    for row in p.rows(sql):
        out[row[0]].append(tuple(row[1:]))
    return out


def reads_as(p, view, parts, cols="id, v"):
    """Every partition of `parts` ({'dt=D': rows}) reads through chain_read as those rows."""
    days = [part.split("=")[1] for part in parts]
    assert chain_reads(p, view, days, cols) == {
        part.split("=")[1]: rows for part, rows in parts.items()
    }


def served(p, view="t"):
    """Days chain_status says are read from the cumulative delta."""
    p.run_op("chain_status", {"model": view})
    return sorted(set(re.findall(r"dt=(\d{8})\s+dt=\d{8}\s+\d+\s+cumulative delta", p.log_text())))


READER = """
{{ config(materialized='table') }}
select * from {{ chain_read(ref('t'), {'dt': var('dt')}) }}
"""


def chain_model(config: str, columns: str) -> str:
    return (
        f"{{{{ config(materialized='chain_incremental', partition_by=['dt'], "
        f"primary_key=['id', 'dt'], {config}) }}}}\n"
        f"select {columns}, dt from {{{{ target.schema }}}}.changes "
        "where dt = '{{ var(\"dt\") }}'\n"
    )


def read_days(p, table: str, cols: str) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for row in p.rows(f"select dt, {cols} from {{s}}.{table}"):
        out.setdefault(row[0], []).append(row[1:])
    return out


def sql_value(v) -> str:
    if v is None:
        return "NULL"
    return f"'{v}'" if isinstance(v, str) else str(v)


def collect(spark, sql: str) -> list[tuple]:
    return sorted(
        (tuple(r) for r in spark.sql(sql).collect()),
        key=lambda r: tuple("" if v is None else str(v) for v in r),
    )


def chain_tables(spark, schema: str, opts: ChainOptions, columns: list[tuple[str, str]]):
    """The chain's branches (partitioned by g, dt) and cumulative table, and its Renderer."""
    defs = ", ".join(f"{c} {t}" for c, t in columns)
    tables = {b: f"{schema}.t__{b}" for b in ("snapshot", "delta", "cumulative")}
    for b in ("snapshot", "delta"):
        spark.sql(f"CREATE TABLE {tables[b]} ({defs}) USING parquet PARTITIONED BY (g, dt)")
    names = [c for c, _ in columns]
    r = Renderer(
        opts, names, dict(columns), tables["snapshot"], tables["delta"], tables["cumulative"]
    )
    spark.sql(cumulative_sql.create(r))
    return tables, r


def stored_partitions(spark, table: str) -> list[tuple[str, ...]]:
    return [
        tuple(x.split("=", 1)[1] for x in str(p[0]).split("/"))
        for p in spark.sql(f"SHOW PARTITIONS {table}").collect()
    ]


def drop_temporary_views() -> None:
    """Drop the temporary views a test left in this process's SparkSession: a dbt run that
    fails mid-materialization leaves its `__dbt_tmp` view, and Spark lists a session's
    temporary views in SHOW TABLES of every schema, so the next test of the process that lists
    its schema would find them (tests/adapter and tests/functional share one session)."""
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None:
        return
    for row in spark.sql("SHOW TABLES").collect():
        if row.isTemporary:
            spark.sql(f"DROP VIEW IF EXISTS `{row.tableName}`")
