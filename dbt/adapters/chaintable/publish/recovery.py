"""Recovery after an unfinished write (docs/design.md#crash-safety-and-locking): its scratch tables
and the directories no partition references are removed, what it published is kept, and the
snapshots its delta write invalidated are dropped; and the garbage collection of directories
that publishing and recovery share."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from dbt.adapters.base.relation import BaseRelation

from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base import versions
from dbt.adapters.chaintable.base.partitions import Values, parse_partition_path
from dbt.adapters.chaintable.base.runner import logger
from dbt.adapters.chaintable.base.versions import in_version, is_version, version_location
from dbt.adapters.chaintable.chain.catalog import Catalog
from dbt.adapters.chaintable.chain.tables import BROKEN_LOCK_SUFFIX as BROKEN
from dbt.adapters.chaintable.chain.tables import CHAIN_PATTERN, ChainTables, name_of, schema_of
from dbt.adapters.chaintable.publish import safety
from dbt.adapters.chaintable.read.render import Renderer
from dbt.adapters.chaintable.view.writer import ViewWriter


def _columns_of(path: str) -> list[str]:
    """The partition columns a path names, in its order ('region=CN/dt=X' -> [region, dt])."""
    return [kv.split("=", 1)[0] for kv in path.split("/")]


class Recovery:
    def __init__(self, catalog: Catalog, views: ViewWriter):
        self.catalog, self.views = catalog, views
        self.run = catalog.runner.run

    # ---- recovery -----------------------------------------------------------------------------
    def recover(self, tables: ChainTables, lock: Mapping[str, str] | None = None) -> frozenset[str]:
        """Remove what an unfinished write left: its scratch tables and every directory of theirs
        that no partition of the branches references. Referenced ones were published: keep.
        `lock`: the properties of the lock the unfinished write held, which name its bare stage
        directory if it had one. Every writer's stage and pub tables count: recovery runs
        under the lock, so they were left by a writer that is gone or no longer holds it.
        Returns the lower-case names of the chain's tables but the scratch ones it dropped (the
        broken locks stay in it)."""
        present = self.catalog.names_like(
            schema_of(tables.view), name_of(tables.view) + CHAIN_PATTERN
        )
        garbage: list[str] = []
        lock = lock or {}
        run_id, branch = lock.get(safety.P_STAGE_RUN), lock.get(safety.P_TARGET)
        if run_id and branch and branch.rsplit(".", 1)[-1].strip("`").lower() in present:
            garbage += self._unpublished_directory(branch, run_id, lock.get(safety.P_PARTITION))
            garbage += self._switched_away(branch, json.loads(lock.get(safety.P_REPLACES, "{}")))
        gc = name_of(tables.gc).lower()
        scratch = set(tables.scratch(present))
        broken = {n for n in scratch if n.startswith(name_of(tables.view).lower() + BROKEN)}
        for name in sorted(scratch - broken - {gc}):  # stages and pubs, of any writer
            rel = tables.stage.incorporate(path={"identifier": name})
            props = self.catalog.properties(rel)
            target = props.get(safety.P_TARGET)
            if target:
                if props.get(safety.P_LINKED):
                    replaced = json.loads(props.get(safety.P_REPLACES, "{}"))
                    self._switch_back(rel, target, replaced)
                garbage += self._unpublished(rel, target, props.get(safety.P_PARTITION))
                garbage += self._switched_away(
                    target, json.loads(props.get(safety.P_REPLACES, "{}"))
                )
            self.run(S.drop_table(str(rel)))
        if garbage or gc in present:
            self.gc(tables, garbage)
        # broken locks stay listed: the lock recovers each once it is stale (lock.py)
        names = frozenset(present - (scratch - broken))
        if lock.get(safety.P_INVALIDATES):
            self._finish_invalidation(tables, json.loads(lock[safety.P_INVALIDATES]), names)
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

    def _switch_back(self, rel: BaseRelation, target: str, replaced: Mapping[str, str]) -> None:
        """A crashed publish of a stage whose partitions read right only together
        (safety.P_LINKED) undone: each partition it switched goes back to the directory it had
        (`replaced`), each it added is dropped, so the chain reads as before the run and a
        rerun starts from there. Its directories are then garbage like any unpublished ones."""
        cat = self.catalog
        parts = cat.partition_paths(rel)
        cols = _columns_of(parts[0]) if parts else []
        target_parts = set(cat.partition_paths(target))
        back, added = [], []
        for path in parts:
            values = parse_partition_path(path, cols)
            if path not in target_parts or cat.partition_location(
                target, cols, values
            ) != cat.partition_location(str(rel), cols, values):
                continue  # not published by this stage
            if path in replaced:
                back.append((values, replaced[path]))
            else:
                added.append(values)
        if not (back or added):
            return
        logger.info(
            f"{target}: switching back {len(back)} and dropping {len(added)} partition(s) an "
            "unfinished run published of a write that reads right only whole"
        )
        for values, old in back:
            self.run(S.set_partition_location(target, cols, values, old))
        self.run(S.drop_partitions(target, cols, added))

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
