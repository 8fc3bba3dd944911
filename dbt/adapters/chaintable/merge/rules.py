"""The merge's rules over a chain's options (docs/design.md#merge-order-and-engines): the merge
order, which rows retract, which columns carry values, what an engine says of a key's rows
(RowRules, merge/engines/); with the names of the columns the merge's SQL adds to the rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from dbt.adapters.chaintable.base.keys import RETRACTABLE_FUNCTIONS
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.quoting import q, string

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


TIE = "__chain_tie"  # the row ties with the one before it in merge order (rank_rows's tie_rows)


TIE_FAILED = "chaintable: tied rows in the partition written"


RESET = "__chain_reset"  # partial-update: position of the key's last -D


Types = Mapping[str, str] | None


def lower_set(names: Sequence[str]) -> set:
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
    return [f"{t} {d} {nulls}" for t in order_exprs(opts)]


def order_exprs(opts: ChainOptions, partition: bool = True) -> list[str]:
    exprs = [q(opts.sequence_field)] if opts.sequence_field else []
    exprs += [q(c) for c in opts.chain_keys] if partition else []
    if opts.rowkind_field:
        exprs.append(f"CASE WHEN {RETRACT} THEN 0 ELSE 1 END")
    return exprs


# ---- which rows an engine ignores or refuses ----------------------------------------------------
def value_columns(opts: ChainOptions, columns: Sequence[str]) -> list[str]:
    """Columns an engine merges: all but the primary key and the sequence and rowkind fields."""
    system = [c for c in (opts.sequence_field, opts.rowkind_field) if c]
    skip = lower_set(list(opts.primary_key) + system)
    return [c for c in columns if c.lower() not in skip]


class RowRules(Protocol):
    """What an engine says of a key's rows before they are ranked (merge/engines/): which it
    ignores, and why it refuses a retraction (None: it takes them)."""

    latest_wins: bool

    def ignored(self, opts: ChainOptions) -> str | None: ...

    def refusal(self, opts: ChainOptions, columns: Sequence[str]) -> str | None: ...


def retract_refusal(opts: ChainOptions, aggregated: Sequence[str]) -> str | None:
    """Why `aggregated` columns cannot take a -U/-D row: a function that cannot retract."""
    ignored = lower_set(opts.ignore_retract)
    bad = [
        f"{c}: {opts.aggregate_function(c)}"
        for c in aggregated
        if opts.aggregate_function(c) not in RETRACTABLE_FUNCTIONS and c.lower() not in ignored
    ]
    if bad:
        return (
            f"aggregate functions cannot retract -U/-D rows ({', '.join(bad)}); only "
            f"{', '.join(RETRACTABLE_FUNCTIONS)} can, list other columns in ignore_retract"
        )
    return None
