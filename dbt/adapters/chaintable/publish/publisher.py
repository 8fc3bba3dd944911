"""Writing partitions safely: a merged write to a table of its own, and the atomic switch of each
partition to its new directory, under the chain's lock (lock.py), with what a crash leaves to
recovery.py (safety.py holds the pure parts and docs/design.md#crash-safety-and-locking the
reasoning)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from dbt.adapters.base.relation import BaseRelation

from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base import versions
from dbt.adapters.chaintable.base.failpoints import failpoint
from dbt.adapters.chaintable.base.keys import P_ANCHOR_SEQUENCE, P_SNAPSHOT_GENERATIONS
from dbt.adapters.chaintable.base.partitions import (
    Values,
    default_partition_directories,
    format_partition,
)
from dbt.adapters.chaintable.base.versions import version_location
from dbt.adapters.chaintable.chain import generations
from dbt.adapters.chaintable.chain.catalog import Catalog, Loaded
from dbt.adapters.chaintable.chain.tables import ChainTables
from dbt.adapters.chaintable.publish import safety
from dbt.adapters.chaintable.publish.lock import ChainLock
from dbt.adapters.chaintable.publish.recovery import Recovery
from dbt.adapters.chaintable.read.render import Renderer


class Publisher:
    def __init__(self, catalog: Catalog, lock: ChainLock, recovery: Recovery):
        self.catalog, self.lock, self.recovery = catalog, lock, recovery
        self.run = catalog.runner.run

    # ---- publishing ---------------------------------------------------------------------------
    def create_pub(
        self,
        target: BaseRelation,
        loaded: Loaded,
        source_sql: str,
        parts: Sequence[Values],
        run_id: str,
        by_key: bool = False,
    ) -> dict[Values, str]:
        """Merged rows in a fresh directory below `target`, laid out (format, buckets) like it,
        every partition of `parts` present (empty if the merge left no row), ready to publish;
        returns the directories of `parts` known without asking (publish's `directories`).
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
        location = version_location(info["Location"], run_id)
        known = default_partition_directories(
            location, loaded.columns, loaded.opts.partition_by, parts
        )
        self.run(
            S.create_table(
                pub,
                loaded.columns,
                loaded.opts.partition_by,
                {safety.P_TARGET: str(target)},
                file_format=info.get("Provider", "parquet"),
                location=location,
                clustered_by=bucket_cols if buckets > 0 else (),
                buckets=buckets if buckets > 0 else None,
            )
        )
        by_key = by_key and buckets == 0
        if len(parts) == 1:  # one partition (one group): its rows carry its values
            self.run(renderer.insert_overwrite(pub, source_sql, only=parts[0], by_key=by_key))
            return known
        self.run(renderer.insert_overwrite(pub, source_sql, by_key=by_key))
        # the partitions the rows left out, empty: IF NOT EXISTS passes over the written ones,
        # so the table need not be listed first
        self.run(renderer.add_empty_partitions(pub, parts))
        return known

    def _new_generations(
        self,
        target: BaseRelation,
        partition_by: Sequence[str],
        parts: Sequence[Values],
        existing: Sequence[Values],
    ) -> dict[str, str]:
        """Before snapshot partitions get new rows, each gets a new token in
        P_SNAPSHOT_GENERATIONS, so that what a build recorded about their old rows (the anchors'
        highest sequence, P_ANCHOR_SEQUENCE) no longer counts, even if a writer whose lease ran
        out writes its record afterwards. First: a crash between the two only makes the next
        build scan a partition again. The tokens, bounded (chain/generations.py), and the entries
        still made under them are written together (one write), so that no entry of old rows
        can match a token again. Returns the table's properties after that write ({} for the
        delta branch)."""
        if str(ChainTables.of_branch(target).snapshot) != str(target):
            return {}
        props = self.catalog.properties(target)
        tokens = generations.tokens_of(props)
        entries: dict[str, Any] = json.loads(props.get(P_ANCHOR_SEQUENCE) or "{}")
        written = {format_partition(partition_by, p) for p in parts}
        kept = {format_partition(partition_by, p) for p in existing} - written
        token = versions.new_run_id()
        tokens = generations.renewed(tokens, kept, written, token, versions.new_run_id)
        update = {P_SNAPSHOT_GENERATIONS: generations.dumps(tokens)}
        current = generations.current_entries({k: entries[k] for k in kept & set(entries)}, tokens)
        if current != entries:
            update[P_ANCHOR_SEQUENCE] = generations.dumps(current)
        self.catalog.set_properties(target, update)
        return {**props, **update}

    def publish(
        self,
        target: BaseRelation,
        source: BaseRelation | None,
        partition_by: Sequence[str],
        parts: Sequence[Values],
        existing: Sequence[Values],
        directories: Mapping[Values, str] | None = None,
    ) -> dict[str, str]:
        """Switch each partition of `target` to its new directory in `source` (`directories`
        names those known without asking: a bare stage directory, whose run has no `source`
        table, or the default directories below a staging or pub table this run created, whose
        partitions none added with a LOCATION: partitions.default_partition_directories): one
        metastore operation per partition (atomic for readers). Old directories are deleted
        afterwards. Returns the snapshot branch's properties as the publish left them ({} for
        the delta branch)."""
        cat, have = self.catalog, set(existing)
        known = dict(directories or {})
        self.lock.verify(ChainTables.of_branch(target))
        props = self._new_generations(target, partition_by, parts, existing)
        replaced = {
            format_partition(partition_by, part): cat.partition_location(target, partition_by, part)
            for part in parts
            if part in have
        }
        if replaced:  # so that recovery after a crash can delete the ones switched away from
            record = {safety.P_REPLACES: json.dumps(replaced)}
            if source is None:  # the lock names the run's bare stage directory: it records them
                self.lock.record_stage(ChainTables.of_branch(target), record)
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
            self.lock.unstaged(ChainTables.of_branch(target))
        if old_dirs:  # nothing switched away: nothing to delete (the lock's recovery already
            # collected what a crashed writer left in the scratch table)
            cat.changed()
            self.recovery.gc(
                ChainTables.of_branch(target), old_dirs, "directories switched away from"
            )
        return props
