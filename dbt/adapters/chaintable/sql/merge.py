"""SQL of the chain merge, the one place that decides what a key's rows merge to
(docs/design.md#merge-order-and-engines).

`merge_sql` is used by every read (the view, chain_read) and by compaction, so a day reads the
same whether it is merged on read or compacted.

Plan shape, chosen for the common case of a small delta over a large anchor:
  anchor rows whose key is not in the deltas   -> passed through (LEFT ANTI JOIN against the
                                                  deltas' keys: broadcast, the anchor is never
                                                  shuffled). Merging one anchor row gives that
                                                  row back for every engine, so this is exact.
  anchor rows whose key is in the deltas + all delta rows -> merged per key (one small shuffle)

Per key, the rows go through three steps:
  1. prepare: mark retractions (-U/-D; an anchor row never is one: it is merged state), drop the
     rows the engine ignores, and raise on retractions the engine refuses;
  2. rank: number the rows in merge order (`order_terms`: sequence, then partition, then
     -U/-D before +I/+U);
  3. merge per engine:
     deduplicate     the latest row; a winning -U/-D removes the key.
     first-row       the earliest row; -U/-D are ignored (ours: Paimon refuses them unless
                     'ignore-delete'; a first row cannot be retracted anyway, and ignoring keeps
                     first-row usable on CDC input with -U/+U pairs).
     partial-update  per column the latest non-null value (see `_partial_update` for deletes).
     aggregation     per column its aggregate function (see `_aggregate`).

Two kinds of input rows exist: delta rows (and the rows of a model written straight to the
snapshot branch) are raw input; an anchor row is the already merged state of its key. Only the
`count` aggregate has to tell them apart (a raw row counts one, an anchor row carries a count),
which is what the ANCHOR column is for.

A compacted day always equals its merged read. A compacted snapshot keeps no trace of deleted
keys, though (as in Paimon): a later delta row for such a key with a sequence value LOWER than
that of the delete is shadowed by the delete while the chain reaches back past it, and comes
back once the day of the delete is compacted and becomes the anchor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dbt.adapters.chaintable.options import RETRACTABLE_FUNCTIONS, ChainOptions
from dbt.adapters.chaintable.sql.quoting import cols_sql, q, string

ROW_KINDS = ("+I", "-U", "+U", "-D")
RETRACT_KINDS = ("-U", "-D")
# Aggregates whose result depends on the order of their inputs (the rest are commutative).
ORDER_SENSITIVE_FUNCTIONS = (
    "first_value",
    "last_value",
    "first_non_null_value",
    "last_non_null_value",
    "listagg",
)
LISTAGG_DELIMITER = ","  # Paimon's default 'list-agg-delimiter'

ANCHOR = "__chain_anchor"  # true for rows of the anchor snapshot partition (merged state)
RETRACT = "__chain_retract"  # true for a -U/-D delta row
ORD = "__chain_ord"  # rank of the row among its key's rows (1 = earliest or latest)
RESET = "__chain_reset"  # partial-update: position of the key's last -D

Types = Mapping[str, str] | None


def _lower(names: Sequence[str]) -> set:
    return {n.lower() for n in names}


def is_retract(opts: ChainOptions, alias: str = "") -> str:
    """SQL predicate on a raw row: it is a -U/-D (false when there is no rowkind field)."""
    if not opts.rowkind_field:
        return "false"
    prefix = f"{alias}." if alias else ""
    kinds = ", ".join(string(k) for k in RETRACT_KINDS)
    return f"coalesce({prefix}{q(opts.rowkind_field)} IN ({kinds}), false)"


def order_terms(opts: ChainOptions, descending: bool = True) -> list[str]:
    """Rule 6, over prepared rows: higher sequence wins; on a tie the later partition (the anchor
    is earlier than every delta); then -U/-D before +I/+U, so +I/+U win a full tie. A NULL
    sequence is the lowest. `descending` puts the latest row first."""
    d, nulls = ("DESC", "NULLS LAST") if descending else ("ASC", "NULLS FIRST")
    return [f"{t} {d} {nulls}" for t in _order_exprs(opts)]


def _order_exprs(opts: ChainOptions, partition: bool = True) -> list[str]:
    exprs = [q(opts.sequence_field)] if opts.sequence_field else []
    exprs += [q(c) for c in opts.chain_keys] if partition else []
    if opts.rowkind_field:
        exprs.append(f"CASE WHEN {RETRACT} THEN 0 ELSE 1 END")
    return exprs


# ---- which rows an engine ignores or refuses ----------------------------------------------------
def value_columns(opts: ChainOptions, columns: Sequence[str]) -> list[str]:
    """Columns an engine merges: all but the primary key and the sequence and rowkind fields."""
    system = [c for c in (opts.sequence_field, opts.rowkind_field) if c]
    skip = _lower(list(opts.primary_key) + system)
    return [c for c in columns if c.lower() not in skip]


def _ignored(opts: ChainOptions) -> str | None:
    """Predicate (over prepared rows) for the rows an engine drops before merging."""
    if not opts.rowkind_field:
        return None
    if opts.merge_engine == "first-row":
        return RETRACT
    if opts.merge_engine == "partial-update":
        if opts.ignore_delete:
            return RETRACT
        if opts.remove_record_on_delete:
            return f"({RETRACT} AND {q(opts.rowkind_field)} = '-U')"
    return None


def refusal(opts: ChainOptions, columns: Sequence[str]) -> str | None:
    """Why this table cannot take a -U/-D row, or None when it can. Checked on the staged rows
    before a run writes anything, and again (raise_error) when a merge meets such a row."""
    if not opts.rowkind_field:
        return None
    if opts.merge_engine == "partial-update" and not (
        opts.ignore_delete or opts.remove_record_on_delete
    ):
        return (
            "merge_engine 'partial-update' cannot take -U/-D rows; set "
            "partial_update_ignore_delete or partial_update_remove_record_on_delete"
        )
    if opts.merge_engine == "aggregation":
        ignored = _lower(opts.ignore_retract)
        bad = [
            f"{c}: {opts.aggregate_function(c)}"
            for c in value_columns(opts, columns)
            if opts.aggregate_function(c) not in RETRACTABLE_FUNCTIONS and c.lower() not in ignored
        ]
        if bad:
            return (
                f"aggregate functions cannot retract -U/-D rows ({', '.join(bad)}); only "
                f"{', '.join(RETRACTABLE_FUNCTIONS)} can, list other columns in ignore_retract"
            )
    return None


def _key_text_sql(columns: Sequence[str]) -> str:
    parts = [f"{string(c + '=')}, coalesce(CAST({q(c)} AS STRING), 'NULL')" for c in columns]
    return "concat('(', " + ", ', ', ".join(parts) + ", ')')"


def _prepared(
    opts: ChainOptions, columns: Sequence[str], source_sql: str, refuse: bool = True
) -> str:
    """`source_sql` rows (columns + ANCHOR) with RETRACT; rows the engine ignores are dropped;
    with `refuse`, a retraction the engine refuses fails the query, naming the key."""
    marked = (
        f"SELECT {cols_sql(columns)}, {ANCHOR}, "
        f"(NOT {ANCHOR} AND {is_retract(opts)}) AS {RETRACT} FROM ({source_sql}) __s"
    )
    where = []
    ignored = _ignored(opts)
    if ignored:
        where.append(f"NOT {ignored}")
    reason = refusal(opts, columns) if refuse else None
    if reason and opts.rowkind_field:  # a refusal is about -U/-D rows: a rowkind field exists
        msg = (
            f"concat('chain merge: ', {string(reason)}, '; got ', "
            f"{q(opts.rowkind_field)}, ' for key ', {_key_text_sql(opts.primary_key)})"
        )
        where.append(f"CASE WHEN {RETRACT} THEN raise_error({msg}) ELSE true END")
    if not where:
        return marked
    return f"SELECT * FROM ({marked}) __m WHERE " + " AND ".join(where)


def _keys(keys: Sequence[str]) -> str:
    """Grouping of a key's rows; a constant when the primary key is the partition columns."""
    return cols_sql(keys) if keys else "true"


