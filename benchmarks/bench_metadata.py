"""Where a chain keeps its state: table properties (today) against a small metadata table (typed
records, one row per commit, read in one statement). Both sides measured side by side in one
SparkSession on the embedded Derby metastore, with the same state: the keys a chain with N
groups holds after a rewrite of one day (every group's old directory recorded, as the publish
does), read back and written as the adapter does.

- properties: read = SHOW TBLPROPERTIES of the snapshot branch; commit = ALTER TABLE ... SET
  TBLPROPERTIES of the keys a publish changes (in the adapter's stored form: mirrors, pieces).
- table: read = the newest row of a parquet table `t__chain_meta` (one row per commit: a commit
  number, and the state as a JSON document per key); commit = INSERT INTO of one row.

Prints the medians and the ratios table / properties, and writes them as JSON (--out).
    .venv/bin/python benchmarks/bench_metadata.py --groups 10 100 1000 --rounds 7
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base.properties import read_back
from dbt.adapters.chaintable.base.quoting import string

ROOT = Path(tempfile.mkdtemp(prefix="bench_metadata_"))


def spark_session():
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(ROOT / "warehouse"))
        .config(
            "spark.hadoop.javax.jdo.option.ConnectionURL",
            f"jdbc:derby:;databaseName={ROOT / 'metastore_db'};create=true",
        )
        .enableHiveSupport()
        .getOrCreate()
    )


def state(groups: int, commit: int) -> dict[str, str]:
    """The chain's own keys after a rewrite of one day in every group: the directories the
    publish switched away from, the stale and history records, a few scalars. Paths under a
    schema Spark redacts (`ods_hourly`), as the adapter meets them."""
    base = "file:/warehouse/ods_hourly.db/t__delta"
    replaced = {
        f"region=g{g:04d}/dt=20250105": f"{base}/_chain_v/2025010{commit % 9}-{g:08x}/region=g{g:04d}/dt=20250105"
        for g in range(groups)
    }
    history = {f"region=g{g:04d}": "dt=20250101" for g in range(groups)}
    return {
        "chaintable.stage.replaces": json.dumps(replaced),
        "chaintable.history-start": json.dumps(history),
        "chaintable.view-map": f"2025010{commit % 9}-abcdef01 0123456789abcdef",
        "chaintable.last-expire-check": "2025-01-05 00:00:00",
        "chaintable.cumulative-layout": "mask",
    }


def timed(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(spark, groups: int, rounds: int) -> dict[str, float]:
    schema = f"ods_hourly_{groups}"
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {schema}")
    props_table, meta = f"{schema}.t__snapshot", f"{schema}.t__chain_meta"
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {props_table} (id INT, dt STRING) USING parquet PARTITIONED BY (dt)"
    )
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {meta} (commit BIGINT, state MAP<STRING, STRING>) USING parquet"
    )
    counter = iter(range(1, 10**9))

    def commit_properties() -> None:
        spark.sql(S.set_properties(props_table, state(groups, next(counter))))

    def read_properties() -> None:
        rows = spark.sql(S.show_properties(props_table)).collect()
        read_back(props_table, [(str(k), str(v)) for k, v in rows])

    def commit_table() -> None:
        entries = ", ".join(
            f"{string(k)}, {string(v)}" for k, v in state(groups, next(counter)).items()
        )
        spark.sql(f"INSERT INTO {meta} SELECT {next(counter)}, map({entries})")

    def read_table() -> None:
        spark.sql(f"SELECT state FROM {meta} ORDER BY commit DESC LIMIT 1").collect()

    commit_properties(), commit_table(), read_properties(), read_table()  # warm up
    out = {
        "properties_commit_s": timed(commit_properties, rounds),
        "table_commit_s": timed(commit_table, rounds),
        "properties_read_s": timed(read_properties, rounds),
        "table_read_s": timed(read_table, rounds),
    }
    out["commit_ratio_table_over_properties"] = out["table_commit_s"] / out["properties_commit_s"]
    out["read_ratio_table_over_properties"] = out["table_read_s"] / out["properties_read_s"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", default="benchmarks/results/bench_metadata.json")
    args = ap.parse_args()
    spark = spark_session()
    results = {str(g): measure(spark, g, args.rounds) for g in args.groups}
    import pyspark

    record = {"pyspark": pyspark.__version__, "rounds": args.rounds, "by_groups": results}
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    for g, r in results.items():
        print(
            f"{g:>5} groups: commit {r['properties_commit_s']:.3f} s props / {r['table_commit_s']:.3f} s table "
            f"({r['commit_ratio_table_over_properties']:.2f}x); read {r['properties_read_s']:.3f} s props / "
            f"{r['table_read_s']:.3f} s table ({r['read_ratio_table_over_properties']:.2f}x)"
        )


if __name__ == "__main__":
    main()
