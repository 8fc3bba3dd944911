"""Real dbt against real Spark: one embedded SparkSession (session method) per pytest process.

Each test gets its own dbt project directory and its own schema; tests read results through
the same SparkSession (the tests may use PySpark; the adapter never does).
"""

from __future__ import annotations

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


def session_params(root: Path) -> dict[str, str]:
    return {
        "spark.sql.warehouse.dir": str(root / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.memory": "2g",
    }


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
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


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
        res = dbtRunner(callbacks=[collect]).invoke(argv)
        if expect_ok and not res.success:
            raise AssertionError(
                f"dbt {' '.join(args)} failed: {res.exception}\n" + self.log_text()[-6000:]
            )
        if not expect_ok:
            assert not res.success, f"dbt {' '.join(args)} unexpectedly succeeded"
        return res

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


@pytest.fixture
def project(spark, spark_root, tmp_path) -> Project:
    schema = "t_" + uuid.uuid4().hex[:10]
    output = {
        "type": "chaintable",
        "method": "session",
        "host": "localhost",
        "server_side_parameters": session_params(spark_root),
    }
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {schema}")
    p = Project(tmp_path / "proj", spark, output, schema)
    yield p
    spark.sql(f"DROP DATABASE IF EXISTS {schema} CASCADE")


@pytest.fixture(scope="session")
def thrift_server(tmp_path_factory):
    """One Spark Thrift Server per test process, for the files that use it."""
    import servers

    server = servers.start_thrift(tmp_path_factory.mktemp("thrift"))  # ANSI on
    yield server
    server.stop()
    assert not server.alive()
