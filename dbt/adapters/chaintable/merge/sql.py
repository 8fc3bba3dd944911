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

A compacted day always equals its merged read; what a compacted snapshot forgets of deleted keys
is in docs/design.md#merge-order-and-engines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dbt.adapters.chaintable.base.keys import INTEGRAL_TYPES, RETRACTABLE_FUNCTIONS
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.quoting import cols_sql, q, string

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
TIE = "__chain_tie"  # the row ties with the one before it in merge order (_ranked's tie_rows)
TIE_FAILED = "chaintable: tied rows in the partition written"
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
    if opts.merge_engine == "partial-update" and opts.sequence_groups:
        return _retract_refusal(opts, [c for _, members in opts.sequence_groups for c in members])
    if opts.merge_engine == "partial-update" and not (
        opts.ignore_delete or opts.remove_record_on_delete
    ):
        return (
            "merge_engine 'partial-update' cannot take -U/-D rows; set "
            "partial_update_ignore_delete or partial_update_remove_record_on_delete"
        )
    if opts.merge_engine == "aggregation":
        return _retract_refusal(opts, value_columns(opts, columns))
    return None


def _retract_refusal(opts: ChainOptions, aggregated: Sequence[str]) -> str | None:
    """Why `aggregated` columns cannot take a -U/-D row: a function that cannot retract."""
    if opts.merge_engine == "partial-update" and opts.ignore_delete:
        return None  # the rows are dropped before any function sees them
    ignored = _lower(opts.ignore_retract)
    bad = [
        f"{c}: {opts.aggregate_function(c)}"
        for c in aggregated
        if opts.aggregate_function(c) not in RETRACTABLE_FUNCTIONS
        and c.lower() not in ignored
        and (opts.merge_engine == "aggregation" or c in opts.aggregate_functions)
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
    cluster: Sequence[str] = (),
    tie_rows: str | None = None,
) -> str:
    """`cluster` (SQL expressions the keys determine): the rows are shuffled by them and the
    window partitioned by them and the keys, so that a caller's window over `cluster` needs no
    second shuffle nor sort. `tie_rows` (a predicate): TIE is true on a row it selects whose
    previous row in merge order ties with it (equal in every ordering term, so the same
    partition too): the tie checks.check_stage refuses, found in the window the merge sorts
    anyway (a group of tied rows is contiguous in that order)."""
    order = ", ".join(order_terms(opts, descending=latest_first))
    source = _prepared(opts, columns, source_sql)
    by = _keys(keys)
    if cluster:
        source = f"SELECT * FROM ({source}) __q DISTRIBUTE BY {', '.join(cluster)}"
        by = ", ".join([*cluster, *(q(k) for k in keys if q(k) not in cluster)])
    window = f"PARTITION BY {by} ORDER BY {order}"
    tie = ""
    if tie_rows is not None:
        same = " AND ".join(f"lag({e}) OVER ({window}) <=> {e}" for e in _order_exprs(opts))
        tie = f", coalesce({tie_rows} AND NOT {ANCHOR} AND {same or 'true'}, false) AS {TIE}"
    return f"SELECT *, row_number() OVER ({window}) AS {ORD}{tie} FROM ({source}) __p"


# ---- the engines --------------------------------------------------------------------------------
def _pick_one(
    opts: ChainOptions,
    columns: Sequence[str],
    source_sql: str,
    keys: Sequence[str],
    keep_deletes: bool = False,
    drop_anchor: bool = False,
    cluster: Sequence[str] = (),
    tie_rows: str | None = None,
) -> str:
    """deduplicate: the latest row, dropped when it is a -U/-D (kept with `keep_deletes`).
    first-row: the earliest row (its -U/-D were dropped in `_prepared`).
    `drop_anchor`: no row for a key whose anchor row wins (the cumulative delta's build, where
    the anchor rows are stand-ins holding only what ranks them). `cluster`, `tie_rows`: see
    `_ranked`; a tie fails the query (TIE_FAILED), tested on every row (the rank's test
    waits for it, so no row is left out)."""
    latest = opts.merge_engine != "first-row"
    ranked = _ranked(
        opts, columns, source_sql, keys, latest_first=latest, cluster=cluster, tie_rows=tie_rows
    )
    rank = ORD
    if tie_rows is not None:  # in the rank's own test: no order of evaluation to rely on
        rank = f"(CASE WHEN {TIE} THEN raise_error({string(TIE_FAILED)}) ELSE {ORD} END)"
    keep = f"{rank} = 1" + (f" AND NOT {RETRACT}" if latest and not keep_deletes else "")
    keep += f" AND NOT {ANCHOR}" if drop_anchor else ""
    return f"SELECT {cols_sql(columns)} FROM ({ranked}) __r WHERE {keep}"


