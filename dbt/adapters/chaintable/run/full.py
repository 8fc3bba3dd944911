"""chain_input 'full' (docs/design.md#full-state-input): a model that returns each group's full
state of the day is stored as what differs from the group's state of its latest day before.

The pure part plans which days are compared (`plan_full`) and renders the comparison
(`diff_sql`); `FullInput` asks the catalog and the model's groups for them. A delete is a row
whose kind column (KIND, the chain's rowkind field, which the adapter alone writes) is '-D', so
the deduplicate merge removes the key as it does for any rowkind chain; reads leave the column
out (read/visible.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.partitions import ChainPlanError, Values
from dbt.adapters.chaintable.base.quoting import cols_sql, q, string
from dbt.adapters.chaintable.chain.state import ChainState, ReadPlan
from dbt.adapters.chaintable.read.visible import KIND

INSERT, DELETE = "+I", "-D"
ON = "__ct_on"  # a side of the comparison's outer join has the key
COUNT = "__ct_n"  # rows of the key in the model's output


@dataclass(frozen=True)
class FullPlan:
    """What a run of day `day` (chain values) of a full chain compares: `groups`, those the
    model has rows for; `previous`, the read of each one's latest day before `day` (a group
    without one has every key inserted); `following`, the read of each one's next held day
    after `day` where a delta serves it: that delta was compared with the state `day` had, and
    is compared again with the new one, so that the day still reads as it did."""

    day: Values
    groups: tuple[Values, ...]
    previous: tuple[ReadPlan, ...]
    following: tuple[ReadPlan, ...] = ()

    def by_day(self) -> dict[Values, list[ReadPlan]]:
        """The previous reads by chain value (one partition read each)."""
        return _by_chain(self.previous)

    def following_by_day(self) -> dict[Values, list[ReadPlan]]:
        """The next held days' reads by chain value."""
        return _by_chain(self.following)

    def rewritten(self) -> tuple[Values, ...]:
        """The delta partitions of later days the run writes again."""
        return tuple(p.group + p.chain for p in self.following)


def _by_chain(plans: Sequence[ReadPlan]) -> dict[Values, list[ReadPlan]]:
    out: dict[Values, list[ReadPlan]] = {}
    for p in plans:
        out.setdefault(p.chain, []).append(p)
    return out


def plan_full(
    state: ChainState,
    model: str,
    day: Values,
    groups: Sequence[Values],
    rewrite_later: bool = True,
) -> FullPlan:
    """The reads that `day`'s output of `groups` is compared with, and those of the groups'
    next held days, compared again with it. A next held day with a snapshot reads that
    snapshot, which `day` does not change: nothing there is written. `rewrite_later` False (a
    write of full states to the snapshot branch, which writes no delta): a group holding a
    later day is refused."""
    key = state.sort_key(day)
    chains = state.chains()
    previous, following = [], []
    for group in sorted(set(groups)):
        days = chains.get(group, [])
        later = [c for c in days if state.sort_key(c) > key]
        if later and not rewrite_later:
            raise ChainPlanError(
                f"chain_incremental model '{model}': chain_input 'full' cannot write day "
                f"{state.layout.path(group + day)} to the snapshot branch: the group holds a "
                f"later day ({state.layout.path(group + later[0])}), whose stored changes were "
                "compared with this day's state; nothing was written"
            )
        if later and group + later[0] not in state.snapshots:
            plan = state.plan_read(group, later[0])
            if plan is not None:
                following.append(plan)
        before = [c for c in days if state.sort_key(c) < key]
        if before:
            plan = state.plan_read(group, before[-1])
            if plan is not None:
                previous.append(plan)
    return FullPlan(tuple(day), tuple(sorted(set(groups))), tuple(previous), tuple(following))


def first_load_sql(model_sql: str) -> str:
    """A full state written as it is (first run, snapshot branch): every row an insert."""
    return f"SELECT *, {string(INSERT)} AS {q(KIND)} FROM ({model_sql}) __full"


def groups_sql(opts: ChainOptions, model_sql: str) -> str:
    """The groups the model's output has rows for (one row, `true`, for a chain without
    group keys that has any)."""
    if not opts.group_keys:
        return f"SELECT true FROM ({model_sql}) __g LIMIT 1"
    return f"SELECT DISTINCT {_group_names(opts)} FROM ({model_sql}) __g"


def _group_names(opts: ChainOptions) -> str:
    """The group key columns as Spark spells them in a partition's name."""
    return ", ".join(f"CAST({q(g)} AS STRING)" for g in opts.group_keys)


def in_groups_sql(opts: ChainOptions, model_sql: str, groups: Sequence[Values]) -> str:
    """The model's rows of `groups` (values as groups_sql spells them)."""
    if not opts.group_keys:
        return model_sql
    tuples = ", ".join("(" + ", ".join(string(v) for v in g) + ")" for g in sorted(groups))
    return f"SELECT * FROM ({model_sql}) __in WHERE ({_group_names(opts)}) IN ({tuples})"


def diff_sql(
    opts: ChainOptions,
    columns: Sequence[str],
    model_sql: str,
    previous_sql: str | None,
    day: Mapping[str, str],
) -> str:
    """The rows that turn the previous state (`previous_sql`, `columns`) into the model's
    output (`model_sql`, `columns`): a key only in the output is inserted, one in both whose
    other columns differ (NULL equal to NULL) is written again, one only in the previous state
    is deleted (KIND '-D', at `day`: {chain key: literal SQL}). A key with more than one row in
    the output keeps them all, so that the run's checks refuse it as on any chain."""
    if previous_sql is None:
        return first_load_sql(model_sql)
    keys = list(opts.merge_keys)
    by = f"PARTITION BY {cols_sql(keys)}" if keys else ""
    chain = {c.lower() for c in opts.chain_keys}
    skip = {c.lower() for c in opts.primary_key}
    values = [c for c in columns if c.lower() not in skip]

    def out(c: str) -> str:
        other = day[c] if c.lower() in chain else f"__p.{q(c)}"
        return f"CASE WHEN __o.{ON} THEN __o.{q(c)} ELSE {other} END AS {q(c)}"

    on = " AND ".join(f"__o.{q(k)} = __p.{q(k)}" for k in keys) or "true"
    same = " AND ".join(f"__o.{q(c)} <=> __p.{q(c)}" for c in values) or "true"
    kind = f"CASE WHEN __o.{ON} THEN {string(INSERT)} ELSE {string(DELETE)} END AS {q(KIND)}"
    return (
        f"SELECT {', '.join(out(c) for c in columns)}, {kind}\n"
        f"FROM (SELECT {cols_sql(columns)}, true AS {ON}, count(*) OVER ({by}) AS {COUNT} "
        f"FROM ({model_sql}) __m) __o\n"
        f"FULL OUTER JOIN (SELECT {cols_sql(columns)}, true AS {ON} "
        f"FROM ({previous_sql}) __q) __p\nON {on}\n"
        f"WHERE __o.{ON} IS NULL OR __p.{ON} IS NULL OR __o.{COUNT} > 1 OR NOT ({same})"
    )