def _ranked(
    opts: ChainOptions,
    columns: Sequence[str],
    source_sql: str,
    keys: Sequence[str],
    latest_first: bool,
) -> str:
    order = ", ".join(order_terms(opts, descending=latest_first))
    return (
        f"SELECT *, row_number() OVER (PARTITION BY {_keys(keys)} ORDER BY {order}) AS {ORD} "
        f"FROM ({_prepared(opts, columns, source_sql)}) __p"
    )


# ---- the engines --------------------------------------------------------------------------------
def _pick_one(
    opts: ChainOptions,
    columns: Sequence[str],
    source_sql: str,
    keys: Sequence[str],
    keep_deletes: bool = False,
) -> str:
    """deduplicate: the latest row, dropped when it is a -U/-D (kept with `keep_deletes`).
    first-row: the earliest row (its -U/-D were dropped in `_prepared`)."""
    latest = opts.merge_engine != "first-row"
    ranked = _ranked(opts, columns, source_sql, keys, latest_first=latest)
    keep = f"{ORD} = 1" + (f" AND NOT {RETRACT}" if latest and not keep_deletes else "")
    return f"SELECT {cols_sql(columns)} FROM ({ranked}) __r WHERE {keep}"


def _partial_update(
    opts: ChainOptions,
    columns: Sequence[str],
    source_sql: str,
    keys: Sequence[str],
    keep_deletes: bool = False,
) -> str:
    """Per column the latest non-null value in merge order, over the rows that count:
    - partial_update_ignore_delete: -U/-D rows are ignored (dropped in `_prepared`);
    - partial_update_remove_record_on_delete: a -D ends the record: only rows after the key's
      last -D count (they start a fresh record), and a key whose last row is a -D is gone.
      A -U is ignored (as in Paimon): it is the old image of an update whose +U follows, and
      resetting on it would drop every column the +U leaves NULL;
    - neither: -U/-D rows are refused (`refusal`).
    The sequence and rowkind fields are merged like any column (latest non-null), so a merged
    row carries the highest sequence and the kind (+I/+U) of its latest row.
    `keep_deletes`: a key whose record a -D ended gives a row whose rowkind field is '-D' (its
    other values those of the rows after the -D, none) instead of no row."""
    ranked = _ranked(opts, columns, source_sql, keys, latest_first=False)
    counted = f"NOT {RETRACT}"
    if opts.remove_record_on_delete and not opts.ignore_delete:
        ranked = (
            f"SELECT *, max(CASE WHEN {RETRACT} THEN {ORD} END) OVER "
            f"(PARTITION BY {_keys(keys)}) AS {RESET} FROM ({ranked}) __d"
        )
        counted += f" AND {ORD} > coalesce({RESET}, 0)"
    key_set = _lower(keys)
    if not keep_deletes:
        exprs = [
            q(c)
            if c.lower() in key_set
            else f"max_by({q(c)}, CASE WHEN {q(c)} IS NOT NULL THEN {ORD} END) AS {q(c)}"
            for c in columns
        ]
        return (
            f"SELECT {', '.join(exprs)} FROM ({ranked}) __r WHERE {counted} GROUP BY {_keys(keys)}"
        )
    exprs = []
    for c in columns:
        if c.lower() in key_set:
            exprs.append(q(c))
            continue
        expr = f"max_by({q(c)}, CASE WHEN {counted} AND {q(c)} IS NOT NULL THEN {ORD} END)"
        if opts.rowkind_field and c.lower() == opts.rowkind_field.lower():
            expr = f"CASE WHEN count_if({counted}) = 0 THEN {string('-D')} ELSE {expr} END"
        exprs.append(f"{expr} AS {q(c)}")
    return f"SELECT {', '.join(exprs)} FROM ({ranked}) __r GROUP BY {_keys(keys)}"


