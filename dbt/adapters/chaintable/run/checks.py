"""Bad input is refused before anything is written (docs/design.md#validation): the staged rows
of a run, the partitions it writes and the model's columns against the stored schema."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base import timestamps
from dbt.adapters.chaintable.base.config import ModelSettings
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.base.quoting import is_string_type
from dbt.adapters.chaintable.base.values import ChainConfigError
from dbt.adapters.chaintable.chain.catalog import Catalog
from dbt.adapters.chaintable.cumulative import plan as cumulative
from dbt.adapters.chaintable.merge import rules
from dbt.adapters.chaintable.merge.engines import engine_of
from dbt.adapters.chaintable.read.render import Renderer
from dbt.adapters.chaintable.run import stage as stage_sql
from dbt.adapters.chaintable.run.model import Columns

# a query's rows (Runner.fetch)
Fetch = Callable[[str], list[tuple[Any, ...]]]


def _key_text(columns: Sequence[str], values: Sequence[Any]) -> str:
    return "(" + ", ".join(f"{c}={v!r}" for c, v in zip(columns, values, strict=False)) + ")"


def chain_partition_predicate(
    settings: ModelSettings, columns: Columns, also: Sequence[Values] = ()
) -> str | None:
    """The SQL test that a staged row lies inside the model's chain_partition (None: the
    model sets none), once its values are checked: one rule for the checks' scan and the
    cumulative build that stands in for it. `also`: partitions the adapter itself stages
    beside the model's day (a full chain's later days compared again, run/full.py)."""
    spec = settings.chain_partition
    if not spec:
        return None
    check_chain_partition(settings, spec)
    names = [c for c, _ in columns]
    r = Renderer(settings.opts, names, dict(columns), "", "")
    inside = r.predicate(list(spec), list(spec.values()))
    if also:
        inside = f"({inside} OR {r.partitions_predicate(also)})"
    return inside


def check_stage(
    catalog: Catalog,
    settings: ModelSettings,
    stage: str,
    columns: Columns,
    also: Sequence[Values] = (),
) -> tuple[list[Values], dict[Values, float]]:
    """The partitions of the staged rows, or an error naming the model and the offending key.
    One scan summarises every partition of the stage (stage_sql.stage_summary_sql); only a rule it
    finds broken (or a partition where a tie is possible) costs a query of its own. Also, per
    partition whose rows all have one, the lowest sequence as an integer
    (cumulative.ordinal_sequence_type; none for other engines and types)."""
    opts, model = settings.opts, settings.model
    names = [c for c, _ in columns]
    source = S.select_all(stage)
    spec = settings.chain_partition
    inside = chain_partition_predicate(settings, columns, also)
    n = len(opts.partition_by)
    kind = cumulative.ordinal_sequence_type(opts, dict(columns))
    summary = catalog.runner.fetch(
        stage_sql.stage_summary_sql(opts, names, source, inside, sequence_kind=kind)
    )
    parts = [tuple(str(v) for v in r[:n]) for r in summary]  # as the partitions' names
    # per partition (stage_summary_sql's columns after the partition values)
    n_rows, n_keys, pk_null, bad_kind, refused, outside = (
        [r[n + i] for r in summary] for i in range(6)
    )
    fetch = catalog.runner.fetch
    _refuse_bad_rows(fetch, opts, model, names, source, (pk_null, bad_kind, refused))
    _refuse_ties(fetch, opts, model, names, source, zip(n_rows, n_keys, strict=True))
    outside_parts = [p for p, o in zip(parts, outside, strict=True) if str(o).lower() == "true"]
    if outside_parts:
        raise ChainConfigError(
            f"chain_incremental model '{model}': rows outside chain_partition "
            f"{dict(spec or {})}, e.g. partition "
            f"{settings.layout.path(outside_parts[0])}; "
            "nothing was written"
        )
    if spec:
        check_spelling(settings, spec, [p for p in parts if p not in set(also)])
        if not parts:
            check_empty_spelling(catalog, settings, spec, dict(columns))
    lowest = {
        p: float(r[n + 6])
        for p, r in zip(parts, summary, strict=True)
        if kind and r[n + 6] is not None and not int(r[n + 7] or 0)
    }
    return parts, lowest


def _refuse_bad_rows(
    fetch: Fetch,
    opts: ChainOptions,
    model: str,
    names: Sequence[str],
    source: str,
    counts: tuple[Sequence[Any], Sequence[Any], Sequence[Any]],
) -> None:
    """A NULL key, a bad row kind or a retraction the engine refuses, each counted per partition
    by the stage's summary (`counts`), named by a query of its own with its first key."""
    pk_null, bad_kind, refused = counts
    if sum(int(v or 0) for v in pk_null):
        row = fetch(stage_sql.pk_null_sql(opts, source))[0]
        bad = [c for c, v in zip(opts.primary_key, row, strict=False) if v is None]
        raise ChainConfigError(
            f"chain_incremental model '{model}': NULL in primary key column(s) {bad}, e.g. key "
            f"{_key_text(opts.primary_key, row)}; nothing was written"
        )
    bad_kind_sql = stage_sql.bad_kind_sql(opts, source)
    if bad_kind_sql and sum(int(v or 0) for v in bad_kind):
        row = fetch(bad_kind_sql)[0]
        raise ChainConfigError(
            f"chain_incremental model '{model}': rowkind_field '{opts.rowkind_field}' must be "
            f"one of {list(rules.ROW_KINDS)}, got {row[-1]!r} for key "
            f"{_key_text(opts.primary_key, row)}; nothing was written"
        )
    refused_sql = stage_sql.refused_sql(opts, names, source)
    if refused_sql and sum(int(v or 0) for v in refused):
        row = fetch(refused_sql)[0]
        raise ChainConfigError(
            f"chain_incremental model '{model}': {engine_of(opts).refusal(opts, names)}; got a "
            f"{row[-1]!r} row for key {_key_text(opts.primary_key, row)}; "
            "nothing was written"
        )


