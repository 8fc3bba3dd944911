"""The partitions of one chain table and the forms a partition takes outside SQL: its values (a
tuple, group values then chain values), its path (`region=CN/dt=20250101`, as SHOW PARTITIONS
prints it and as table properties store it) and an operation's partition spec. SQL forms (spec,
predicate) are rendered by base/quoting.py and chain/sql.py from the same values."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import unquote

from dbt.adapters.chaintable.base.keys import INTEGRAL_TYPES
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.values import ChainConfigError, parse_bool

Values = tuple[str, ...]


HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


class ChainPlanError(ChainConfigError):
    """A request the chain cannot satisfy (bad partition spec, unsafe drop, ...)."""


def parse_partition_path(path: str, partition_by: Sequence[str]) -> Values:
    """'region=CN/dt=20250101' (as SHOW PARTITIONS prints it) -> ('CN', '20250101')."""
    parts = {}
    for piece in path.split("/"):
        key, _, value = piece.partition("=")
        parts[unquote(key).lower()] = unquote(value)
    try:
        values = tuple(parts[c.lower()] for c in partition_by)
    except KeyError:
        raise ChainPlanError(
            f"partition '{path}' does not match partition_by {list(partition_by)}"
        ) from None
    if HIVE_NULL in values:
        raise ChainPlanError(
            f"partition '{path}' has a NULL partition value; chain tables need "
            "non-null partition values"
        )
    return values


# a name or value Spark and Hive write into a partition's directory name as it is (neither's path
# escaping changes it; Hive also lowercases column names there, so upper case is left out)
_PLAIN_NAME = re.compile(r"[a-z0-9_]+")
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9_.-]+")


def default_partition_directory(
    table_location: str, columns: Sequence[str], values: Values, table_columns: Sequence[str]
) -> str | None:
    """The directory a write into a partition of the table at `table_location` gives it
    (`<location>/region=CN/dt=20250101`) when no name or value needs escaping in a path, else
    None (its location is then asked of the catalog). `table_columns`: the table's columns as
    the catalog spells them; a write names the directory with that spelling (a table created
    from a query holding `DT` has `DT=...` directories), so a partition column spelt otherwise
    there gives None too."""
    plain = all(_PLAIN_NAME.fullmatch(c) and c in table_columns for c in columns) and all(
        _PLAIN_VALUE.fullmatch(v) for v in values
    )
    if not plain or len(columns) != len(values):
        return None
    return f"{table_location.rstrip('/')}/{format_partition(columns, values)}"


def default_partition_directories(
    table_location: str,
    table_columns: Sequence[tuple[str, str]],
    columns: Sequence[str],
    parts: Sequence[Values],
) -> dict[Values, str]:
    """default_partition_directory of each of `parts` that has one (the table's columns as
    (name, type) pairs)."""
    names = [c for c, _ in table_columns]
    found = {p: default_partition_directory(table_location, columns, p, names) for p in parts}
    return {p: d for p, d in found.items() if d is not None}


def parse_flag(value: Any, name: str) -> bool:
    """An operation's boolean argument (overwrite, dry_run); None is false."""
    return parse_bool(value, False, name, ChainPlanError)


def parse_partition_spec(spec: Any) -> dict[str, str]:
    """A partition given as a dict or as Paimon's string form: `dt=20250811` or
    `dt="20250811",hour="22"`. More than one partition (a list, or `;`, or a key given
    several values) is an error."""
    if isinstance(spec, Mapping):
        lowered = [str(k).lower() for k in spec]
        several = sorted(
            str(k)
            for k, v in spec.items()
            if isinstance(v, (list, tuple, set, Mapping)) or lowered.count(str(k).lower()) > 1
        )
        if several:
            raise ChainPlanError(
                f"exactly one partition is expected, got several values for {several}: {spec!r}"
            )
        return {str(k): str(v) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        if len(spec) != 1:
            raise ChainPlanError(f"exactly one partition is expected, got {len(spec)}: {spec!r}")
        return parse_partition_spec(spec[0])
    if not isinstance(spec, str) or not spec.strip():
        raise ChainPlanError(f"partition must be a dict or 'key=value,...', got {spec!r}")
    if ";" in spec:
        raise ChainPlanError(f"exactly one partition is expected, got '{spec}'")
    out: dict[str, str] = {}
    for piece in spec.split(","):
        key, eq, value = piece.partition("=")
        if not eq or not key.strip():
            raise ChainPlanError(f"cannot parse partition '{spec}': expected key=value[,key=value]")
        if key.strip().lower() in (k.lower() for k in out):
            raise ChainPlanError(f"exactly one partition is expected, got '{spec}'")
        out[key.strip()] = value.strip().strip("'\"")
    return out


def g_in(group: Values, groups: Sequence[Values]) -> bool:
    return tuple(group) in {tuple(g) for g in groups}


def format_partition(columns: Sequence[str], values: Sequence[str]) -> str:
    return "/".join(f"{c}={v}" for c, v in zip(columns, values, strict=False))


def spark_value(value: str, spark_type: str) -> Any:
    t = spark_type.lower()
    try:
        if t in INTEGRAL_TYPES:
            return int(value)
        if t.startswith("decimal") or t in ("double", "float"):
            return Decimal(value)
    except (ValueError, InvalidOperation):
        pass
    return value


@dataclass(frozen=True)
class Layout:
    partition_by: tuple[str, ...]
    group_keys: tuple[str, ...]
    chain_keys: tuple[str, ...]

    @classmethod
    def of(cls, opts: ChainOptions) -> Layout:
        return cls(tuple(opts.partition_by), tuple(opts.group_keys), tuple(opts.chain_keys))

    def split(self, values: Values) -> tuple[Values, Values]:
        n = len(self.group_keys)
        return tuple(values[:n]), tuple(values[n:])

    def path(self, values: Values) -> str:
        return format_partition(self.partition_by, values)

    def parse(self, path: str) -> Values:
        return parse_partition_path(path, self.partition_by)

    def group_path(self, group: Values) -> str:
        return format_partition(self.group_keys, group)

    def chain_path(self, chain: Values) -> str:
        return format_partition(self.chain_keys, chain)

    def parse_group(self, path: str) -> Values:
        return parse_partition_path(path, self.group_keys) if self.group_keys else ()

    def parse_chain(self, path: str) -> Values:
        return parse_partition_path(path, self.chain_keys)