def _aggregation(
    opts: ChainOptions, columns: Sequence[str], source_sql: str, keys: Sequence[str], types: Types
) -> str:
    """Each value column aggregated with its function (`_aggregate`). Chain key columns come
    from the latest row (callers relabel them), the sequence field is the highest sequence seen,
    the rowkind field the kind of the latest +I/+U row ('+I' if there is none), so a merged
    row is never read back as a retraction. A key stays even when retractions cancel it out
    (Paimon without 'aggregation.remove-record-on-delete')."""
    ranked = _ranked(opts, columns, source_sql, keys, latest_first=False)
    key_set, values = _lower(keys), _lower(value_columns(opts, columns))
    exprs = []
    for c in columns:
        if c.lower() in key_set:
            exprs.append(q(c))
            continue
        if c.lower() in values:
            expr = _cast(_aggregate(opts, c), opts.aggregate_function(c), c, types)
        elif opts.sequence_field and c.lower() == opts.sequence_field.lower():
            expr = f"max({q(c)})"
        elif opts.rowkind_field and c.lower() == opts.rowkind_field.lower():
            expr = f"coalesce(max_by({q(c)}, CASE WHEN NOT {RETRACT} THEN {ORD} END), '+I')"
        else:  # chain keys
            expr = f"max_by({q(c)}, {ORD})"
        exprs.append(f"{expr} AS {q(c)}")
    return f"SELECT {', '.join(exprs)} FROM ({ranked}) __r GROUP BY {_keys(keys)}"


