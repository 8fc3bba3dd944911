"""What a read of a chain shows: every column but the row kind a full chain keeps for itself
(chain_input 'full', run/full.py): the view, chain_read, chain_changes and chain_history
leave it out; a chain of changes is read as it is."""

from __future__ import annotations

from collections.abc import Sequence

from dbt.adapters.chaintable.base.keys import FULL_KIND
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.quoting import cols_sql, q, string

KIND = FULL_KIND


def shown(opts: ChainOptions, columns: Sequence[str]) -> list[str]:
    if opts.chain_input != "full":
        return list(columns)
    return [c for c in columns if c.lower() != KIND]


def visible_sql(
    opts: ChainOptions, columns: Sequence[str], sql: str, extra: Sequence[str] = ()
) -> str:
    """`sql`'s rows (`columns`, then `extra`) without the kind column of a full chain."""
    if opts.chain_input != "full":
        return sql
    return f"SELECT {cols_sql([*shown(opts, columns), *extra])} FROM ({sql}) __visible"


def visible_changes_sql(
    opts: ChainOptions, columns: Sequence[str], sql: str, change: str, before: str
) -> str:
    """chain_changes' rows (`columns`, `change`, the struct `before` of the earlier state)
    without the kind column, in the struct too."""
    if opts.chain_input != "full":
        return sql
    cols = shown(opts, columns)
    fields = ", ".join(f"{string(c)}, {q(before)}.{q(c)}" for c in cols)
    return (
        f"SELECT {cols_sql([*cols, change])}, CASE WHEN {q(before)} IS NOT NULL "
        f"THEN named_struct({fields}) END AS {q(before)} FROM ({sql}) __visible"
    )
