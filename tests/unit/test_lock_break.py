"""The chain's lock over the fake catalog (publish/lock.py): breaking a stale lock is a rename
exactly one writer wins, a writer whose lock is gone stops before its next catalog change, and
a lock is dropped only by the writer that holds it."""

from __future__ import annotations

import contextlib
import datetime as dt

import pytest

from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base.partitions import ChainPlanError
from dbt.adapters.chaintable.base.properties import read_back
from dbt.adapters.chaintable.base.runner import LeaseLostError, UnlockedWriteError
from dbt.adapters.chaintable.chain.tables import ChainTables
from dbt.adapters.chaintable.publish import lock as lock_module
from dbt.adapters.chaintable.publish import safety
from tests.unit.fake_catalog import FakeConnections, fake_adapter

DEAD = {
    safety.P_OWNER: "pod-dead:4242:inv-dead",
    safety.P_SINCE: "2025-01-01 00:00:00",
    safety.P_OPERATION: "run of model 't'",
    safety.P_WRITER: "dead0000",
    **safety.heartbeat(dt.timedelta(seconds=60), safety.utcnow() - dt.timedelta(hours=1)),
}
LIVE = {**DEAD, safety.P_OWNER: "pod-c:7:inv-c", safety.P_WRITER: "live0000"}
LIVE.update(safety.heartbeat(dt.timedelta(seconds=300)))


def writer(conns: FakeConnections):
    """One writer: an adapter of its own over the shared catalog (a process of its own)."""
    chain = fake_adapter(conns).chain
    return chain.publisher.lock, ChainTables.of(
        fake_adapter(conns).Relation.create(schema="s", identifier="t", type="view")
    )


def plant(conns: FakeConnections, props: dict[str, str], name: str = "t__chain_lock") -> None:
    conns.add_query(S.create_lock_view(f"s.{name}", props))


def props_of(conns: FakeConnections, name: str = "t__chain_lock") -> dict[str, str]:
    """The lock's properties as the adapter reads them back."""
    return read_back(name, list(conns.tables[f"s.{name}"].props.items()))


def test_breaking_a_stale_lock_renames_it_recovers_it_and_leaves_only_the_new_lock():
    conns = FakeConnections()
    plant(conns, DEAD)
    lock, tables = writer(conns)
    with lock.locked(tables, "run of model 't'"):
        held = props_of(conns)
        assert held[safety.P_OWNER] != DEAD[safety.P_OWNER]
        assert not [n for n in conns.tables if "broken" in n]  # recovered, then dropped
    renames = [s for s in conns.statements if " RENAME TO " in s]
    assert len(renames) == 1
    assert renames[0].startswith("ALTER VIEW s.t__chain_lock RENAME TO s.t__chain_lock_broken_")
    assert "s.t__chain_lock" not in conns.tables  # released


def test_of_two_writers_that_judged_one_lock_stale_the_second_to_rename_is_refused(monkeypatch):
    """A and B both judged the dead lock stale. B renames it first; A's rename then finds no
    lock: A is refused, naming B once B's own lock is there, and touches nothing."""
    monkeypatch.setattr(lock_module, "WINNER_WAIT", 0.0)
    conns = FakeConnections()
    plant(conns, DEAD)
    a_lock, tables = writer(conns)
    b_lock, _ = writer(conns)
    b_lock._break(tables, "run of model 't'", DEAD, "b0000000")  # B renamed it...
    with pytest.raises(ChainPlanError, match="another writer broke the stale lock of run of"):
        a_lock._break(tables, "run of model 't'", DEAD, "a0000000")  # ...before A could
    plant(conns, LIVE)  # B's own lock, taken right after its rename
    with pytest.raises(ChainPlanError, match=r"by process 7 on pod-c .* is writing it"):
        a_lock._break(tables, "run of model 't'", DEAD, "a0000000")
    assert props_of(conns) == LIVE
    assert sorted(n for n in conns.tables if "broken" in n) == ["s.t__chain_lock_broken_b0000000"]