def _aggregate(opts: ChainOptions, column: str) -> str:
    """One column's aggregate over a key's ranked rows (Paimon's field aggregators).

    NULL inputs are skipped (a column of only NULLs stays NULL; count gives 0). An anchor row is
    one input carrying the state so far: sum(anchor, deltas), max(anchor, deltas), ..., which
    is exact because every function is associative. Retractions: sum subtracts, product
    divides, count subtracts one per non-null retracted value; a column in ignore_retract skips
    retractions; any other function never sees one (`refusal`). Order-sensitive functions
    (first/last, listagg) follow merge order."""
    c, fn = q(column), opts.aggregate_function(column)
    ignore = column.lower() in _lower(opts.ignore_retract)
    added = f"CASE WHEN NOT {RETRACT} THEN {c} END"
    if fn == "sum":
        return f"sum({added})" if ignore else f"sum(CASE WHEN {RETRACT} THEN -{c} ELSE {c} END)"
    if fn == "count":
        retracted = "0" if ignore else "-1"
        return (
            f"sum(CASE WHEN {ANCHOR} THEN coalesce({c}, 0) WHEN {c} IS NULL THEN 0 "
            f"WHEN {RETRACT} THEN {retracted} ELSE 1 END)"
        )
    if fn == "product":

        def prod(rows: str) -> str:
            return (
                f"aggregate(collect_list(CASE WHEN {rows} THEN CAST({c} AS DOUBLE) END), "
                "CAST(1 AS DOUBLE), (__acc, __x) -> __acc * __x)"
            )

        inputs = added if ignore else c
        value = (
            prod(f"NOT {RETRACT}")
            if ignore
            else f"try_divide({prod(f'NOT {RETRACT}')}, {prod(RETRACT)})"
        )
        return f"CASE WHEN count({inputs}) = 0 THEN NULL ELSE {value} END"
    if fn in ("max", "min", "bool_and", "bool_or"):
        return f"{fn}({added})"
    if fn == "listagg":
        return f"listagg({added}, {string(LISTAGG_DELIMITER)}) WITHIN GROUP (ORDER BY {ORD})"
    position = f"NOT {RETRACT}" + (f" AND {c} IS NOT NULL" if fn.endswith("non_null_value") else "")
    pick = "min_by" if fn.startswith("first") else "max_by"
    return f"{pick}({c}, CASE WHEN {position} THEN {ORD} END)"


