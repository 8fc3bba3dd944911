"""The catalog's side of chain_input 'full' (run/full.py plans and renders): the groups of the
model's output, the chain's state of each one's latest day before the run's, and the SQL a run
stages in place of the model's rows."""

from __future__ import annotations

from dataclasses import dataclass

from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.base.runner import logger
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.chain.catalog import Catalog
from dbt.adapters.chaintable.chain.state import ReadPlan
from dbt.adapters.chaintable.cumulative.plan import served_days
from dbt.adapters.chaintable.read.render import Renderer
from dbt.adapters.chaintable.run import full
from dbt.adapters.chaintable.run.model import ChainRun, Columns


@dataclass(frozen=True)
class FullStage:
    """What a run of a full chain stages: `sql`, its rows; `groups`, the groups of the model's
    output (None: a write of the snapshot branch, every row an insert); `rewritten`, the delta
    partitions of later days compared again with the new day (run/full.py FullPlan)."""

    sql: str
    groups: tuple[Values, ...] | None = None
    rewritten: tuple[Values, ...] = ()


class FullInput:
    def __init__(self, catalog: Catalog):
        self.catalog = catalog

    def staged(self, run: ChainRun, model_sql: str, cols: Columns) -> FullStage:
        """What the run stages for the model's full states. A delta run compares each group's
        output with the group's latest day before the run's day, read as chain_read reads it
        (the cumulative delta where it serves the day), and the group's next held day after it
        with the output, so that this day changes and that one reads as before; it costs one
        query more for the groups (their other days are read for them alone)."""
        opts, model = run.opts, run.model
        if not run.publishes:
            return FullStage(full.first_load_sql(model_sql))
        if run.empty:  # --empty or --sample: part of a state is no state, nothing is written
            return FullStage(
                f"SELECT * FROM ({full.first_load_sql(model_sql)}) __none WHERE false", ()
            )
        spec = run.settings.chain_partition
        if not spec or any(c not in spec for c in opts.chain_keys):
            raise ChainConfigError(
                f"chain_incremental model '{model}': chain_input 'full' needs chain_partition "
                "(the day of the extract, e.g. {'dt': var('dt')}) on a run of an existing "
                "chain; nothing was written"
            )
        loaded = self.catalog.load(run.tables.view)
        state = loaded.state()
        day = state.spelled(tuple(str(spec[c]) for c in opts.chain_keys))
        rows = self.catalog.runner.fetch(full.groups_sql(opts, model_sql))
        groups = [tuple(str(v) for v in r) if opts.group_keys else () for r in rows]
        snapshot = run.branch == "snapshot"  # chain_branch: the states as they are
        plan = full.plan_full(state, model, day, groups, rewrite_later=not snapshot)
        if snapshot:
            return FullStage(full.first_load_sql(model_sql), plan.groups)
        r = Renderer.of(loaded)

        def reads(by_day: dict[Values, list[ReadPlan]]) -> dict[Values, str]:
            return {
                chain: r.partition_read(plans, served_days(loaded, plans))
                for chain, plans in by_day.items()
            }

        def lits(chain: Values) -> dict[str, str]:
            return {c: r.lit(c, v) for c, v in zip(opts.chain_keys, chain, strict=True)}

        names = [c for c, _ in cols]
        previous = "\nUNION ALL\n".join(
            f"SELECT * FROM ({sql}) __r{i}" for i, sql in enumerate(reads(plan.by_day()).values())
        )
        parts = [full.diff_sql(opts, names, model_sql, previous or None, lits(day))]
        following = plan.following_by_day()
        for chain, sql in reads(following).items():
            # the next held day, as it reads now, against this day's new state
            now = full.in_groups_sql(opts, model_sql, [p.group for p in following[chain]])
            parts.append(full.diff_sql(opts, names, sql, now, lits(chain)))
        if plan.following:
            logger.info(
                f"'{model}': the next held day of {len(plan.following)} group(s) is compared "
                "again with this day's new state, so that it reads as before: "
                + ", ".join(state.layout.path(p) for p in plan.rewritten()[:5])
                + (" ..." if len(plan.following) > 5 else "")
            )
        sql = "\nUNION ALL\n".join(f"SELECT * FROM ({p}) __d{i}" for i, p in enumerate(parts))
        return FullStage(sql if len(parts) > 1 else parts[0], plan.groups, plan.rewritten())
