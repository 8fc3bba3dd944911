"""Shared plumbing of the benchmarks: one SparkSession and dbt invocations in this process.

dbt runs through dbtRunner with `method: session`, so dbt-spark's getOrCreate returns the
SparkSession started here: the dbt runs and the timed reads share one JVM and one catalog
(Derby metastore + warehouse at absolute paths under the out dir).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")


def session_params(root: Path, driver_memory: str = "6g") -> dict[str, str]:
    """Same settings as tests/functional/conftest.py, at absolute paths below `root`."""
    return {
        "spark.sql.warehouse.dir": str(root / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.memory": driver_memory,
    }


def fresh_root(out: Path, name: str) -> Path:
    """A clean catalog + warehouse + project directory for this run."""
    root = (out / name).resolve()
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    return root


def start_spark(root: Path, driver_memory: str = "6g"):
    from pyspark.sql import SparkSession

    os.environ["DERBY_SYSTEM_HOME"] = str(root)
    builder = SparkSession.builder.appName("chaintable-bench").enableHiveSupport()
    for k, v in session_params(root, driver_memory).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class Statement:
    __slots__ = ("elapsed", "end", "sql", "start")

    def __init__(self, sql: str, start: float):
        self.sql, self.start, self.end, self.elapsed = sql, start, start, 0.0

    @property
    def kind(self) -> str:
        """The statement's verb and object, e.g. 'SHOW PARTITIONS', 'CREATE OR REPLACE VIEW'."""
        text = re.sub(r"^\s*/\*.*?\*/", "", self.sql, flags=re.S)  # dbt's query comment
        words = text.replace("\n", " ").replace("(", " ").split()
        head = " ".join(words[:5]).upper()  # the longest kind below has five words
        for k in (
            "CREATE OR REPLACE VIEW",
            "CREATE TEMPORARY VIEW",
            "CREATE OR REPLACE TEMPORARY VIEW",
            "INSERT OVERWRITE",
            "SHOW PARTITIONS",
            "SHOW TBLPROPERTIES",
            "SHOW TABLES",
            "SHOW TABLE EXTENDED",
            "DESCRIBE FORMATTED",
            "DESCRIBE QUERY",
            "DESCRIBE TABLE",
            "DESCRIBE EXTENDED",
            "ALTER TABLE",
            "DROP TABLE",
            "DROP VIEW",
            "CREATE TABLE",
            "CREATE VIEW",
            "SELECT",
            "WITH",
            "SET",
            "USE",
        ):
            if head.startswith(k):
                return k
        return " ".join(words[:2]).upper()


def jvm_counters(spark) -> dict[str, float]:
    """Seconds the driver JVM has spent so far compiling Spark's generated code (Janino), in
    its JIT compiler threads and in garbage collection. The first run of a query shape in a JVM
    pays the first two (the benchmark's baseline pays them on day 2, its first merge)."""
    jvm = spark.sparkContext._jvm
    mf = jvm.java.lang.management.ManagementFactory
    gc = sum(max(0, b.getCollectionTime()) for b in mf.getGarbageCollectorMXBeans())
    codegen = getattr(
        getattr(jvm.org.apache.spark.sql.catalyst.expressions.codegen, "CodeGenerator$"), "MODULE$"
    )
    return {
        "codegen_s": codegen.compileTime() / 1e9,
        "jit_s": mf.getCompilationMXBean().getTotalCompilationTime() / 1e3,
        "gc_s": gc / 1e3,
    }


def executor_seconds(spark, after_stage: int = -1) -> tuple[int, float, float]:
    """(the last stage id, executor run seconds, executor CPU seconds) summed over the stages
    after `after_stage` that Spark's status store holds: the compute a query costs on a
    cluster, where the driver's catalog round trips cost next to none."""
    sc = spark.sparkContext
    gw = sc._gateway
    no_quantiles = gw.new_array(gw.jvm.double, 0)
    stages = sc._jsc.sc().statusStore().stageList(None, False, False, no_quantiles, None)
    last, run_ms, cpu_ns = after_stage, 0, 0
    it = stages.iterator()
    while it.hasNext():
        d = it.next()
        if d.stageId() > after_stage:
            last = max(last, d.stageId())
            run_ms += d.executorRunTime()
            cpu_ns += d.executorCpuTime()
    return last, run_ms / 1e3, cpu_ns / 1e9


