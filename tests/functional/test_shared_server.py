"""A shared Spark server under load: reader sessions of a Thrift Server and of a Spark Connect
server while the chain takes daily runs, a compaction, a new column and an expiration, and two
dbt processes writing one chain. Servers start from the pyspark wheel on 127.0.0.1 and stop by
PID (servers.py); the Thrift Server is conftest.py's, shared with test_cluster.py in a process."""

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import servers
from helpers import (
    CHANGES,
    EXPECTED_0803,
    EXPECTED_ROWS,
    MODEL,
    READER_GRACE,
    ThriftProject,
    beyond_the_grace,
    normalized,
    write_session_project,
)

from dbt.adapters.chaintable.chain.catalog import READER_GRACE_ENV


def test_readers_in_other_sessions_never_lose_the_view(thrift_server, tmp_path, monkeypatch):
    """Three reader sessions on the Thrift Server loop over the published days while the chain
    takes daily runs, a compaction, a new column and an expiration, each of which points the
    view at a new layout: every read that runs within the reader grace succeeds and gives the
    day's answer from before or after the change (only the expiration changes the days read).
    The view is altered in place (ALTER VIEW AS), never replaced: Spark runs CREATE OR REPLACE VIEW as a
    drop and a create in the metastore, and a reader between the two found no view."""
    import threading
    import time

    from pyhive import hive

    monkeypatch.setenv(READER_GRACE_ENV, str(READER_GRACE))
    p = ThriftProject(tmp_path / "proj", thrift_server, "s_" + uuid.uuid4().hex[:8])
    p.sql(f"CREATE DATABASE {p.schema}")
    days = ["20250801", "20250802", "20250803"]
    query = "select count(*), sum(amount) from {s}.t where dt = '{d}'"
    stop, answers, errors = threading.Event(), [], []

    def reader() -> None:
        conn = hive.connect(host=servers.HOST, port=thrift_server.port, username="r")
        try:
            while not stop.is_set():
                for d in days:
                    cur = conn.cursor()
                    began = time.monotonic()
                    try:
                        cur.execute(query.format(s=p.schema, d=d))
                        answers.append((d, tuple(str(v) for v in cur.fetchall()[0])))
                    except Exception as e:  # every failure is the finding, with its duration
                        took = round(time.monotonic() - began, 1)
                        errors.append((d, took, str(e)[:200] + " ... " + str(e)[-300:]))
                    # a dashboard's pace, not a tight loop: unpaced, three loops of tiny
                    # broadcast joins filled the server's 1 GB heap with hash pages (8 MB
                    # each then; 1 MB now, servers._sql_confs) faster than Spark cleaned them
                    # up (OutOfMemoryError in a broadcast).
                    # A read a second: every change still meets reads of each day, and the
                    # readers leave the machine's CPU to the writer (the Connect test below)
                    time.sleep(1.0)
        finally:
            conn.close()

    try:
        p.sql(f"CREATE TABLE {p.schema}.changes USING parquet AS {CHANGES}")
        p.model("t", MODEL)
        for d in days:
            p.dbt("run", "--select", "t", vars={"dt": d})
        expected = {d: tuple(str(v) for v in p.sql(query.format(s=p.schema, d=d))[0]) for d in days}
        threads = [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        statements = []
        for d in ("20250804",):  # a daily run points the view at a new layout
            p.dbt("run", "--select", "t", vars={"dt": d})
            statements.append(p.log_text())
        p.run_op("compact_chain", {"model": "t", "partition": {"dt": "20250803"}})
        statements.append(p.log_text())
        # a new column: the sessions cached the branches' old schema; the run waits out the
        # server's cache time (3 s) before the view names the column
        p.model(
            "t",
            MODEL.replace(
                "partition_expiration_time='3650 d'",
                "partition_expiration_time='3650 d', on_schema_change='append_new_columns'",
            ).replace("select id,", "select id, 'x' as w,"),
        )
        p.sql(
            f"INSERT INTO {p.schema}.changes VALUES "
            "(6, CAST(3.00 AS DECIMAL(10,2)), 'f', '+I', 11, 'EU', '20250807')"
        )
        p.dbt("run", "--select", "t", vars={"dt": "20250807"})
        # the run waits unless its own work after the ADD COLUMNS took longer than the 3 s
        assert "cached schemas (spark.sql.metadataCacheTTLSeconds = 3s)" in p.log_text()
        # the day's one new row has the new column's value, the older rows none
        new = p.sql(f"select id, w from {p.schema}.t where dt = '20250807' and w is not null")
        assert new == [(6, "x")]
        time.sleep(1)  # the readers read through the new view
        # an expiration: snapshot 0801 goes with delta 0802 (0803 is the anchor kept), so those
        # two days read as absent from then on, never as a partial chain
        p.run_op("expire_chain", {"model": "t", "now": "2035-08-06 00:00:00"})
        statements.append(p.log_text())
        gone = ("0", "None")
        assert p.sql(query.format(s=p.schema, d="20250801")) == [(0, None)]
        time.sleep(1)
        stop.set()
        for t in threads:
            t.join(timeout=120)
        assert beyond_the_grace([(took, error) for _, took, error in errors]) == []
        assert len(answers) >= 3 * len(days)
        allowed = {(d, expected[d]) for d in days} | {(d, gone) for d in days[:2]}
        assert set(answers) <= allowed
        assert {(d, expected[d]) for d in days} <= set(answers)
        log = "\n".join(statements)
        assert f"ALTER VIEW {p.schema}.t AS" in log
        assert f"CREATE OR REPLACE VIEW {p.schema}.t " not in log
    finally:
        stop.set()
        p.sql(f"DROP DATABASE IF EXISTS {p.schema} CASCADE")
        p.conn.close()


def test_two_dbt_processes_writing_one_chain_on_a_shared_server(thrift_server, tmp_path):
    """Two dbt processes run the same chain model on one Thrift Server: the second (this
    process's dbt), started while the first holds the table's lock (held longer by a failpoint),
    is refused with the model and the holder named and writes nothing; the first finishes. A
    holder SIGKILLed in the middle of its run leaves its lock in the server's catalog: the next
    process on the host (this one) finds the holder gone, breaks the lock and writes the day.
    The holders are processes of their own (one is killed); the others run in this process,
    another process on the host as far as the lock can tell (its owner names the pid)."""
    import time

    p = ThriftProject(tmp_path / "proj", thrift_server, "s_" + uuid.uuid4().hex[:8])
    p.sql(f"CREATE DATABASE {p.schema}")
    dbt_bin = str(Path(sys.executable).parent / "dbt")
    base_env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    base_env.pop("CHAINTABLE_FAILPOINT", None)

    def start(day: str, failpoint: str | None = None) -> subprocess.Popen:
        env = dict(base_env, **({"CHAINTABLE_FAILPOINT": failpoint} if failpoint else {}))
        args = ["run", "--select", "t", "--vars", json.dumps({"dt": day})]
        dirs = ["--project-dir", str(p.root), "--profiles-dir", str(p.root)]
        return subprocess.Popen(
            [dbt_bin, *args, *dirs], env=env, cwd=p.root, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip

    def locked() -> bool:
        return bool(p.sql(f"SHOW TABLES IN {p.schema} LIKE 't__chain_lock'"))

    def day_rows(day: str):
        return normalized(
            p.sql(f"select region, id, amount, note from {p.schema}.t where dt = '{day}'")
        )

    try:
        p.sql(f"CREATE TABLE {p.schema}.changes USING parquet AS {CHANGES}")
        p.model("t", MODEL)
        for d in ("20250801", "20250802"):
            p.dbt("run", "--select", "t", vars={"dt": d})
        before = day_rows("20250802")

        release = tmp_path / "release"
        first = start("20250803", f"run.staged:wait={release}")
        deadline = time.monotonic() + 120
        while not locked():
            assert first.poll() is None and time.monotonic() < deadline, "no lock taken"
            time.sleep(0.5)
        p.dbt("run", "--select", "t", vars={"dt": "20250803"}, expect_ok=False)
        out2 = p.log_text()
        assert (
            f"{p.schema}.t is locked: run of model 't' by process {first.pid} on " in out2
            and "so this run of model 't' did not start and wrote nothing" in out2
        ), out2[-3000:]
        assert first.poll() is None  # refused while the first was still writing
        release.write_text("")
        out1, _ = first.communicate(timeout=300)
        assert first.returncode == 0, out1[-3000:]
        assert day_rows("20250802") == before
        assert day_rows("20250803") == normalized(EXPECTED_0803)
        assert not locked()

        killed = start("20250804", "run.staged:kill")
        killed.communicate(timeout=300)
        assert killed.returncode == -9
        assert locked()  # as the killed process left it
        assert day_rows("20250803") == normalized(EXPECTED_0803)
        p.dbt("run", "--select", "t", vars={"dt": "20250804"})
        out = p.log_text()
        assert f"process {killed.pid} on" in out and "has exited" in out
        # key 4 (US) deleted on 0804
        assert day_rows("20250804") == normalized([r for r in EXPECTED_0803 if r[1] != 4])
        assert not locked()
        assert p.sql(f"SHOW TABLES IN {p.schema} LIKE 't__chain_*'") == []
    finally:
        p.sql(f"DROP DATABASE IF EXISTS {p.schema} CASCADE")
        p.conn.close()


CONNECT_READERS = """
import json, os, sys, threading, time
from pyspark.sql import SparkSession

url, schema, days, stop_file, out_file, n = sys.argv[1:7]
lock, out = threading.Lock(), open(out_file, "a")

def emit(record):
    with lock:
        out.write(json.dumps(record) + "\\n")
        out.flush()

def reader(i):
    spark = SparkSession.builder.remote(url).create()  # a session of its own on the server
    try:
        while not os.path.exists(stop_file):
            for d in days.split(","):
                began = time.monotonic()
                try:
                    row = spark.sql(
                        f"select count(*), sum(amount) from {schema}.t where dt = '{d}'"
                    ).collect()[0]
                    emit({"reader": i, "day": d, "answer": [str(row[0]), str(row[1])]})
                except Exception as e:
                    took = round(time.monotonic() - began, 1)
                    emit({"reader": i, "day": d, "error": f"{took}s {str(e)[:500]}"})
                # a read a second per session: with a read every 0.25 s the three sessions
                # took 11-23 s of the machine's CPU from the run they watch (this test alone:
                # 110 s, then 87, 93 and 99 s over three runs)
                time.sleep(1.0)
    finally:
        spark.stop()

threads = [threading.Thread(target=reader, args=(i,)) for i in range(int(n))]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


# dbt in one process of its own (the pytest process holds a local session, and SPARK_REMOTE
# makes dbt's session a Connect client): it runs the commands written to <inbox>/<n>.json in
# turn (an argv; null stops it), each answered with one line `RESULT {"ok": ..., "log": [...]}`
# (the messages dbt logged). Not through stdin, which is /dev/null: given a pipe, the process
# blocked reading it in the middle of its first command. One process for every command of the
# test, not one per command: a process start costs ~10 s here
CONNECT_DBT = """
import json, os, sys, time
from dbt.cli.main import dbtRunner


def main(proj, inbox):
    n = 0
    while True:
        path = os.path.join(inbox, f"{n}.json")
        while not os.path.exists(path):
            time.sleep(0.05)
        with open(path) as f:
            argv = json.load(f)
        if argv is None:
            return
        msgs = []

        def collect(event):
            msg = getattr(event.info, "msg", "")
            if msg:
                msgs.append(str(msg))

        res = dbtRunner(callbacks=[collect]).invoke(
            argv + ["--project-dir", proj, "--profiles-dir", proj]
        )
        print("RESULT " + json.dumps({"ok": bool(res.success), "log": msgs}), flush=True)
        n += 1


# dbt's multiprocessing context is 'spawn': a child it starts imports this script again, which
# unguarded ran every command of the inbox a second time (30 s at the end of this test)
if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
"""


class DbtProcess:
    """CONNECT_DBT started in `root`: `run(*argv)` runs one dbt command in it."""

    def __init__(self, root: Path, proj: Path, env: dict[str, str]):
        import queue
        import threading

        script, self.inbox, self.sent = root / "dbt_process.py", root / "inbox", 0
        script.write_text(CONNECT_DBT)
        self.inbox.mkdir()
        self.proc = subprocess.Popen(
            [sys.executable, str(script), str(proj), str(self.inbox)], env=env, cwd=root,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.out: list[str] = []

        def pump(stdout) -> None:
            for line in stdout:
                self.lines.put(line)
            self.lines.put(None)

        threading.Thread(target=pump, args=(self.proc.stdout,), daemon=True).start()

    def send(self, argv: list[str] | None) -> None:
        tmp = self.inbox / f"{self.sent}.tmp"
        tmp.write_text(json.dumps(argv))
        tmp.rename(self.inbox / f"{self.sent}.json")  # whole, never half written
        self.sent += 1

    def run(self, *argv: str, **vars) -> list[str]:
        """The messages of `dbt <argv> --vars <vars>`, which must succeed."""
        self.send([*argv, "--vars", json.dumps(vars)])
        while True:
            line = self.lines.get(timeout=600)
            assert line is not None, "the dbt process exited: " + "".join(self.out[-60:])
            if line.startswith("RESULT "):
                result = json.loads(line[len("RESULT ") :])
                assert result["ok"], "\n".join(result["log"][-80:])
                return result["log"]
            self.out.append(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.send(None)
        try:
            self.proc.wait(timeout=120)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def test_readers_of_a_spark_connect_server_never_fail(tmp_path_factory):
    """The reader test of a Thrift Server, on a Spark Connect server: dbt runs in session mode
    with SPARK_REMOTE (in a process of its own, DbtProcess) while three Spark Connect sessions
    of another process loop over the published days; daily runs, a compaction, a new column and
    an expiration: every read that runs within the reader grace succeeds with the day's answer
    from before or after the change. dbt-spark's session builder returns a Spark Connect
    session there, so every statement runs on the server (its own Hive catalog and warehouse):
    the days read as on a session of dbt's own (EXPECTED_ROWS, test_cluster.py's standalone
    cluster), and the dbt process keeps no catalog of its own."""
    import time

    root = tmp_path_factory.mktemp("connect_readers")
    server = servers.start_connect(root / "server")
    source = CHANGES.replace(
        "  (4, CAST(1.00 AS DECIMAL(10,2)), 'new', '-D', 10, 'US', '20250804')",
        "  (4, CAST(1.00 AS DECIMAL(10,2)), 'new', '-D', 10, 'US', '20250804'),\n"
        "  (6, CAST(3.00 AS DECIMAL(10,2)), 'f', '+I', 11, 'EU', '20250807')",
    )
    assert source != CHANGES
    model = MODEL.replace("from {{ target.schema }}.changes", f"from ({source}) src")
    proj = write_session_project(root, {"spark.sql.shuffle.partitions": "2"}, model)
    env = {
        **os.environ,
        "SPARK_REMOTE": server.url,
        "DERBY_SYSTEM_HOME": str(root),
        READER_GRACE_ENV: str(READER_GRACE),
    }
    env.pop("CHAINTABLE_FAILPOINT", None)

    days = ["20250801", "20250802", "20250803"]
    # the days' count(*) and sum(amount), from CHANGES: key 2 deleted on 0802, key 1's late
    # row of 0803 loses to 0802's newer sequence
    expected = {
        "20250801": ("3", "35.75"),
        "20250802": ("3", "17.25"),
        "20250803": ("4", "20.50"),
    }
    stop_file, out_file = root / "stop", root / "reads.jsonl"
    readers, dbt_process = None, DbtProcess(root, proj, env)
    dbt = dbt_process.run

    def dumped(query: str | None = None) -> list[str]:
        """The rows the project's `dump` macro logs for `query` (by default days 0803, 0804)."""
        args = ["--args", json.dumps({"query": query})] if query else []
        return [
            m.split("ROW ", 1)[1]
            for m in dbt("run-operation", "dump", *args)
            if m.startswith("ROW ")
        ]

    try:
        for d in days:
            dbt("run", "--select", "t", dt=d)
        dbt_log = proj / "logs" / "dbt.log"
        first_runs = len(dbt_log.read_text())  # the first run creates the view; then altered
        script = root / "readers.py"
        script.write_text(CONNECT_READERS)
        reader_env = {k: v for k, v in env.items() if k != "SPARK_REMOTE"}
        readers = subprocess.Popen(
            [sys.executable, str(script), server.url, "s", ",".join(days), str(stop_file),
             str(out_file), "3"],
            env=reader_env, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip

        def reads() -> list[dict]:
            if not out_file.exists():
                return []
            return [json.loads(x) for x in out_file.read_text().splitlines() if x.strip()]

        def read_until(done: Callable[[list[dict]], bool], what: str) -> None:
            """Waits (up to 120 s) until the reads so far satisfy `done`; the readers run."""
            deadline = time.monotonic() + 120
            while not done(reads()):
                assert readers.poll() is None, readers.communicate()[0][-3000:]
                assert time.monotonic() < deadline, what
                time.sleep(0.5)

        read_until(
            lambda rs: len({r["reader"] for r in rs}) >= 3, "the reader sessions never read"
        )  # every session has read once
        dbt("run", "--select", "t", dt="20250804")
        dbt("run-operation", "compact_chain", "--args",
            json.dumps({"model": "t", "partition": {"dt": "20250803"}}))  # fmt: skip
        # the rows of days 0803 and 0804, read on the server through the view
        assert dumped() == EXPECTED_ROWS
        (proj / "models" / "t.sql").write_text(
            model.replace(
                "partition_expiration_time='3650 d'",
                "partition_expiration_time='3650 d', on_schema_change='append_new_columns'",
            ).replace("select id,", "select id, 'x' as w,")
        )
        dbt("run", "--select", "t", dt="20250807")
        assert dumped(
            "select concat_ws('|', cast(id as string), w) from s.t "
            "where dt = '20250807' and w is not null"
        ) == ["6|x"]
        time.sleep(1)  # the readers read through the new view
        # snapshot 0801 goes with delta 0802 (0803 is the anchor kept)
        dbt("run-operation", "expire_chain", "--args", json.dumps({"now": "2035-08-06 00:00:00",
            "model": "t"}))  # fmt: skip
        read_before = len(reads())
        read_until(  # a session has read the expired day since
            lambda rs: any(
                r["day"] == "20250801" and r.get("answer") == ["0", "None"]
                for r in rs[read_before:]
            ),
            "no session read day 20250801 after the expiration",
        )
        stop_file.touch()
        out, _ = readers.communicate(timeout=120)
        assert readers.returncode == 0, out[-3000:]
        records = reads()
        failures = [r["error"].split("s ", 1) for r in records if "error" in r]
        assert beyond_the_grace([(float(took), error) for took, error in failures]) == []
        assert len(records) >= 3 * len(days)
        # a read that failed within the grace (checked above) has no answer
        answers = {(r["day"], tuple(r["answer"])) for r in records if "answer" in r}
        gone = ("0", "None")
        allowed = {(d, expected[d]) for d in days} | {(d, gone) for d in days[:2]}
        assert answers <= allowed
        assert {(d, expected[d]) for d in days} <= answers
        assert ("20250801", gone) in answers  # the readers saw the expiration
        log = dbt_log.read_text()[first_runs:]
        assert "ALTER VIEW s.t AS" in log and "CREATE OR REPLACE VIEW s.t " not in log
        assert "cached schemas (spark.sql.metadataCacheTTLSeconds = 3s)" in log
        # the chain tables live in the server's warehouse, not in one of the dbt process
        assert (root / "server" / "warehouse" / "s.db" / "t__snapshot").is_dir()
        assert (root / "server" / "warehouse" / "s.db" / "t__delta").is_dir()
        assert not (root / "spark-warehouse").exists() and not (root / "metastore_db").exists()
        assert "CANNOT_MODIFY_STATIC_CONFIG" not in "".join(dbt_process.out)
    finally:
        if readers is not None and readers.poll() is None:
            readers.kill()
        dbt_process.stop()
        server.stop()
    assert not server.alive()
