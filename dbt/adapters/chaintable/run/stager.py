"""A run's first step on the tables: the model's rows, staged once, where they can be checked and
then published as they are (publish/safety.py)."""

from __future__ import annotations

from collections.abc import Mapping

from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base import versions
from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.chain.catalog import Catalog
from dbt.adapters.chaintable.publish import safety
from dbt.adapters.chaintable.publish.publisher import Publisher
from dbt.adapters.chaintable.run import full
from dbt.adapters.chaintable.run.full_input import FullInput
from dbt.adapters.chaintable.run.model import (
    ChainRun,
    Stage,
    create_sql,
    snapshot_write_needs_merge,
)


class Stager:
    def __init__(self, catalog: Catalog, publisher: Publisher):
        self.catalog, self.publisher = catalog, publisher
        self.run = catalog.runner.run
        self.full = FullInput(catalog)

    def stage(
        self,
        run: ChainRun,
        compiled_code: str,
        run_id: str,
        single: Values | None,
        bare: Mapping[str, str] | None,
    ) -> Stage:
        """The model's rows, once. On an existing chain they go to a fresh directory below the
        target branch: `single`, the one partition the run can write (single_partition), in a
        bare directory (`bare`: what the lock records of it); else an external table
        partitioned and bucketed like the target. After the checks the partitions are
        published as they are (publish/safety.py). A first run or full refresh stages a plain table."""
        cols = self.catalog.describe_query(compiled_code)
        run.opts.validate_columns(run.model, [c for c, _ in cols], dict(cols))  # first
        groups: tuple[Values, ...] | None = None
        rewritten: tuple[Values, ...] = ()
        if run.opts.chain_input == "full":
            fs = self.full.staged(run, compiled_code, cols)
            compiled_code, groups, rewritten = fs.sql, fs.groups, fs.rewritten
            cols = [*cols, (full.KIND, "string")]
            if (
                rewritten and single is not None
            ):  # later days too: a stage partitioned as the target
                single, run_id = None, versions.new_run_id()
        # no stage is left over: taking the lock ran the recovery, which drops it
        if not run.publishes:
            self.run(S.create_scratch_as(str(run.tables.stage), compiled_code))
            return Stage()
        info = self.catalog.formatted(run.target)
        provider = info.get("Provider", "parquet")
        bucketed = bool(run.settings.buckets) or int(info.get("Num Buckets") or 0) > 0
        if single is not None and (provider.lower() not in safety.BY_NAME_FORMATS or bucketed):
            # files that must not hold the partition columns, or bucket files: a staging table
            # lays them out, in a directory of its own (the one the lock names stays unwritten)
            single, run_id = None, versions.new_run_id()
        stage = Stage(run_id, info["Location"], provider, single, tuple(cols), groups, rewritten)
        if stage.bare:
            self.run(S.write_directory(stage.directory, provider, compiled_code))
            self.publisher.lock.staged(run.tables, bare or {})
            return stage
        linked = {safety.P_LINKED: "true"} if rewritten else {}
        self.run(
            create_sql(
                run,
                run.tables.stage,
                [],
                {safety.P_TARGET: str(run.target), **linked},
                location=stage.directory,
                as_select=compiled_code,
                provider=provider,
            )
        )
        return stage

    @staticmethod
    def single_partition(run: ChainRun) -> Values | None:
        """The one partition a run of an existing chain can write, when chain_partition gives
        every partition column and the stage is published as it is (no merge of a snapshot
        write); else None (a stage partitioned like its target). Its target must also read
        columns by name and have no buckets (stage)."""
        spec, opts = run.settings.chain_partition, run.opts
        if not run.publishes or not spec or any(c not in spec for c in opts.partition_by):
            return None
        if run.branch == "snapshot" and snapshot_write_needs_merge(opts):
            return None
        return tuple(str(spec[c]) for c in opts.partition_by)
