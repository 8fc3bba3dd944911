"""SQL of the cumulative delta (docs/design.md#cumulative-delta): its table, the build of a
day's partitions and the read of a day from its anchor and its partition. `r` is the chain's
SQL vocabulary (chain/sql.py), which holds the names, columns and partition predicates."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from dbt.adapters.chaintable.base import statements
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.base.quoting import cols_sql, literal, q
from dbt.adapters.chaintable.chain.sql import ChainSql
from dbt.adapters.chaintable.chain.tables import STAMP_COLUMN
from dbt.adapters.chaintable.cumulative.plan import (
    MASK_COLUMN,
    Build,
)
from dbt.adapters.chaintable.cumulative.read import bit, block, mask_of, on_keys, select
from dbt.adapters.chaintable.merge.engines import engine_of
from dbt.adapters.chaintable.merge.ranked import pick_one
from dbt.adapters.chaintable.merge.rules import ANCHOR, Types, is_retract
from dbt.adapters.chaintable.merge.sql import merge_select


def _distinct_keys(keys: Sequence[str], source_sql: str) -> str:
    return f"(SELECT DISTINCT {cols_sql(keys) or 'true AS __chain_any'} FROM ({source_sql}) __dk)"


def build_sql(
    opts: ChainOptions,
    columns: Sequence[str],
    delta_sql: str,
    state_sql: str | None,
    anchor_sql: str | None,
    types: Types = None,
    cluster: Sequence[str] = (),
    tie_rows: str | None = None,
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
    (the state grows with the chain, the day's changes do not).
    `cluster`: the partition of the caller's window over the result (the mask window). For
    deduplicate and first-row every state row is then ranked instead, in a window that shares
    its shuffle (see merge.rank_rows: one shuffle of the day's rows, not two, and no joins of the
    state; measured on the benchmark's day-14 build: 1.16 -> 0.66 s at 2M rows, 1.74 -> 1.45 s
    at 10M). Other engines ignore it: only a pick-one merge gives a state row alone back.
    `tie_rows`: with `cluster`, rows that tie in that window fail the query (merge.rank_rows)."""
    keys = list(opts.merge_keys)
    picks_one = _picks_one(opts)
    cluster = cluster if picks_one else ()
    inputs = [f"SELECT {cols_sql(columns)}, false AS {ANCHOR} FROM ({delta_sql}) __e"]
    touched = _distinct_keys(keys, delta_sql)  # the day's changed keys
    passed = None
    if state_sql is not None and cluster:
        inputs.append(f"SELECT {cols_sql(columns)}, false AS {ANCHOR} FROM ({state_sql}) __s")
    elif state_sql is not None:
        passed, state_sql, state_input = _state_inputs(opts, columns, state_sql, touched)
        inputs.append(state_input)
    if anchor_sql is not None:
        inputs.append(_anchor_input(opts, columns, anchor_sql, touched, state_sql))
    union = " UNION ALL ".join(inputs)
    if cluster:
        engine = engine_of(opts)  # keep_deletes, drop_anchor:
        merged = pick_one(opts, columns, union, keys, engine, True, True, cluster, tie_rows)
    else:
        merged = merge_select(
            opts, columns, union, keys, types, keep_deletes=True, drop_anchor=picks_one
        )
    return merged if passed is None else f"{passed} UNION ALL {merged}"


def _state_inputs(
    opts: ChainOptions, columns: Sequence[str], state_sql: str, touched: str
) -> tuple[str, str, str]:
    """The previous day's rows split by the day's changed keys (`touched`): those passed through
    as they are, those merged again, and the merge's input of the latter."""
    on = on_keys(opts.merge_keys, "__s", "__t")
    passed = (
        f"SELECT /*+ BROADCAST(__t) */ {cols_sql(columns, '__s')} FROM ({state_sql}) __s "
        f"LEFT ANTI JOIN {touched} __t ON {on}"
    )
    merged = (
        f"SELECT /*+ BROADCAST(__t) */ {cols_sql(columns, '__s')} FROM ({state_sql}) __s "
        f"LEFT SEMI JOIN {touched} __t ON {on}"
    )
    # a live state row is merged state (like an anchor row: a count carries its value); a
    # tombstone is the retraction that removed the key. deduplicate and first-row count
    # nothing: there ANCHOR marks the stand-ins only
    state_flag = "false" if _picks_one(opts) else f"NOT {is_retract(opts)}"
    return (
        passed,
        merged,
        f"SELECT {cols_sql(columns)}, {state_flag} AS {ANCHOR} FROM ({merged}) __s",
    )