_INTEGRAL = ("tinyint", "smallint", "int", "integer", "bigint", "byte", "short", "long")


def _cast(expr: str, fn: str, column: str, types: Types) -> str:
    """sum, count and product compute in a wider type (bigint, double); the merged column keeps
    the table's type so that the view and the compacted snapshot match the branches."""
    if fn not in ("sum", "count", "product") or not types:
        return expr
    spark_type = {k.lower(): v for k, v in types.items()}.get(column.lower())
    if not spark_type:
        return expr
    if fn == "product" and spark_type.lower() in _INTEGRAL:
        expr = f"round({expr})"  # a double product of integers may miss by an ulp
    return f"CAST({expr} AS {spark_type})"


# ---- public API ---------------------------------------------------------------------------------
def _merge(
    opts: ChainOptions,
    columns: Sequence[str],
    source_sql: str,
    keys: Sequence[str],
    types: Types,
    keep_deletes: bool = False,
) -> str:
    """One row per key; `keep_deletes` keeps a key the merge removes as a -U/-D row (the
    cumulative delta's tombstone). Aggregation never removes a key."""
    if opts.merge_engine == "partial-update":
        return _partial_update(opts, columns, source_sql, keys, keep_deletes)
    if opts.merge_engine == "aggregation":
        return _aggregation(opts, columns, source_sql, keys, types)
    return _pick_one(opts, columns, source_sql, keys, keep_deletes)


def merge_rows_sql(
    opts: ChainOptions,
    columns: Sequence[str],
    source_sql: str,
    types: Types = None,
    by_partition: bool = False,
) -> str:
    """One merged row per merge key of `source_sql` (raw rows with `columns`), deleted keys
    removed. The chain key columns of a result row are those of its latest row (callers
    relabel). `types` ({column: spark type}) keeps aggregated columns in their type.
    `by_partition` merges each partition's rows on their own (a model's rows written straight
    to the snapshot branch: each partition is a full state)."""
    keys = list(opts.primary_key) if by_partition else list(opts.merge_keys)
    raw = f"SELECT {cols_sql(columns)}, false AS {ANCHOR} FROM ({source_sql}) __raw"
    return _merge(opts, columns, raw, keys, types)


def merge_sql(
    opts: ChainOptions,
    columns: Sequence[str],
    anchor_sql: str | None,
    delta_sql: str,
    types: Types = None,
    broadcast: bool = False,
) -> str:
    """Full state over an anchor (may be None) and deltas, both SELECTs yielding `columns`.
    `broadcast` hints Spark to broadcast the deltas' keys where it cannot estimate their size
    (deltas joined to the mapping table), so that the anchor is not shuffled there either."""
    if anchor_sql is None:
        return merge_rows_sql(opts, columns, delta_sql, types)
    keys = list(opts.merge_keys)
    on = " AND ".join(f"__a.{q(k)} = __d.{q(k)}" for k in keys) or "true"
    touched = f"(SELECT DISTINCT {cols_sql(keys) or 'true AS __chain_any'} FROM ({delta_sql}) __dk)"
    hint = "/*+ BROADCAST(__d) */ " if broadcast else ""
    untouched = (
        f"SELECT {hint}{cols_sql(columns, '__a')} FROM ({anchor_sql}) __a "
        f"LEFT ANTI JOIN {touched} __d ON {on}"
    )
    contested = (
        f"SELECT {hint}{cols_sql(columns, '__a')}, true AS {ANCHOR} FROM ({anchor_sql}) __a "
        f"LEFT SEMI JOIN {touched} __d ON {on} "
        f"UNION ALL SELECT {cols_sql(columns)}, false AS {ANCHOR} FROM ({delta_sql}) __e"
    )
    return f"{untouched} UNION ALL {_merge(opts, columns, contested, keys, types)}"


