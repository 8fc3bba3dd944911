"""SQL of the cumulative delta (docs/design.md#cumulative-delta): its table, the build of a
day's partitions and the read of a day from its anchor and its partition. `r` is the chain's
Renderer (render.py), which holds the names, columns and partition predicates."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from dbt.adapters.chaintable.cumulative import STAMP_COLUMN, Build
from dbt.adapters.chaintable.options import ChainOptions
from dbt.adapters.chaintable.planner import ReadPlan, Values
from dbt.adapters.chaintable.sql import statements
from dbt.adapters.chaintable.sql.merge import ANCHOR, Types, _merge, is_retract
from dbt.adapters.chaintable.sql.quoting import cols_sql, literal, q, spec_sql

if TYPE_CHECKING:  # render.py imports this module
    from dbt.adapters.chaintable.sql.render import Renderer


def _on(keys: Sequence[str], left: str, right: str) -> str:
    return " AND ".join(f"{left}.{q(k)} = {right}.{q(k)}" for k in keys) or "true"


def _distinct_keys(keys: Sequence[str], source_sql: str) -> str:
    return f"(SELECT DISTINCT {cols_sql(keys) or 'true AS __chain_any'} FROM ({source_sql}) __dk)"


def build_sql(
    opts: ChainOptions,
    columns: Sequence[str],
    delta_sql: str,
    state_sql: str | None,
    anchor_sql: str | None,
    types: Types = None,
) -> str:
    """The cumulative delta of a day: every key of `delta_sql` (raw delta rows) or of
    `state_sql` (the previous day's cumulative rows, each a key's merged state or tombstone)
    with its merged state, a removed key as its -U/-D row. A state row merged alone gives itself
    back (one window or aggregation over all the rows, no join to split them). A key of the
    deltas is merged with its `anchor_sql` row too (None: no anchor, or one that cannot change
    the result) unless the state holds it already.

    deduplicate and first-row pick one row: the anchor row again changes nothing for a key the
    state holds, so only the deltas' keys are looked up, and the anchor rows go in as stand-ins
    with only the columns that rank them (key, chain and sequence columns: a narrow scan of the
    anchor). A key whose anchor row wins gets no row, so the read keeps the anchor's row; the
    next day's build looks that key up again if its delta has it.

    State rows whose key the deltas do not have are passed through as they are (an anti join
    against the deltas' keys, broadcast): only the changed keys are ranked, not the whole state
    (the state grows with the chain, the day's changes do not)."""
    keys = list(opts.merge_keys)
    pick_one = opts.merge_engine in ("deduplicate", "first-row")
    inputs = [f"SELECT {cols_sql(columns)}, false AS {ANCHOR} FROM ({delta_sql}) __e"]
    touched = _distinct_keys(keys, delta_sql)  # the day's changed keys
    passed = None
    if state_sql is not None:
        on = _on(keys, "__s", "__t")
        passed = (
            f"SELECT /*+ BROADCAST(__t) */ {cols_sql(columns, '__s')} FROM ({state_sql}) __s "
            f"LEFT ANTI JOIN {touched} __t ON {on}"
        )
        state_sql = (
            f"SELECT /*+ BROADCAST(__t) */ {cols_sql(columns, '__s')} FROM ({state_sql}) __s "
            f"LEFT SEMI JOIN {touched} __t ON {on}"
        )
        # a live state row is merged state (like an anchor row: a count carries its value); a
        # tombstone is the retraction that removed the key. deduplicate and first-row count
        # nothing: there ANCHOR marks the stand-ins only
        state_flag = "false" if pick_one else f"NOT {is_retract(opts)}"
        inputs.append(
            f"SELECT {cols_sql(columns)}, {state_flag} AS {ANCHOR} FROM ({state_sql}) __s"
        )
    if anchor_sql is not None:
        lookup = touched
        if state_sql is not None and not pick_one:
            lookup = (
                f"(SELECT * FROM {lookup} __n LEFT ANTI JOIN "
                f"{_distinct_keys(keys, state_sql)} __o ON {_on(keys, '__n', '__o')})"
            )
        anchor_cols = cols_sql(columns, "__a")
        if pick_one:
            ranking = {c.lower() for c in [*keys, *opts.chain_keys, opts.sequence_field] if c}
            anchor_cols = ", ".join(
                f"__a.{q(c)}" if c.lower() in ranking else f"NULL AS {q(c)}" for c in columns
            )
        inputs.append(
            f"SELECT /*+ BROADCAST(__t) */ {anchor_cols}, true AS {ANCHOR} "
            f"FROM ({anchor_sql}) __a LEFT SEMI JOIN {lookup} __t "
            f"ON {_on(keys, '__a', '__t')}"
        )
    merged = _merge(
        opts,
        columns,
        " UNION ALL ".join(inputs),
        keys,
        types,
        keep_deletes=True,
        drop_anchor=pick_one,
    )
    return merged if passed is None else f"{passed} UNION ALL {merged}"


def read_sql(
    opts: ChainOptions,
    columns: Sequence[str],
    anchor_sql: str | None,
    cumulative_sql: str,
    keys_sql: str,
) -> str:
    """A day's full state from its anchor and its cumulative delta: the anchor rows whose key the
    cumulative delta does not hold (its keys, one row each, from `keys_sql`, broadcast), and its
    live rows."""
    return " UNION ALL ".join(read_parts(opts, columns, anchor_sql, cumulative_sql, keys_sql))


def read_parts(
    opts: ChainOptions,
    columns: Sequence[str],
    anchor_sql: str | None,
    cumulative_sql: str,
    keys_sql: str,
) -> list[str]:
    """`read_sql` as the SELECTs of its UNION ALL."""
    keys = list(opts.merge_keys)
    live = f"SELECT {cols_sql(columns)} FROM ({cumulative_sql}) __c WHERE NOT {is_retract(opts)}"
    if anchor_sql is None:
        return [live]
    untouched = (
        f"SELECT /*+ BROADCAST(__k) */ {cols_sql(columns, '__a')} FROM ({anchor_sql}) __a "
        f"LEFT ANTI JOIN (SELECT {cols_sql(keys) or 'true AS __chain_any'} "
        f"FROM ({keys_sql}) __kk) __k "
        f"ON {_on(keys, '__a', '__k')}"
    )
    return [untouched, live]


# ---- one chain's cumulative table -------------------------------------------------------------
def _where(r: Renderer, parts: Mapping[Values, str]) -> str:
    """C partitions: each (group + chain) with its stamp. Stamps are unique per partition
    (cumulative.stamp), so one IN list of them cannot pick another partition's."""
    stamps = ", ".join(literal(s) for s in sorted(set(parts.values())))
    return f"({r.partitions_predicate(list(parts))}) AND {q(STAMP_COLUMN)} IN ({stamps})"


def select(r: Renderer, parts: Mapping[Values, str]) -> str:
    return f"SELECT {cols_sql(r.columns)} FROM {r.cumulative} WHERE {_where(r, parts)}"


def read(r: Renderer, plans: Sequence[ReadPlan], serving: Mapping[Values, str]) -> list[str]:
    """The full state of one day for the groups of `plans`, all served (`serving`), as the
    SELECTs of a UNION ALL."""
    parts = {p.group + p.chain: serving[p.group + p.chain] for p in plans}
    anchors = [p.group + p.anchor for p in plans if p.anchor is not None]
    keys = (
        f"SELECT {cols_sql(r.opts.merge_keys) or '1'} FROM {r.cumulative} WHERE {_where(r, parts)}"
    )
    return read_parts(
        r.opts,
        r.columns,
        r.select(r.snapshot, anchors) if anchors else None,
        select(r, parts),
        keys,
    )


def columns(r: Renderer) -> list[tuple[str, str]]:
    """The table's columns (table order) and the stamp, the last partition column."""
    return [(c, r.type_of(c)) for c in r.columns] + [(STAMP_COLUMN, "string")]


def create(r: Renderer) -> str:
    return statements.create_table(
        r.cumulative, columns(r), [*r.opts.partition_by, STAMP_COLUMN], {}
    )


def build(r: Renderer, chain: Values, builds: Sequence[Build], with_anchor: bool) -> str:
    """Write the cumulative delta of day `chain` for each build's group (one day, all its
    groups, one statement): a dynamic overwrite of exactly the partitions with rows."""
    deltas = [b.plan.group + d for b in builds for d in b.deltas]
    states = {b.plan.group + b.previous: b.previous_stamp for b in builds if b.previous is not None}
    anchors = [b.plan.group + b.plan.anchor for b in builds if b.plan.anchor is not None]
    body = build_sql(
        r.opts,
        r.columns,
        r.select(r.delta, deltas),
        select(r, states) if states else None,
        r.select(r.snapshot, anchors) if anchors and with_anchor else None,
        types=r.types,
    )
    if r.opts.group_keys:
        cases = " ".join(
            f"WHEN {r.predicate(r.opts.group_keys, b.plan.group)} THEN {literal(b.stamp)}"
            for b in builds
        )
        stamp = f"CASE {cases} END"
    else:
        stamp = literal(builds[0].stamp)
    parts = ", ".join(q(c) for c in [*r.opts.partition_by, STAMP_COLUMN])
    return (
        f"INSERT OVERWRITE TABLE {r.cumulative} PARTITION ({parts})\n"
        f"SELECT {r.relabel(chain)}, {stamp} AS {q(STAMP_COLUMN)} FROM ({body}) __b"
    )


def empty(r: Renderer, values: Values, stamp: str) -> str:
    """An empty C partition: a day of a group whose deltas changed no key."""
    nulls = ", ".join(f"CAST(NULL AS {r.type_of(c)}) AS {q(c)}" for c in r.data_columns)
    spec = spec_sql([*r.opts.partition_by, STAMP_COLUMN], (*values, stamp))
    return f"INSERT OVERWRITE TABLE {r.cumulative} PARTITION ({spec}) SELECT {nulls} WHERE 1 = 0"


def drop(r: Renderer, parts: Sequence[Values]) -> str | None:
    """Drop C partitions given as partition values + stamp."""
    return statements.drop_partitions(r.cumulative, [*r.opts.partition_by, STAMP_COLUMN], parts)
