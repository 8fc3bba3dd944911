"""Reading a day from the cumulative delta (docs/design.md#cumulative-delta): its anchor rows
whose key the day's C partition does not hold, and that partition's live rows. Every read of a
served day goes through here: the view, chain_read, compaction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.base.quoting import cols_sql, literal, q
from dbt.adapters.chaintable.chain.sql import ChainSql
from dbt.adapters.chaintable.chain.state import ReadPlan
from dbt.adapters.chaintable.chain.tables import STAMP_COLUMN
from dbt.adapters.chaintable.cumulative.plan import MASK_COLUMN, MASK_SHIFT, mask_key
from dbt.adapters.chaintable.merge.rules import is_retract


def on_keys(keys: Sequence[str], left: str, right: str) -> str:
    return " AND ".join(f"{left}.{q(k)} = {right}.{q(k)}" for k in keys) or "true"


def block(column_sql: str) -> str:
    """The block of 64 key values a key falls in (its mask row's key)."""
    return f"shiftright(CAST({column_sql} AS BIGINT), {MASK_SHIFT})"


def bit(column_sql: str) -> str:
    """A key's bit in its block's mask."""
    return f"shiftleft(1L, CAST(CAST({column_sql} AS BIGINT) & {2**MASK_SHIFT - 1} AS INT))"


def masked_on(others: Sequence[str], mask: str) -> str:
    """The anti join's condition of an anchor row `__a` and a mask row `__k`: equal `others`
    (group keys, a mapped read's targets), the same block of `mask`, the row's bit set.
    Spark probes a broadcast map of one long key much faster than one of several keys or of a
    string (10M rows, 16 groups, a delta-only day's read, medians of 6 rounds: 3.04 s -> 2.79 s,
    the classic stored day 1.83 s). So the key is the block mixed with a hash of `others` (blocks of other groups
    rarely share it), and the exact equalities go into the condition, inside coalesce, which
    Spark does not take for join keys."""
    a_block, k_block = block("__a." + q(mask)), block("__k." + q(mask))
    hit = f"(__k.{q(MASK_COLUMN)} & {bit('__a.' + q(mask))}) <> 0"
    if not others:
        return f"{a_block} = {k_block} AND {hit}"
    mixed = {
        side: f"(xxhash64({cols_sql(others, side)}) ^ {blk})"
        for side, blk in (("__a", a_block), ("__k", k_block))
    }
    exact = [f"coalesce(__a.{q(o)} = __k.{q(o)}, false)" for o in others]
    return " AND ".join(
        [f"{mixed['__a']} = {mixed['__k']}", *exact, f"coalesce({a_block} = {k_block}, false)", hit]
    )


def read_parts(
    opts: ChainOptions,
    columns: Sequence[str],
    anchor_sql: str | None,
    cumulative_sql: str,
    keys_from: str,
    mask: str | None = None,
    where: str = "",
) -> list[str]:
    """A day's full state from its anchor and its cumulative delta, as the SELECTs of a UNION
    ALL: the anchor rows whose key the cumulative delta does not hold (its keys, one row each,
    broadcast: `keys_sql` of the C rows `keys_from`, a FROM clause, where `where` holds), and
    its live rows. With `mask` (plan.mask_key) the keys are C's mask rows instead (`keys_from`
    has the mask column). Every served read is assembled here: a day's (`read`) and the view's
    mapped read (view/sql.py, ViewSql.mapped_read)."""
    keys = list(opts.merge_keys)
    live = f"SELECT {cols_sql(columns)} FROM ({cumulative_sql}) __c WHERE NOT {is_retract(opts)}"
    if anchor_sql is None:
        return [live]
    if mask is None:
        on = on_keys(keys, "__a", "__k")
        kept = cols_sql(keys) or "true AS __chain_any"
    else:
        on = masked_on([k for k in keys if k.lower() != mask.lower()], mask)
        kept = cols_sql([*keys, MASK_COLUMN])
    key_rows = keys_sql(keys, keys_from, mask, where)
    untouched = (
        f"SELECT /*+ BROADCAST(__k) */ {cols_sql(columns, '__a')} FROM ({anchor_sql}) __a "
        f"LEFT ANTI JOIN (SELECT {kept} FROM ({key_rows}) __kk) __k ON {on}"
    )
    return [untouched, live]


# ---- one chain's cumulative table -------------------------------------------------------------
def stamped_where(r: ChainSql, parts: Mapping[Values, str]) -> str:
    """C partitions: each (group + chain) with its stamp. Stamps are unique per partition
    (cumulative.stamp), so one IN list of them cannot pick another partition's."""
    stamps = ", ".join(literal(s) for s in sorted(set(parts.values())))
    return f"({r.partitions_predicate(list(parts))}) AND {q(STAMP_COLUMN)} IN ({stamps})"


def mask_of(r: ChainSql) -> str | None:
    return mask_key(r.opts, r.types)


def select(r: ChainSql, parts: Mapping[Values, str]) -> str:
    return f"SELECT {cols_sql(r.columns)} FROM {r.cumulative} WHERE {stamped_where(r, parts)}"


def served_parts(plans: Sequence[ReadPlan], serving: Mapping[Values, str]) -> dict[Values, str]:
    """The C partitions (group + chain: stamp) that serve `plans`' day."""
    return {p.group + p.chain: serving[p.group + p.chain] for p in plans}


def read(r: ChainSql, plans: Sequence[ReadPlan], serving: Mapping[Values, str]) -> list[str]:
    """The full state of one day for the groups of `plans`, all served (`serving`), as the
    SELECTs of a UNION ALL."""
    parts = served_parts(plans, serving)
    anchors = [p.group + p.anchor for p in plans if p.anchor is not None]
    mask = mask_of(r)
    return read_parts(
        r.opts,
        r.columns,
        r.select(r.snapshot, anchors) if anchors else None,
        select(r, parts),
        r.cumulative,
        mask,
        stamped_where(r, parts),
    )


def live(r: ChainSql, plans: Sequence[ReadPlan], serving: Mapping[Values, str]) -> str:
    """The live rows of the C partitions that serve `plans`' day: its state of every key a
    delta in (anchor, day] touched, without the anchor's scan (history/sql.py reads the keys
    of such deltas from here alone)."""
    parts = served_parts(plans, serving)
    (rows,) = read_parts(r.opts, r.columns, None, select(r, parts), r.cumulative)
    return rows


def held_keys(r: ChainSql, plans: Sequence[ReadPlan], serving: Mapping[Values, str]) -> str:
    """The merge keys of every row, tombstones too, of the C partitions that serve `plans`'
    day: the keys whose state C gives there."""
    where = stamped_where(r, served_parts(plans, serving))
    return keys_sql(list(r.opts.merge_keys), r.cumulative, None, where)


def keys_sql(keys: Sequence[str], source: str, mask: str | None, where: str = "") -> str:
    """`read_parts`' keys from C rows `source` (with the mask column when `mask`): each
    key, or with `mask` the first key of each block with the block's mask."""
    conds = [f"{q(MASK_COLUMN)} IS NOT NULL"] if mask else []
    conds += [where] if where else []
    selected = cols_sql([*keys, MASK_COLUMN] if mask else keys) or "1"
    return f"SELECT {selected} FROM {source}" + (" WHERE " + " AND ".join(conds) if conds else "")
