"""The catalog's side of chain_input 'full' (run/full.py plans and renders): the groups of the
model's output, the chain's state of each one's latest day before the run's, and the SQL a run
stages in place of the model's rows."""

from __future__ import annotations

from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.chain.catalog import Catalog
from dbt.adapters.chaintable.cumulative.plan import served_days
from dbt.adapters.chaintable.read.render import Renderer
from dbt.adapters.chaintable.run import full
from dbt.adapters.chaintable.run.model import ChainRun, Columns


class FullInput:
    def __init__(self, catalog: Catalog):
        self.catalog = catalog

    def staged_sql(
        self, run: ChainRun, model_sql: str, cols: Columns
    ) -> tuple[str, tuple[Values, ...] | None]:
        """What the run stages for the model's full states, and the groups they are of (None:
        a write of the snapshot branch, every row an insert). A delta run compares each group's
        output with the group's latest day before the run's day, read as chain_read reads it
        (the cumulative delta where it serves the day); it costs one query more for the groups
        (their previous days are read for them alone)."""
        opts, model = run.opts, run.model
        if not run.publishes:
            return full.first_load_sql(model_sql), None
        if run.empty:  # --empty or --sample: part of a state is no state, nothing is written
            return f"SELECT * FROM ({full.first_load_sql(model_sql)}) __none WHERE false", ()
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
        plan = full.plan_full(state, model, day, groups)
        if run.branch == "snapshot":  # chain_branch: the states as they are, no day after
            return full.first_load_sql(model_sql), plan.groups
        r = Renderer.of(loaded)
        reads = [
            f"SELECT * FROM ({r.partition_read(plans, served_days(loaded, plans))}) __r{i}"
            for i, plans in enumerate(plan.by_day().values())
        ]
        lits = {c: r.lit(c, v) for c, v in zip(opts.chain_keys, day, strict=True)}
        names = [c for c, _ in cols]
        previous = "\nUNION ALL\n".join(reads) or None
        return full.diff_sql(opts, names, model_sql, previous, lits), plan.groups
