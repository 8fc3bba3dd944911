"""Writing partitions safely: the lock, the atomic partition switch, recovery after a crash and
the removal of directories nothing references any more (safety.py holds the pure parts and
docs/design.md#crash-safety-and-locking the reasoning)."""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

from dbt.adapters.base.relation import BaseRelation

from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base import versions
from dbt.adapters.chaintable.base.config import DEFAULT_LEASE
from dbt.adapters.chaintable.base.failpoints import SimulatedCrash, failpoint
from dbt.adapters.chaintable.base.partitions import (
    ChainPlanError,
    Values,
    format_partition,
    parse_partition_path,
)
from dbt.adapters.chaintable.base.runner import logger
from dbt.adapters.chaintable.base.versions import in_version, is_version, version_location
from dbt.adapters.chaintable.chain.catalog import (
    CHAIN_PATTERN,
    Catalog,
    ChainTables,
    Loaded,
    name_of,
    schema_of,
)
from dbt.adapters.chaintable.publish import safety
from dbt.adapters.chaintable.publish.lease import Heartbeat
from dbt.adapters.chaintable.read.render import Renderer
from dbt.adapters.chaintable.view.writer import ViewWriter


def _columns_of(path: str) -> list[str]:
    """The partition columns a path names, in its order ('region=CN/dt=X' -> [region, dt])."""
    return [kv.split("=", 1)[0] for kv in path.split("/")]


