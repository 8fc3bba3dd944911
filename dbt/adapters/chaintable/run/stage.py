"""SQL of the checks on a run's staged rows (checks.check_stage), before anything is written:
one scan summarising every partition, then a query per broken rule to name an example."""

from __future__ import annotations

from collections.abc import Sequence

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.quoting import cols_sql, literal, q, string
from dbt.adapters.chaintable.cumulative.sql import sequence_ordinal
from dbt.adapters.chaintable.merge.engines import engine_of
from dbt.adapters.chaintable.merge.ranked import prepared
from dbt.adapters.chaintable.merge.rules import (
    ANCHOR,
    ORDER_SENSITIVE_FUNCTIONS,
    ROW_KINDS,
    is_retract,
    order_exprs,
    value_columns,
)


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
    return is_retract(opts) if engine_of(opts).refusal(opts, columns) else "false"


def stage_summary_sql(
    opts: ChainOptions,
    columns: Sequence[str],
    source_sql: str,
    inside: str | None = None,
    sequence_kind: str | None = None,
) -> str:
    """One scan of the staged rows, one row per partition: its partition values, then how many
    rows it has, how many distinct merge keys, and how many rows break each rule: NULL in the
    primary key, a rowkind outside +I/-U/+U/-D, a -U/-D the table refuses (`refusal`), and
    whether the partition lies outside `inside` (a predicate on partition columns). The failing
    rule's own query (below) then finds an example for the error; a partition whose rows
    outnumber its keys is the only place a tie (`tied_sql`) can be. With `sequence_kind`
    (cumulative.ordinal_sequence_type) also the lowest sequence and how many are NULL, which
    decide whether the day's cumulative build needs the anchor (cumulative.anchor_can_win)."""
    keys = list(opts.merge_keys)
    distinct = f"count(DISTINCT {cols_sql(keys)})" if keys else "least(count(*), 1)"
    parts = cols_sql(opts.partition_by)
    # the values as Spark spells them in a partition's name (a boolean 'true', a timestamp in
    # the session's time zone), whatever Python type the connection would give
    named = ", ".join(f"CAST({q(c)} AS STRING)" for c in opts.partition_by)
    return (
        f"SELECT {named}, count(*), {distinct}, count_if({_pk_null(opts)}), "
        f"count_if({_bad_kind(opts)}), count_if({_refused(opts, columns)}), "
        f"{'false' if inside is None else f'NOT ({inside})'}"
        + (
            f", min({sequence_ordinal(q(opts.sequence_field), sequence_kind)}), "
            f"count_if({q(opts.sequence_field)} IS NULL)"
            if sequence_kind and opts.sequence_field
            else ""
        )
        + f" FROM ({source_sql}) __s GROUP BY {parts}"
    )


ROW_FAILED = "chaintable: a staged row breaks a check"


def guarded_sql(
    opts: ChainOptions,
    columns: Sequence[str],
    source_sql: str,
    inside: str | None = None,
    above: tuple[str, int] | None = None,
) -> str:
    """The staged rows (`columns`), a query that fails (ROW_FAILED) at the first row breaking a
    rule of stage_summary_sql: NULL in the primary key, a rowkind outside +I/-U/+U/-D, a -U/-D
    the table refuses, a row outside `inside`. For a build that reads the rows once anyway (the
    cumulative delta of a daily run, run before the publish): a failure is then named by
    checks.check_stage. `above` (sequence_ordinal's kind, a bound): a row whose sequence is
    NULL or not above the bound fails too (the build left the anchor out: cumulative.
    anchor_can_win)."""
    rules = [_pk_null(opts), _bad_kind(opts), _refused(opts, columns)]
    if inside is not None:
        rules.append(f"coalesce(NOT ({inside}), false)")
    if above is not None and opts.sequence_field:
        kind, bound = above
        seq = q(opts.sequence_field)
        rules.append(f"{seq} IS NULL OR {sequence_ordinal(seq, kind)} <= {int(bound)}")
    fail = f"raise_error({string(ROW_FAILED)})"
    cases = " ".join(f"WHEN {r} THEN {fail}" for r in rules if r != "false")
    where = f" WHERE CASE {cases} ELSE true END" if cases else ""
    return f"SELECT {cols_sql(columns)} FROM ({source_sql}) __g{where}"


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
    if not engine_of(opts).refusal(opts, columns) or not opts.rowkind_field:
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
    engine = engine_of(opts)
    if engine.combines_rows:
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
    rows = prepared(opts, columns, raw, engine, refuse=False)
    group = [q(c) for c in opts.primary_key] + order_exprs(opts, partition=False)
    return (
        f"SELECT {cols_sql(shown)}, count(*) FROM ({rows}) __t GROUP BY {', '.join(group)} "
        f"HAVING {having} LIMIT 1"
    )


def typed_values_sql(values: Sequence[tuple[str, str]]) -> str:
    """Each (value, type) cast to its type and back to a string: a partition value as Spark
    spells it in the partition's name, as stage_summary_sql gives the staged ones."""
    return "SELECT " + ", ".join(f"CAST({literal(v, t)} AS STRING)" for v, t in values)
