"""The chain's lock (docs/design.md#crash-safety-and-locking; safety.py has the pure rules): one
writer per chain table, a lease renewed while it works, and what the lock names for whoever
recovers after a crash (a bare stage directory, the snapshots a delta write invalidates)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base.config import DEFAULT_LEASE
from dbt.adapters.chaintable.base.failpoints import SimulatedCrash, failpoint
from dbt.adapters.chaintable.base.partitions import ChainPlanError, Values
from dbt.adapters.chaintable.base.runner import LeaseLostError, logger
from dbt.adapters.chaintable.chain.catalog import Catalog
from dbt.adapters.chaintable.chain.tables import ChainTables
from dbt.adapters.chaintable.publish import safety
from dbt.adapters.chaintable.publish.lease import Heartbeat
from dbt.adapters.chaintable.publish.recovery import Recovery

# how long a writer that lost the race to break a stale lock looks for the winner's lock, to
# name it: the winner creates it right after its rename
WINNER_LOOKS, WINNER_WAIT = 5, 0.4
# on the properties _acquire returns of a lock it broke: the view they were renamed to
P_BROKEN = "chaintable.lock.broken-to"


class ChainLockedError(ChainPlanError):
    """Another writer holds the chain's lock: this operation did not start."""


def _properties_if_there(catalog: Catalog, relation: Any) -> dict[str, str] | None:
    """The relation's properties; None when the catalog says it does not exist. Any other
    failure is raised as it is (a metastore out of reach is not a lock taken over)."""
    try:
        return catalog.properties(relation)
    except DbtRuntimeError as e:
        if "NOT_FOUND" not in str(e) and "not found" not in str(e).lower():
            raise
        return None