def _refuse_ties(
    fetch: Fetch,
    opts: ChainOptions,
    model: str,
    names: Sequence[str],
    source: str,
    counts: Iterable[tuple[Any, Any]],
) -> None:
    """Rows of one key in one partition that the merge order cannot tell apart; looked for only
    where a partition has more rows than keys (`counts`: rows and keys per partition)."""
    sql = stage_sql.tied_sql(opts, names, source)
    tie_possible = any(int(r) > int(k) for r, k in counts)
    rows = fetch(sql) if sql and tie_possible else []
    if rows:
        shown = list(opts.primary_key) + ([opts.sequence_field] if opts.sequence_field else [])
        same = " with the same sequence value" if opts.sequence_field else ""
        differ = " that differ in order-sensitive columns" if engine_of(opts).combines_rows else ""
        raise ChainConfigError(
            f"chain_incremental model '{model}': {rows[0][-1]} rows for key "
            f"{_key_text(shown, rows[0])} in one partition{same}{differ}; "
            "the merge order cannot decide between them (add a sequence_field or dedupe "
            "the model); nothing was written"
        )


def check_spelling(
    settings: ModelSettings, spec: Mapping[str, str], staged: Sequence[Values]
) -> None:
    """The stage's check compares typed values (on an int column chain_partition '05' lets 5
    in) while Spark names a partition as it prints the value (5). A run must name its
    partitions as Spark does: the empty partitions it adds and the one-partition stage are
    named from chain_partition, and an empty partition '05' written over a stage would cast to
    5 and replace the staged rows."""
    index = {c: i for i, c in enumerate(settings.opts.partition_by)}
    for part in staged:
        if any(part[index[c]] != v for c, v in spec.items()):
            raise ChainConfigError(
                f"chain_incremental model '{settings.model}': its rows are in partition "
                f"{settings.layout.path(part)}, which chain_partition {dict(spec)} spells "
                "differently; give chain_partition the value as SHOW PARTITIONS prints it; "
                "nothing was written"
            )


def check_empty_spelling(
    catalog: Catalog, settings: ModelSettings, spec: Mapping[str, str], types: Mapping[str, str]
) -> None:
    """check_spelling for a day without rows, whose empty partitions are named from
    chain_partition alone: each value of a column that is not a string, cast to the column's
    type, must print as given. Otherwise the partition Spark adds ('05' on an int column
    becomes 5) is not the one the run and its crash recovery look for by name."""
    by_name = {c.lower(): t for c, t in types.items()}  # the model may spell a column DT
    typed = [(c, v, by_name.get(c.lower(), "string")) for c, v in spec.items()]
    typed = [(c, v, t) for c, v, t in typed if not is_string_type(t)]
    if not typed:
        return
    held = catalog.runner.fetch(stage_sql.typed_values_sql([(v, t) for _, v, t in typed]))[0]
    for (column, value, spark_type), cast in zip(typed, held, strict=True):
        if cast is None or str(cast) != value:
            shown = "no value" if cast is None else repr(str(cast))
            raise ChainConfigError(
                f"chain_incremental model '{settings.model}': chain_partition {dict(spec)} "
                f"gives column '{column}' ({spark_type}) the value {value!r}, which Spark "
                f"holds as {shown}; give chain_partition the value as SHOW PARTITIONS prints "
                "it; nothing was written"
            )


def check_chain_partition(settings: ModelSettings, spec: Mapping[str, str]) -> None:
    opts = settings.opts
    missing = [c for c in opts.chain_keys if c not in spec]
    unknown = [k for k in spec if k not in opts.partition_by]
    if missing or unknown:
        raise ChainConfigError(
            f"chain_incremental model '{settings.model}': chain_partition {dict(spec)} must give "
            f"every chain key {list(opts.chain_keys)} (and optionally group keys), "
            f"missing {missing}, unknown {unknown}"
        )


def check_partition_times(settings: ModelSettings, parts: Sequence[Values]) -> None:
    """With a timestamp pattern and formatter, every partition written must parse: an
    unparseable one could never expire and would break the chain's time order."""
    opts = settings.opts
    if not (opts.timestamp_pattern and opts.timestamp_formatter):
        return
    for part in parts:
        try:
            timestamps.partition_time(
                opts.timestamp_pattern,
                opts.timestamp_formatter,
                dict(zip(opts.partition_by, part, strict=True)),
            )
        except (ChainConfigError, ValueError) as e:
            raise ChainConfigError(
                f"chain_incremental model '{settings.model}': partition "
                f"{settings.layout.path(part)}: {e}; nothing was written"
            ) from None
