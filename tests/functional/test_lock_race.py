"""Writers racing for one chain's lock on a real Spark catalog (docs/design.md#crash-safety-and-locking).

Each writer is the adapter of a process of its own (its own ChainLock, Runner and heartbeat), in
a thread of this one, sending its SQL to this process's SparkSession: the same statements a dbt
run sends, with the catalog's own answers, without a dbt process start per writer (a trial
costs a few seconds, so many can run)."""

from __future__ import annotations

import datetime as dt
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from dbt.adapters.chaintable.base import failpoints
from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base.partitions import ChainPlanError
from dbt.adapters.chaintable.base.runner import LeaseLostError
from dbt.adapters.chaintable.publish import lease as lease_module
from dbt.adapters.chaintable.publish import safety
from tests.unit.fake_catalog import fake_adapter

CONFIG: dict[str, Any] = {
    "partition_by": ["region", "dt"],
    "chain_partition_keys": ["dt"],
    "primary_key": ["id", "region", "dt"],
    "cumulative_delta": False,
}
COLUMNS = "id int, v string, region string, dt string"
WRITERS = 3
# the chain's own relations; anything else named t__* is scratch or a lock
DERIVED = ("t__snapshot", "t__delta", "t__chain_map")
# in one driver Spark sends the writers' catalog calls one at a time: the trials here are few,
# the twenty that race on the metastore itself are test_lock_race_metastore.py's
TRIALS = 5


class SparkConnections:
    """What the adapter's Runner asks of dbt's connection manager, answered by a SparkSession."""

    profile = None

    def __init__(self, spark):
        self.spark = spark

    def add_query(self, sql: str, auto_begin: bool = False, **_: Any):
        rows = [tuple(r) for r in self.spark.sql(sql).collect()]
        return None, SimpleNamespace(fetchall=lambda: rows)

    def set_connection_name(self, name: str) -> None:
        pass

    def release(self) -> None:
        pass

    def clear_thread_connection(self) -> None:
        pass


def writer(spark):
    from dbt.adapters.chaintable.impl import ChainTableAdapter

    class Adapter(ChainTableAdapter):
        def cached_relation(self, database: str, schema: str, identifier: str):
            """What dbt's cache would hold: the chain's view once it exists."""
            found = spark.sql(f"SHOW TABLES IN {schema} LIKE '{identifier}'").collect()
            return (
                self.Relation.create(schema=schema, identifier=identifier, type="view")
                if (found)
                else None
            )

    return fake_adapter(SparkConnections(spark), Adapter)


def relation(adapter, schema: str, name: str = "t"):
    return adapter.Relation.create(schema=schema, identifier=name, type="view")


def write_day(spark, schema: str, day: str, config: dict[str, Any] | None = None, tag: str = ""):
    """One writer's run of `day`: its own rows (v tagged) from a source of its own."""
    source = f"{schema}.src_{tag or 'x'}_{day}"
    rows = ", ".join(f"({i}, '{tag}-{day}-{i}', '{r}', '{day}')" for i, r in enumerate("AB"))
    spark.sql(f"CREATE TABLE IF NOT EXISTS {source} ({COLUMNS}) USING parquet")
    spark.sql(f"INSERT OVERWRITE {source} VALUES {rows}")
    adapter = writer(spark)
    cfg = {**CONFIG, "chain_partition": {"dt": day}, **(config or {})}
    run = adapter.chain_prepare(relation(adapter, schema), "t", cfg, False, False)
    return adapter.chain_execute(run, f"SELECT * FROM {source}")


def stale_lock(spark, schema: str, lease_s: int = 10) -> dict[str, str]:
    """A lock left by a writer on another host whose heartbeat stopped long ago."""
    beat = safety.utcnow() - dt.timedelta(seconds=10 * lease_s)
    props = {
        safety.P_OWNER: "pod-dead:4242:inv-dead",
        safety.P_SINCE: "2025-01-01 00:00:00",
        safety.P_OPERATION: "run of model 't'",
        safety.P_HEARTBEAT: beat.strftime(safety.TS),
        safety.P_LEASE: str(lease_s),
        safety.P_WRITER: "dead0000",
    }
    spark.sql(S.create_lock_view(f"{schema}.t__chain_lock", props))
    return props