def _identity(props: Mapping[str, str]) -> tuple[str | None, ...]:
    """What tells one hold of a lock from another (an older version wrote no writer token)."""
    return tuple(props.get(k) for k in (safety.P_OWNER, safety.P_SINCE, safety.P_WRITER))


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
        (lease.py). While it is held, every statement of this thread that changes the catalog
        first checks that the lock is still this holder's (Runner.guard): a holder that lost
        it stops there, and the lock and what it names are left to the one that holds it now.
        Ending with the lock lost raises LeaseLostError, also when the work itself succeeded."""
        key, me = str(tables.lock), safety.Owner.me()
        # one holder per dbt invocation and thread: a nested operation of the same thread (a
        # run's automatic expiration) holds it already; another thread (--threads) does not
        holder = f"{me.invocation}:{threading.get_ident()}"
        if self._held.get(key) == holder:
            yield None
            return
        token = uuid.uuid4().hex[:16]  # this hold of the lock (safety.P_WRITER)
        props = {**(stage or {}), **safety.heartbeat(lease), safety.P_WRITER: token}
        broken = self._acquire(tables, operation, me, props)
        self._held[key] = holder
        beat = self._heartbeats[key] = Heartbeat(self.catalog.runner, key, lease, token)
        beat.start()
        with self.catalog.runner.guard(beat.check):
            try:
                names = self._recover(tables, broken)
                yield names
            except SimulatedCrash:
                self._release(key)
                raise
            except Exception:
                self._after_failure(tables, key)
                raise
            except BaseException:  # interrupted: the lock stays for the next writer to recover
                self._release(key)
                raise
            try:
                if self._lost(key) is None:
                    self._unlock(tables)
            finally:
                lost = self._lost(key)
                self._release(key)
            if lost is not None:
                raise LeaseLostError(
                    f"{tables.view}: {lost}; the {operation} stopped before its next catalog "
                    "change and left the lock to the next writer: run it again"
                )

    def _after_failure(self, tables: ChainTables, key: str) -> None:
        """A failed write leaves nothing behind, unless the lock may be another writer's now; a
        recovery that fails keeps the lock and what it names for the next writer."""
        try:
            if self._lost(key) is None:
                self._recover(tables, self._records(key))
                self._unlock(tables)
        finally:
            self._release(key)

    def _unlock(self, tables: ChainTables) -> None:
        """Drop the lock if it is still this holder's, as the catalog says (not the heartbeat's
        last look): a lock another writer took over stays."""
        self.verify(tables)
        self.run(S.drop_view(str(tables.lock)))

    def verify(self, tables: ChainTables) -> None:
        """Refuse (LeaseLostError) unless the catalog's lock is this holder's: before the first
        catalog change of a publish and before the lock is dropped. A lock another writer took
        between two renewals of the heartbeat is seen here, not at the next renewal."""
        key = str(tables.lock)
        beat = self._heartbeats.get(key)
        if beat is None:
            return
        beat.check()
        props = _properties_if_there(self.catalog, tables.lock)
        if (props or {}).get(safety.P_WRITER) != beat.owner:
            beat.taken(props)
            beat.check()

    def staged(self, tables: ChainTables, record: Mapping[str, str]) -> None:
        """The run holding the lock wrote the bare stage directory its lock names (`record`:
        the lock's stage properties): a failure before its publish deletes it."""
        self._stages[str(tables.lock)] = dict(record)

    def _release(self, key: str) -> None:
        """Forget holding lock `key` and stop renewing it."""
        self._held.pop(key, None)
        self._records(key)
        beat = self._heartbeats.pop(key, None)
        if beat is not None:
            beat.stop()

    def _records(self, key: str) -> dict[str, str]:
        """What lock `key` recorded of a bare stage directory and of the snapshot partitions its
        run invalidates, forgotten."""
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

    def _alter_lock(self, tables: ChainTables, sql: str) -> None:
        """A change of the held lock's properties, never beside a renewal of its heartbeat, and
        only while the catalog's lock is this holder's (verify): never onto another's."""
        self.verify(tables)
        beat = self._heartbeats.get(str(tables.lock))
        with beat.altering() if beat is not None else nullcontext():
            self.run(sql)

    def _lost(self, lock: str) -> str | None:
        beat = self._heartbeats.get(lock)
        return beat.lost() if beat is not None else None

    def check_lease(self, lock: str) -> None:
        """Refuse to go on when this process could not renew `lock` in time (lease.py)."""
        beat = self._heartbeats.get(lock)
        if beat is not None:
            beat.check()

    def _name(self, tables: ChainTables, record: Mapping[str, str]) -> None:
        lock = str(tables.lock)
        self._alter_lock(tables, S.set_view_properties(lock, record))
        self._invalidations[lock] = dict(record)

    def invalidated(self, tables: ChainTables) -> None:
        """What the lock named (invalidating) is done: it forgets it (a compaction later in
        the run may write those snapshot partitions again)."""
        lock = str(tables.lock)
        if self._invalidations.pop(lock, None):
            self._alter_lock(tables, S.unset_view_properties(lock, [safety.P_INVALIDATES]))

    def _acquire(
        self, tables: ChainTables, operation: str, me: safety.Owner, stage: Mapping[str, str]
    ) -> dict[str, str] | None:
        """Take the lock; returns the properties of a stale lock it broke (None: none), which
        name the renamed view that still holds them (P_BROKEN)."""
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
                self.catalog.runner.run_on_lock(S.create_lock_view(str(tables.lock), props))
                return broken
            except Exception:
                if not self.catalog.exists(tables.lock):
                    raise
                holder = self.catalog.properties(tables.lock)
                why = safety.lock_is_stale(holder, me, now)
                if why is None or attempt == 2:
                    raise self._locked(tables, operation, holder) from None
                logger.info(
                    f"{tables.view}: breaking the lock of {safety.lock_holder_text(holder)}: {why}"
                )
                failpoint("lock.break")
                broken = self._break(tables, operation, holder, props[safety.P_WRITER])
        return broken  # pragma: no cover - the second attempt returns or raises

    def _break(
        self, tables: ChainTables, operation: str, holder: Mapping[str, str], writer: str
    ) -> dict[str, str]:
        """Break the stale lock whose properties are `holder`: rename it to a name of this
        writer's own. A rename takes one view, so of writers racing to break the same lock
        exactly one renames it; the others find nothing to rename and are refused. The renamed
        view keeps the dead run's record until its recovery is done (_recover)."""
        claim = tables.broken_lock(writer)
        try:
            self.catalog.runner.run_on_lock(S.rename_view(str(tables.lock), str(claim)))
        except DbtRuntimeError:
            raise self._locked(tables, operation, self._winner(tables), holder) from None
        taken = _properties_if_there(self.catalog, claim)
        if taken is None:  # renamed away under this writer: a metastore whose database reads
            # committed rows (PostgreSQL's default) can let two renames of one view both
            # succeed, the second renaming the first's result (tests/unit/test_lock_break.py)
            raise self._locked(tables, operation, self._winner(tables), holder)
        if _identity(taken) != _identity(holder):
            # between the look and the rename another writer broke the stale lock and took a
            # fresh one: that one was renamed; it goes back, and this writer stands aside
            # (a third writer may hold the lock by now: then the holder the rename took finds
            # its lock gone before its next publish (verify), and the renamed view is
            # recovered once stale, as any broken lock)
            with contextlib.suppress(DbtRuntimeError):
                self.catalog.runner.run_on_lock(S.rename_view(str(claim), str(tables.lock)))
            raise self._locked(tables, operation, taken)
        return {**taken, P_BROKEN: str(claim)}

    def _winner(self, tables: ChainTables) -> dict[str, str] | None:
        """The lock of the writer that broke a stale lock first, once it has taken it (it
        renames the stale one, then creates its own: a moment apart); None if not yet."""
        for _ in range(WINNER_LOOKS):
            try:
                return self.catalog.properties(tables.lock)
            except DbtRuntimeError:
                time.sleep(WINNER_WAIT)
        return None

    def _locked(
        self,
        tables: ChainTables,
        operation: str,
        holder: Mapping[str, str] | None,
        broken: Mapping[str, str] | None = None,
    ) -> ChainLockedError:
        """The refusal naming the lock's `holder`, or (None) saying that another writer broke
        the stale lock `broken` first."""
        what = (
            f"{safety.lock_holder_text(holder)} is writing it"
            if holder is not None
            else f"another writer broke the stale lock of {safety.lock_holder_text(broken or {})} "
            "first"
        )
        return ChainLockedError(
            f"{tables.view} is locked: {what}, so this {operation} did not start and wrote "
            f"nothing; retry when it is done (if that process is gone for good: DROP VIEW "
            f"{tables.lock})"
        )

    def _recover(self, tables: ChainTables, lock: Mapping[str, str] | None) -> frozenset[str]:
        """The recovery of what the unfinished write holding `lock` left (the lock this writer
        broke, or its own after a failure), then of every other broken lock left by a writer
        that broke one and stopped before it recovered it, once that is stale too (a lock a
        writer renamed by mistake and could not give back belongs to a live holder until
        then). Returns the chain's names without the broken locks."""
        names = self.recovery.recover(tables, lock)
        if lock and lock.get(safety.P_INVALIDATES):
            self.invalidated(tables)  # the lock's own record, carried until now
        done = [lock[P_BROKEN]] if lock and lock.get(P_BROKEN) else []
        me, now = safety.Owner.me(), dt.datetime.now().replace(microsecond=0)
        ours = {n.split(".")[-1].strip("`").lower() for n in done}
        for name in sorted(set(tables.scratch(names)) - ours):
            view = tables.lock.incorporate(path={"identifier": name})
            props = self.catalog.properties(view)
            if safety.lock_is_stale(props, me, now) is not None:
                self.recovery.recover(tables, props)
                done.append(str(view))
        for view_name in done:
            self.run(S.drop_view(view_name))
        return frozenset(n for n in names if n not in set(tables.scratch(names)))

    def record_stage(self, tables: ChainTables, record: Mapping[str, str]) -> None:
        """Add `record` to what the lock names of the run's bare stage directory."""
        lock = str(tables.lock)
        self._alter_lock(tables, S.set_view_properties(lock, record))
        self._stages.setdefault(lock, {}).update(record)

    def unstaged(self, tables: ChainTables) -> None:
        """The bare stage directory is published: a later failure of the run leaves none."""
        self._stages.pop(str(tables.lock), None)
