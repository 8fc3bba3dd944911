"""Reading a model's config option by option (ChainOptions.from_config,
docs/design.md#validation): each helper reads a group of options and refuses, naming the option,
what cannot work together."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dbt.adapters.chaintable.base.keys import (
    AGGREGATE_FUNCTIONS,
    CHAIN_INPUTS,
    DEFAULT_AGGREGATE_FUNCTION,
    MERGE_ENGINES,
)
from dbt.adapters.chaintable.base.values import ChainConfigError, as_list, is_int, parse_bool


def read_keys(
    config: Mapping[str, Any], fail: Callable[[str], ChainConfigError]
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """partition_by, chain_partition_keys and primary_key, checked against each other."""
    try:
        partition_by = as_list(config.get("partition_by"))
    except TypeError:
        raise fail(
            f"partition_by must be a list of column names, got {config.get('partition_by')!r}"
        ) from None
    if not partition_by:
        raise fail(
            "partition_by is required: a chain table is partitioned "
            "(group keys then chain keys), e.g. partition_by=['dt']"
        )
    chain_keys = as_list(config.get("chain_partition_keys")) or partition_by
    if chain_keys != partition_by[len(partition_by) - len(chain_keys) :]:
        raise fail(
            f"chain_partition_keys {list(chain_keys)} must be a contiguous suffix of "
            f"partition_by {list(partition_by)}"
        )
    primary_key = as_list(config.get("primary_key"))
    if not primary_key:
        # dbt's incremental models name their key unique_key: say that it is not read here
        hint = (
            f"; unique_key {config.get('unique_key')!r} is not read by chain_incremental"
            if config.get("unique_key")
            else ""
        )
        raise fail("primary_key is required (a list containing every partition column)" + hint)
    missing = [c for c in partition_by if c not in primary_key]
    if missing:
        raise fail(
            f"primary_key {list(primary_key)} must contain every partition column; "
            f"missing {missing}"
        )
    return partition_by, chain_keys, primary_key


def read_engine(
    config: Mapping[str, Any], primary_key: Sequence[str], fail: Callable[[str], ChainConfigError]
) -> tuple[str, str | None, str | None]:
    """merge_engine, sequence_field and rowkind_field."""
    engine = str(config.get("merge_engine") or "deduplicate")
    if engine not in MERGE_ENGINES:
        raise fail(f"merge_engine '{engine}' is not one of {list(MERGE_ENGINES)}")
    sequence_field = config.get("sequence_field") or None
    rowkind_field = config.get("rowkind_field") or None
    for name, col in (("sequence_field", sequence_field), ("rowkind_field", rowkind_field)):
        if col is not None and col in primary_key:
            raise fail(f"{name} '{col}' cannot be a primary key column")
    if engine == "first-row" and sequence_field:
        raise fail(
            "merge_engine 'first-row' cannot be used with a sequence_field "
            f"('{sequence_field}'): the first row wins, whatever its sequence"
        )
    return engine, sequence_field, rowkind_field


def read_input(
    config: Mapping[str, Any],
    engine: str,
    sequence_field: str | None,
    rowkind_field: str | None,
    fail: Callable[[str], ChainConfigError],
) -> str:
    """chain_input. A full state is compared with the chain's state of the group's day before,
    key by key, and the latest day wins (docs/design.md#full-state-input): only the
    deduplicate engine reads a day's state back as it was given, and the adapter writes the
    row kind of its own changes."""
    chain_input = str(config.get("chain_input") or "changes")
    if chain_input not in CHAIN_INPUTS:
        raise fail(f"chain_input '{chain_input}' is not one of {list(CHAIN_INPUTS)}")
    if chain_input != "full":
        return chain_input
    if engine != "deduplicate":
        raise fail(
            f"chain_input 'full' takes merge_engine 'deduplicate' only, not '{engine}': a "
            "day's full state is read back as it was given"
        )
    if sequence_field:
        raise fail(
            f"chain_input 'full' cannot be used with sequence_field '{sequence_field}': the "
            "day order decides which state is the latest"
        )
    if rowkind_field:
        raise fail(
            f"chain_input 'full' cannot be used with rowkind_field '{rowkind_field}': the "
            "adapter keeps the row kind of the changes it computes itself"
        )
    return chain_input


def read_aggregates(
    config: Mapping[str, Any],
    engine: str,
    primary_key: Sequence[str],
    sequence_field: str | None,
    rowkind_field: str | None,
    fail: Callable[[str], ChainConfigError],
) -> tuple[dict[str, str], tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]]:
    """aggregate_functions and sequence_groups, each against the engine and the key."""
    aggs_raw = config.get("aggregate_functions") or {}
    if not isinstance(aggs_raw, Mapping):
        raise fail(f"aggregate_functions must be a dict {{column: function}}, got {aggs_raw!r}")
    aggs = {str(k): str(v).lower() for k, v in aggs_raw.items()}
    groups = _sequence_groups(config.get("sequence_groups"), fail)
    if groups and engine != "partial-update":
        raise fail(f"sequence_groups needs merge_engine 'partial-update', not '{engine}'")
    if aggs and engine != "aggregation" and not groups:
        raise fail("aggregate_functions is set but merge_engine is not 'aggregation'")
    for col, fn in aggs.items():
        if fn not in AGGREGATE_FUNCTIONS:
            raise fail(
                f"aggregate function '{fn}' for column '{col}' is not one of "
                f"{list(AGGREGATE_FUNCTIONS)}"
            )
        if col == sequence_field:
            raise fail(
                f"column '{col}' is the sequence_field and cannot have an aggregate "
                f"function ('{fn}')"
            )
        if col in primary_key:
            raise fail(f"column '{col}' is a primary key column and cannot be aggregated")
        if col == rowkind_field:
            raise fail(
                f"column '{col}' is the rowkind_field and cannot have an aggregate "
                f"function ('{fn}'): a merged row is always an insert"
            )
    return aggs, groups


def read_ignore_retract(
    config: Mapping[str, Any], fail: Callable[[str], ChainConfigError]
) -> tuple[str, ...]:
    ignore_retract_raw = config.get("ignore_retract") or ()
    if isinstance(ignore_retract_raw, Mapping):
        return tuple(
            k
            for k, v in ignore_retract_raw.items()
            if parse_bool(v, False, f"ignore_retract of column '{k}'", fail)
        )
    else:
        return as_list(ignore_retract_raw)


def read_deletes(
    config: Mapping[str, Any], fail: Callable[[str], ChainConfigError]
) -> tuple[bool, bool]:
    """partial_update_remove_record_on_delete and partial_update_ignore_delete."""
    remove_on_delete = parse_bool(
        config.get("partial_update_remove_record_on_delete"),
        False,
        "partial_update_remove_record_on_delete",
        fail,
    )
    ignore_delete = parse_bool(
        config.get("partial_update_ignore_delete"), False, "partial_update_ignore_delete", fail
    )
    if remove_on_delete and ignore_delete:
        raise fail(
            "partial_update_remove_record_on_delete and partial_update_ignore_delete "
            "contradict each other (a delete cannot both remove the key and be ignored)"
        )
    return remove_on_delete, ignore_delete


def read_max_num(config: Mapping[str, Any], fail: Callable[[str], ChainConfigError]) -> int | None:
    raw_max_num = config.get("partition_expiration_max_num")
    max_num = None
    if raw_max_num is not None and raw_max_num != "":
        if isinstance(raw_max_num, bool) or not is_int(raw_max_num):
            raise fail(f"partition_expiration_max_num must be an integer, got {raw_max_num!r}")
        max_num = int(float(raw_max_num))
    if max_num is not None and max_num < 1:
        raise fail(f"partition_expiration_max_num must be >= 1, got {max_num}")
    return max_num


def _sequence_groups(raw: Any, fail: Any) -> tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]:
    """`{seq: [cols]}` (a key 'g_1,g_3' names several sequence columns, compared in order),
    sorted so that the stored options compare equal whatever the config's order."""
    if not raw:
        return ()
    if not isinstance(raw, Mapping):
        raise fail(f"sequence_groups must be a dict {{sequence column: [columns]}}, got {raw!r}")
    groups = []
    for seq_raw, members_raw in raw.items():
        try:
            seq, members = as_list(seq_raw), as_list(members_raw)
        except TypeError:
            raise fail(
                f"sequence_groups['{seq_raw}'] must be a list of column names, got {members_raw!r}"
            ) from None
        if not seq or not members:
            raise fail(f"sequence_groups['{seq_raw}'] needs a sequence column and its columns")
        groups.append((seq, members))
    return tuple(sorted(groups))


def check_groups(
    groups: Sequence[tuple[tuple[str, ...], tuple[str, ...]]],
    aggs: Mapping[str, str],
    primary_key: Sequence[str],
    partition_by: Sequence[str],
    sequence_field: str | None,
    rowkind_field: str | None,
    fail: Any,
) -> None:
    """A column in one group at most; no key, partition, sequence or rowkind column in a group;
    aggregate functions only on a group's members (Paimon: "must use sequence group for
    aggregation functions"; last_non_null_value is what a column outside a group does anyway)."""
    seen: dict[str, str] = {}
    for seq, members in groups:
        name = ",".join(seq)
        for col in (*seq, *members):
            where = (
                "a partition column"
                if col in partition_by
                else "a primary key column"
                if col in primary_key
                else "the sequence_field"
                if col == sequence_field
                else "the rowkind_field"
                if col == rowkind_field
                else None
            )
            if where:
                raise fail(f"sequence group '{name}' contains column '{col}', {where}")
            if col.lower() in seen:
                raise fail(
                    f"column '{col}' is in two sequence groups: '{seen[col.lower()]}' and '{name}'"
                )
            seen[col.lower()] = name
    sequences = {c.lower() for seq, _ in groups for c in seq}
    for col, fn in aggs.items():
        if col.lower() in sequences:
            raise fail(
                f"column '{col}' is a sequence group's sequence and cannot have an aggregate "
                f"function ('{fn}')"
            )
        if col.lower() not in seen and fn != DEFAULT_AGGREGATE_FUNCTION:
            raise fail(
                f"aggregate function '{fn}' for column '{col}' needs the column in a sequence "
                "group (merge_engine 'partial-update')"
            )
