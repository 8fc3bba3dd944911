"""The first two steps of every engine's merge (sql.py describes the three): each row prepared
(retractions marked, ignored rows dropped, refused ones raised) and ranked in merge order per
key; and the engines that keep one row per key (deduplicate, first-row)."""

from __future__ import annotations

from collections.abc import Sequence

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.quoting import cols_sql, q, string
from dbt.adapters.chaintable.merge.rules import (
    ANCHOR,
    ORD,
    RETRACT,
    TIE,
    TIE_FAILED,
    RowRules,
    is_retract,
    order_exprs,
    order_terms,
)


def _key_text_sql(columns: Sequence[str]) -> str:
    parts = [f"{string(c + '=')}, coalesce(CAST({q(c)} AS STRING), 'NULL')" for c in columns]
    return "concat('(', " + ", ', ', ".join(parts) + ", ')')"


def prepared(
    opts: ChainOptions,
    columns: Sequence[str],
    source_sql: str,
    engine: RowRules,
    refuse: bool = True,
) -> str:
    """`source_sql` rows (columns + ANCHOR) with RETRACT; rows the engine ignores are dropped;
    with `refuse`, a retraction the engine refuses fails the query, naming the key."""
    marked = (
        f"SELECT {cols_sql(columns)}, {ANCHOR}, "
        f"(NOT {ANCHOR} AND {is_retract(opts)}) AS {RETRACT} FROM ({source_sql}) __s"
    )
    where = []
    ignored = engine.ignored(opts)
    if ignored:
        where.append(f"NOT {ignored}")
    reason = engine.refusal(opts, columns) if refuse else None
    if reason and opts.rowkind_field:  # a refusal is about -U/-D rows: a rowkind field exists
        msg = (
            f"concat('chain merge: ', {string(reason)}, '; got ', "
            f"{q(opts.rowkind_field)}, ' for key ', {_key_text_sql(opts.primary_key)})"
        )
        where.append(f"CASE WHEN {RETRACT} THEN raise_error({msg}) ELSE true END")
    if not where:
        return marked
    return f"SELECT * FROM ({marked}) __m WHERE " + " AND ".join(where)


def key_list(keys: Sequence[str]) -> str:
    """Grouping of a key's rows; a constant when the primary key is the partition columns."""
    return cols_sql(keys) if keys else "true"


def rank_rows(
    opts: ChainOptions,
    columns: Sequence[str],
    source_sql: str,
    keys: Sequence[str],
    engine: RowRules,
    latest_first: bool,
    cluster: Sequence[str] = (),
    tie_rows: str | None = None,
) -> str:
    """Rows prepared for `engine` and ranked in merge order per key (`latest_first`).
    `cluster` (SQL expressions the keys determine): the rows are shuffled by them and the
    window partitioned by them and the keys, so that a caller's window over `cluster` needs no
    second shuffle nor sort. `tie_rows` (a predicate): TIE is true on a row it selects whose
    previous row in merge order ties with it (equal in every ordering term, so the same
    partition too): the tie checks.check_stage refuses, found in the window the merge sorts
    anyway (a group of tied rows is contiguous in that order)."""
    order = ", ".join(order_terms(opts, descending=latest_first))
    source = prepared(opts, columns, source_sql, engine)
    by = key_list(keys)
    if cluster:
        source = f"SELECT * FROM ({source}) __q DISTRIBUTE BY {', '.join(cluster)}"
        by = ", ".join([*cluster, *(q(k) for k in keys if q(k) not in cluster)])
    window = f"PARTITION BY {by} ORDER BY {order}"
    tie = ""
    if tie_rows is not None:
        same = " AND ".join(f"lag({e}) OVER ({window}) <=> {e}" for e in order_exprs(opts))
        tie = f", coalesce({tie_rows} AND NOT {ANCHOR} AND {same or 'true'}, false) AS {TIE}"
    return f"SELECT *, row_number() OVER ({window}) AS {ORD}{tie} FROM ({source}) __p"


# ---- the engines --------------------------------------------------------------------------------
def pick_one(
    opts: ChainOptions,
    columns: Sequence[str],
    source_sql: str,
    keys: Sequence[str],
    engine: RowRules,
    keep_deletes: bool = False,
    drop_anchor: bool = False,
    cluster: Sequence[str] = (),
    tie_rows: str | None = None,
) -> str:
    """The engines that keep one of a key's rows (merge/engines/: `engine`). deduplicate: the latest row, dropped when it is a -U/-D (kept with `keep_deletes`).
    first-row: the earliest row (its -U/-D were dropped in `prepared`).
    `drop_anchor`: no row for a key whose anchor row wins (the cumulative delta's build, where
    the anchor rows are stand-ins holding only what ranks them). `cluster`, `tie_rows`: see
    `rank_rows`; a tie fails the query (TIE_FAILED), tested on every row (the rank's test
    waits for it, so no row is left out)."""
    latest = engine.latest_wins
    ranked = rank_rows(
        opts, columns, source_sql, keys, engine, latest, cluster=cluster, tie_rows=tie_rows
    )
    rank = ORD
    if tie_rows is not None:  # in the rank's own test: no order of evaluation to rely on
        rank = f"(CASE WHEN {TIE} THEN raise_error({string(TIE_FAILED)}) ELSE {ORD} END)"
    keep = f"{rank} = 1" + (f" AND NOT {RETRACT}" if latest and not keep_deletes else "")
    keep += f" AND NOT {ANCHOR}" if drop_anchor else ""
    return f"SELECT {cols_sql(columns)} FROM ({ranked}) __r WHERE {keep}"