def _anchor_input(
    opts: ChainOptions,
    columns: Sequence[str],
    anchor_sql: str,
    touched: str,
    state_sql: str | None,
) -> str:
    """The anchor rows of the day's changed keys (`touched`) the state does not hold; for a
    pick-one engine, stand-ins with only the columns that rank them (build_sql)."""
    keys = list(opts.merge_keys)
    lookup = touched
    if state_sql is not None and not _picks_one(opts):
        lookup = (
            f"(SELECT * FROM {lookup} __n LEFT ANTI JOIN "
            f"{_distinct_keys(keys, state_sql)} __o ON {on_keys(keys, '__n', '__o')})"
        )
    anchor_cols = cols_sql(columns, "__a")
    if _picks_one(opts):
        ranking = {c.lower() for c in [*keys, *opts.chain_keys, opts.sequence_field] if c}
        anchor_cols = ", ".join(
            f"__a.{q(c)}" if c.lower() in ranking else f"NULL AS {q(c)}" for c in columns
        )
    return (
        f"SELECT /*+ BROADCAST(__t) */ {anchor_cols}, true AS {ANCHOR} "
        f"FROM ({anchor_sql}) __a LEFT SEMI JOIN {lookup} __t "
        f"ON {on_keys(keys, '__a', '__t')}"
    )


def _picks_one(opts: ChainOptions) -> bool:
    return engine_of(opts).picks_one_row


def columns(r: ChainSql) -> list[tuple[str, str]]:
    """The table's data columns, the mask column, the table's partition columns and the
    stamp, the last partition column."""
    return [
        *((c, r.type_of(c)) for c in r.data_columns),
        (MASK_COLUMN, "bigint"),
        *((c, r.type_of(c)) for c in r.opts.partition_by),
        (STAMP_COLUMN, "string"),
    ]


def add_mask_column(r: ChainSql) -> str:
    """A t__cumulative created before it had the mask column gets it (NULL in its rows)."""
    return statements.add_columns(r.cumulative, [(MASK_COLUMN, "bigint")])


def create(r: ChainSql) -> str:
    return statements.create_table(
        r.cumulative, columns(r), [*r.opts.partition_by, STAMP_COLUMN], {}
    )


def _rows(
    r: ChainSql,
    builds: Sequence[Build],
    with_anchor: bool,
    anchorless: Collection[Values],
    fresh: tuple[Values, str] | None = None,
) -> tuple[str, str]:
    """The cumulative delta of one day for each build's group: the data columns and the mask
    column (named as in the table) to select, and the FROM clause they come from. `fresh`: a
    delta partition not published yet and its rows (r.columns, checked: stage.guarded_sql),
    read in place of the branch's; ties among them fail the query (build_sql's tie_rows)."""
    deltas = [b.plan.group + d for b in builds for d in b.deltas]
    delta_sql = r.select(r.delta, deltas)
    tie_rows = None
    if fresh is not None:
        part, rows = fresh
        published = [d for d in deltas if d != part]
        delta_sql = f"{r.select(r.delta, published)} UNION ALL {rows}" if published else rows
        tie_rows = r.predicate(r.opts.partition_by, part)
    states = {b.plan.group + b.previous: b.previous_stamp for b in builds if b.previous is not None}
    anchors = [
        b.plan.group + b.plan.anchor
        for b in builds
        if b.plan.anchor is not None and b.plan.group not in anchorless
    ]
    mask = mask_of(r)
    # the mask window's partition: the group and the block of the key
    blocks = [*(q(g) for g in r.opts.group_keys), block(q(mask))] if mask else []
    body = build_sql(
        r.opts,
        r.columns,
        delta_sql,
        select(r, states) if states else None,
        r.select(r.snapshot, anchors) if anchors and with_anchor else None,
        types=r.types,
        cluster=blocks,
        tie_rows=tie_rows,
    )
    # typed as the table's columns: a directory write keeps the types the query gives
    data = ", ".join(
        f"CAST({q(c)} AS {r.types[c.lower()]}) AS {q(c)}" if c.lower() in r.types else q(c)
        for c in r.data_columns
    )
    if mask is None:
        return f"{data}, CAST(NULL AS BIGINT) AS {q(MASK_COLUMN)}", f"({body}) __b"
    # the first key of each block carries the block's mask (mask_key); one window over the
    # day's rows
    window = f"PARTITION BY {', '.join(blocks)}"
    rows = f"{data}, CASE WHEN {q(mask)} = __first THEN __mask END AS {q(MASK_COLUMN)}"
    source = (
        f"(SELECT *, bit_or({bit(q(mask))}) OVER ({window}) AS __mask, "
        f"min({q(mask)}) OVER ({window}) AS __first FROM ({body}) __w) __b"
    )
    return rows, source


