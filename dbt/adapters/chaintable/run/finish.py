"""A run's last steps: the planned partitions written or published, the stale marks, the cumulative
delta and the view brought up to date, the invalidated snapshots and the stage dropped; then the
inline compaction and the automatic expiration."""

from __future__ import annotations

import time

from dbt.adapters.events.logging import get_node_info
from dbt.adapters.events.types import AdapterEventWarning
from dbt_common.events.functions import warn_or_error
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base.failpoints import failpoint
from dbt.adapters.chaintable.base.partitions import Values, default_partition_directories
from dbt.adapters.chaintable.base.runner import LeaseLostError, logger
from dbt.adapters.chaintable.chain.catalog import METADATA_CACHE_TTL, Catalog, Loaded
from dbt.adapters.chaintable.compaction.compactor import Compactor
from dbt.adapters.chaintable.cumulative.accumulate import Prebuilt
from dbt.adapters.chaintable.expiration.expirer import Expirer
from dbt.adapters.chaintable.read.render import Renderer
from dbt.adapters.chaintable.run.model import (
    ChainRun,
    Stage,
    WritePlan,
    invalidated_snapshots,
    snapshot_write_needs_merge,
    table_order,
)
from dbt.adapters.chaintable.write.unit import Write, WriteUnit

# the longest a run waits for other sessions' cached schemas to expire before its view reads
# new columns (a server keeping them longer is told so in the log)
MAX_SCHEMA_WAIT = 120.0


