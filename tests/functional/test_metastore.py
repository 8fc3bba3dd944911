"""Several Spark drivers on one catalog: dbt processes in session mode, each its own JVM, on a Hive
metastore service backed by PostgreSQL (scripts/spark-local.sh start metastore), as an
orchestrator runs them. Two writers of one chain at once: one commits, the other is refused with
the model and the holder named and writes nothing, and its rerun commits. A writer of another
chain in the same schema runs beside them without waiting. A reader process loops over the
published days through all of it, a compaction and an expiration included: no read fails, and
every answer is one of the day's states. A writer of a third chain SIGKILLed on another host
leaves its lock: a writer is refused while the lease runs, and the rerun after it breaks it.
The first run and the rerun run with `--threads 4`, over the chains of threads_project.py too:
each of their days reads there as with `--threads 1` in a session.

The tests read one history (each dbt process starts a JVM, ~10 s): the chain whose writer is
killed is written by the same processes as the others (its refused writer is u's, beside the
two writers of `t`), its lease running out while they run; the compaction and the expiration
are the rerun's on-run-end hook."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import READER_GRACE, beyond_the_grace
from threads_project import (
    SERVER_CHAINS,
    SERVER_DAYS,
    assert_reads_as_reference,
    normalized,
    queries,
    write_models,
)

from dbt.adapters.chaintable.chain.catalog import READER_GRACE_ENV
from dbt.adapters.chaintable.publish.safety import HOST_ENV

# the crashed writer's lease (s): a process on pod-b reaches k (35 s of dbt's parse and session
# start on a slow machine, 53 s after the crash) before it runs out, and the takeover after it
LEASE = 75
CHAIN = """
{{{{ config(materialized='chain_incremental', partition_by=['dt'], primary_key=['id', 'dt'],
          partition_timestamp_pattern='$dt', partition_timestamp_formatter='yyyyMMdd',
          partition_expiration_time='3650 d', chain_lock_lease='{LEASE} s') }}}}
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
# the reader loops over the days of `t` until `stop` exists, then reads the days of each table
# of `finals` once (the state a run left, read by another driver); before the loop and after
# it, it answers the queries of the file `asks` (the threads models after each of their runs)
READER = """
import json, os, sys, time
from pyspark.sql import SparkSession
params, schema, days, out, stop, finals, asks = json.loads(sys.argv[1]), *sys.argv[2:]
builder = SparkSession.builder.enableHiveSupport()
for k, v in params.items():
    builder = builder.config(k, v)
spark = builder.getOrCreate()

def read(f, table):
    for day in days.split(","):
        began = time.monotonic()
        try:
            n, h = spark.sql(
                f"select count(*), coalesce(sum(xxhash64(id, v) % 1000000007), 0) from {schema}.{table} "
                f"where dt = '{day}'").collect()[0]
            f.write(json.dumps({"table": table, "day": day, "n": n, "hash": h}) + "\\n")
        except Exception as e:
            took = time.monotonic() - began
            f.write(json.dumps({"table": table, "day": day, "took": took, "error": str(e)[:500]}) + "\\n")
        f.flush()

def answer(phase):
    s = spark.newSession()  # no table metadata cached from the reads before
    qs = json.loads(open(asks).read())
    rows = {k: [list(r) for r in s.sql(q).collect()] for k, q in qs.items()}
    with open(f"{asks}.tmp", "w") as f:
        f.write(json.dumps(rows))
    os.rename(f"{asks}.tmp", f"{asks}.{phase}")

answer("start")
with open(out, "a") as f:
    while not os.path.exists(stop):
        read(f, "t")
        time.sleep(1.0)  # a dashboard's pace: a loop every ~2 s still meets every change
    for table in finals.split(","):
        read(f, table)
answer("end")
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
        for model in ("t", "u", "k"):
            (root / "models" / f"{model}.sql").write_text(CHAIN.format(rows=rows, LEASE=LEASE))
        write_models(root / "models" / "threads", SERVER_CHAINS)  # to the schema <schema>_t4
        (root / "dbt_project.yml").write_text(
            "name: ms\nversion: '1.0'\nconfig-version: 2\nprofile: ms\nmodel-paths: [models]\n"
            "macro-paths: [macros]\n"
            "on-run-end: \"{{ maintain() if execute and var('maintain', '') else '' }}\"\n"
            "models:\n  ms:\n    threads:\n      +schema: t4\n"
        )
        (root / "macros").mkdir()
        (root / "macros" / "maintain.sql").write_text(MAINTAIN)
        metastore.write_profile(root, "ms", schema)
        self.exe = str(Path(sys.executable).parent / "dbt")

    def start(
        self, *args: str, failpoint: str | None = None, host: str | None = None, **vars: str
    ) -> subprocess.Popen:
        """A dbt process; `host` names the host it runs on for its lock (HOST_ENV). Files a
        change stopped pointing at are deleted READER_GRACE after it, for the reader."""
        env = {k: v for k, v in os.environ.items() if k not in ("CHAINTABLE_FAILPOINT", HOST_ENV)}
        env[READER_GRACE_ENV] = str(READER_GRACE)
        if failpoint:
            env["CHAINTABLE_FAILPOINT"] = failpoint
        if host:
            env[HOST_ENV] = host
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

    def run(self, *args: str, **kwargs: str) -> str:
        return self.ended(self.start(*args, **kwargs))[1]

    def ended(self, proc: subprocess.Popen, code: int = 0) -> tuple[int, str]:
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == code, out[-4000:]
        return proc.returncode, out


@dataclass
class History:
    """What the processes of the history printed and what the reader read."""

    schema: str
    writers: dict[str, tuple[int, str]] = field(default_factory=dict)  # tag: (code, output)
    other: str = ""  # u's writer, beside t's, with k's writer on pod-b within the lease
    rerun: str = ""  # t's loser again, with k's writer on pod-b after the lease
    taken: float = 0.0  # seconds from k's kill to the end of the run that took its lock over
    reads: list[dict] = field(default_factory=list)
    # the threads models read after the first run (D1) and after the rerun (D2):
    # {day: {query: rows}}
    threads: dict[str, dict[str, list]] = field(default_factory=dict)
    reader_err: str = ""

    @property
    def loser(self) -> str:
        return next(t for t, (c, _) in self.writers.items() if c != 0)


def kill_k(dbt: Dbt) -> float:
    """k's writer SIGKILLed on pod-a after its partitions were switched. The time of the kill."""
    crashed = dbt.start("run", "-s", "k", failpoint="publish.done:kill", host="pod-a", dt=D2)
    dbt.ended(crashed, -9)
    return time.monotonic()


