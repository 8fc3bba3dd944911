"""How a raw config or property value is read: flags, lists, numbers, each refused with the
option named (docs/design.md#validation)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from dbt_common.exceptions import DbtRuntimeError


class ChainConfigError(DbtRuntimeError):
    """A chain table configuration that cannot work; raised before anything is written."""


def is_int(value: Any) -> bool:
    try:
        return float(value) == int(float(value))
    except (TypeError, ValueError, OverflowError):  # not a number, NaN, infinity
        return False


def is_number(value: Any) -> bool:
    """A finite number (NaN or infinity would make a trigger that can never fire)."""
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError, OverflowError):
        return False


def as_flag(value: Any) -> bool | None:
    """true or false, also spelt as a string (yes/no, 1/0) as YAML or --args may give it;
    None for anything else."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    return None


def parse_bool(value: Any, default: bool, name: str, fail: Callable[[str], Exception]) -> bool:
    """A boolean config or argument; None or '' (an unset var) gives the default. Anything
    but a flag (as_flag) is refused (`fail(message)` makes the error) rather than read as
    false, or as a true non-empty string."""
    flag = default if value is None or value == "" else as_flag(value)
    if flag is None:
        raise fail(f"{name} must be true or false, got {value!r}")
    return flag


def as_list(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, Mapping):  # dbt-spark style {'field': ...} is not a column list
        raise TypeError("expected a list of column names")
    return tuple(str(v).strip() for v in value)


def as_bool(value: Any) -> bool:
    """A flag the adapter stored in TBLPROPERTIES: true only when spelt as one (as_flag)."""
    return as_flag(value) is True
