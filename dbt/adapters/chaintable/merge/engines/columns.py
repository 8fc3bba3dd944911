"""The SQL of the engines that merge a key's rows column by column: partial-update (with or
without sequence groups) and aggregation, over the rows ranked.py prepared and ranked."""

from __future__ import annotations

from collections.abc import Sequence

from dbt.adapters.chaintable.base.keys import INTEGRAL_TYPES
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.quoting import q, string
from dbt.adapters.chaintable.merge.engines.base import MergeInput
from dbt.adapters.chaintable.merge.ranked import key_list, rank_rows
from dbt.adapters.chaintable.merge.rules import (
    ANCHOR,
    LISTAGG_DELIMITER,
    ORD,
    RESET,
    RETRACT,
    RowRules,
    Types,
    lower_set,
    value_columns,
)


def partial_update(m: MergeInput, engine: RowRules) -> str:
    """Per column the latest non-null value in merge order, over the rows that count:
    - partial_update_ignore_delete: -U/-D rows are ignored (dropped in `prepared`);
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
    opts, columns, keys, keep_deletes = m.opts, m.columns, m.keys, m.keep_deletes
    ranked = rank_rows(opts, columns, m.source_sql, keys, engine, latest_first=False)
    if opts.sequence_groups:
        return _grouped_update(opts, columns, ranked, keys, keep_deletes, m.types)
    counted = f"NOT {RETRACT}"
    if opts.remove_record_on_delete and not opts.ignore_delete:
        ranked = (
            f"SELECT *, max(CASE WHEN {RETRACT} THEN {ORD} END) OVER "
            f"(PARTITION BY {key_list(keys)}) AS {RESET} FROM ({ranked}) __d"
        )
        counted += f" AND {ORD} > coalesce({RESET}, 0)"
    key_set = lower_set(keys)
    if not keep_deletes:
        exprs = [
            q(c)
            if c.lower() in key_set
            else f"max_by({q(c)}, CASE WHEN {q(c)} IS NOT NULL THEN {ORD} END) AS {q(c)}"
            for c in columns
        ]
        return f"SELECT {', '.join(exprs)} FROM ({ranked}) __r WHERE {counted} GROUP BY {key_list(keys)}"
    exprs = []
    for c in columns:
        if c.lower() in key_set:
            exprs.append(q(c))
            continue
        expr = f"max_by({q(c)}, CASE WHEN {counted} AND {q(c)} IS NOT NULL THEN {ORD} END)"
        if opts.rowkind_field and c.lower() == opts.rowkind_field.lower():
            expr = f"CASE WHEN count_if({counted}) = 0 THEN {string('-D')} ELSE {expr} END"
        exprs.append(f"{expr} AS {q(c)}")
    return f"SELECT {', '.join(exprs)} FROM ({ranked}) __r GROUP BY {key_list(keys)}"


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
    key_set = lower_set(keys)
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
    return f"SELECT {', '.join(exprs)} FROM ({ranked}) __r GROUP BY {key_list(keys)}{having}"


def aggregation_sql(m: MergeInput, engine: RowRules) -> str:
    """Each value column aggregated with its function (`_aggregate`). Chain key columns come
    from the latest row (callers relabel them), the sequence field is the highest sequence seen,
    the rowkind field the kind of the latest +I/+U row ('+I' if there is none), so a merged
    row is never read back as a retraction. A key stays even when retractions cancel it out
    (Paimon without 'aggregation.remove-record-on-delete')."""
    opts, columns, keys, types = m.opts, m.columns, m.keys, m.types
    ranked = rank_rows(opts, columns, m.source_sql, keys, engine, latest_first=False)
    key_set, values = lower_set(keys), lower_set(value_columns(opts, columns))
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
    return f"SELECT {', '.join(exprs)} FROM ({ranked}) __r GROUP BY {key_list(keys)}"


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
    ignore = column.lower() in lower_set(opts.ignore_retract)
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
