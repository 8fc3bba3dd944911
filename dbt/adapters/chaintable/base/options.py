"""Chain table options: parsed from a model's config, validated, and stored in TBLPROPERTIES.

The TBLPROPERTIES use Paimon's option keys so that every operation (compaction, expiration,
status) works from the catalog alone, without the dbt project that created the table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dbt.adapters.chaintable.base import timestamps
from dbt.adapters.chaintable.base.compaction_policy import CompactionPolicy
from dbt.adapters.chaintable.base.keys import (
    AGGREGATE_FUNCTIONS,
    DEFAULT_AGGREGATE_FUNCTION,
    MERGE_ENGINES,
    P_AGG_SUFFIX,
    P_CHAIN_KEYS,
    P_CHECK_INTERVAL,
    P_CUMULATIVE,
    P_ENABLED,
    P_ENGINE,
    P_EXPIRATION,
    P_FIELD_PREFIX,
    P_GROUP_SUFFIX,
    P_MAX_NUM,
    P_PARTITION,
    P_PRIMARY_KEY,
    P_PU_IGNORE_DELETE,
    P_PU_REMOVE_ON_DELETE,
    P_RETRACT_SUFFIX,
    P_ROWKIND,
    P_SEQUENCE,
    P_TS_FORMATTER,
    P_TS_PATTERN,
    SEQUENCE_GROUP_TYPES,
)
from dbt.adapters.chaintable.base.values import (
    ChainConfigError,
    as_bool,
    as_list,
    is_int,
    parse_bool,
)


@dataclass(frozen=True)
class ChainOptions:
    partition_by: tuple[str, ...]
    chain_keys: tuple[str, ...]
    primary_key: tuple[str, ...]
    sequence_field: str | None = None
    rowkind_field: str | None = None
    merge_engine: str = "deduplicate"
    timestamp_pattern: str | None = None
    timestamp_formatter: str | None = None
    expiration_time: str | None = None
    check_interval: str | None = None
    max_num: int | None = None
    aggregate_functions: dict[str, str] = field(default_factory=dict)
    ignore_retract: tuple[str, ...] = ()
    remove_record_on_delete: bool = False
    ignore_delete: bool = False
    cumulative_delta: bool = True
    # partial-update: ((sequence columns, member columns), ...): the members (and the sequence
    # columns) take the values of the row with the highest group sequence
    sequence_groups: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()
    compaction: CompactionPolicy | None = None  # chain_compaction; None: compact when asked

    # ---- derived -------------------------------------------------------------------------
    @property
    def group_keys(self) -> tuple[str, ...]:
        return self.partition_by[: len(self.partition_by) - len(self.chain_keys)]

    @property
    def merge_keys(self) -> tuple[str, ...]:
        """Columns identifying one record across the chain: the primary key without chain keys."""
        return tuple(c for c in self.primary_key if c not in self.chain_keys)

    @property
    def expiration_enabled(self) -> bool:
        return bool(self.expiration_time)

    def aggregate_function(self, column: str) -> str:
        return self.aggregate_functions.get(column, DEFAULT_AGGREGATE_FUNCTION)

    @property
    def grouped_columns(self) -> tuple[str, ...]:
        """Every column of a sequence group: its sequence columns and its members."""
        return tuple(c for seq, members in self.sequence_groups for c in (*seq, *members))

    # ---- construction --------------------------------------------------------------------
    @classmethod
    def from_config(cls, model: str, config: Mapping[str, Any]) -> ChainOptions:
        """Validate a model's config (docs/design.md#validation); every error names the model
        and the option."""

        def fail(msg: str) -> ChainConfigError:
            return ChainConfigError(f"chain_incremental model '{model}': {msg}")

        partition_by, chain_keys, primary_key = _keys(config, fail)
        engine, sequence_field, rowkind_field = _engine(config, primary_key, fail)
        aggs, groups = _aggregates(config, engine, primary_key, sequence_field, rowkind_field, fail)
        ignore_retract = _ignore_retract(config, fail)
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
        if groups:
            _check_groups(
                groups, aggs, primary_key, partition_by, sequence_field, rowkind_field, fail
            )
            if remove_on_delete:
                raise fail(
                    "partial_update_remove_record_on_delete cannot be used with sequence_groups: "
                    "a -U/-D retracts the columns of its sequence groups instead (as in Paimon)"
                )

        max_num = _max_num(config, fail)

        opts = cls(
            partition_by=partition_by,
            chain_keys=chain_keys,
            primary_key=primary_key,
            sequence_field=sequence_field,
            rowkind_field=rowkind_field,
            merge_engine=engine,
            timestamp_pattern=config.get("partition_timestamp_pattern") or None,
            timestamp_formatter=config.get("partition_timestamp_formatter") or None,
            expiration_time=config.get("partition_expiration_time") or None,
            check_interval=config.get("partition_expiration_check_interval") or None,
            max_num=max_num,
            aggregate_functions=aggs,
            ignore_retract=ignore_retract,
            remove_record_on_delete=remove_on_delete,
            ignore_delete=ignore_delete,
            cumulative_delta=parse_bool(
                config.get("cumulative_delta"), True, "cumulative_delta", fail
            ),
            sequence_groups=groups,
            compaction=CompactionPolicy.from_config(config.get("chain_compaction"), fail),
        )
        try:
            opts.validate_timestamps()
        except timestamps.ExpirationConfigError as e:
            raise fail(str(e)) from None
        return opts

    def validate_timestamps(self) -> None:
        """Expiration needs a pattern and a formatter that give a complete date."""
        if self.expiration_time:
            timestamps.parse_duration(self.expiration_time)
            if self.check_interval:
                timestamps.parse_duration(self.check_interval)
            if not self.timestamp_pattern or not self.timestamp_formatter:
                raise timestamps.ExpirationConfigError(
                    "partition_expiration_time is set, so partition_timestamp_pattern and "
                    "partition_timestamp_formatter are required (e.g. '$dt' and 'yyyyMMdd')"
                )
        if self.timestamp_pattern or self.timestamp_formatter:
            if not (self.timestamp_pattern and self.timestamp_formatter):
                raise timestamps.ExpirationConfigError(
                    "partition_timestamp_pattern and partition_timestamp_formatter go together"
                )
            timestamps.validate_timestamp_config(
                self.timestamp_pattern, self.timestamp_formatter, self.partition_by
            )

    def validate_columns(
        self, model: str, columns: Sequence[str], types: Mapping[str, str] | None = None
    ) -> None:
        """Checks that need the model's output columns (and their Spark types)."""
        present = {c.lower() for c in columns}
        wanted = [("primary_key", c) for c in self.primary_key]
        wanted += [("partition_by", c) for c in self.partition_by]
        wanted += [("sequence_field", self.sequence_field)] if self.sequence_field else []
        wanted += [("rowkind_field", self.rowkind_field)] if self.rowkind_field else []
        wanted += [("aggregate_functions", c) for c in self.aggregate_functions]
        wanted += [("ignore_retract", c) for c in self.ignore_retract]
        wanted += [("sequence_groups", c) for c in self.grouped_columns]
        for option, col in wanted:
            if col.lower() not in present:
                raise ChainConfigError(
                    f"chain_incremental model '{model}': {option} column '{col}' is not in the "
                    f"model's columns {list(columns)}"
                )
        lowered = {k.lower(): v for k, v in (types or {}).items()}
        for seq, _ in self.sequence_groups:
            for col in seq:
                spark_type = lowered.get(col.lower())
                base = (spark_type or "").lower().split("(")[0].strip()
                if spark_type is not None and base not in SEQUENCE_GROUP_TYPES:
                    raise ChainConfigError(
                        f"chain_incremental model '{model}': sequence_groups sequence column "
                        f"'{col}' has type {spark_type}; a group's sequence must be a number, a "
                        "date or a timestamp"
                    )

    # ---- TBLPROPERTIES round trip --------------------------------------------------------
    def to_properties(self) -> dict[str, str]:
        props = {
            P_ENABLED: "true",
            P_PARTITION: ",".join(self.partition_by),
            P_CHAIN_KEYS: ",".join(self.chain_keys),
            P_PRIMARY_KEY: ",".join(self.primary_key),
            P_ENGINE: self.merge_engine,
        }
        optional = {
            P_SEQUENCE: self.sequence_field,
            P_ROWKIND: self.rowkind_field,
            P_TS_PATTERN: self.timestamp_pattern,
            P_TS_FORMATTER: self.timestamp_formatter,
            P_EXPIRATION: self.expiration_time,
            P_CHECK_INTERVAL: self.check_interval,
            P_MAX_NUM: None if self.max_num is None else str(self.max_num),
        }
        props.update({k: v for k, v in optional.items() if v})
        if self.merge_engine == "partial-update":
            props[P_PU_REMOVE_ON_DELETE] = str(self.remove_record_on_delete).lower()
            props[P_PU_IGNORE_DELETE] = str(self.ignore_delete).lower()
        props[P_CUMULATIVE] = str(self.cumulative_delta).lower()
        for col, fn in self.aggregate_functions.items():
            props[f"{P_FIELD_PREFIX}{col}{P_AGG_SUFFIX}"] = fn
        for col in self.ignore_retract:
            props[f"{P_FIELD_PREFIX}{col}{P_RETRACT_SUFFIX}"] = "true"
        for seq, members in self.sequence_groups:
            props[f"{P_FIELD_PREFIX}{','.join(seq)}{P_GROUP_SUFFIX}"] = ",".join(members)
        if self.compaction is not None:
            props.update(self.compaction.to_properties())
        return props

    @classmethod
    def from_properties(cls, table: str, props: Mapping[str, str]) -> ChainOptions:
        if props.get(P_ENABLED) != "true":
            raise ChainConfigError(f"'{table}' is not a chain table (no '{P_ENABLED}' property)")
        aggs, retract, groups = {}, [], []
        for key, value in props.items():
            if key.startswith(P_FIELD_PREFIX) and key.endswith(P_GROUP_SUFFIX):
                seq = as_list(key[len(P_FIELD_PREFIX) : -len(P_GROUP_SUFFIX)])
                groups.append((seq, as_list(value)))
            elif key.startswith(P_FIELD_PREFIX) and key.endswith(P_AGG_SUFFIX):
                aggs[key[len(P_FIELD_PREFIX) : -len(P_AGG_SUFFIX)]] = value
            elif (
                key.startswith(P_FIELD_PREFIX) and key.endswith(P_RETRACT_SUFFIX) and as_bool(value)
            ):
                retract.append(key[len(P_FIELD_PREFIX) : -len(P_RETRACT_SUFFIX)])
        return cls(
            partition_by=as_list(props.get(P_PARTITION)),
            chain_keys=as_list(props.get(P_CHAIN_KEYS)),
            primary_key=as_list(props.get(P_PRIMARY_KEY)),
            sequence_field=props.get(P_SEQUENCE) or None,
            rowkind_field=props.get(P_ROWKIND) or None,
            merge_engine=props.get(P_ENGINE, "deduplicate"),
            timestamp_pattern=props.get(P_TS_PATTERN) or None,
            timestamp_formatter=props.get(P_TS_FORMATTER) or None,
            expiration_time=props.get(P_EXPIRATION) or None,
            check_interval=props.get(P_CHECK_INTERVAL) or None,
            max_num=int(props[P_MAX_NUM]) if props.get(P_MAX_NUM) else None,
            aggregate_functions=aggs,
            ignore_retract=tuple(sorted(retract)),
            remove_record_on_delete=as_bool(props.get(P_PU_REMOVE_ON_DELETE, "false")),
            ignore_delete=as_bool(props.get(P_PU_IGNORE_DELETE, "false")),
            cumulative_delta=as_bool(props.get(P_CUMULATIVE, "true")),
            sequence_groups=tuple(sorted(groups)),
            compaction=CompactionPolicy.from_properties(props),
        )

    def structural_differences(self, other: ChainOptions) -> dict[str, tuple[Any, Any]]:
        """Options whose change would reinterpret stored data (a full refresh is needed)."""
        keys = ("partition_by", "chain_keys", "primary_key")
        return {
            k: (getattr(other, k), getattr(self, k))
            for k in keys
            if getattr(self, k) != getattr(other, k)
        }


# ---- reading a model's config, option by option (ChainOptions.from_config) -----------------
def _keys(
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


def _engine(
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


def _aggregates(
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


def _ignore_retract(
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


def _max_num(config: Mapping[str, Any], fail: Callable[[str], ChainConfigError]) -> int | None:
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


def _check_groups(
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
