"""Writes a class data sharing archive of the classes a Spark driver of this venv loads (JDK 17's
dynamic CDS: -XX:ArchiveClassesAtExit) and prints its path; a JVM started with
-XX:SharedArchiveFile=<path> maps them instead of loading and verifying them from the jars.
scripts/test.sh makes it once per venv for the JVMs the functional tests start; measured on this
machine, a driver that starts, writes a partition and reads it took 10 s, 4.5-5 s with the archive.
A JVM whose classpath or build does not match the archive ignores it."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pyspark

WORK = """
from pyspark.sql import SparkSession
s = (SparkSession.builder.enableHiveSupport().config("spark.ui.enabled", "false")
     .config("spark.sql.warehouse.dir", "wh").config("spark.sql.shuffle.partitions", "2")
     .getOrCreate())
for q in [
    "CREATE DATABASE a",
    "CREATE TABLE a.t (id int, v string, dt string) USING parquet PARTITIONED BY (dt)",
    "INSERT OVERWRITE a.t PARTITION (dt) SELECT 1, 'x', '20250101'",
    "CREATE VIEW a.w AS SELECT * FROM a.t",
    "ALTER TABLE a.t SET TBLPROPERTIES ('k' = 'v')",
    "SHOW PARTITIONS a.t", "SHOW TBLPROPERTIES a.t", "DESCRIBE FORMATTED a.t",
    "SELECT dt, count(*), max(id) FROM a.w GROUP BY dt",
    "SELECT * FROM a.t x JOIN a.t y USING (id) WHERE x.dt = '20250101'",
]:
    s.sql(q).collect()
s.stop()
"""


def main() -> int:
    venv = Path(sys.prefix)
    archive = venv / f"spark-{pyspark.__version__}-classes.jsa"
    if not archive.is_file():
        # written aside and renamed once the JVM has ended well: a JVM stopped while it dumps
        # leaves no half archive under the name the tests trust
        partial = archive.with_suffix(".jsa.tmp")
        with tempfile.TemporaryDirectory() as work:
            env = {
                **os.environ,
                "SPARK_SUBMIT_OPTS": f"-XX:ArchiveClassesAtExit={partial}",
                "DERBY_SYSTEM_HOME": work,
                "SPARK_LOCAL_IP": "127.0.0.1",
            }
            subprocess.run(
                [sys.executable, "-c", WORK], cwd=work, env=env, check=True, capture_output=True
            )
        if partial.is_file():
            os.replace(partial, archive)
    print(archive if archive.is_file() else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
