"""The change a run makes to an existing chain's tables before it publishes: columns to add, table
properties to set and to unset, and whether the model's config needs a full refresh instead.
Computed purely from the model's settings and what the tables store (change_set), so it is
unit-tested without Spark; the run applies it (run/planner.py, RunPlanner.evolve)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dbt.adapters.chaintable.base.config import ModelSettings
from dbt.adapters.chaintable.base.keys import dropped_options
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.run.model import Columns


@dataclass(frozen=True)
class ChangeSet:
    # appended to both branches (and the cumulative delta), on_schema_change=append_new_columns
    add_columns: tuple[tuple[str, str], ...] = ()
    # every option of the config, set together on both branches once any of them changed
    set_properties: Mapping[str, str] = field(default_factory=dict)
    # options stored but no longer configured (dropped_options)
    unset_properties: tuple[str, ...] = ()
    # why the config changes how stored partitions are read; None: it does not
    full_refresh: str | None = None
    message: str = ""  # what the run logs about the model's columns

    @property
    def changes_tables(self) -> bool:
        return bool(self.add_columns or self.set_properties or self.unset_properties)

    def properties_after(self, stored: Mapping[str, str]) -> dict[str, str]:
        """The branches' properties once the change is applied."""
        kept = {k: v for k, v in stored.items() if k not in self.unset_properties}
        return {**kept, **self.set_properties}


def full_refresh_reason(opts: ChainOptions, table: str, stored: Mapping[str, str]) -> str | None:
    """Why `opts` cannot be applied to a chain whose branches store `stored`: options that would
    reinterpret the stored partitions; None when there are none."""
    changed = opts.structural_differences(ChainOptions.from_properties(table, stored))
    if not changed:
        return None
    desc = "; ".join(f"{k} {a} -> {b}" for k, (a, b) in changed.items())
    return f"{desc} changes how stored partitions are read"


def change_set(
    settings: ModelSettings,
    tables: tuple[str, str],
    stored: Mapping[str, str],
    stored_cols: Columns,
    columns: Columns,
) -> ChangeSet:
    """What a run of `settings` changes on the branches (`tables`: snapshot and delta names),
    which store properties `stored` and columns `stored_cols`, given the model's `columns`
    (table order). Refuses a change of columns that on_schema_change does not allow."""
    snapshot, delta = tables
    added, message = schema_change(settings, delta, columns, stored_cols)
    props = settings.opts.to_properties()
    return ChangeSet(
        add_columns=tuple(added),
        set_properties=props if any(stored.get(k) != v for k, v in props.items()) else {},
        unset_properties=tuple(dropped_options(stored, props)),
        full_refresh=full_refresh_reason(settings.opts, snapshot, stored),
        message=message,
    )


def schema_change(
    settings: ModelSettings, delta: str, stage_cols: Columns, table_cols: Columns
) -> tuple[list[tuple[str, str]], str]:
    """How the model's columns differ from the stored ones, under on_schema_change (ignore |
    fail | append_new_columns): (columns to append to both branches, what to log). Both
    branches always keep one schema, so removed or retyped columns are refused."""
    mode = settings.on_schema_change
    have = {c.lower(): t for c, t in table_cols}
    new = {c.lower(): t for c, t in stage_cols}
    added = [(c, t) for c, t in stage_cols if c.lower() not in have]
    removed = [c for c, _ in table_cols if c.lower() not in new]
    retyped = [
        f"{c} {have[c.lower()]} -> {new[c.lower()]}"
        for c, _ in table_cols
        if c.lower() in new and new[c.lower()] != have[c.lower()]
    ]
    if not (added or removed or retyped):
        return [], ""
    desc = (
        f"chain_incremental model '{settings.model}': the model's columns differ from "
        f"{delta}: added {[c for c, _ in added]}, removed {removed}, "
        f"type changed {retyped}"
    )
    if mode == "fail" or removed or retyped:
        raise ChainConfigError(desc + f" (on_schema_change={mode}); nothing was written")
    if mode == "append_new_columns":
        return added, desc + "; appended to both branches"
    return [], desc + "; new columns ignored (on_schema_change=ignore)"
