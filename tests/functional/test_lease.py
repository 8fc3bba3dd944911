"""The writer's lock lease through real dbt (docs/design.md#crash-safety-and-locking): a writer on
another host (CHAINTABLE_LOCK_HOST) that dies at a step of its run leaves its lock; the next
writer is refused while the lease runs, then breaks it, recovers and converges. A live holder
that works far past its lease keeps renewing its heartbeat, so nobody may break it."""

from __future__ import annotations

import datetime as dt
import threading
import time
from pathlib import Path
from stat import S_ISDIR

from pyspark.errors import AnalysisException

from dbt.adapters.chaintable.publish import safety

MODEL = """
{{{{ config(materialized='chain_incremental', partition_by=['region', 'dt'],
          chain_partition_keys=['dt'], primary_key=['id', 'region', 'dt'],
          chain_partition={{'dt': var('{day}')}}, chain_lock_lease='10 s') }}}}
select id, v, region, dt from {{{{ target.schema }}}}.{source} where dt = '{{{{ var("{day}") }}}}'
"""
LEASE = 10
# a run's steps: rows staged, the first partition switched (a rewrite: only a partition that
# exists is switched), every partition switched, the view refreshed; the day each run writes,
# and the days its chain holds before. Each step's writer is the writer of a chain of its own,
# all four in one dbt run (four threads), so that their leases run at once.
POINTS = {
    "run.staged": ("20250802", ["20250801"]),
    "publish.first": ("20250802", ["20250801", "20250802"]),
    "publish.done": ("20250803", ["20250801", "20250802"]),
    "run.view": ("20250803", ["20250801", "20250802"]),
}
CHAINS = {f"t_{point.replace('.', '_')}": point for point in POINTS}
COLUMNS = "id int, v string, region string, dt string"


def day_rows(day: str, tag: str) -> list[tuple]:
    return [(1, f"a-{tag}", "CN", day), (2, f"b-{tag}", "US", day), (3, f"c-{tag}", "EU", day)]


def setup(p) -> None:
    p.table("changes", COLUMNS, day_rows("20250801", "1"))
    p.model("t", MODEL.format(source="changes", day="dt"))
    p.dbt("run", vars={"dt": "20250801"})


def write_source(p, source: str, rows) -> None:
    p.spark.createDataFrame(rows, COLUMNS).write.insertInto(f"{p.schema}.{source}", overwrite=True)


def run_chains(p, chains, day: str | None = None, expect_ok: bool = True) -> None:
    """One dbt run of `chains` with four threads; each chain writes its step's day (or `day`)."""
    days = {f"dt_{m}": day or POINTS[point][0] for m, point in CHAINS.items()}
    p.dbt("run", "--threads", "4", "-s", *chains, vars=days, expect_ok=expect_ok)


def die_at_own_step(monkeypatch) -> None:
    """Each chain's writer dies at its own step of the run: CHAINTABLE_FAILPOINT=<step>
    (SimulatedCrash), but asked for only in the thread running that chain (dbt's node context
    of the thread names it)."""
    from dbt_common.events.contextvars import get_node_info

    from dbt.adapters.chaintable.base import failpoints

    monkeypatch.setattr(
        failpoints,
        "wanted_failpoint",
        lambda: CHAINS.get(get_node_info().get("node_name", "")),
    )


def schema_files(p) -> dict[str, object]:
    """{path: (a directory, size, modified ns)} of every file and directory in the schema's
    directory, and the schema's tables under "": a table created, even empty, or dropped shows."""
    (location,) = [
        r[1] for r in p.spark.sql(f"DESCRIBE DATABASE {p.schema}").collect() if r[0] == "Location"
    ]
    root = Path(location.removeprefix("file:"))
    found: dict[str, object] = {
        "": sorted(r[1] for r in p.spark.sql(f"SHOW TABLES IN {p.schema}").collect())
    }
    for f in root.rglob("*"):
        st = f.stat()
        found[str(f.relative_to(root))] = (S_ISDIR(st.st_mode), st.st_size, st.st_mtime_ns)
    return found


def test_a_writer_on_another_host_dead_at_a_step_is_taken_over_after_its_lease(
    project, monkeypatch
):
    p = project
    for m, point in CHAINS.items():
        rows = [r for day in POINTS[point][1] for r in day_rows(day, "1")]
        p.table(f"src_{m}", COLUMNS, rows)
        p.model(m, MODEL.format(source=f"src_{m}", day=f"dt_{m}"))
    run_chains(p, CHAINS, "20250801")
    run_chains(p, [m for m, pt in CHAINS.items() if "20250802" in POINTS[pt][1]], "20250802")
    before = {}
    for m, point in CHAINS.items():
        write_source(p, f"src_{m}", day_rows("20250801", "1") + day_rows(POINTS[point][0], point))
        before[m] = p.full_state(m)
    monkeypatch.setenv(safety.HOST_ENV, "pod-a")
    with monkeypatch.context() as crash:
        die_at_own_step(crash)
        run_chains(p, CHAINS, expect_ok=False)
    died = time.monotonic()
    assert all(f"failpoint {point}" in p.log_text() for point in POINTS)
    monkeypatch.setenv(safety.HOST_ENV, "pod-b")  # the pod comes back under another name
    # the refused runs come at once, within the lease; what they left is the schema (its tables,
    # files and directories: the chains' reads take seconds on a loaded machine, the lease 10)
    files = schema_files(p)
    assert any(f.endswith(".parquet") for f in files), files  # the chains' files, found
    run_chains(p, CHAINS, expect_ok=False)  # within the lease: refused
    for m in CHAINS:
        assert f"{m} is locked: run of model '{m}' by process" in p.log_text()
    assert "on pod-a since" in p.log_text() and "lease 0:00:10)" in p.log_text()
    assert schema_files(p) == files  # they wrote nothing
    crashed = {m: p.full_state(m) for m in CHAINS}
    time.sleep(max(0.0, LEASE + 1 - (time.monotonic() - died)))
    run_chains(p, CHAINS)
    taken = time.monotonic() - died
    assert "its heartbeat stopped" in p.log_text() and "(lease 0:00:10)" in p.log_text()
    assert taken < LEASE + 25, taken  # the takeover: the lease plus one run
    for m, point in CHAINS.items():
        assert f"breaking the lock of run of model '{m}' by process" in p.log_text()
        after = p.full_state(m)
        assert after[f"region=CN/dt={POINTS[point][0]}"] == [(1, f"a-{point}")], point
        for part, rows in crashed[m].items():
            assert rows in (before[m].get(part, []), after[part]), (point, part)
        left = p.spark.sql(f"SHOW TABLES IN {p.schema} LIKE '{m}__chain_*'").collect()
        assert {r[1] for r in left} <= {f"{m}__chain_map"}  # no lock, no scratch table


def test_a_live_holder_working_far_past_its_lease_is_never_broken(project, monkeypatch):
    p = project
    setup(p)
    write_source(p, "changes", day_rows("20250801", "1") + day_rows("20250802", "2"))
    monkeypatch.setenv(safety.HOST_ENV, "pod-a")
    # the run holds its lock after its partition switches for 2 leases (8 heartbeats)
    monkeypatch.setenv("CHAINTABLE_FAILPOINT", f"publish.done:sleep={2 * LEASE}")
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
            try:
                rows = p.spark.sql(f"SHOW TBLPROPERTIES {p.schema}.t__chain_lock").collect()
            except AnalysisException:  # the run ended and dropped its lock since SHOW TABLES
                continue
            props = {r[0]: r[1] for r in rows}
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
