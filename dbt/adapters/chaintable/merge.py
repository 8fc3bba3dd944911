"""SQL of the chain merge (SPEC §2 rule 6), the one place that decides which version of a key wins.

`merge_sql` is used by every read (the view, chain_read) and by compaction, so a day reads the
same whether it is merged on read or compacted.

Plan shape, chosen for the common case of a small delta over a large anchor:
  anchor rows whose key is not in the deltas   -> passed through (LEFT ANTI JOIN against the
                                                  deltas' keys: broadcast, the anchor is never
                                                  shuffled)
  anchor rows whose key is in the deltas + all delta rows -> merged per key (one small shuffle)
"""
from __future__ import annotations

from typing import List, Optional, Sequence

from dbt.adapters.chaintable.options import ChainOptions

RETRACT_KINDS = ("-U", "-D")
RN = "__chain_rn"


def q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def cols_sql(columns: Sequence[str], alias: Optional[str] = None) -> str:
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + q(c) for c in columns)


def is_retract(opts: ChainOptions, alias: str = "") -> str:
    """SQL predicate: the row is a -U/-D (false when there is no rowkind field)."""
    if not opts.rowkind_field:
        return "false"
    prefix = f"{alias}." if alias else ""
    kinds = ", ".join(f"'{k}'" for k in RETRACT_KINDS)
    return f"coalesce({prefix}{q(opts.rowkind_field)} IN ({kinds}), false)"


def order_terms(opts: ChainOptions, descending: bool = True) -> List[str]:
    """Rule 6: higher sequence wins; on a tie the later partition; then -U/-D before +I/+U
    (so +I/+U win a tie). `descending` puts the winner first."""
    d = "DESC" if descending else "ASC"
    nulls = "NULLS LAST" if descending else "NULLS FIRST"
    terms = []
    if opts.sequence_field:
        terms.append(f"{q(opts.sequence_field)} {d} {nulls}")
    terms += [f"{q(c)} {d}" for c in opts.chain_keys]
    if opts.rowkind_field:
        terms.append(f"CASE WHEN {is_retract(opts)} THEN 0 ELSE 1 END {d}")
    return terms


def key_join(opts: ChainOptions, left: str, right: str) -> str:
    return " AND ".join(f"{left}.{q(k)} = {right}.{q(k)}" for k in opts.merge_keys) or "true"


def merge_rows_sql(opts: ChainOptions, columns: Sequence[str], source_sql: str) -> str:
    """One merged row per merge key of `source_sql` (rows with `columns`), deleted keys removed.
    The chain key columns of a result row are those of the winning row (callers relabel)."""
    keys = ", ".join(q(k) for k in opts.merge_keys) or "1"
    if opts.merge_engine == "first-row":
        # The first row per key wins; retractions cannot undo it (Paimon's first-row ignores them).
        order = ", ".join(order_terms(opts, descending=False))
        return (f"SELECT {cols_sql(columns)} FROM (SELECT *, row_number() OVER (PARTITION BY {keys} "
                f"ORDER BY {order}) AS {RN} FROM ({source_sql}) __s WHERE NOT {is_retract(opts)}) "
                f"__r WHERE {RN} = 1")
    order = ", ".join(order_terms(opts))
    return (f"SELECT {cols_sql(columns)} FROM (SELECT *, row_number() OVER (PARTITION BY {keys} "
            f"ORDER BY {order}) AS {RN} FROM ({source_sql}) __s) __r "
            f"WHERE {RN} = 1 AND NOT {is_retract(opts)}")


def merge_sql(opts: ChainOptions, columns: Sequence[str], anchor_sql: Optional[str],
              delta_sql: str) -> str:
    """Full state over an anchor (may be None) and deltas, both SELECTs yielding `columns`."""
    if anchor_sql is None:
        return merge_rows_sql(opts, columns, delta_sql)
    keys = cols_sql(opts.merge_keys)
    touched = f"(SELECT DISTINCT {keys} FROM ({delta_sql}) __dk)"
    untouched = (f"SELECT {cols_sql(columns, '__a')} FROM ({anchor_sql}) __a "
                 f"LEFT ANTI JOIN {touched} __d ON {key_join(opts, '__a', '__d')}")
    contested = (f"SELECT {cols_sql(columns, '__a')} FROM ({anchor_sql}) __a "
                 f"LEFT SEMI JOIN {touched} __d ON {key_join(opts, '__a', '__d')} "
                 f"UNION ALL {delta_sql}")
    return f"{untouched} UNION ALL {merge_rows_sql(opts, columns, contested)}"