def build(
    r: ChainSql,
    chain: Values,
    builds: Sequence[Build],
    with_anchor: bool,
    anchorless: Collection[Values] = (),
) -> str:
    """Write the cumulative delta of day `chain` for each build's group (one day, all its
    groups, one statement): a dynamic overwrite of exactly the partitions with rows. The
    groups `anchorless` names leave their anchor out (cumulative.anchor_can_win)."""
    rows, source = _rows(r, builds, with_anchor, anchorless)
    cases = " ".join(
        f"WHEN {r.predicate(r.opts.group_keys, b.plan.group)} THEN {literal(b.stamp)}"
        for b in builds
    )
    stamp = f"CASE {cases} END" if r.opts.group_keys else literal(builds[0].stamp)
    parts = ", ".join(q(c) for c in [*r.opts.partition_by, STAMP_COLUMN])
    # by name: columns a schema change adds come after the mask column
    names = cols_sql([*r.data_columns, MASK_COLUMN, *r.opts.partition_by, STAMP_COLUMN])
    return (
        f"INSERT OVERWRITE TABLE {r.cumulative} PARTITION ({parts}) ({names})\n"
        f"SELECT {rows}, {r.relabel(chain, r.opts.partition_by)}, {stamp} FROM {source}"
    )


def build_into(
    r: ChainSql,
    build_: Build,
    directory: str,
    with_anchor: bool,
    anchorless: Collection[Values] = (),
    fresh: tuple[Values, str] | None = None,
) -> str:
    """Write one group's cumulative delta of one day to `directory` (its partition's, added
    after: add_partition), in t__cumulative's format and columns: no table write, so no
    staging directory, no partition discovery and no listing after it, and the partition
    exists with no rows too. Measured on the 2M benchmark's day-14 build: 0.69 s with the
    partition's addition against 1.07 s for the dynamic overwrite and its listing.
    `fresh`: see _rows."""
    rows, source = _rows(r, [build_], with_anchor, anchorless, fresh)
    return statements.write_directory(directory, "parquet", f"SELECT {rows} FROM {source}")


def add_partition(r: ChainSql, part: Values, directory: str, exists: bool) -> str | None:
    """Point C partition `part` (values + stamp) at `directory`: added, or switched there when
    it exists."""
    cols = [*r.opts.partition_by, STAMP_COLUMN]
    if exists:
        return statements.set_partition_location(r.cumulative, cols, part, directory)
    return statements.add_partitions(r.cumulative, cols, [(part, directory)])


def sequence_max(r: ChainSql, kind: str, anchors: Sequence[Values], count: bool = False) -> str:
    """The highest sequence (as an integer, sequence_ordinal) of each snapshot partition
    of `anchors`: its partition values, then the maximum (NULL: only NULL sequences); a
    partition with no rows gives no row. `count`: the partition's rows (count(*)) before the
    maximum, so that one scan of the partitions a compaction wrote gives both
    (compaction/plan.py, written_scan)."""
    assert r.opts.sequence_field
    parts = cols_sql(r.opts.partition_by)
    return (
        f"SELECT {parts}, {'count(*), ' if count else ''}"
        f"max({sequence_ordinal(q(r.opts.sequence_field), kind)}) "
        f"FROM {r.snapshot} WHERE {r.partitions_predicate(anchors)} GROUP BY {parts}"
    )


def add_empty(r: ChainSql, parts: Sequence[Values]) -> str | None:
    """Empty C partitions (values + stamp): days of groups whose deltas changed no key."""
    return statements.add_empty_partitions(
        r.cumulative, [*r.opts.partition_by, STAMP_COLUMN], parts
    )


def drop(r: ChainSql, parts: Sequence[Values]) -> str | None:
    """Drop C partitions given as partition values + stamp."""
    return statements.drop_partitions(r.cumulative, [*r.opts.partition_by, STAMP_COLUMN], parts)


def sequence_ordinal(column_sql: str, kind: str) -> str:
    """A sequence value (of plan.ORDINAL_SEQUENCE_TYPES) as a BIGINT in the same order."""
    if kind == "date":
        return f"unix_date({column_sql})"
    if kind == "timestamp":
        return f"unix_micros({column_sql})"
    return f"CAST({column_sql} AS BIGINT)"
