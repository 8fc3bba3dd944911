"""Several Spark drivers on one catalog: dbt processes in session mode, each its own JVM, on a Hive
metastore service backed by PostgreSQL (scripts/spark-local.sh start metastore), as an
orchestrator runs them. Two writers of one chain at once: one commits, the other is refused with
the model and the holder named and writes nothing, and its rerun commits. A writer of another
chain in the same schema runs beside them without waiting. A reader process loops over the
published days through all of it, a compaction and an expiration included: no read fails, and
every answer is one of the day's states."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

CHAIN = """
{{{{ config(materialized='chain_incremental', partition_by=['dt'], primary_key=['id', 'dt'],
          partition_timestamp_pattern='$dt', partition_timestamp_formatter='yyyyMMdd',
          partition_expiration_time='3650 d', chain_lock_lease='30 s') }}}}
select id, concat(cast(id as string), '-', dt, '{{{{ var("tag", "") }}}}') as v, dt
from values {rows} as s(id, dt) where dt = '{{{{ var("dt") }}}}'
"""
D1, D2 = "20250801", "20250802"
MAINTAIN = """
{% macro maintain() %}
  {% do compact_chain(model='t', partition={'dt': var('dt')}) %}
  {% do expire_chain(model='t', now='2045-01-01 00:00:00') %}
{% endmacro %}
"""
KEYS = {D1: [1, 2, 3, 4], D2: [1, 2, 5]}
READER = """
import json, os, sys, time
from pyspark.sql import SparkSession
params, schema, days, out, stop = json.loads(sys.argv[1]), *sys.argv[2:]
builder = SparkSession.builder.enableHiveSupport()
for k, v in params.items():
    builder = builder.config(k, v)
spark = builder.getOrCreate()
with open(out, "a") as f:
    while not os.path.exists(stop):
        for day in days.split(","):
            try:
                n, h = spark.sql(
                    f"select count(*), coalesce(sum(xxhash64(id, v) % 1000000007), 0) from {schema}.t "
                    f"where dt = '{day}'").collect()[0]
                f.write(json.dumps({"day": day, "n": n, "hash": h}) + "\\n")
            except Exception as e:
                f.write(json.dumps({"day": day, "error": str(e)[:500]}) + "\\n")
            f.flush()
        time.sleep(0.2)
"""


def state(day_keys: dict[str, list[int]], tags: dict[str, str]) -> dict[int, str]:
    """A day's full state (deduplicate, later day wins) from the days written up to it."""
    out: dict[int, str] = {}
    for day in sorted(day_keys):
        for key in day_keys[day]:
            out[key] = f"{key}-{day}{tags.get(day, '')}"
    return out


def answer(spark, rows: dict[int, str]) -> tuple[int, int]:
    """(count, xxhash64 sum) of a day's rows, as the reader computes it."""
    if not rows:
        return (0, 0)
    df = spark.createDataFrame(sorted(rows.items()), "id int, v string")
    n, h = df.selectExpr("count(*)", "coalesce(sum(xxhash64(id, v) % 1000000007), 0)").collect()[0]
    return (n, h)


