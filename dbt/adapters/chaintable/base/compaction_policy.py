"""A chain's compaction policy (model config `chain_compaction`, docs/design.md#compaction-policy):
parsed, stored in TBLPROPERTIES and read back. The decisions it drives are compaction/policy.py's."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dbt.adapters.chaintable.base.keys import (
    COMPACTION_KEYS,
    COMPACTION_MODES,
    P_COMPACTION_LENGTH,
    P_COMPACTION_MODE,
    P_COMPACTION_RATIO,
)
from dbt.adapters.chaintable.base.values import as_flag, is_int, is_number


@dataclass(frozen=True)
class CompactionPolicy:
    max_chain_length: int | None = None
    max_cumulative_ratio: float | None = None
    mode: str = "inline"

    @classmethod
    def from_config(cls, raw: Any, fail: Callable[[str], Exception]) -> CompactionPolicy | None:
        """`{max_chain_length: 7, max_cumulative_ratio: 0.05, mode: inline}`; None, {}, false
        or 'none' (YAML's `none` is a string): no policy. `fail(message)` makes the error that
        names the model."""
        if raw is None or raw == {} or str(raw).strip().lower() in ("", "none"):
            return None
        if not isinstance(raw, Mapping):
            if as_flag(raw) is False:
                return None
            raise fail(
                "chain_compaction must be a dict such as {max_chain_length: 7, mode: inline}, "
                f"got {raw!r}"
            )
        unknown = sorted(str(k) for k in raw if k not in COMPACTION_KEYS)
        if unknown:
            raise fail(
                f"chain_compaction has unknown key(s) {unknown}; expected {list(COMPACTION_KEYS)}"
            )
        length = raw.get("max_chain_length")
        if length is not None and (
            isinstance(length, bool) or not is_int(length) or float(length) < 1
        ):
            raise fail(f"chain_compaction max_chain_length must be an integer >= 1, got {length!r}")
        ratio = raw.get("max_cumulative_ratio")
        if ratio is not None and (
            isinstance(ratio, bool) or not is_number(ratio) or float(ratio) <= 0
        ):
            raise fail(f"chain_compaction max_cumulative_ratio must be a number > 0, got {ratio!r}")
        if length is None and ratio is None:
            raise fail(
                "chain_compaction needs a trigger: max_chain_length and/or max_cumulative_ratio"
            )
        mode = str(raw.get("mode") or "inline")
        if mode not in COMPACTION_MODES:
            raise fail(f"chain_compaction mode '{mode}' is not one of {list(COMPACTION_MODES)}")
        return cls(
            None if length is None else int(float(length)),
            None if ratio is None else float(ratio),
            mode,
        )

    def to_properties(self) -> dict[str, str]:
        props = {P_COMPACTION_MODE: self.mode}
        if self.max_chain_length is not None:
            props[P_COMPACTION_LENGTH] = str(self.max_chain_length)
        if self.max_cumulative_ratio is not None:
            props[P_COMPACTION_RATIO] = repr(self.max_cumulative_ratio)
        return props

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> CompactionPolicy | None:
        length, ratio = props.get(P_COMPACTION_LENGTH), props.get(P_COMPACTION_RATIO)
        if not length and not ratio:
            return None
        return cls(
            int(length) if length else None,
            float(ratio) if ratio else None,
            props.get(P_COMPACTION_MODE) or "inline",
        )

    def describe(self) -> str:
        triggers = []
        if self.max_chain_length is not None:
            triggers.append(f"max_chain_length {self.max_chain_length}")
        if self.max_cumulative_ratio is not None:
            triggers.append(f"max_cumulative_ratio {self.max_cumulative_ratio:g}")
        return " or ".join(triggers) + f", mode {self.mode}"
