"""Real dbt against real Spark: one embedded SparkSession (session method) per pytest process.

Each test gets its own dbt project directory and its own schema; tests read results through
the same SparkSession (the tests may use PySpark; the adapter never does).
"""

from __future__ import annotations

import hashlib
import json
import os
import textwrap
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")

# The JVMs a test starts beside this process's session (dbt in a subprocess, the Thrift, Spark
# Connect and standalone servers; spark-submit reads SPARK_SUBMIT_OPTS) compile with C1 only, in
# a code cache large enough to keep what they compiled: each lives for one test or a few, and on
# two cores the C2 compiler's CPU is taken from the other test worker. The session of `spark`
# below keeps the JVM's default tiers: it runs for the whole suite, where C2's code pays off.
# Measured on this suite (two workers, 2 cores): with C1 in every JVM the whole suite ran 2433 s
# against 2325 s, while the tests of these JVMs gained (Spark Connect in session mode 171 ->
# 112 s, the standalone cluster 150 -> 100 s, the SIGKILLed dbt process 141 -> 106 s).
CHILD_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=512m"
os.environ.setdefault("SPARK_SUBMIT_OPTS", CHILD_JVM_OPTS)


def session_params(root: Path) -> dict[str, str]:
    return {
        "spark.sql.warehouse.dir": str(root / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.memory": "2g",
    }


@pytest.fixture(scope="session", autouse=True)
def partial_parse_across_vars():
    """dbt parses a project again from scratch, its ~1,000 macros included (~0.8 s of CPU),
    whenever --vars differ from the last parse, and nearly every invocation here passes a new
    day. Within this process the tests instead let partial parsing keep the parsed macros and
    reparse the project's own files, which Project.dbt marks as changed whenever the vars do
    (macros render at execution time and read the current vars there). A project whose
    dbt_project.yml reads a var is parsed in full as dbt does."""
    from dbt.parser.manifest import ManifestLoader

    original = ManifestLoader.is_partial_parsable

    def is_partial_parsable(self, manifest):
        project_file = Path(self.root_project.project_root) / "dbt_project.yml"
        if "var(" not in project_file.read_text():
            manifest.state_check.vars_hash = self.manifest.state_check.vars_hash
        return original(self, manifest)

    ManifestLoader.is_partial_parsable = is_partial_parsable
    yield
    ManifestLoader.is_partial_parsable = original


@pytest.fixture(scope="session")
def spark_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("spark")
    os.environ["DERBY_SYSTEM_HOME"] = str(root)
    return root


@pytest.fixture(scope="session")
def spark(spark_root):
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.enableHiveSupport()
    for k, v in session_params(spark_root).items():
        builder = builder.config(k, v)
    # this process's JVM starts without the child JVMs' options (CHILD_JVM_OPTS), and they
    # stay set for the JVMs started after it
    ours = os.environ.get("SPARK_SUBMIT_OPTS") == CHILD_JVM_OPTS
    if ours:
        del os.environ["SPARK_SUBMIT_OPTS"]
    try:
        session = builder.getOrCreate()
    finally:
        if ours:
            os.environ["SPARK_SUBMIT_OPTS"] = CHILD_JVM_OPTS
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


_MARK = "chaintable-tests vars "  # the comment Project.dbt keeps at the end of parsed files


class Project:
    """A throwaway dbt project on the shared Spark catalog."""

    def __init__(self, root: Path, spark, profile_output: dict[str, Any], schema: str):
        self.root, self.spark, self.schema = root, spark, schema
        self.output = {**profile_output, "schema": schema}
        (root / "models").mkdir(parents=True, exist_ok=True)
        (root / "seeds").mkdir(exist_ok=True)
        (root / "dbt_project.yml").write_text(
            textwrap.dedent("""
            name: chain_test
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
        out = {}
        for part in parts:
            where = " and ".join(
                f"{kv.split('=')[0]} = '{kv.split('=')[1]}'" for kv in part.split("/")
            )
            out[part] = self.rows(f"select {cols} from {{s}}.{view} where {where}")
        return out

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


@pytest.fixture
def project(spark, spark_root, tmp_path) -> Project:
    schema = "t_" + uuid.uuid4().hex[:10]
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {schema}")
    p = Project(tmp_path / "proj", spark, session_output(spark_root), schema)
    yield p
    spark.sql(f"DROP DATABASE IF EXISTS {schema} CASCADE")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests of the Thrift Server run in one worker (scripts/test.sh: --dist loadgroup), which
    starts it once; the others go to whichever worker is free."""
    for item in items:
        for server in ("thrift_server", "metastore"):
            if server in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(server))


@pytest.fixture(scope="session")
def thrift_server(tmp_path_factory):
    """One Spark Thrift Server per test process, for the files that use it."""
    import servers

    server = servers.start_thrift(tmp_path_factory.mktemp("thrift"))  # ANSI on
    yield server
    server.stop()
    assert not server.alive()


@pytest.fixture(scope="session")
def metastore(tmp_path_factory):
    """One Hive metastore service on PostgreSQL per test process, for the files that use it."""
    import shutil
    import tempfile

    import servers

    # not below pytest's basetemp (mode 0700): PostgreSQL runs as the postgres user
    state = Path(tempfile.mkdtemp(prefix="chaintable-metastore-"))
    state.chmod(0o755)
    server = servers.start_metastore(state)
    yield server
    server.stop()
    assert not server.alive()
    shutil.rmtree(state, ignore_errors=True)
