"""Crash safety and mutual exclusion, the pure parts (lock.py, recovery.py and publisher.py run
the SQL).

Publishing. Spark's INSERT OVERWRITE of a parquet partition deletes the old files, then moves the
new ones in: a crash in between loses the partition. So a chain write never overwrites in place.
It writes the new partitions to a fresh directory of their own, `<table>/_chain_v/<run id>/...`
(a staging table there, or for a run of one partition the bare directory, which the lock names;
`_` directories are invisible to the table), checks them, then switches
each partition to its new directory with one metastore operation (`ALTER TABLE ... PARTITION ...
SET LOCATION`, or `ADD PARTITION ... LOCATION`). A reader sees a partition's old or new
directory, never a mix. Old directories are deleted after the switch, through a managed scratch
table (dropping a managed table's partition deletes its directory); a crash can leave garbage
behind, never a referenced file deleted.

Locking. One writer per chain table: a view `t__chain_lock` created with CREATE VIEW (the
metastore refuses a second one) carries the owner in its properties, and a lease: the holder
renews a heartbeat on it (UTC) every quarter of the lease while it works, however long it runs.
A lock whose heartbeat is older than its lease, from any host, is broken by the next writer,
which first cleans what the crashed run left; so is one whose owner is known gone (same host and
the process has exited, or an earlier invocation of this process). A lock without a heartbeat
(taken by an earlier version) keeps the old rule: broken once older than the lock timeout.
Clocks: the heartbeat is written by the holder's clock and judged by the waiter's, so a waiter's
clock ahead by X sees it X older; a live holder renewed it at most a quarter lease ago, so hosts
whose clocks differ by less than half the lease (seconds, under NTP) never break a live lock.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass

P_OWNER = "chaintable.lock.owner"
P_SINCE = "chaintable.lock.since"
P_OPERATION = "chaintable.lock.operation"
# a token unique to one hold of the lock: whoever breaks or releases a lock, renews its heartbeat
# or publishes under it compares it, never the owner's text (the threads of one dbt invocation
# share that)
P_WRITER = "chaintable.lock.writer"
P_TARGET = "chaintable.stage.target"
P_REPLACES = "chaintable.stage.replaces"  # {partition path: directory it had before the switch}
# the one partition of its target that a run's bare stage directory holds (on the lock; an
# earlier version put it on a staging table without partitions), JSON: {column: value}
P_PARTITION = "chaintable.stage.partition"
# on the lock of a run that stages its one partition in a bare directory (no staging table):
# the run id naming that directory below its target's location (version_location)
P_STAGE_RUN = "chaintable.stage.run"
# on the lock of a delta run whose write drops snapshot partitions (a rewritten delta P
# invalidates snapshot P) or marks later snapshots stale, before it publishes: JSON {"run": run
# id, "written": [{column: value}, ...], "partitions": the invalidated ones}. Whoever recovers
# after a crash before the run finished does both for each partition the run did publish
P_INVALIDATES = "chaintable.stage.invalidates"
# on a staging table whose partitions read right only together (a full chain's day and the
# next days compared again with it, run/full.py): a crashed publish of it is switched back
# whole, never left half done (Recovery)
P_LINKED = "chaintable.stage.linked"
# file formats that read columns by name: a partition's files may then hold its partition
# columns too (a stage without partitions publishes its directory as they are)
BY_NAME_FORMATS = frozenset({"parquet", "orc"})
DEFAULT_LOCK_TIMEOUT = dt.timedelta(hours=12)
TS = "%Y-%m-%d %H:%M:%S"
P_HEARTBEAT = "chaintable.lock.heartbeat"  # UTC time of the holder's last renewal (TS)
P_LEASE = "chaintable.lock.lease"  # seconds a heartbeat stays valid, the holder's choice
HEARTBEATS_PER_LEASE = 4
HOST_ENV = "CHAINTABLE_LOCK_HOST"  # the host name the lock records (default: this host's)


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    invocation: str

    def text(self) -> str:
        return f"{self.host}:{self.pid}:{self.invocation}"

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        m = re.fullmatch(r"(.*):(\d+):([^:]*)", text or "")
        return cls(m.group(1), int(m.group(2)), m.group(3)) if m else None

    @classmethod
    def me(cls) -> Owner:
        try:
            from dbt_common.invocation import get_invocation_id

            invocation = get_invocation_id()
        except Exception:  # pragma: no cover - outside dbt
            invocation = ""
        return cls(os.environ.get(HOST_ENV) or socket.gethostname(), os.getpid(), invocation)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lock_is_stale(
    props: Mapping[str, str],
    me: Owner,
    now: dt.datetime,
    timeout: dt.timedelta = DEFAULT_LOCK_TIMEOUT,
    alive: Callable[[int], bool] = _alive,
    utc_now: dt.datetime | None = None,
) -> str | None:
    """Why the lock described by `props` may be broken, or None while its owner may be working.
    `now`: local time (the lock's start is local), `utc_now`: UTC (its heartbeat is)."""
    owner = Owner.parse(props.get(P_OWNER, ""))
    if owner is None:
        return "the lock has no readable owner"
    if owner.host == me.host:
        if owner.pid == me.pid and owner.invocation != me.invocation:
            return f"it was taken by an earlier dbt invocation ({owner.invocation}) of this process"
        if owner.pid != me.pid and not alive(owner.pid):
            return f"process {owner.pid} on {owner.host} has exited"
    if P_HEARTBEAT in props:
        age, lease = heartbeat_age(props, utc_now or utcnow())
        if age is None or lease is None:
            return "the lock has no readable heartbeat or lease"
        if age > lease:
            return f"its heartbeat stopped {int(age.total_seconds())} s ago (lease {lease})"
        return None  # a live holder keeps its lock, however long it runs
    try:
        since = dt.datetime.strptime(props.get(P_SINCE, ""), TS)
    except ValueError:
        return "the lock has no readable start time"
    if now - since > timeout:
        return f"it is older than the lock timeout ({timeout})"
    return None


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None, microsecond=0)


def heartbeat_age(
    props: Mapping[str, str], utc_now: dt.datetime
) -> tuple[dt.timedelta | None, dt.timedelta | None]:
    """(how old the lock's heartbeat is, its lease), None where unreadable."""
    try:
        beat = dt.datetime.strptime(props.get(P_HEARTBEAT, ""), TS)
    except ValueError:
        beat = None
    raw = props.get(P_LEASE, "")
    lease = dt.timedelta(seconds=int(raw)) if raw.isdigit() else None
    return (utc_now - beat if beat else None), lease


def heartbeat(lease: dt.timedelta, utc_now: dt.datetime | None = None) -> dict[str, str]:
    """The lock properties a holder writes when it takes the lock and at each renewal."""
    return {
        P_HEARTBEAT: (utc_now or utcnow()).strftime(TS),
        P_LEASE: str(int(lease.total_seconds())),
    }


def lock_holder_text(props: Mapping[str, str]) -> str:
    owner = Owner.parse(props.get(P_OWNER, ""))
    who = f"process {owner.pid} on {owner.host}" if owner else "an unknown process"
    text = (
        f"{props.get(P_OPERATION, 'an operation')} by {who} since {props.get(P_SINCE, '(unknown)')}"
    )
    age, lease = heartbeat_age(props, utcnow())
    if age is not None and lease is not None:
        text += f" (heartbeat {max(int(age.total_seconds()), 0)} s ago, lease {lease})"
    return text
