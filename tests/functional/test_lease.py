"""The writer's lock lease through real dbt (docs/design.md#crash-safety-and-locking): a writer on
another host (CHAINTABLE_LOCK_HOST) that dies at a step of its run leaves its lock; the next
writer is refused while the lease runs, then breaks it, recovers and converges. A live holder
that works far past its lease keeps renewing its heartbeat, so nobody may break it."""

from __future__ import annotations

import datetime as dt
import threading
import time

from dbt.adapters.chaintable.publish import safety

MODEL = """
{{ config(materialized='chain_incremental', partition_by=['region', 'dt'],
          chain_partition_keys=['dt'], primary_key=['id', 'region', 'dt'],
          chain_partition={'dt': var('dt')}, chain_lock_lease='10 s') }}
select id, v, region, dt from {{ target.schema }}.changes where dt = '{{ var("dt") }}'
"""
LEASE = 10
# a run's steps: rows staged, the first partition switched (a rewrite: only a partition that
# exists is switched), every partition switched, the view refreshed; and the day each run writes
POINTS = [
    ("run.staged", "20250802"),
    ("publish.first", "20250802"),
    ("publish.done", "20250803"),
    ("run.view", "20250804"),
]


def day_rows(day: str, tag: str) -> list[tuple]:
    return [(1, f"a-{tag}", "CN", day), (2, f"b-{tag}", "US", day), (3, f"c-{tag}", "EU", day)]


def setup(p) -> None:
    p.table("changes", "id int, v string, region string, dt string", day_rows("20250801", "1"))
    p.model("t", MODEL)
    p.dbt("run", vars={"dt": "20250801"})


def write_source(p, rows) -> None:
    p.spark.createDataFrame(rows, "id int, v string, region string, dt string").write.insertInto(
        f"{p.schema}.changes", overwrite=True
    )


def test_a_writer_on_another_host_dead_at_a_step_is_taken_over_after_its_lease(
    project, monkeypatch
):
    p = project
    setup(p)
    for point, day in POINTS:
        write_source(p, day_rows("20250801", "1") + day_rows(day, point))
        before = p.full_state()
        monkeypatch.setenv(safety.HOST_ENV, "pod-a")
        monkeypatch.setenv("CHAINTABLE_FAILPOINT", point)
        p.dbt("run", vars={"dt": day}, expect_ok=False)
        died = time.monotonic()
        monkeypatch.delenv("CHAINTABLE_FAILPOINT")
        monkeypatch.setenv(safety.HOST_ENV, "pod-b")  # the pod comes back under another name
        crashed = p.full_state()
        p.dbt("run", vars={"dt": day}, expect_ok=False)  # within the lease: refused
        assert "t is locked: run of model 't' by process" in p.log_text()
        assert "on pod-a since" in p.log_text() and "lease 0:00:10)" in p.log_text()
        assert p.full_state() == crashed
        time.sleep(max(0.0, LEASE + 1 - (time.monotonic() - died)))
        p.dbt("run", vars={"dt": day})
        taken = time.monotonic() - died
        assert "breaking the lock of run of model 't' by process" in p.log_text()
        assert "its heartbeat stopped" in p.log_text() and "(lease 0:00:10)" in p.log_text()
        after = p.full_state()
        assert after[f"region=CN/dt={day}"] == [(1, f"a-{point}")], point
        for part, rows in crashed.items():
            assert rows in (before.get(part, []), after[part]), (point, part)
        assert taken < LEASE + 25, taken  # the takeover: the lease plus one run
        left = p.spark.sql(f"SHOW TABLES IN {p.schema} LIKE 't__chain_*'").collect()
        assert {r[1] for r in left} <= {"t__chain_map"}  # no lock, no scratch table


def test_a_live_holder_working_far_past_its_lease_is_never_broken(project, monkeypatch):
    p = project
    setup(p)
    write_source(p, day_rows("20250801", "1") + day_rows("20250802", "2"))
    monkeypatch.setenv(safety.HOST_ENV, "pod-a")
    # the run holds its lock after its partition switches for 2.5 leases
    monkeypatch.setenv("CHAINTABLE_FAILPOINT", f"publish.done:sleep={2.5 * LEASE}")
    result: dict = {}
    writer = threading.Thread(
        target=lambda: result.update(ok=p.dbt("run", vars={"dt": "20250802"}))
    )
    writer.start()
    try:
        seen = []
        deadline = time.monotonic() + 4 * LEASE
        while writer.is_alive() and time.monotonic() < deadline:
            time.sleep(1)
            if not p.spark.sql(f"SHOW TABLES IN {p.schema} LIKE 't__chain_lock'").count():
                continue
            props = {
                r[0]: r[1]
                for r in p.spark.sql(f"SHOW TBLPROPERTIES {p.schema}.t__chain_lock").collect()
            }
            if safety.P_HEARTBEAT not in props:
                continue
            other = safety.Owner("pod-b", 1, "another")
            now = dt.datetime.now().replace(microsecond=0)
            seen.append((time.monotonic(), safety.lock_is_stale(props, other, now)))
    finally:
        writer.join()
    assert result.get("ok") is not None
    first = seen[0][0]
    assert seen[-1][0] - first > 1.5 * LEASE  # watched well past the lease
    assert [why for _, why in seen] == [None] * len(seen)
    assert p.full_state()["region=CN/dt=20250802"] == [(1, "a-2")]