class Dbt:
    """dbt commands in processes of their own (each one a Spark driver) on the metastore."""

    def __init__(self, root: Path, metastore, schema: str):
        self.root, self.schema = root, schema
        (root / "models").mkdir(parents=True)
        rows = ", ".join(f"({k}, '{d}')" for d in KEYS for k in KEYS[d])
        for model in ("t", "u"):
            (root / "models" / f"{model}.sql").write_text(CHAIN.format(rows=rows))
        (root / "dbt_project.yml").write_text(
            "name: ms\nversion: '1.0'\nconfig-version: 2\nprofile: ms\nmodel-paths: [models]\n"
            "macro-paths: [macros]\n"
        )
        (root / "macros").mkdir()
        (root / "macros" / "maintain.sql").write_text(MAINTAIN)
        metastore.write_profile(root, "ms", schema)
        self.exe = str(Path(sys.executable).parent / "dbt")

    def start(self, *args: str, failpoint: str | None = None, **vars: str) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if k != "CHAINTABLE_FAILPOINT"}
        if failpoint:
            env["CHAINTABLE_FAILPOINT"] = failpoint
        argv = [self.exe, *args, "--project-dir", str(self.root), "--profiles-dir", str(self.root)]
        argv += ["--vars", json.dumps(vars)]
        return subprocess.Popen(
            argv,
            cwd=self.root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def run(self, *args: str, **vars: str) -> str:
        proc = self.start(*args, **vars)
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, out[-4000:]
        return out


def test_drivers_on_one_metastore_write_one_chain_in_turn_and_readers_never_fail(
    metastore, spark, tmp_path
):
    schema = "ms_" + uuid.uuid4().hex[:8]
    dbt = Dbt(tmp_path / "proj", metastore, schema)
    dbt.run("run", dt=D1)  # the first run: snapshot D1 of both chains
    stop, log = tmp_path / "stop", tmp_path / "reads.jsonl"
    reader_script = tmp_path / "reader.py"
    reader_script.write_text(READER)
    params = json.dumps(metastore.session_params())
    reader = subprocess.Popen(
        [sys.executable, str(reader_script), params, schema, f"{D1},{D2}", str(log), str(stop)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # two writers of t at once: whoever takes the lock holds it after its publish until
        # the other one has ended (refused)
        release = tmp_path / "release"
        hold = f"publish.done:wait={release}"
        writers = {
            tag: dbt.start("run", "-s", "t", failpoint=hold, dt=D2, tag=tag) for tag in ("a", "b")
        }
        other = dbt.start("run", "-s", "u", dt=D2, tag="u")  # another chain of the schema
        deadline = time.monotonic() + 600
        while all(w.poll() is None for w in writers.values()):
            assert time.monotonic() < deadline, "neither writer of t ended"
            time.sleep(0.5)
        release.write_text("")
        outputs = {tag: w.communicate(timeout=600)[0] for tag, w in writers.items()}
        other_out = other.communicate(timeout=600)[0]
        codes = {tag: w.returncode for tag, w in writers.items()}
        assert sorted(codes.values()) == [0, 1], {t: o[-3000:] for t, o in outputs.items()}
        winner = next(t for t, c in codes.items() if c == 0)
        loser = "b" if winner == "a" else "a"
        assert f"{schema}.t is locked: run of model 't' by process" in outputs[loser]
        assert "did not start and wrote nothing" in outputs[loser]
        assert other.returncode == 0, other_out[-3000:]
        assert "locked" not in other_out
        # the loser's rerun commits
        dbt.run("run", "-s", "t", dt=D2, tag=loser)
        # a compaction, then an expiration, in one dbt process (macros/maintain.sql)
        dbt.run("run-operation", "maintain", dt=D2)
        time.sleep(2)
    finally:
        stop.write_text("")
        reader.wait(timeout=120)
    reads = [json.loads(line) for line in log.read_text().splitlines()]
    errors = [r for r in reads if "error" in r]
    assert errors == [], errors[:3]
    s1 = state({D1: KEYS[D1]}, {})
    allowed = {
        D1: {answer(spark, s1), (0, 0)},  # expired at the end
        D2: {(0, 0)} | {answer(spark, state(KEYS, {D2: tag})) for tag in ("a", "b")},
    }
    seen = {day: {(r["n"], r["hash"]) for r in reads if r["day"] == day} for day in allowed}
    for day in allowed:
        assert seen[day] <= allowed[day], (day, seen[day], allowed[day])
    assert len(reads) > 40
    # the final state: D1 expired, D2 the loser's rerun
    assert seen[D2] >= {answer(spark, state(KEYS, {D2: loser}))}
    assert (0, 0) in seen[D1]


def test_a_writer_sigkilled_on_another_host_is_taken_over_after_its_lease(
    metastore, spark, tmp_path, monkeypatch
):
    """A real crash on the shared catalog: a dbt process on host pod-a SIGKILLed after its
    partitions were switched; a process on pod-b is refused while the lease (30 s) runs,
    then breaks the lock, recovers, and its rerun of the day converges."""
    from dbt.adapters.chaintable.publish.safety import HOST_ENV

    schema = "mk_" + uuid.uuid4().hex[:8]
    dbt = Dbt(tmp_path / "proj", metastore, schema)
    monkeypatch.setenv(HOST_ENV, "pod-b")
    dbt.run("run", "-s", "t", dt=D1)
    monkeypatch.setenv(HOST_ENV, "pod-a")
    crashed = dbt.start("run", "-s", "t", failpoint="publish.done:kill", dt=D2, tag="k")
    out = crashed.communicate(timeout=600)[0]
    died = time.monotonic()
    assert crashed.returncode == -9, out[-3000:]
    monkeypatch.setenv(HOST_ENV, "pod-b")  # the pod comes back under another name
    refused = dbt.start("run", "-s", "t", dt=D2, tag="r")
    out = refused.communicate(timeout=600)[0]
    assert refused.returncode == 1, out[-3000:]
    assert "is locked: run of model 't' by process" in out and "on pod-a since" in out
    assert "lease 0:00:30)" in out
    time.sleep(max(0.0, 31 - (time.monotonic() - died)))
    out = dbt.run("run", "-s", "t", dt=D2, tag="r")
    taken = time.monotonic() - died
    assert "breaking the lock of run of model 't' by process" in out
    assert "its heartbeat stopped" in out
    print(f"lease takeover: {taken:.1f} s after the kill (lease 30 s, one dbt process)")
    qs = {
        d: f"select count(*), coalesce(sum(xxhash64(id, v) % 1000000007), 0) from {schema}.t "
        f"where dt = '{d}'"
        for d in (D1, D2)
    }
    got = {d: tuple(rows[0]) for d, rows in metastore.query(qs, tmp_path).items()}
    assert got == {
        D1: answer(spark, state({D1: KEYS[D1]}, {})),
        D2: answer(spark, state(KEYS, {D2: "r"})),
    }