def _partial_update(
    opts: ChainOptions,
    columns: Sequence[str],
    source_sql: str,
    keys: Sequence[str],
    keep_deletes: bool = False,
    types: Types = None,
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
    other values those of the rows after the -D, none) instead of no row.
    With sequence groups: `_grouped_update`."""
    ranked = _ranked(opts, columns, source_sql, keys, latest_first=False)
    if opts.sequence_groups:
        return _grouped_update(opts, columns, ranked, keys, keep_deletes, types)
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


def _group_order(seq: Sequence[str]) -> tuple[str, str]:
    """A sequence group's rows and their order: (predicate, ordering expression). A row counts
    for the group when any of its sequence columns is set, an anchor row (merged state: the
    group's values so far) always. The order is the sequence columns in turn (NULL lowest),
    then merge order, so a tie goes to the later row."""
    part = "(" + " OR ".join([ANCHOR, *(f"{q(c)} IS NOT NULL" for c in seq)]) + ")"
    order = f"CASE WHEN {part} THEN struct({', '.join(q(c) for c in seq)}, {ORD}) END"
    return part, order


def _grouped_update(
    opts: ChainOptions,
    columns: Sequence[str],
    ranked: str,
    keys: Sequence[str],
    keep_deletes: bool,
    types: Types,
) -> str:
    """partial-update with sequence groups (docs/design.md#merge-order-and-engines), over the
    key's rows ranked in merge order:
    - a group's sequence columns and members take the values of its last row in group order
      (`_group_order`); a row whose group sequence is NULL leaves the group as it is. A winning
      -U/-D sets the members to NULL (its sequence values stay, as in Paimon);
    - a member with an aggregate function aggregates the group's rows in group order
      (retractions retract: `_aggregate`);
    - every other column: the latest non-null value of the +I/+U rows, as without groups.
    A key with no +I/+U row (an anchor row is one) is removed; with `keep_deletes` it gives a
    row whose rowkind field is '-D'."""
    key_set = _lower(keys)
    grouped = {}
    for seq, members in opts.sequence_groups:
        part, order = _group_order(seq)
        for c in seq:
            grouped[c.lower()] = f"max_by({q(c)}, {order})"
        for c in members:
            if c in opts.aggregate_functions:
                fn = opts.aggregate_function(c)
                agg = _aggregate(opts, c, f"CASE WHEN {part} THEN {q(c)} END", order)
                grouped[c.lower()] = _cast(agg, fn, c, types)
            else:
                grouped[c.lower()] = f"max_by(CASE WHEN NOT {RETRACT} THEN {q(c)} END, {order})"
    inserts = f"count_if(NOT {RETRACT})"
    exprs = []
    for c in columns:
        if c.lower() in key_set:
            exprs.append(q(c))
            continue
        expr = grouped.get(c.lower()) or (
            f"max_by({q(c)}, CASE WHEN NOT {RETRACT} AND {q(c)} IS NOT NULL THEN {ORD} END)"
        )
        if keep_deletes and opts.rowkind_field and c.lower() == opts.rowkind_field.lower():
            expr = f"CASE WHEN {inserts} = 0 THEN {string('-D')} ELSE {expr} END"
        exprs.append(f"{expr} AS {q(c)}")
    having = "" if keep_deletes else f" HAVING {inserts} > 0"
    return f"SELECT {', '.join(exprs)} FROM ({ranked}) __r GROUP BY {_keys(keys)}{having}"


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


def _aggregate(opts: ChainOptions, column: str, value: str | None = None, order: str = ORD) -> str:
    """One column's aggregate over a key's ranked rows (Paimon's field aggregators).

    NULL inputs are skipped (a column of only NULLs stays NULL; count gives 0). An anchor row is
    one input carrying the state so far: sum(anchor, deltas), max(anchor, deltas), ..., which
    is exact because every function is associative. Retractions: sum subtracts, product
    divides, count subtracts one per non-null retracted value; a column in ignore_retract skips
    retractions; any other function never sees one (`refusal`). Order-sensitive functions
    (first/last, listagg) follow merge order, or `order` (a sequence group's); `value` is the
    column's input (a sequence group's rows only)."""
    c, fn = (f"({value})" if value else q(column)), opts.aggregate_function(column)
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
        return f"listagg({added}, {string(LISTAGG_DELIMITER)}) WITHIN GROUP (ORDER BY {order})"
    position = f"NOT {RETRACT}" + (f" AND {c} IS NOT NULL" if fn.endswith("non_null_value") else "")
    pick = "min_by" if fn.startswith("first") else "max_by"
    return f"{pick}({c}, CASE WHEN {position} THEN {order} END)"


def _cast(expr: str, fn: str, column: str, types: Types) -> str:
    """sum, count and product compute in a wider type (bigint, double); the merged column keeps
    the table's type so that the view and the compacted snapshot match the branches."""
    if fn not in ("sum", "count", "product") or not types:
        return expr
    spark_type = {k.lower(): v for k, v in types.items()}.get(column.lower())
    if not spark_type:
        return expr
    if fn == "product" and spark_type.lower() in INTEGRAL_TYPES:
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
    drop_anchor: bool = False,
) -> str:
    """One row per key; `keep_deletes` keeps a key the merge removes as a -U/-D row (the
    cumulative delta's tombstone). Aggregation never removes a key. `drop_anchor`: see
    `_pick_one` (deduplicate and first-row only)."""
    if opts.merge_engine == "partial-update":
        return _partial_update(opts, columns, source_sql, keys, keep_deletes, types)
    if opts.merge_engine == "aggregation":
        return _aggregation(opts, columns, source_sql, keys, types)
    return _pick_one(opts, columns, source_sql, keys, keep_deletes, drop_anchor)


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
    return " UNION ALL ".join(merge_parts(opts, columns, anchor_sql, delta_sql, types, broadcast))


def merge_parts(
    opts: ChainOptions,
    columns: Sequence[str],
    anchor_sql: str | None,
    delta_sql: str,
    types: Types = None,
    broadcast: bool = False,
) -> list[str]:
    """`merge_sql` as the SELECTs its UNION ALL is made of, for callers that project each part
    on its own (Renderer.merged)."""
    if anchor_sql is None:
        return [merge_rows_sql(opts, columns, delta_sql, types)]
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
    return [untouched, _merge(opts, columns, contested, keys, types)]