class Dbt:
    """Runs dbt commands in this process and records the wall time and every SQL statement
    (and, given the SparkSession, the JVM's compile and GC seconds during each invocation)."""

    def __init__(self, project_dir: Path, spark=None):
        self.project_dir = project_dir
        self.spark = spark
        self.statements: list[Statement] = []
        self.messages: list[str] = []

    def _callback(self, event) -> None:
        now = time.perf_counter()
        name = event.info.name
        if name == "SQLQuery":
            self.statements.append(Statement(event.data.sql, now))
        elif name == "SQLQueryStatus" and self.statements:
            self.statements[-1].elapsed = float(event.data.elapsed)
            self.statements[-1].end = now
        else:
            msg = getattr(event.info, "msg", "")
            if msg and event.info.level in ("info", "warn", "error"):
                self.messages.append(str(msg))

    def _runner(self, *args: str, vars: dict[str, Any] | None = None):
        """Run dbt in this process with the project's dirs; (result, wall seconds, start)."""
        from dbt.cli.main import dbtRunner

        self.statements, self.messages = [], []
        argv = list(args) + [
            "--project-dir",
            str(self.project_dir),
            "--profiles-dir",
            str(self.project_dir),
        ]
        if vars is not None:
            argv += ["--vars", json.dumps(vars)]
        t0 = time.perf_counter()
        res = dbtRunner(callbacks=[self._callback]).invoke(argv)
        wall = time.perf_counter() - t0
        if not res.success:
            raise RuntimeError(
                f"dbt {' '.join(args)} failed: {res.exception}\n" + "\n".join(self.messages[-40:])
            )
        return res, wall, t0

    def invoke(self, *args: str, vars: dict[str, Any] | None = None) -> dict[str, Any]:
        """A timed invocation: its wall time and the SQL statements it ran."""
        before = jvm_counters(self.spark) if self.spark is not None else None
        stage = executor_seconds(self.spark)[0] if self.spark is not None else -1
        res, wall, t0 = self._runner(*args, vars=vars)
        out: dict[str, Any] = {"wall_s": wall, "statements": self.profile(t0 + wall)}
        # dbt's own timing of the selected nodes (what each costs inside a larger `dbt run`)
        out["node_s"] = sum(
            getattr(r, "execution_time", 0.0) for r in getattr(res.result, "results", None) or []
        )
        if before is not None:
            after = jvm_counters(self.spark)
            out["jvm"] = {k: after[k] - before[k] for k in before}
            _, out["executor_s"], out["executor_cpu_s"] = executor_seconds(self.spark, stage)
        return out

    def compile_inline(self, sql: str) -> str:
        """`dbt compile --inline sql`: the SQL dbt renders for it (e.g. a chain_read call)."""
        res, _, _ = self._runner("compile", "--inline", sql, "--log-level", "none")
        return res.result.results[0].node.compiled_code

    def profile(self, end: float) -> dict[str, Any]:
        """Per statement kind: count and time until the next statement started (includes the
        fetch of a SELECT's rows, which dbt-spark's session cursor runs after the status event)."""
        out: dict[str, dict[str, float]] = {}
        stmts = self.statements
        spans = []
        for i, s in enumerate(stmts):
            span = (stmts[i + 1].start if i + 1 < len(stmts) else end) - s.start
            spans.append([s.kind, round(span, 4)])
            d = out.setdefault(s.kind, {"count": 0, "span_s": 0.0})
            d["count"] += 1
            d["span_s"] += span
        first = stmts[0].start if stmts else end
        return {
            "count": len(stmts),
            "sql_span_s": end - first,
            "by_kind": dict(sorted(out.items(), key=lambda kv: -kv[1]["span_s"])),
            "in_order": spans,
        }


def dir_bytes(path: str) -> int:
    p = path[len("file:") :] if path.startswith("file:") else path
    total = 0
    for dirpath, _, files in os.walk(p):
        for f in files:
            total += os.path.getsize(os.path.join(dirpath, f))
    return total


def table_location(spark, table: str) -> str:
    for row in spark.sql(f"DESCRIBE FORMATTED {table}").collect():
        if (row[0] or "").strip() == "Location":
            return row[1].strip()
    raise RuntimeError(f"no location for {table}")


def table_properties(spark, table: str) -> dict[str, str]:
    return {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}


def table_columns(spark, table: str) -> list[Any]:
    """(name, type) of `table`'s columns, as the adapter's _describe reads them."""
    cols = []
    for r in spark.sql(f"DESCRIBE TABLE {table}").collect():
        if not r[0] or r[0].startswith("#"):
            break
        cols.append((r[0], r[1]))
    return cols


def require_matplotlib(ap: argparse.ArgumentParser) -> None:
    """The chart comes last: say at start-up, not after minutes of measuring, that it cannot."""
    try:
        import matplotlib  # noqa: F401  # imported to learn whether it can be
    except ImportError:
        ap.exit(
            2,
            f"{ap.prog}: the chart needs matplotlib: .venv/bin/pip install matplotlib "
            "(the `bench` extra of pyproject.toml)\n",
        )


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def provenance() -> dict[str, Any]:
    """What a result was measured on: the machine, the commit and the versions that decide it."""
    import platform
    import subprocess
    from importlib.metadata import version

    def out(*cmd: str) -> str:
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        except OSError:
            return ""
        return (done.stdout or done.stderr).strip()

    here = Path(__file__).resolve().parent
    dirty = out("git", "-C", str(here), "status", "--porcelain", "--untracked-files=no")
    return {
        "machine": {
            "system": platform.platform(),
            "cpus": os.cpu_count(),
            "memory_kb": next(
                (int(line.split()[1]) for line in open("/proc/meminfo") if "MemTotal" in line),
                None,
            )
            if os.path.exists("/proc/meminfo")
            else None,
        },
        "commit": out("git", "-C", str(here), "rev-parse", "HEAD") + ("+dirty" if dirty else ""),
        "versions": {
            "python": platform.python_version(),
            **{p: version(p) for p in ("pyspark", "dbt-core", "dbt-spark", "dbt-chaintable")},
            "java": out("java", "-version").splitlines()[0] if out("java", "-version") else "",
        },
    }
