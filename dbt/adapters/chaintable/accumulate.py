"""Keeping the cumulative delta in step with the branches (docs/design.md#cumulative-delta):
before a write changes inputs in place, stop serving the days they feed; after it, build the
cumulative partitions of the days it added or changed, one chain day at a time."""

from __future__ import annotations

from collections.abc import Sequence

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.chaintable import cumulative, safety
from dbt.adapters.chaintable.catalog import Catalog, Loaded
from dbt.adapters.chaintable.planner import Values
from dbt.adapters.chaintable.progress import Stopwatch
from dbt.adapters.chaintable.runner import logger
from dbt.adapters.chaintable.sql import cumulative as cumulative_sql
from dbt.adapters.chaintable.sql.merge import value_columns
from dbt.adapters.chaintable.view import ViewWriter


class Accumulator:
    def __init__(self, catalog: Catalog, views: ViewWriter):
        self.catalog, self.views = catalog, views
        self.run = catalog.runner.run

    def before_write(self, loaded: Loaded, branch: str, written: Sequence[Values]) -> Loaded:
        """Before `written` partitions of `branch` are published: the days they will feed that
        the cumulative delta serves now are read by merge instead (the view is refreshed
        without them) and their cumulative partitions dropped, so that no reader meets a
        cumulative partition built from inputs that changed in place. A daily run, which adds
        the newest day, serves nothing it feeds and costs nothing here."""
        if not loaded.cumulative:
            return loaded
        kept = loaded.cumulative_of().kept_affected(branch, written)
        if kept:  # no view reads them: dropped at once
            self.run(cumulative_sql.drop(loaded.renderer(), kept))
            gone = set(kept)
            loaded = loaded.with_cumulative([c for c in loaded.cumulative if c not in gone])
        future = loaded.with_published(branch, written)
        affected = set(future.cumulative_of().affected(written))
        served = loaded.serving(loaded.state().delta_only())
        unserve = sorted(affected & set(served))
        if not unserve:
            return loaded
        logger.info(
            f"{loaded.tables.view}: {len(unserve)} day(s) read by merge until their "
            "cumulative delta is rebuilt"
        )
        loaded = self.views.refresh(loaded, unserved=unserve)
        safety.failpoint("cumulative.unserved")
        return loaded

    def _ensure_table(self, loaded: Loaded) -> Loaded:
        """t__cumulative exists with the mask column (cumulative.MASK_COLUMN); t__snapshot
        records that, so a daily run reads nothing more to know it."""
        if loaded.props.get(cumulative.P_LAYOUT) == cumulative.LAYOUT:
            return loaded
        renderer, tables = loaded.renderer(), loaded.tables
        if loaded.cumulative is None:
            self.run(cumulative_sql.create(renderer))
        elif cumulative.MASK_COLUMN not in {
            c.lower() for c, _ in self.catalog.describe(tables.cumulative)
        }:
            self.run(cumulative_sql.add_mask_column(renderer))
        self.catalog.set_properties(tables.snapshot, {cumulative.P_LAYOUT: cumulative.LAYOUT})
        return loaded.with_props({cumulative.P_LAYOUT: cumulative.LAYOUT})

    def after_write(self, loaded: Loaded, written: Sequence[Values]) -> Loaded:
        """Build the cumulative partitions of the days `written` feeds (`loaded` is the catalog
        after the publish). A failed build leaves those days read by merge: the write stays."""
        if not loaded.opts.cumulative_delta:
            return loaded
        cum = loaded.cumulative_of()
        days = cum.affected(written)
        if not days:
            return loaded
        renderer, opts = loaded.renderer(), loaded.opts
        incremental = cumulative.incremental(opts, value_columns(opts, loaded.column_names))
        builds = cum.builds(days, incremental)
        built = sum(1 for b in builds if b.previous is not None)
        clock = Stopwatch()
        chains = sorted({b.plan.chain for b in builds}, key=loaded.state().sort_key)
        try:
            loaded = self._ensure_table(loaded)
            for i, chain in enumerate(chains, 1):
                todo = [b for b in builds if b.plan.chain == chain]
                self.run(cumulative_sql.build(renderer, chain, todo, cumulative.needs_anchor(opts)))
                safety.failpoint("cumulative.built")
                if len(chains) > 1:  # a rebuild of many days: say how far it is
                    logger.info(
                        f"{loaded.tables.view}: cumulative delta of day "
                        f"{loaded.layout.chain_path(chain)} built ({i} of {len(chains)} days, "
                        f"{len(todo)} partition(s), {clock})"
                    )
            # the table exists now (_ensure_table): its partitions, listed without asking
            parts = set(self.catalog.cumulative_partitions(loaded.tables, opts, True) or ())
            for b in builds:  # a day whose deltas changed no key has no rows: still served
                part = b.plan.group + b.plan.chain + (b.stamp,)
                if part not in parts:
                    self.run(cumulative_sql.empty(renderer, b.plan.group + b.plan.chain, b.stamp))
                    parts.add(part)
        except DbtRuntimeError as e:
            logger.warning(
                f"{loaded.tables.view}: building the cumulative delta failed, the "
                f"days stay read by merge: {e}"
            )
            return loaded.with_cumulative(self.catalog.cumulative_partitions(loaded.tables, opts))
        logger.info(
            f"{loaded.tables.view}: cumulative delta of {len(builds)} day(s) built "
            f"({built} from the day before) in {clock}"
        )
        return loaded.with_cumulative(sorted(parts))