# ---- the cumulative delta (cumulative.py) ----------------------------------------------------
def _on(keys: Sequence[str], left: str, right: str) -> str:
    return " AND ".join(f"{left}.{q(k)} = {right}.{q(k)}" for k in keys) or "true"


def _distinct_keys(keys: Sequence[str], source_sql: str) -> str:
    return f"(SELECT DISTINCT {cols_sql(keys) or 'true AS __chain_any'} FROM ({source_sql}) __dk)"


def cumulative_build_sql(
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
    the result) unless the state holds it already: for deduplicate and first-row, which pick one
    row, the anchor row again changes nothing, so only the deltas' keys are looked up."""
    keys = list(opts.merge_keys)
    inputs = [f"SELECT {cols_sql(columns)}, false AS {ANCHOR} FROM ({delta_sql}) __e"]
    if state_sql is not None:
        # a live state row is merged state (like an anchor row: a count carries its value); a
        # tombstone is the retraction that removed the key
        inputs.append(
            f"SELECT {cols_sql(columns)}, NOT {is_retract(opts)} AS {ANCHOR} FROM ({state_sql}) __s"
        )
    if anchor_sql is not None:
        lookup = _distinct_keys(keys, delta_sql)
        if state_sql is not None and opts.merge_engine not in ("deduplicate", "first-row"):
            lookup = (
                f"(SELECT * FROM {lookup} __n LEFT ANTI JOIN "
                f"{_distinct_keys(keys, state_sql)} __o ON {_on(keys, '__n', '__o')})"
            )
        inputs.append(
            f"SELECT /*+ BROADCAST(__t) */ {cols_sql(columns, '__a')}, true AS {ANCHOR} "
            f"FROM ({anchor_sql}) __a LEFT SEMI JOIN {lookup} __t "
            f"ON {_on(keys, '__a', '__t')}"
        )
    return _merge(opts, columns, " UNION ALL ".join(inputs), keys, types, keep_deletes=True)


def cumulative_read_sql(
    opts: ChainOptions,
    columns: Sequence[str],
    anchor_sql: str | None,
    cumulative_sql: str,
    keys_sql: str,
) -> str:
    """A day's full state from its anchor and its cumulative delta: the anchor rows whose key the
    cumulative delta does not hold (its keys, one row each, from `keys_sql`, broadcast), and its
    live rows."""
    keys = list(opts.merge_keys)
    live = f"SELECT {cols_sql(columns)} FROM ({cumulative_sql}) __c WHERE NOT {is_retract(opts)}"
    if anchor_sql is None:
        return live
    untouched = (
        f"SELECT /*+ BROADCAST(__k) */ {cols_sql(columns, '__a')} FROM ({anchor_sql}) __a "
        f"LEFT ANTI JOIN (SELECT {cols_sql(keys) or 'true AS __chain_any'} "
        f"FROM ({keys_sql}) __kk) __k "
        f"ON {_on(keys, '__a', '__k')}"
    )
    return f"{untouched} UNION ALL {live}"


# ---- checks on staged rows (checks.check_stage), before anything is written ---------------------
def _pk_null(opts: ChainOptions) -> str:
    """Predicate: a primary key column is NULL."""
    return " OR ".join(f"{q(c)} IS NULL" for c in opts.primary_key) or "false"


def _bad_kind(opts: ChainOptions) -> str:
    """Predicate: the rowkind field is not one of +I, -U, +U, -D (NULL included)."""
    if not opts.rowkind_field:
        return "false"
    kinds = ", ".join(string(k) for k in ROW_KINDS)
    return f"NOT coalesce({q(opts.rowkind_field)} IN ({kinds}), false)"


def _refused(opts: ChainOptions, columns: Sequence[str]) -> str:
    """Predicate: a -U/-D row the table refuses (`refusal`)."""
    return is_retract(opts) if refusal(opts, columns) else "false"