def write_t_twice(dbt: Dbt, h: History, release: Path) -> None:
    """Two writers of t at once: whoever takes the lock holds it after its publish until the
    other one has ended (refused); a writer of u (another chain of the schema) beside them, on
    pod-b, where k's pod came back under another name: its k, within k's lease (LEASE), is
    refused."""
    hold = f"publish.done:wait={release}"
    writers = {
        tag: dbt.start("run", "-s", "t", failpoint=hold, dt=D2, tag=tag) for tag in ("a", "b")
    }
    other = dbt.start("run", "-s", "u", "k", host="pod-b", dt=D2, tag="u")
    deadline = time.monotonic() + 600
    while all(w.poll() is None for w in writers.values()):
        assert time.monotonic() < deadline, "neither writer of t ended"
        time.sleep(0.5)
    release.write_text("")
    outputs = {tag: w.communicate(timeout=600)[0] for tag, w in writers.items()}
    h.writers = {tag: (w.returncode, outputs[tag]) for tag, w in writers.items()}
    assert sorted(c for c, _ in h.writers.values()) == [0, 1], {
        t: o[-3000:] for t, o in outputs.items()
    }
    h.other = dbt.ended(other, 1)[1]


@pytest.fixture(scope="module")
def history(metastore, tmp_path_factory, threads_reference) -> History:
    tmp = tmp_path_factory.mktemp("ms")
    h = History("ms_" + uuid.uuid4().hex[:8])
    dbt = Dbt(tmp / "proj", metastore, h.schema)
    # the first run: snapshot D1 of the three chains, and D1 of the threads models
    dbt.run("run", "--threads", "4", dt=D1)
    stop, log, asks = tmp / "stop", tmp / "reads.jsonl", tmp / "threads.json"
    asks.write_text(json.dumps(queries(f"{h.schema}_t4", SERVER_CHAINS)))
    (tmp / "reader.py").write_text(READER)
    params = json.dumps(metastore.session_params())
    with open(tmp / "reader.err", "w") as err:
        reader = subprocess.Popen(
            [sys.executable, str(tmp / "reader.py"), params, h.schema, f"{D1},{D2}", str(log)]
            + [str(stop), "k", str(asks)],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        died = kill_k(dbt)
        write_t_twice(dbt, h, tmp / "release")
        # k's lease runs out meanwhile: this process builds the threads models' reference (in
        # its own session, unless the other test worker has) instead of only sleeping. A
        # failure there is left to the threads test, whose own call builds it again and fails
        with contextlib.suppress(Exception):
            threads_reference()
        time.sleep(max(0.0, LEASE + 1 - (time.monotonic() - died)))
        # the reader has answered the threads queries of D1 (or died) before D2 is written
        deadline = time.monotonic() + 300
        while not Path(f"{asks}.start").exists() and reader.poll() is None:
            assert time.monotonic() < deadline, "the reader never answered the threads queries"
            time.sleep(0.5)
        # the loser's rerun of t, and k's writer on pod-b once the lease has run out, beside D2
        # of the threads models; then a compaction and an expiration of t, its on-run-end hook
        # (macros/maintain.sql)
        h.rerun = dbt.run(
            "run", "--threads", "4", "-s", "t", "k", "path:models/threads",
            host="pod-b", dt=D2, tag=h.loser, maintain="1",
        )  # fmt: skip
        h.taken = time.monotonic() - died
        time.sleep(2)
    finally:
        stop.write_text("")
        try:
            reader.wait(timeout=120)
        finally:
            if reader.poll() is None:
                reader.kill()
    h.reader_err = (tmp / "reader.err").read_text()
    assert log.exists(), h.reader_err[-3000:]
    h.reads = [json.loads(line) for line in log.read_text().splitlines()]
    for day, phase in ((D1, "start"), (D2, "end")):
        if Path(f"{asks}.{phase}").exists():
            h.threads[day] = json.loads(Path(f"{asks}.{phase}").read_text())
    return h


def test_drivers_on_one_metastore_write_one_chain_in_turn_and_readers_never_fail(history, spark):
    h = history
    codes = {tag: code for tag, (code, _) in h.writers.items()}
    assert sorted(codes.values()) == [0, 1], {t: o[-3000:] for t, (_, o) in h.writers.items()}
    loser = h.loser
    assert f"{h.schema}.t is locked: run of model 't' by process" in h.writers[loser][1]
    assert "did not start and wrote nothing" in h.writers[loser][1]
    # u's writer waited for neither t's writers nor k's lock, and wrote its day
    assert f"{h.schema}.t is locked" not in h.other and f"{h.schema}.u is locked" not in h.other
    assert re.search(rf"OK created .* model {h.schema}\.u\b", h.other), h.other[-3000:]
    errors = [(r["took"], r["error"]) for r in h.reads if "error" in r]
    assert beyond_the_grace(errors) == [], errors[:3]
    reads = [r for r in h.reads if r["table"] == "t"]
    s1 = state({D1: KEYS[D1]}, {})
    allowed = {
        D1: {answer(spark, s1), (0, 0)},  # expired at the end
        D2: {(0, 0)} | {answer(spark, state(KEYS, {D2: tag})) for tag in ("a", "b")},
    }
    seen = {day: {(r["n"], r["hash"]) for r in reads if r["day"] == day} for day in allowed}
    for day in allowed:
        assert seen[day] <= allowed[day], (day, seen[day], allowed[day])
    assert len(reads) > 40
    # the final state: D1 expired, D2 the loser's rerun (h.rerun ended with 0: it committed)
    assert seen[D2] >= {answer(spark, state(KEYS, {D2: loser}))}
    assert (0, 0) in seen[D1]


def test_a_writer_sigkilled_on_another_host_is_taken_over_after_its_lease(history, spark):
    """A real crash on the shared catalog: a dbt process on host pod-a SIGKILLed after its
    partitions were switched; a process on pod-b is refused while the lease (LEASE) runs,
    then breaks the lock, recovers, and its rerun of the day converges."""
    h = history
    assert "is locked: run of model 'k' by process" in h.other
    assert "on pod-a since" in h.other and f"lease {dt.timedelta(seconds=LEASE)})" in h.other
    assert "breaking the lock of run of model 'k' by process" in h.rerun
    assert "its heartbeat stopped" in h.rerun
    print(f"lease takeover: {h.taken:.1f} s after the kill (lease {LEASE} s, one dbt process)")
    got = {r["day"]: (r["n"], r["hash"]) for r in h.reads if r["table"] == "k"}
    assert got == {
        D1: answer(spark, state({D1: KEYS[D1]}, {})),
        D2: answer(spark, state(KEYS, {D2: h.loser})),
    }


def test_threads_4_equal_threads_1_in_processes_on_a_metastore_service(history, threads_reference):
    """The first run (D1) and the rerun (D2) ran with `--threads 4` over the chains of
    threads_project.py too, in dbt processes on the metastore service, beside the other
    writers: read by another driver after each, every model and branch equals the same day run
    with `--threads 1` in a session."""
    assert SERVER_DAYS == [D1, D2]
    assert list(history.threads) == SERVER_DAYS, history.reader_err[-3000:]
    got = {day: normalized(rows) for day, rows in history.threads.items()}
    assert_reads_as_reference(got, threads_reference)