def chain_names(spark, schema: str) -> list[str]:
    return sorted(r[1] for r in spark.sql(f"SHOW TABLES IN {schema} LIKE 't__*'").collect())


def day_rows(spark, schema: str, day: str) -> list[tuple]:
    return sorted(
        tuple(r) for r in spark.sql(f"SELECT id, v FROM {schema}.t WHERE dt = '{day}'").collect()
    )


def race(p, day: str, i: int, outcome: dict[int, Any], held: threading.local) -> None:
    """Writer `i`'s run of `day`: what it returned or raised goes to `outcome`."""
    held.done = False
    try:
        outcome[i] = write_day(p.spark, p.schema, day, tag=f"w{i}")
    except Exception as e:  # the test reads what each writer got
        outcome[i] = e


@pytest.fixture
def first_load(project):
    """A chain `t` with its first day loaded."""
    write_day(project.spark, project.schema, "20250101", tag="first")
    return project


def test_three_writers_breaking_one_stale_lock_one_wins_each_time(first_load, monkeypatch):
    """Each trial: a stale lock; three writers judge it stale and are held at `lock.break`
    until all three are there, then go on together. Exactly one breaks it and publishes; the
    others are refused naming the holder; the day reads as the winner's rows; every file the
    chain references is there (every day reads) and no scratch table or lock is left."""
    p = first_load
    arrived = threading.Barrier(WRITERS, timeout=120)
    held = threading.local()

    def at(name: str) -> str | None:  # every writer stops at lock.break until all three are
        if name == "lock.break" and not getattr(held, "done", False):
            held.done = True
            arrived.wait()
        return None

    monkeypatch.setattr(failpoints, "wanted_failpoint", lambda: None)
    monkeypatch.setattr("dbt.adapters.chaintable.publish.lock.failpoint", at)
    expected = {"20250101": day_rows(p.spark, p.schema, "20250101")}
    for trial in range(TRIALS):
        day = f"202502{trial + 1:02d}"
        stale_lock(p.spark, p.schema)
        outcome: dict[int, Any] = {}
        threads = [
            threading.Thread(target=race, args=(p, day, i, outcome, held)) for i in range(WRITERS)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        won = [i for i, r in outcome.items() if not isinstance(r, Exception)]
        lost = {i: r for i, r in outcome.items() if isinstance(r, Exception)}
        assert len(won) == 1, f"trial {trial}: {outcome}"
        assert all(isinstance(e, ChainPlanError) for e in lost.values()), lost
        for e in lost.values():
            assert "t is locked: " in str(e) and "did not start and wrote nothing" in str(e)
            assert "by process" in str(e), e  # names a holder: the winner, or the stale one
        winner = won[0]
        expected[day] = [(i, f"w{winner}-{day}-{i}") for i in range(2)]
        assert day_rows(p.spark, p.schema, day) == expected[day], f"trial {trial}"
        scratch = [n for n in chain_names(p.spark, p.schema) if n not in DERIVED]
        assert scratch == [], f"trial {trial}"
    # every day still reads as its winner's rows: every file the chain references is there
    assert {day: day_rows(p.spark, p.schema, day) for day in expected} == expected


def test_a_lock_replaced_between_the_lease_check_and_the_publish_is_left_in_place(
    first_load, monkeypatch
):
    p = first_load
    replaced = threading.Event()
    foreign = {
        safety.P_OWNER: "pod-c:7:inv-c",
        safety.P_SINCE: "2025-01-01 00:00:00",
        safety.P_OPERATION: "run of model 't'",
        safety.P_WRITER: "foreign1",
        **safety.heartbeat(dt.timedelta(seconds=300)),
    }

    def at(name: str) -> None:  # between the stage's checks and the publish, another writer's
        if name == "run.staged":  # lock takes the place of this one's
            p.spark.sql(f"DROP VIEW {p.schema}.t__chain_lock")
            p.spark.sql(S.create_lock_view(f"{p.schema}.t__chain_lock", foreign))
            replaced.set()

    monkeypatch.setattr("dbt.adapters.chaintable.run.flow.failpoint", at)
    with pytest.raises(LeaseLostError, match="the lock now belongs to pod-c:7:inv-c"):
        write_day(p.spark, p.schema, "20250102", tag="a")
    assert replaced.is_set()
    rows = p.spark.sql(f"SHOW TBLPROPERTIES {p.schema}.t__chain_lock").collect()
    lock = {str(k): str(v) for k, v in rows}
    assert {k: lock[k] for k in foreign} == foreign  # the foreign lock, untouched
    assert p.partitions("t__delta") == []  # nothing published
    assert day_rows(p.spark, p.schema, "20250102") == []


def test_a_writer_frozen_past_its_lease_after_its_publish_touches_nothing_when_it_resumes(
    first_load, monkeypatch
):
    """Writer A stops after its publish, with an inline compaction due, for longer than its
    lease (its heartbeat stopped too, as in a frozen process); writer B breaks its lock,
    recovers and writes the next day; A resumes and fails with the lost lease before any
    catalog change: B's lock, stage and days are intact and every day reads right."""
    p = first_load
    lease_s = 10  # the shortest a model may configure (base/config.py MIN_LEASE)
    config = {
        "chain_lock_lease": f"{lease_s} s",
        "chain_compaction": {"max_chain_length": 1, "mode": "inline"},
    }
    frozen, resume, a_done = threading.Event(), threading.Event(), threading.Event()
    a_thread: dict[str, int] = {}
    beat = lease_module.Heartbeat.beat

    def frozen_beat(self) -> None:  # A's heartbeat stops while A is frozen
        if frozen.is_set() and getattr(self, "creator", None) == a_thread.get("id"):
            return
        beat(self)

    init = lease_module.Heartbeat.__init__

    def init_noting_creator(self, *args, **kwargs) -> None:
        init(self, *args, **kwargs)
        self.creator = threading.get_ident()

    monkeypatch.setattr(lease_module.Heartbeat, "beat", frozen_beat)
    monkeypatch.setattr(lease_module.Heartbeat, "__init__", init_noting_creator)

    def at(name: str) -> None:
        if name == "publish.done" and threading.get_ident() == a_thread.get("id"):
            frozen.set()
            resume.wait(timeout=120)

    monkeypatch.setattr("dbt.adapters.chaintable.publish.publisher.failpoint", at)
    outcome: dict[str, Any] = {}

    def run_a() -> None:
        a_thread["id"] = threading.get_ident()
        try:
            outcome["a"] = write_day(p.spark, p.schema, "20250102", config, tag="a")
        except Exception as e:
            outcome["a"] = e
        a_done.set()

    t = threading.Thread(target=run_a)
    t.start()
    deadline = time.monotonic() + 120
    while not (frozen.is_set() or a_done.is_set()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert frozen.is_set(), outcome
    time.sleep(lease_s + 2)  # A's heartbeat is older than its lease now
    write_day(p.spark, p.schema, "20250103", config, tag="b")
    b_lock_gone = "t__chain_lock" not in chain_names(p.spark, p.schema)
    resume.set()
    t.join(timeout=120)
    assert isinstance(outcome["a"], LeaseLostError), outcome
    assert "stopping before anything more is published" in str(outcome["a"])
    assert b_lock_gone
    # A's day was published before it froze: B's recovery kept it, B's refresh reads it
    assert day_rows(p.spark, p.schema, "20250102") == [(0, "a-20250102-0"), (1, "a-20250102-1")]
    assert day_rows(p.spark, p.schema, "20250103") == [(0, "b-20250103-0"), (1, "b-20250103-1")]
    # no lock or scratch table of A's is left, and A changed nothing after it resumed
    assert "t__chain_lock" not in chain_names(p.spark, p.schema)