def stage_summary_sql(
    opts: ChainOptions, columns: Sequence[str], source_sql: str, inside: str | None = None
) -> str:
    """One scan of the staged rows, one row per partition: its partition values, then how many
    rows it has, how many distinct merge keys, and how many rows break each rule: NULL in the
    primary key, a rowkind outside +I/-U/+U/-D, a -U/-D the table refuses (`refusal`), and
    whether the partition lies outside `inside` (a predicate on partition columns). The failing
    rule's own query (below) then finds an example for the error; a partition whose rows
    outnumber its keys is the only place a tie (`tied_sql`) can be."""
    keys = list(opts.merge_keys)
    distinct = f"count(DISTINCT {cols_sql(keys)})" if keys else "least(count(*), 1)"
    parts = cols_sql(opts.partition_by)
    return (
        f"SELECT {parts}, count(*), {distinct}, count_if({_pk_null(opts)}), "
        f"count_if({_bad_kind(opts)}), count_if({_refused(opts, columns)}), "
        f"{'false' if inside is None else f'NOT ({inside})'} "
        f"FROM ({source_sql}) __s GROUP BY {parts}"
    )


def pk_null_sql(opts: ChainOptions, source_sql: str) -> str:
    """First row with a NULL in its primary key: the primary key."""
    return (
        f"SELECT {cols_sql(opts.primary_key)} FROM ({source_sql}) __s "
        f"WHERE {_pk_null(opts)} LIMIT 1"
    )


def bad_kind_sql(opts: ChainOptions, source_sql: str) -> str | None:
    """First row whose rowkind field is not one of +I, -U, +U, -D (NULL included)."""
    if not opts.rowkind_field:
        return None
    return (
        f"SELECT {cols_sql(opts.primary_key)}, {q(opts.rowkind_field)} FROM ({source_sql}) "
        f"__s WHERE {_bad_kind(opts)} LIMIT 1"
    )


def refused_sql(opts: ChainOptions, columns: Sequence[str], source_sql: str) -> str | None:
    """First -U/-D row when the table refuses them (`refusal`): primary key, then its kind."""
    if not refusal(opts, columns) or not opts.rowkind_field:
        return None
    return (
        f"SELECT {cols_sql(opts.primary_key)}, {q(opts.rowkind_field)} FROM ({source_sql}) "
        f"__s WHERE {_refused(opts, columns)} LIMIT 1"
    )


def tied_sql(opts: ChainOptions, columns: Sequence[str], source_sql: str) -> str | None:
    """First key with rows the merge order cannot tell apart: same primary key (so the same
    partition), same sequence value and same kind class. Returns the primary key, the sequence
    value (if any) and the row count. Aggregation is commutative, so its ties only matter when
    the rows differ in an order-sensitive column (first/last, listagg, the rowkind field):
    many raw rows per key and day are its normal input. Rows the engine ignores never tie."""
    shown = list(opts.primary_key) + ([opts.sequence_field] if opts.sequence_field else [])
    having = "count(*) > 1"
    if opts.merge_engine == "aggregation":
        sensitive = [
            c
            for c in value_columns(opts, columns)
            if opts.aggregate_function(c) in ORDER_SENSITIVE_FUNCTIONS
        ]
        sensitive += [opts.rowkind_field] if opts.rowkind_field else []
        if not sensitive:
            return None
        having += f" AND count(DISTINCT struct({cols_sql(sensitive)})) > 1"
    raw = f"SELECT {cols_sql(columns)}, false AS {ANCHOR} FROM ({source_sql}) __raw"
    rows = _prepared(opts, columns, raw, refuse=False)
    group = [q(c) for c in opts.primary_key] + _order_exprs(opts, partition=False)
    return (
        f"SELECT {cols_sql(shown)}, count(*) FROM ({rows}) __t GROUP BY {', '.join(group)} "
        f"HAVING {having} LIMIT 1"
    )
