"""The lock's lease (safety.py, lease.py): when a lock may be broken, from any host, and the
thread that renews a held one."""

from __future__ import annotations

import datetime as dt
import time
from contextlib import contextmanager

import pytest

from dbt.adapters.chaintable.base.config import lease_of
from dbt.adapters.chaintable.base.properties import REDACTED, mirror_key
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.publish import safety
from dbt.adapters.chaintable.publish.lease import Heartbeat, LeaseLostError

NOW = dt.datetime(2025, 8, 1, 12, 0, 0)  # local
UTC = dt.datetime(2025, 8, 1, 10, 0, 0)  # the same instant in UTC
ME = safety.Owner("pod-b", 7, "inv-b")


def lock(host="pod-a", pid=7, beat_age=None, lease=300, since=NOW - dt.timedelta(hours=1)):
    props = {
        safety.P_OWNER: f"{host}:{pid}:inv-a",
        safety.P_SINCE: since.strftime(safety.TS),
        safety.P_OPERATION: "run of model 't'",
    }
    if beat_age is not None:
        props.update(safety.heartbeat(dt.timedelta(seconds=lease), UTC - beat_age))
    return props


def stale(props, me=ME, alive=lambda pid: True, utc_now=UTC):
    return safety.lock_is_stale(props, me, NOW, alive=alive, utc_now=utc_now)


def test_a_live_holder_on_another_host_keeps_its_lock_however_long_it_runs():
    old = NOW - dt.timedelta(hours=30)  # past the 12 h timeout of locks without a lease
    assert stale(lock(beat_age=dt.timedelta(seconds=60), since=old)) is None


def test_a_lock_whose_heartbeat_is_older_than_its_lease_is_broken_from_any_host():
    assert stale(lock(beat_age=dt.timedelta(seconds=301))) == (
        "its heartbeat stopped 301 s ago (lease 0:05:00)"
    )
    # the holder's own lease counts, not the waiter's
    assert stale(lock(beat_age=dt.timedelta(seconds=301), lease=600)) is None


def test_clocks_differing_by_less_than_half_the_lease_never_break_a_live_lock():
    # renewed a quarter lease ago by the holder's clock; the waiter's clock is 149 s ahead
    renewed = dt.timedelta(seconds=75)
    ahead = UTC + dt.timedelta(seconds=149)
    assert stale(lock(beat_age=renewed), utc_now=ahead) is None


def test_a_dead_process_on_this_host_is_broken_at_once_whatever_its_heartbeat():
    props = lock(host="pod-b", pid=99, beat_age=dt.timedelta(seconds=1))
    assert stale(props, alive=lambda pid: False) == "process 99 on pod-b has exited"


def test_a_lock_without_heartbeat_keeps_the_timeout_rule():
    assert stale(lock()) is None
    old = lock(since=NOW - dt.timedelta(hours=13))
    assert stale(old) == "it is older than the lock timeout (12:00:00)"


def test_an_unreadable_heartbeat_is_broken():
    props = {**lock(beat_age=dt.timedelta(seconds=1)), safety.P_LEASE: "five"}
    assert stale(props) == "the lock has no readable heartbeat or lease"


def test_the_holder_text_says_how_old_the_heartbeat_is():
    props = lock(beat_age=dt.timedelta(seconds=0))
    text = safety.lock_holder_text(props)
    assert text.startswith("run of model 't' by process 7 on pod-a since 2025-08-01 11:00:00")
    assert "lease 0:05:00)" in text


def test_the_lease_is_a_duration_of_at_least_ten_seconds():
    assert lease_of("t", None) == dt.timedelta(minutes=5)
    assert lease_of("t", "90 s") == dt.timedelta(seconds=90)
    with pytest.raises(ChainConfigError, match="model 't': chain_lock_lease '5 s' is shorter"):
        lease_of("t", "5 s")
    with pytest.raises(ChainConfigError, match="model 't': chain_lock_lease: cannot parse"):
        lease_of("t", "300")


def test_the_host_name_can_be_set_for_pods_that_come_back_under_another(monkeypatch):
    monkeypatch.setenv(safety.HOST_ENV, "pod-7")
    assert safety.Owner.me().host == "pod-7"


class FakeRunner:
    """Statements of the heartbeat thread, answered with the lock's owner."""

    def __init__(self, owner: str, fail: bool = False):
        self.owner, self.fail, self.statements, self.connections = owner, fail, [], 0

    @contextmanager
    def own_connection(self, name):
        self.connections += 1
        yield

    def run_on_lock(self, sql):
        if self.fail:
            raise RuntimeError("metastore out of reach")
        self.statements.append(sql)

    def fetch(self, sql):
        assert sql == "SHOW TBLPROPERTIES s.t__chain_lock"
        # the holder's writer token is its owner text here (safety.P_WRITER)
        if "token" in self.owner:  # as Spark shows it: redacted, with the mirror
            return [
                (safety.P_OWNER, REDACTED),
                (mirror_key(safety.P_OWNER), self.owner.encode().hex()),
                (safety.P_WRITER, REDACTED),
                (mirror_key(safety.P_WRITER), self.owner.encode().hex()),
            ]
        return [(safety.P_OWNER, self.owner), (safety.P_WRITER, self.owner)]


LEASE = dt.timedelta(seconds=0.4)  # renewed every 0.1 s


def test_the_heartbeat_renews_the_lock_until_stopped():
    runner = FakeRunner("pod-token:7:inv")
    beat = Heartbeat(runner, "s.t__chain_lock", LEASE, "pod-token:7:inv")
    beat.start()
    time.sleep(0.55)
    beat.stop()
    count = len(runner.statements)
    assert 3 <= count <= 6, runner.statements
    assert runner.connections == 1
    assert all(
        s.startswith("ALTER VIEW s.t__chain_lock SET TBLPROPERTIES ('chaintable.lock.heartbeat'")
        and "'chaintable.lock.lease' = '0'" in s
        for s in runner.statements
    )
    beat.check()
    assert beat.lost() is None
    time.sleep(0.25)
    assert len(runner.statements) == count  # stopped


def test_a_holder_that_cannot_renew_for_half_its_lease_stops():
    beat = Heartbeat(FakeRunner("a", fail=True), "s.t__chain_lock", LEASE, "a")
    beat.start()
    beat.check()
    time.sleep(0.3)
    with pytest.raises(LeaseLostError, match="could not be renewed for 0 s"):
        beat.check()
    beat.stop()


def test_a_holder_whose_lock_was_taken_over_stops_and_never_alters_it():
    runner = FakeRunner("pod-c:1:x")
    beat = Heartbeat(runner, "s.t__chain_lock", LEASE, "pod-a:7:inv")
    beat.start()
    time.sleep(0.35)
    assert not beat._thread.is_alive()  # it stopped renewing at the first read
    beat.stop()
    assert runner.statements == []  # the new owner's lock was only read
    assert beat.lost().startswith("the lock now belongs to pod-c:1:x")
    with pytest.raises(LeaseLostError, match="the lock now belongs to pod-c:1:x"):
        beat.check()