def test_a_rename_renamed_again_by_a_racing_writer_is_refused(monkeypatch):
    """On a metastore on PostgreSQL two renames of one view can both succeed, the later one
    renaming the earlier one's result: A's rename went through, then B's renamed it to B's
    name. A finds its claim gone and is refused naming B; B's claim holds the dead lock."""
    monkeypatch.setattr(lock_module, "WINNER_WAIT", 0.0)
    conns = FakeConnections()
    plant(conns, DEAD)
    a_lock, tables = writer(conns)
    send = conns.add_query

    def racing(sql: str, *args, **kwargs):
        out = send(sql, *args, **kwargs)
        if sql == "ALTER VIEW s.t__chain_lock RENAME TO s.t__chain_lock_broken_a0000000":
            send(
                "ALTER VIEW s.t__chain_lock_broken_a0000000 RENAME TO s.t__chain_lock_broken_b0000000"
            )
            plant(conns, LIVE)  # B's own lock, taken right after
        return out

    monkeypatch.setattr(conns, "add_query", racing)
    with pytest.raises(ChainPlanError, match=r"by process 7 on pod-c .* is writing it"):
        a_lock._break(tables, "run of model 't'", DEAD, "a0000000")
    assert props_of(conns) == LIVE
    assert props_of(conns, "t__chain_lock_broken_b0000000")[safety.P_OWNER] == DEAD[safety.P_OWNER]
    assert sorted(n for n in conns.tables if "broken" in n) == ["s.t__chain_lock_broken_b0000000"]


def test_a_rename_that_took_a_fresh_lock_gives_it_back_and_stands_aside():
    """Between A's look at the stale lock and A's rename, the stale lock was replaced by a
    live writer's: A renamed the live lock, sees it is not the one it judged, renames it back
    and is refused naming the live holder."""
    conns = FakeConnections()
    plant(conns, LIVE)
    lock, tables = writer(conns)
    with pytest.raises(ChainPlanError, match="by process 7 on pod-c"):
        lock._break(tables, "run of model 't'", DEAD, "me000000")
    assert props_of(conns) == LIVE
    assert not [n for n in conns.tables if "broken" in n]


def test_a_broken_lock_left_by_a_writer_that_stopped_is_recovered_once_stale():
    conns = FakeConnections()
    plant(conns, DEAD, "t__chain_lock_broken_gone")
    plant(conns, LIVE, "t__chain_lock_broken_live")  # a live holder's: kept until stale
    lock, tables = writer(conns)
    with lock.locked(tables, "run of model 't'") as names:
        assert names is not None and not [n for n in names if "broken" in n]
    assert "s.t__chain_lock_broken_gone" not in conns.tables
    assert props_of(conns, "t__chain_lock_broken_live") == LIVE


def test_a_writer_whose_lock_was_taken_stops_before_its_next_change_and_leaves_the_lock():
    conns = FakeConnections()
    lock, tables = writer(conns)
    with (
        pytest.raises(LeaseLostError, match="the lock now belongs to pod-c:7:inv-c"),
        lock.locked(tables, "run of model 't'"),
    ):
        conns.add_query(S.drop_view("s.t__chain_lock"))
        plant(conns, LIVE)  # another writer's lock took this one's place
        lock.verify(tables)  # the publish's look at the catalog
    assert props_of(conns) == LIVE  # neither dropped nor altered on the way out
    assert not [s for s in conns.statements if s.startswith("ALTER VIEW s.t__chain_lock SET")]


def test_a_lost_lease_is_never_passed_over():
    """A holder whose lease ran out (lost() says so) is refused at its next statement however
    the error was caught, and its operation fails at the end even if it caught them all."""
    conns = FakeConnections()
    lock, tables = writer(conns)
    with (
        pytest.raises(LeaseLostError, match="stopped before its next catalog change"),
        lock.locked(tables, "run of model 't'"),
    ):
        beat = lock._heartbeats[str(tables.lock)]
        beat.taken({safety.P_OWNER: "pod-c:7:inv-c"})
        sent = len(conns.statements)
        for _ in range(2):
            # caught and passed over, as a careless handler would
            with contextlib.suppress(LeaseLostError):
                lock.catalog.set_properties(tables.snapshot, {"chaintable.x": "1"})
        assert len(conns.statements) == sent  # neither statement was sent
    assert "s.t__chain_lock" in conns.tables  # left to its holder


def test_a_change_of_the_catalog_without_the_lock_is_refused_before_it_runs():
    conns = FakeConnections()
    lock, tables = writer(conns)
    with pytest.raises(UnlockedWriteError, match="without the chain's lock"):
        lock.catalog.set_properties(tables.snapshot, {"chaintable.x": "1"})
    assert conns.statements == []
    lock.catalog.runner.fetch("SHOW TABLES IN s LIKE 't__*'")  # reads need no lock
    with lock.locked(tables, "run of model 't'"):
        conns.table("t__snapshot")
        lock.catalog.set_properties(tables.snapshot, {"chaintable.x": "1"})
    assert conns.tables["s.t__snapshot"].props["chaintable.x"] == "1"
