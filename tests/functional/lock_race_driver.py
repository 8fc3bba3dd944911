"""One writer of test_lock_race_metastore.py: a Spark driver of its own on the metastore service,
so that three writers' catalog calls reach the metastore side by side (in one driver, Spark
sends them one at a time). Writer 0 also sets each trial up and checks it.

    python lock_race_driver.py <session params json> <schema> <writer> <trials> <dir>

Files in <dir> order the trials: `lock-<n>` (writer 0 planted trial n's stale lock),
`at-<n>-<i>` (writer i is at lock.break), `out-<n>-<i>.json` (what writer i's run returned or
raised), `check-<n>.json` (writer 0's read of trial n: the day's rows, the chain's other
tables), `final.json` (every day's rows at the end)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).parent)]

WAIT_S = 300


def wait_for(paths: list[Path]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not all(p.exists() for p in paths):
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {WAIT_S} s for {[str(p) for p in paths]}")
        time.sleep(0.05)


def put(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.rename(path)


def main() -> None:
    params, schema, me, trials, where = sys.argv[1:6]
    i, n_trials, out = int(me), int(trials), Path(where)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.enableHiveSupport()
    for k, v in json.loads(params).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()

    import test_lock_race as race

    from dbt.adapters.chaintable.base import failpoints
    from dbt.adapters.chaintable.publish import lock as lock_module

    writers = range(race.WRITERS)
    trial = {"n": -1, "held": False}

    def at(name: str) -> None:  # held at lock.break until every writer is there
        if name == "lock.break" and not trial["held"]:
            trial["held"] = True
            put(out / f"at-{trial['n']}-{i}", "")
            wait_for([out / f"at-{trial['n']}-{w}" for w in writers])

    failpoints.wanted_failpoint = lambda: None
    lock_module.failpoint = at  # type: ignore[assignment]
    if i == 0:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {schema}")
        race.write_day(spark, schema, "20250101", tag="first")
    days = ["20250101"]
    for n in range(n_trials):
        day = f"202502{n + 1:02d}"
        days.append(day)
        trial.update(n=n, held=False)
        if i == 0:
            race.stale_lock(spark, schema)
            put(out / f"lock-{n}", "")
        wait_for([out / f"lock-{n}"])
        try:
            race.write_day(spark, schema, day, tag=f"w{i}")
            result = {"ok": True}
        except Exception as e:  # the test reads what each writer got
            result = {"ok": False, "type": type(e).__name__, "error": str(e)}
        put(out / f"out-{n}-{i}.json", json.dumps(result))
        if i == 0:
            wait_for([out / f"out-{n}-{w}.json" for w in writers])
            check = {
                "rows": race.day_rows(spark, schema, day),
                "tables": race.chain_names(spark, schema),
            }
            put(out / f"check-{n}.json", json.dumps(check))
        wait_for([out / f"check-{n}.json"])
    if i == 0:
        final = {d: race.day_rows(spark, schema, d) for d in days}
        put(out / "final.json", json.dumps(final))
        spark.sql(f"DROP DATABASE IF EXISTS {schema} CASCADE")
    spark.stop()


if __name__ == "__main__":
    main()
