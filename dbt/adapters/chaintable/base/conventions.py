"""dbt's own model configs as a chain_incremental model takes them (README: dbt conventions):
on_schema_change, file_format, grants, persist_docs and an enforced contract's constraints, each
read and checked before anything is written, every error naming the model, the config and what
is allowed."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dbt.adapters.chaintable.base.values import ChainConfigError

Fail = Callable[[str], ChainConfigError]

# dbt's sync_all_columns would drop columns that stored partitions hold: both branches keep one
# schema (run/changes.py refuses a removed column), so it is not offered
ON_SCHEMA_CHANGE = ("ignore", "fail", "append_new_columns")

# the formats the functional tests write (tests/functional/test_conventions.py): a file table
# of the Hive catalog whose partitions the publish switches by location (publish/safety.py).
# delta, iceberg and hudi keep their own transaction logs, which a location switch bypasses
FILE_FORMATS = ("parquet", "orc")

# the constraints the chain itself enforces: a NULL key and a key the merge cannot decide are
# refused (run/checks.py), so the view holds one row per primary key and partition
ENFORCED = "not_null on primary_key columns, primary_key equal to the model's primary_key"


# how a server without grant statements refuses dbt's `show grants on ...` (Spark's own
# catalog: tests/functional/test_conventions.py), older Spark included
GRANTS_UNSUPPORTED = ("INVALID_STATEMENT_OR_CLAUSE", "PARSE_SYNTAX_ERROR", "Operation not allowed")


def grants_unsupported(error: str) -> bool:
    return any(marker in error for marker in GRANTS_UNSUPPORTED)


def first_line(error: str) -> str:
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    found = [line for line in lines if any(m in line for m in GRANTS_UNSUPPORTED)]
    return (found or lines or [""])[0][:300]


def read_on_schema_change(config: Mapping[str, Any], fail: Fail) -> str:
    raw = config.get("on_schema_change")
    mode = str(raw).strip().lower() if raw not in (None, "") else "ignore"
    if mode not in ON_SCHEMA_CHANGE:
        why = (
            ": it would drop columns that stored partitions hold"
            if mode == "sync_all_columns"
            else ""
        )
        raise fail(f"on_schema_change {raw!r} is not one of {list(ON_SCHEMA_CHANGE)}{why}")
    return mode


def read_file_format(config: Mapping[str, Any], fail: Fail) -> str:
    raw = config.get("file_format")
    fmt = str(raw).strip().lower() if raw not in (None, "") else "parquet"
    if fmt not in FILE_FORMATS:
        raise fail(
            f"file_format {raw!r} is not one of {list(FILE_FORMATS)}: the branches are file "
            "tables of the Hive catalog whose partitions a run switches by location (formats "
            "with a log of their own, such as delta, iceberg or hudi, would not see the switch)"
        )
    return fmt


def read_grants(config: Mapping[str, Any], fail: Fail) -> dict[str, tuple[str, ...]]:
    """`grants: {privilege: grantee or [grantees]}` as dbt takes it (README: dbt conventions)."""
    raw = config.get("grants") or {}
    if not isinstance(raw, Mapping):
        raise fail(f"grants must be a dict {{privilege: [grantees]}}, got {raw!r}")
    out = {}
    for privilege, grantees in raw.items():
        names = [grantees] if isinstance(grantees, str) else grantees
        if not isinstance(names, Sequence) or not all(isinstance(g, str) for g in names):
            raise fail(
                f"grants[{privilege!r}] must be a grantee or a list of them, got {grantees!r}"
            )
        out[str(privilege)] = tuple(names)
    return out


def read_persist_docs(config: Mapping[str, Any], fail: Fail) -> tuple[bool, bool]:
    """(relation, columns) of `persist_docs: {relation: true, columns: true}`."""
    raw = config.get("persist_docs") or {}
    if not isinstance(raw, Mapping):
        raise fail(f"persist_docs must be a dict {{relation: bool, columns: bool}}, got {raw!r}")
    unknown = sorted(set(raw) - {"relation", "columns"})
    if unknown:
        raise fail(f"persist_docs keys {unknown} are not 'relation' or 'columns'")
    return bool(raw.get("relation")), bool(raw.get("columns"))


def check_constraints(
    model: str, primary_key: Sequence[str], node: Mapping[str, Any] | None
) -> None:
    """An enforced contract's constraints: the ones the chain enforces (ENFORCED) are applied by
    its checks; Spark's session catalog stores none on a file table (ALTER TABLE ... ADD
    CONSTRAINT and SET NOT NULL are refused), so any other is refused, unless the constraint
    says `warn_unenforced: false` (dbt's way to keep one as documentation only)."""
    node = node or {}
    if not (node.get("contract") or {}).get("enforced"):
        return
    found = [(c, None) for c in node.get("constraints") or []]
    for name, column in (node.get("columns") or {}).items():
        found += [(c, name) for c in column.get("constraints") or []]
    key = {c.lower() for c in primary_key}
    for constraint, column in found:
        kind = str(constraint.get("type"))
        cols = [column] if column else list(constraint.get("columns") or [])
        where = f"on column '{column}'" if column else f"on columns {cols}"
        if kind == "not_null" and column and column.lower() in key:
            continue
        if kind == "primary_key" and {c.lower() for c in cols} == key:
            continue
        if constraint.get("warn_unenforced") is False:
            continue
        raise ChainConfigError(
            f"chain_incremental model '{model}': contract constraint '{kind}' {where} cannot "
            f"be enforced: the chain enforces {ENFORCED} {list(primary_key)}; Spark's catalog "
            "stores no constraint on the branch tables. Make it a data test, or set "
            "warn_unenforced: false on it to keep it as documentation; nothing was written"
        )