class Finisher:
    def __init__(
        self,
        catalog: Catalog,
        unit: WriteUnit,
        compactor: Compactor,
        expirer: Expirer,
    ):
        self.catalog, self.unit, self.publisher = catalog, unit, unit.publisher
        self.compactor, self.expirer = compactor, expirer
        self.run = catalog.runner.run

    def write(self, run: ChainRun, stage: Stage, plan: WritePlan) -> bool:
        """Write or publish the planned partitions; True when no staging table is left (the
        publish dropped it, or the rows were staged in a bare directory)."""
        tables, opts, loaded = run.tables, run.opts, plan.loaded
        renderer = Renderer.of(loaded)
        target = run.target
        before = loaded.snapshots if run.branch == "snapshot" else loaded.deltas
        source = renderer.select_all(str(tables.stage))
        merge = run.branch == "snapshot" and snapshot_write_needs_merge(opts)
        if merge:
            source = renderer.batch_merge(source)
        if not run.publishes:  # first run / full refresh: the tables are new, nothing to protect
            self.run(renderer.add_empty_partitions(str(target), plan.empties))
            self.run(renderer.insert_overwrite(str(target), source))
            return False
        if merge:  # the stage holds raw rows: publish the merged ones from a table of their own
            pub = self.publisher.create_pub(
                target, loaded, source, plan.written, stage.run_id + "-m"
            )
            self.publisher.publish(
                target, tables.pub, opts.partition_by, plan.written, before, directories=pub
            )
            return False
        if stage.bare:  # its directory is the one partition, rows or none
            if stage.partition not in plan.written:  # --empty: nothing to publish
                self.publisher.recovery.gc(tables, [stage.directory])
                return True
            self.publisher.publish(
                target,
                None,
                opts.partition_by,
                plan.written,
                existing=before,
                directories={stage.partition: stage.directory},
            )
            return True
        stage_renderer = Renderer(
            opts,
            [c for c, _ in table_order(plan.stage_columns, opts)],
            dict(plan.stage_columns),
            str(tables.stage),
            "",
        )
        self.run(stage_renderer.add_empty_partitions(str(tables.stage), plan.empties))
        known = default_partition_directories(
            stage.directory, plan.stage_columns, opts.partition_by, plan.written
        )
        self.publisher.publish(
            target, tables.stage, opts.partition_by, plan.written, before, directories=known
        )
        return True

    def rows_written(self, run: ChainRun, plan: WritePlan) -> int:
        """The rows now in the partitions the run wrote: one count, which Spark answers from
        the files' footers (parquet, orc) without reading the rows."""
        if not plan.written:
            return 0
        where = Renderer.of(plan.loaded).partitions_predicate(plan.written)
        rows = self.catalog.runner.fetch(S.count_rows(str(run.target), where))
        return int(rows[0][0] or 0) if rows else 0

    def _await_cached_schemas(self, run: ChainRun, plan: WritePlan) -> None:
        """After new columns, before the view reads them: a session of a shared server that read
        the chain before keeps the branches' old schema cached, and a view naming a new column
        fails there (UNRESOLVED_COLUMN) until that cache expires. The old view names none, so
        the run waits out the server's cache time first (docs/design.md#crash-safety-and-locking)."""
        if plan.columns_added_at is None:
            return
        ttl = self.catalog.metadata_cache_ttl()
        if ttl is None:
            logger.info(
                f"'{run.model}': new columns; sessions of a shared server that read "
                f"{run.tables.view} before keep its old columns until they reconnect or run "
                f"REFRESH TABLE, unless the server sets {METADATA_CACHE_TTL} (README: running "
                "on a cluster)"
            )
            return
        wait = min(ttl, MAX_SCHEMA_WAIT) + 0.5 - (time.monotonic() - plan.columns_added_at)
        if ttl > MAX_SCHEMA_WAIT:
            logger.warning(
                f"'{run.model}': {METADATA_CACHE_TTL} is {ttl:.0f}s; the run waits "
                f"{MAX_SCHEMA_WAIT:.0f}s at most, so sessions that read the chain before may "
                "fail on the new columns for the rest of that time"
            )
        if wait > 0:
            logger.info(
                f"'{run.model}': waiting {wait:.1f}s for other sessions' cached schemas "
                f"({METADATA_CACHE_TTL} = {ttl:g}s) before the view reads the new columns"
            )
            time.sleep(wait)
        else:  # the run's own work since the ADD COLUMNS took longer than the cache lives
            logger.info(
                f"'{run.model}': other sessions' cached schemas ({METADATA_CACHE_TTL} = "
                f"{ttl:g}s) expired while the run wrote; the view reads the new columns"
            )

    def finish(
        self,
        run: ChainRun,
        plan: WritePlan,
        stage_dropped: bool,
        prebuilt: Prebuilt | None = None,
    ) -> Loaded:
        """After the publish: record stale snapshots, point the view at the new state, then drop
        the snapshots a rewritten delta invalidates (the view no longer reads them) and the
        stage. Returns the catalog as it now is."""
        tables, lay = run.tables, plan.loaded.layout
        # a publish switched or added exactly `plan.written` in the target branch and changed no
        # properties or columns; a first run's new tables are read again
        loaded = (
            plan.loaded.with_published(run.branch, plan.written)
            if run.publishes
            else self.catalog.load(tables.view)
        )
        stale = loaded.stale()
        invalidated: list[Values] = []
        if run.branch == "delta":
            invalidated = invalidated_snapshots(run, plan)  # dropped below
            stale = loaded.stale_after_delta_write(plan.written, invalidated)
        else:
            written = {lay.path(p) for p in plan.written}
            stale = {k: v for k, v in stale.items() if k not in written}
        if stale != loaded.stale():
            self.catalog.set_stale(tables, stale)
        # the snapshots a rewritten delta invalidates are dropped below: no day is built on them;
        # a publish keeps the view, a first run or full refresh dropped it
        write = Write(run.branch, plan.written, plan.lowest_sequence, prebuilt, stores_changes=True)
        loaded = self.unit.published(
            loaded.without(snapshots=invalidated),
            write,
            wait=lambda: self._await_cached_schemas(run, plan),
            view_exists=run.view_exists and run.publishes,
        )
        failpoint("run.view")
        if invalidated:
            logger.info(
                f"'{run.model}': rewritten delta partition(s) invalidate snapshot "
                f"partition(s) {[lay.path(p) for p in invalidated]}"
            )
            self.catalog.retire(
                "invalidated snapshot partitions",
                Renderer.of(loaded).drop_partitions(str(tables.snapshot), invalidated),
            )
        self.publisher.lock.invalidated(tables)  # the lock forgets what it named for recovery
        if not stage_dropped:
            self.publisher.recovery.drop_scratch(tables)
        # the day is read through the view already: its stored changes only save later reads
        self.unit.settled(loaded, write)
        return loaded

    def maintain(self, run: ChainRun, loaded: Loaded) -> str:
        """After the day is published: compact what the inline compaction policy says is due,
        then expire when configured and due (so a new anchor counts at once). A failed
        compaction leaves the day published and readable: the run warns (an error under
        --warn-error) and expires nothing this time; the next run or compact_chain retries.
        Returns what the run's result message adds."""
        if run.empty:
            return ""
        rule = run.opts.compaction
        if rule is not None and rule.mode == "inline":
            try:
                self.compactor.compact_due(loaded, f"'{run.model}'")
            except LeaseLostError:  # the lock is another writer's: nothing to recover here
                raise
            except DbtRuntimeError as e:
                self.publisher.recovery.recover(
                    run.tables
                )  # the failed write leaves nothing behind
                warn_or_error(
                    AdapterEventWarning(
                        name=logger.name,
                        base_msg=(
                            f"chain_incremental model '{run.model}': the inline compaction "
                            f"failed; the run's {run.branch} partition(s) are published and "
                            "readable, and the next run (or compact_chain with no partition) "
                            f"retries what is due: {e}"
                        ),
                        args=[],
                        node_info=get_node_info(),
                    )
                )
                return "; compaction failed"
        if run.opts.expiration_enabled:
            self.expirer.auto_expire(run.tables.view)
        return ""
