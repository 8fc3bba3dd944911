"""The chain's lock (docs/design.md#crash-safety-and-locking; safety.py has the pure rules): one
writer per chain table, a lease renewed while it works, and what the lock names for whoever
recovers after a crash (a bare stage directory, the snapshots a delta write invalidates)."""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext

from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base.config import DEFAULT_LEASE
from dbt.adapters.chaintable.base.failpoints import SimulatedCrash
from dbt.adapters.chaintable.base.partitions import ChainPlanError, Values
from dbt.adapters.chaintable.base.runner import logger
from dbt.adapters.chaintable.chain.catalog import Catalog, ChainTables
from dbt.adapters.chaintable.publish import safety
from dbt.adapters.chaintable.publish.lease import Heartbeat
from dbt.adapters.chaintable.publish.recovery import Recovery


class ChainLock:
    def __init__(self, catalog: Catalog, recovery: Recovery):
        self.catalog, self.recovery = catalog, recovery
        self.run = catalog.runner.run
        # {lock view: dbt invocation holding it}: a nested operation of the same invocation (a
        # run's automatic expiration) does not take the lock again
        self._held: dict[str, str] = {}
        # {lock view: what the lock records of its run's bare stage directory}, from when the
        # directory is written (staged) until it is published: what a failure in between leaves
        self._stages: dict[str, dict[str, str]] = {}
        # {lock view: its record of the snapshot partitions the run's delta write invalidates},
        # from before the publish until they are dropped (safety.P_INVALIDATES)
        self._invalidations: dict[str, dict[str, str]] = {}
        # {lock view: the thread renewing its lease} while this process holds it
        self._heartbeats: dict[str, Heartbeat] = {}

    # ---- the lock -----------------------------------------------------------------------------
    @contextmanager
    def locked(
        self,
        tables: ChainTables,
        operation: str,
        stage: Mapping[str, str] | None = None,
        lease: dt.timedelta = DEFAULT_LEASE,
    ) -> Iterator[frozenset[str] | None]:
        """Hold the chain's lock for `operation`. Yields the lower-case names of the chain's
        tables (`t__*`) as the recovery listed them under the lock, so the holder need not list
        them again; None when this invocation already held the lock. `stage`: what the lock
        records of a run's bare stage directory (safety.P_STAGE_RUN, P_TARGET, P_PARTITION),
        so that whoever recovers after a crash finds it. `lease`: how long the lock stays
        valid after each renewal of its heartbeat, which a thread does while the holder works
        (lease.py)."""
        key, me = str(tables.lock), safety.Owner.me()
        # one holder per dbt invocation and thread: a nested operation of the same thread (a
        # run's automatic expiration) holds it already; another thread (--threads) does not
        holder = f"{me.invocation}:{threading.get_ident()}"
        if self._held.get(key) == holder:
            yield None
            return
        broken = self._acquire(tables, operation, me, {**(stage or {}), **safety.heartbeat(lease)})
        self._held[key] = holder
        self._heartbeats[key] = Heartbeat(self.catalog.runner, key, lease, me.text())
        self._heartbeats[key].start()
        try:
            if broken and broken.get(safety.P_INVALIDATES):
                # on this lock until the recovery below has finished it: a failure or crash in
                # between leaves it to the next writer
                self._name(tables, {safety.P_INVALIDATES: broken[safety.P_INVALIDATES]})
            yield self._recover(tables, broken)
        except SimulatedCrash:
            self._release(key)
            raise
        except Exception:
            lost = self._lost(key)
            own = self._release(key)
            if lost is None:  # else the lock and what it names may be another writer's now
                self._recover(tables, own)  # a refused or failed write leaves nothing behind
                # (a recovery that fails keeps the lock and what it names for the next writer)
                self.run(S.drop_view(str(tables.lock)))
            raise
        except BaseException:  # interrupted: the lock stays for the next writer to recover
            self._release(key)
            raise
        lost = self._lost(key)
        self._release(key)
        if lost is None:
            self.run(S.drop_view(str(tables.lock)))
        else:
            logger.warning(f"{tables.view}: {lost}; the lock is left to the next writer")

    def staged(self, tables: ChainTables, record: Mapping[str, str]) -> None:
        """The run holding the lock wrote the bare stage directory its lock names (`record`:
        the lock's stage properties): a failure before its publish deletes it."""
        self._stages[str(tables.lock)] = dict(record)

    def _release(self, key: str) -> dict[str, str]:
        """Forget holding lock `key` and stop renewing it; returns what it recorded of a bare
        stage directory and of the snapshot partitions its run invalidates."""
        self._held.pop(key, None)
        beat = self._heartbeats.pop(key, None)
        if beat is not None:
            beat.stop()
        return {**self._stages.pop(key, {}), **self._invalidations.pop(key, {})}

    def invalidating(
        self,
        tables: ChainTables,
        run_id: str,
        partition_by: Sequence[str],
        written: Sequence[Values],
        invalidated: Sequence[Values],
    ) -> None:
        """Before a delta run publishes `written`, of which the snapshot branch also holds
        `invalidated` (or which later snapshots were built on): the lock names them, so that a
        failure or crash after the publish still ends as the run would have
        (_finish_invalidation)."""

        def specs(parts: Sequence[Values]) -> list[dict[str, str]]:
            return [dict(zip(partition_by, p, strict=True)) for p in parts]

        record = {"run": run_id, "written": specs(written), "partitions": specs(invalidated)}
        self._name(tables, {safety.P_INVALIDATES: json.dumps(record)})

    def _alter_lock(self, lock: str, sql: str) -> None:
        """A change of the held lock's properties, never beside a renewal of its heartbeat."""
        beat = self._heartbeats.get(lock)
        with beat.altering() if beat is not None else nullcontext():
            self.run(sql)

    def _lost(self, lock: str) -> str | None:
        beat = self._heartbeats.get(lock)
        return beat.lost() if beat is not None else None

    def check_lease(self, lock: str) -> None:
        """Refuse to publish when this process could not renew `lock` in time (lease.py)."""
        beat = self._heartbeats.get(lock)
        if beat is not None:
            beat.check()

    def _name(self, tables: ChainTables, record: Mapping[str, str]) -> None:
        lock = str(tables.lock)
        self._alter_lock(lock, S.set_view_properties(lock, record))
        self._invalidations[lock] = dict(record)

    def invalidated(self, tables: ChainTables) -> None:
        """What the lock named (invalidating) is done: it forgets it (a compaction later in
        the run may write those snapshot partitions again)."""
        lock = str(tables.lock)
        if self._invalidations.pop(lock, None):
            self._alter_lock(lock, S.unset_view_properties(lock, [safety.P_INVALIDATES]))

    def _acquire(
        self, tables: ChainTables, operation: str, me: safety.Owner, stage: Mapping[str, str]
    ) -> dict[str, str] | None:
        """Take the lock; returns the properties of a stale lock it broke (None: none)."""
        now = dt.datetime.now().replace(microsecond=0)
        props = {
            safety.P_OWNER: me.text(),
            safety.P_SINCE: now.strftime(safety.TS),
            safety.P_OPERATION: operation,
            **stage,
        }
        broken = None
        for attempt in (1, 2):
            try:
                self.run(S.create_lock_view(str(tables.lock), props))
                return broken
            except Exception:
                if not self.catalog.exists(tables.lock):
                    raise
                holder = self.catalog.properties(tables.lock)
                why = safety.lock_is_stale(holder, me, now)
                if why is None or attempt == 2:
                    raise ChainPlanError(
                        f"{tables.view} is locked: {safety.lock_holder_text(holder)} is writing "
                        f"it, so this {operation} did not start and wrote nothing; retry when it "
                        f"is done (if that process is gone for good: DROP VIEW {tables.lock})"
                    ) from None
                logger.info(
                    f"{tables.view}: breaking the lock of {safety.lock_holder_text(holder)}: {why}"
                )
                self.run(S.drop_view(str(tables.lock)))
                broken = holder
        return broken  # pragma: no cover - the second attempt returns or raises

    def _recover(self, tables: ChainTables, lock: Mapping[str, str] | None) -> frozenset[str]:
        """The recovery of what the unfinished write holding `lock` left; the invalidation it
        carried is then done, and the lock forgets it."""
        names = self.recovery.recover(tables, lock)
        if lock and lock.get(safety.P_INVALIDATES):
            self.invalidated(tables)  # carried on this lock until now (locked)
        return names

    def record_stage(self, tables: ChainTables, record: Mapping[str, str]) -> None:
        """Add `record` to what the lock names of the run's bare stage directory."""
        lock = str(tables.lock)
        self._alter_lock(lock, S.set_view_properties(lock, record))
        self._stages.setdefault(lock, {}).update(record)

    def unstaged(self, tables: ChainTables) -> None:
        """The bare stage directory is published: a later failure of the run leaves none."""
        self._stages.pop(str(tables.lock), None)
