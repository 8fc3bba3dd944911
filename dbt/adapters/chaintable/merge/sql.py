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
     partial-update  per column the latest non-null value (see `partial_update` for deletes).
     aggregation     per column its aggregate function (see engines._aggregate).

Two kinds of input rows exist: delta rows (and the rows of a model written straight to the
snapshot branch) are raw input; an anchor row is the already merged state of its key. Only the
`count` aggregate has to tell them apart (a raw row counts one, an anchor row carries a count),
which is what the ANCHOR column is for.

A compacted day always equals its merged read; what a compacted snapshot forgets of deleted keys
is in docs/design.md#merge-order-and-engines.
"""

from __future__ import annotations

from collections.abc import Sequence

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.quoting import cols_sql, q
from dbt.adapters.chaintable.merge.engines import MergeInput, engine_of
from dbt.adapters.chaintable.merge.rules import ANCHOR, Types


# ---- public API ---------------------------------------------------------------------------------
def merge_select(
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
    `pick_one` (deduplicate and first-row only)."""
    m = MergeInput(opts, columns, source_sql, keys, types, keep_deletes, drop_anchor)
    return engine_of(opts).merge_select(m)


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
    return merge_select(opts, columns, raw, keys, types)


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
    return [untouched, merge_select(opts, columns, contested, keys, types)]