class Publisher:
    def __init__(self, catalog: Catalog, views: ViewWriter):
        self.catalog, self.views = catalog, views
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
            yield self.recover(tables, broken)
        except SimulatedCrash:
            self._release(key)
            raise
        except Exception:
            lost = self._lost(key)
            own = self._release(key)
            if lost is None:  # else the lock and what it names may be another writer's now
                self.recover(tables, own)  # a refused or failed write leaves nothing behind
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

    # ---- recovery -----------------------------------------------------------------------------
    def recover(self, tables: ChainTables, lock: Mapping[str, str] | None = None) -> frozenset[str]:
        """Remove what an unfinished write left: its scratch tables and every directory of theirs
        that no partition of the branches references. Referenced ones were published: keep.
        `lock`: the properties of the lock the unfinished write held, which name its bare stage
        directory if it had one. Returns the lower-case names of the chain's tables but the
        scratch ones it dropped."""
        present = self.catalog.names_like(
            schema_of(tables.view), name_of(tables.view) + CHAIN_PATTERN
        )
        garbage: list[str] = []
        lock = lock or {}
        run_id, branch = lock.get(safety.P_STAGE_RUN), lock.get(safety.P_TARGET)
        if run_id and branch and branch.rsplit(".", 1)[-1].strip("`").lower() in present:
            garbage += self._unpublished_directory(branch, run_id, lock.get(safety.P_PARTITION))
            garbage += self._switched_away(branch, json.loads(lock.get(safety.P_REPLACES, "{}")))
        for rel in (tables.stage, tables.pub):
            if name_of(rel).lower() not in present:
                continue
            props = self.catalog.properties(rel)
            target = props.get(safety.P_TARGET)
            if target:
                garbage += self._unpublished(rel, target, props.get(safety.P_PARTITION))
                garbage += self._switched_away(
                    target, json.loads(props.get(safety.P_REPLACES, "{}"))
                )
            self.run(S.drop_table(str(rel)))
        if garbage or name_of(tables.gc).lower() in present:
            self.gc(tables, garbage)
        scratch = {name_of(r).lower() for r in (tables.stage, tables.pub, tables.gc)}
        names = frozenset(present - scratch)
        if lock.get(safety.P_INVALIDATES):
            self._finish_invalidation(tables, json.loads(lock[safety.P_INVALIDATES]), names)
            self.invalidated(tables)  # carried on this lock until now (locked)
        return names

    def _finish_invalidation(
        self, tables: ChainTables, record: Mapping[str, Any], names: frozenset[str]
    ) -> None:
        """What an unfinished delta run left of its write (safety.P_INVALIDATES), done as the
        run would have done it for each partition the run published: later snapshots built on
        the old delta marked stale, and the snapshot partitions of the same values dropped
        after the view stops reading them. A delta the run did not publish changes nothing."""
        if not {name_of(tables.snapshot).lower(), name_of(tables.delta).lower()} <= names:
            return
        loaded = self.catalog.load(tables.view)
        cols, run_id = loaded.opts.partition_by, str(record["run"])

        def values(key: str) -> list[Values]:
            return [tuple(str(spec.get(c)) for c in cols) for spec in record.get(key, [])]

        published = [
            p
            for p in values("written")
            if p in loaded.deltas
            and in_version(self.catalog.partition_location(tables.delta, cols, p), run_id)
        ]
        dropped = [p for p in values("partitions") if p in published and p in loaded.snapshots]
        state, lay = loaded.state(), loaded.layout
        stale = loaded.stale_after_delta_write(published, dropped)
        if stale != loaded.stale():
            self.catalog.set_stale(tables, stale)
        if not dropped:
            return
        logger.info(
            f"{tables.view}: dropping snapshot partition(s) {[lay.path(p) for p in dropped]}, "
            "which the unfinished run's rewritten delta partition(s) invalidate"
        )
        self.views.refresh(loaded, state.without(snapshots=dropped))
        self.catalog.retire(
            "invalidated snapshot partitions",
            Renderer.of(loaded).drop_partitions(str(tables.snapshot), dropped),
        )

    def _unpublished_directory(self, target: str, run_id: str, single: str | None) -> list[str]:
        """A run's bare stage directory (safety.P_STAGE_RUN) unless its one partition `single`
        ({column: value}, JSON) references it: then it was published."""
        where = self._single_location(target, single) if single is not None else None
        if where is not None and is_version(where, run_id):
            return []
        return [version_location(self.catalog.location(target), run_id)]

    def _single_location(self, target: str, single: str) -> str | None:
        """The location of `target`'s partition `single` ({column: value}, JSON), None while
        it has none. Compared by value with the partitions as SHOW PARTITIONS prints them (it
        escapes values and spells columns as the table does)."""
        spec = json.loads(single)
        cols, values = list(spec), tuple(str(v) for v in spec.values())
        listed = {parse_partition_path(p, cols) for p in self.catalog.partition_paths(target)}
        return self.catalog.partition_location(target, cols, values) if values in listed else None

    def _unpublished(self, rel: BaseRelation, target: str, single: str | None) -> list[str]:
        """Directories of a leftover staging table that its target does not reference.
        `single`: the one partition a stage without partitions holds (_single_location; an
        earlier version staged one partition so)."""
        cat = self.catalog
        root = cat.location(rel)
        if single is not None:  # its directory is that partition's once published
            return [] if self._single_location(target, single) == root else [root]
        parts = cat.partition_paths(rel)
        cols = _columns_of(parts[0]) if parts else []
        target_parts = set(cat.partition_paths(target))

        def where(table: str, path: str) -> str:
            return cat.partition_location(table, cols, parse_partition_path(path, cols))

        referenced = [
            p for p in parts if p in target_parts and where(target, p) == where(str(rel), p)
        ]
        if not referenced:
            return [root]
        return [where(str(rel), p) for p in parts if p not in referenced]

    def _switched_away(self, target: str, replaced: Mapping[str, str]) -> list[str]:
        """Directories a crashed publish had already switched partitions away from."""
        out = []
        current = set(self.catalog.partition_paths(target)) if replaced else set()
        for path, old_dir in replaced.items():
            cols = _columns_of(path)
            if (
                path not in current
                or self.catalog.partition_location(target, cols, parse_partition_path(path, cols))
                != old_dir
            ):
                out.append(old_dir)
        return out

    def gc(self, tables: ChainTables, dirs: Sequence[str], retired: str | None = None) -> None:
        """Delete directories no partition references any more: attach each to a partition of
        a managed scratch table, then drop those partitions (which deletes their directories).
        Partitions already there were attached by a run that crashed before dropping them.
        `retired`: what readers of other sessions read until the last change (deleted after
        the reader grace); None for rows no reader ever saw."""
        gc = str(tables.gc)
        self.run(S.create_gc_table(gc))
        pending = [p.split("=", 1)[1] for p in self.catalog.partition_paths(gc)]
        stamp = versions.new_run_id()
        names = [f"{stamp}-{i}" for i in range(len(dirs))]
        self.run(S.add_partitions(gc, ["d"], [([n], d) for n, d in zip(names, dirs, strict=True)]))
        drop = S.drop_partitions(gc, ["d"], [[n] for n in pending + names])
        if retired:
            self.catalog.retire(retired, drop)
        else:
            self.run(drop)
        self.run(S.drop_table(gc))

    def drop_scratch(self, tables: ChainTables) -> None:
        """What is left of a run's stage after the publish (which drops a published stage): a
        first run's managed stage, or the raw rows of a merged snapshot write, never published."""
        if self.catalog.exists(tables.stage):
            raw = (
                self.catalog.location(tables.stage)
                if self.catalog.properties(tables.stage).get(safety.P_TARGET)
                else None
            )
            self.run(S.drop_table(str(tables.stage)))
            if raw:
                self.gc(tables, [raw])

    # ---- publishing ---------------------------------------------------------------------------
    def create_pub(
        self,
        target: BaseRelation,
        loaded: Loaded,
        source_sql: str,
        parts: Sequence[Values],
        run_id: str,
        by_key: bool = False,
    ) -> None:
        """Merged rows in a fresh directory below `target`, laid out (format, buckets) like it,
        every partition of `parts` present (empty if the merge left no row), ready to publish.
        `by_key`: shuffled and sorted by key (Renderer.by_key) unless `target` is bucketed,
        whose buckets are its layout."""
        pub = str(loaded.tables.pub)
        self.run(S.drop_table(pub))
        renderer = Renderer.of(loaded)
        info = self.catalog.formatted(target)
        buckets = int(info.get("Num Buckets") or 0)
        bucket_cols = [
            c.strip(" `")
            for c in info.get("Bucket Columns", "").strip("[]").split(",")
            if c.strip(" `")
        ]
        self.run(
            S.create_table(
                pub,
                loaded.columns,
                loaded.opts.partition_by,
                {safety.P_TARGET: str(target)},
                file_format=info.get("Provider", "parquet"),
                location=version_location(info["Location"], run_id),
                clustered_by=bucket_cols if buckets > 0 else (),
                buckets=buckets if buckets > 0 else None,
            )
        )
        by_key = by_key and buckets == 0
        if len(parts) == 1:  # one partition (one group): its rows carry its values
            self.run(renderer.insert_overwrite(pub, source_sql, only=parts[0], by_key=by_key))
            return
        self.run(renderer.insert_overwrite(pub, source_sql, by_key=by_key))
        present = set(self.catalog.partitions(pub, loaded.opts.partition_by))
        for part in parts:
            if part not in present:
                self.run(renderer.empty_partition(pub, part))

    def publish(
        self,
        target: BaseRelation,
        source: BaseRelation | None,
        partition_by: Sequence[str],
        parts: Sequence[Values],
        existing: Sequence[Values],
        directories: Mapping[Values, str] | None = None,
    ) -> None:
        """Switch each partition of `target` to its new directory in `source` (`directories`
        names those known without asking: a bare stage directory, whose run has no `source`
        table): one metastore operation per partition (atomic for readers). Old directories
        are deleted afterwards."""
        cat, have = self.catalog, set(existing)
        known = dict(directories or {})
        self.check_lease(str(ChainTables.of_branch(target).lock))
        replaced = {
            format_partition(partition_by, part): cat.partition_location(target, partition_by, part)
            for part in parts
            if part in have
        }
        if replaced:  # so that recovery after a crash can delete the ones switched away from
            record = {safety.P_REPLACES: json.dumps(replaced)}
            if source is None:  # the lock names the run's bare stage directory: it records them
                lock = str(ChainTables.of_branch(target).lock)
                self._alter_lock(lock, S.set_view_properties(lock, record))
                self._stages.setdefault(lock, {}).update(record)
            else:
                cat.set_properties(source, record)
        added, old_dirs = [], []
        for part in parts:
            new_dir = known.get(part)
            if new_dir is None:
                assert source is not None, "a partition without a directory needs a stage table"
                new_dir = cat.partition_location(source, partition_by, part)
            if part in have:
                old_dirs.append(replaced[format_partition(partition_by, part)])
                self.run(S.set_partition_location(str(target), partition_by, part, new_dir))
                failpoint("publish.first")
            else:
                added.append((part, new_dir))
        self.run(S.add_partitions(str(target), partition_by, added))
        failpoint("publish.done")
        if source is not None:
            self.run(S.drop_table(str(source)))  # external: its published files stay
        else:  # published: a later failure of the run has no stage directory to delete
            self._stages.pop(str(ChainTables.of_branch(target).lock), None)
        if old_dirs:  # nothing switched away: nothing to delete (the lock's recovery already
            # collected what a crashed writer left in the scratch table)
            cat.changed()
            self.gc(ChainTables.of_branch(target), old_dirs, "directories switched away from")
