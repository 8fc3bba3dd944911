"""Quoting: the one place that turns names and values into SQL text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dbt.adapters.chaintable.base.properties import stored, stored_keys

_STRINGS = ("string",)


def q(name: str) -> str:
    """A column name as a back-quoted identifier."""
    return "`" + name.replace("`", "``") + "`"


def string(text: object) -> str:
    """A single-quoted Spark SQL string literal (also for paths and property values)."""
    return "'" + str(text).replace("\\", "\\\\").replace("'", "\\'") + "'"


def cols_sql(columns: Sequence[str], alias: str | None = None) -> str:
    """A column list, each name quoted, optionally qualified by a table alias."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + q(c) for c in columns)


def is_string_type(spark_type: str) -> bool:
    """string, varchar(n) or char(n): a value of the type is its own spelling."""
    t = spark_type.lower()
    return t in _STRINGS or t.startswith(("varchar", "char"))


def literal(value: str, spark_type: str = "string") -> str:
    """A typed SQL literal for a partition value (constant-folded, so pruning still works)."""
    if is_string_type(spark_type):
        return string(value)
    return f"CAST({string(value)} AS {spark_type})"


def spec_sql(columns: Sequence[str], values: Sequence[str]) -> str:
    """The body of a static `PARTITION (...)` clause. Spark takes only constants there and
    converts a string to the partition column's type, so every value is a quoted string (a
    `CAST(...)`, right in a predicate, is a syntax error in a spec)."""
    return ", ".join(f"{q(c)} = {string(v)}" for c, v in zip(columns, values, strict=False))


def properties_sql(props: Mapping[str, str]) -> str:
    """The body of a TBLPROPERTIES clause, keys sorted: each property, and the unredacted mirror
    of each one that Spark's redaction would hide when it is read back (properties.py)."""
    written = stored(props)
    return ", ".join(f"{string(k)} = {string(v)}" for k, v in sorted(written.items()))


def property_keys_sql(keys: Sequence[str]) -> str:
    """The keys of an UNSET TBLPROPERTIES clause, sorted, each with its mirror."""
    return ", ".join(string(k) for k in stored_keys(keys))
