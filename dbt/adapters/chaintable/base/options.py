"""Chain table options: parsed from a model's config, validated, and stored in TBLPROPERTIES.

The TBLPROPERTIES use Paimon's option keys so that every operation (compaction, expiration,
status) works from the catalog alone, without the dbt project that created the table.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.chaintable.base import timestamps

MERGE_ENGINES = ("deduplicate", "partial-update", "aggregation", "first-row")
AGGREGATE_FUNCTIONS = (
    "sum",
    "product",
    "count",
    "max",
    "min",
    "first_value",
    "last_value",
    "first_non_null_value",
    "last_non_null_value",
    "listagg",
    "bool_and",
    "bool_or",
)
# Retraction (-U/-D) has a meaning only for these aggregates (Paimon's FieldAggregator.retract).
RETRACTABLE_FUNCTIONS = ("sum", "product", "count")
DEFAULT_AGGREGATE_FUNCTION = "last_non_null_value"
BRANCHES = ("delta", "snapshot")
# Spark's integral types: chain values of these compare as numbers, products of them round
INTEGRAL_TYPES = ("tinyint", "smallint", "int", "integer", "bigint", "byte", "short", "long")
# the types Paimon compares as a sequence group's sequence (numbers, dates and times)
SEQUENCE_GROUP_TYPES = (
    *INTEGRAL_TYPES,
    "float",
    "double",
    "decimal",
    "date",
    "time",
    "timestamp",
    "timestamp_ntz",
)

# Paimon option keys (plus a few of ours under `chaintable.`).
P_ENABLED = "chain-table.enabled"
P_CHAIN_KEYS = "chain-table.chain-partition-keys"
P_BRANCH = "chain-table.branch"
P_PRIMARY_KEY = "primary-key"
P_PARTITION = "partition"
P_SEQUENCE = "sequence.field"
P_ROWKIND = "rowkind.field"
P_ENGINE = "merge-engine"
P_TS_PATTERN = "partition.timestamp-pattern"
P_TS_FORMATTER = "partition.timestamp-formatter"
P_EXPIRATION = "partition.expiration-time"
P_CHECK_INTERVAL = "partition.expiration-check-interval"
P_MAX_NUM = "partition.expiration-max-num"
P_PU_REMOVE_ON_DELETE = "partial-update.remove-record-on-delete"
P_PU_IGNORE_DELETE = "partial-update.ignore-delete"
P_FIELD_PREFIX = "fields."
P_AGG_SUFFIX = ".aggregate-function"
P_RETRACT_SUFFIX = ".ignore-retract"
P_GROUP_SUFFIX = ".sequence-group"  # fields.<seq>[,<seq>...].sequence-group = <cols>
P_LAST_EXPIRE_CHECK = "chaintable.last-expire-check"
P_STALE = "chaintable.stale-snapshots"
# {group path: chain path of the oldest snapshot kept}: expiration dropped the history before it,
# so that snapshot is the group's only record of it (ours: a guard against rebuilding it)
P_HISTORY_START = "chaintable.history-start"
# at most how many delta-only chain values (the newest ones after the newest snapshot) the view
# reads through a branch of their own (older ones go through the mapping table): set it with
# the model's `tblproperties`
P_VIEW_RECENT = "chaintable.view-recent-branches"
DEFAULT_VIEW_RECENT = 7
# "<version> <digest>": the mapping table's version the view reads and a digest of its rows, so
# a refresh whose mapped reads did not change (a daily run) reuses it instead of writing it again
P_VIEW_MAP = "chaintable.view-map"
# whether delta-only days are served from the cumulative delta (model config cumulative_delta)
P_CUMULATIVE = "chaintable.cumulative-delta"


class ChainConfigError(DbtRuntimeError):
    """A chain table configuration that cannot work; raised before anything is written."""


COMPACTION_MODES = ("inline", "deferred")
COMPACTION_KEYS = ("max_chain_length", "max_cumulative_ratio", "mode")
# the compaction policy (model config chain_compaction) in TBLPROPERTIES, ours: a deferred
# compaction is planned from the catalog alone
P_COMPACTION_LENGTH = "chaintable.compaction.max-chain-length"
P_COMPACTION_RATIO = "chaintable.compaction.max-cumulative-ratio"
P_COMPACTION_MODE = "chaintable.compaction.mode"
COMPACTION_PROPERTIES = (P_COMPACTION_LENGTH, P_COMPACTION_RATIO, P_COMPACTION_MODE)


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
            isinstance(length, bool) or not _is_int(length) or float(length) < 1
        ):
            raise fail(f"chain_compaction max_chain_length must be an integer >= 1, got {length!r}")
        ratio = raw.get("max_cumulative_ratio")
        if ratio is not None and (
            isinstance(ratio, bool) or not _is_number(ratio) or float(ratio) <= 0
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


def _is_int(value: Any) -> bool:
    try:
        return float(value) == int(float(value))
    except (TypeError, ValueError, OverflowError):  # not a number, NaN, infinity
        return False


def _is_number(value: Any) -> bool:
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


def _as_list(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, Mapping):  # dbt-spark style {'field': ...} is not a column list
        raise TypeError("expected a list of column names")
    return tuple(str(v).strip() for v in value)


def _as_bool(value: Any) -> bool:
    """A flag the adapter stored in TBLPROPERTIES: true only when spelt as one (as_flag)."""
    return as_flag(value) is True


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

        try:
            partition_by = _as_list(config.get("partition_by"))
        except TypeError:
            raise fail(
                f"partition_by must be a list of column names, got {config.get('partition_by')!r}"
            ) from None
        if not partition_by:
            raise fail(
                "partition_by is required: a chain table is partitioned "
                "(group keys then chain keys), e.g. partition_by=['dt']"
            )
        chain_keys = _as_list(config.get("chain_partition_keys")) or partition_by
        if chain_keys != partition_by[len(partition_by) - len(chain_keys) :]:
            raise fail(
                f"chain_partition_keys {list(chain_keys)} must be a contiguous suffix of "
                f"partition_by {list(partition_by)}"
            )
        primary_key = _as_list(config.get("primary_key"))
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
        ignore_retract_raw = config.get("ignore_retract") or ()
        if isinstance(ignore_retract_raw, Mapping):
            ignore_retract = tuple(
                k
                for k, v in ignore_retract_raw.items()
                if parse_bool(v, False, f"ignore_retract of column '{k}'", fail)
            )
        else:
            ignore_retract = _as_list(ignore_retract_raw)

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

        raw_max_num = config.get("partition_expiration_max_num")
        max_num = None
        if raw_max_num is not None and raw_max_num != "":
            if isinstance(raw_max_num, bool) or not _is_int(raw_max_num):
                raise fail(f"partition_expiration_max_num must be an integer, got {raw_max_num!r}")
            max_num = int(float(raw_max_num))
        if max_num is not None and max_num < 1:
            raise fail(f"partition_expiration_max_num must be >= 1, got {max_num}")

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
                seq = _as_list(key[len(P_FIELD_PREFIX) : -len(P_GROUP_SUFFIX)])
                groups.append((seq, _as_list(value)))
            elif key.startswith(P_FIELD_PREFIX) and key.endswith(P_AGG_SUFFIX):
                aggs[key[len(P_FIELD_PREFIX) : -len(P_AGG_SUFFIX)]] = value
            elif (
                key.startswith(P_FIELD_PREFIX)
                and key.endswith(P_RETRACT_SUFFIX)
                and _as_bool(value)
            ):
                retract.append(key[len(P_FIELD_PREFIX) : -len(P_RETRACT_SUFFIX)])
        return cls(
            partition_by=_as_list(props.get(P_PARTITION)),
            chain_keys=_as_list(props.get(P_CHAIN_KEYS)),
            primary_key=_as_list(props.get(P_PRIMARY_KEY)),
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
            remove_record_on_delete=_as_bool(props.get(P_PU_REMOVE_ON_DELETE, "false")),
            ignore_delete=_as_bool(props.get(P_PU_IGNORE_DELETE, "false")),
            cumulative_delta=_as_bool(props.get(P_CUMULATIVE, "true")),
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
            seq, members = _as_list(seq_raw), _as_list(members_raw)
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


# options a model's config may leave out: stored, then no longer configured, they are unset
OPTIONAL_PROPERTIES = (
    P_SEQUENCE,
    P_ROWKIND,
    P_TS_PATTERN,
    P_TS_FORMATTER,
    P_EXPIRATION,
    P_CHECK_INTERVAL,
    P_MAX_NUM,
    P_PU_REMOVE_ON_DELETE,
    P_PU_IGNORE_DELETE,
    *COMPACTION_PROPERTIES,
)


# the model config that sets each option the adapter keeps in the branches' TBLPROPERTIES
CONFIG_OF_PROPERTY = {
    P_ENABLED: "materialized='chain_incremental'",
    P_BRANCH: "chain_branch",
    P_CHAIN_KEYS: "chain_partition_keys",
    P_PRIMARY_KEY: "primary_key",
    P_PARTITION: "partition_by",
    P_SEQUENCE: "sequence_field",
    P_ROWKIND: "rowkind_field",
    P_ENGINE: "merge_engine",
    P_TS_PATTERN: "partition_timestamp_pattern",
    P_TS_FORMATTER: "partition_timestamp_formatter",
    P_EXPIRATION: "partition_expiration_time",
    P_CHECK_INTERVAL: "partition_expiration_check_interval",
    P_MAX_NUM: "partition_expiration_max_num",
    P_PU_REMOVE_ON_DELETE: "partial_update_remove_record_on_delete",
    P_PU_IGNORE_DELETE: "partial_update_ignore_delete",
    P_CUMULATIVE: "cumulative_delta",
}
FIELD_CONFIG = {
    P_AGG_SUFFIX: "aggregate_functions",
    P_RETRACT_SUFFIX: "ignore_retract",
    P_GROUP_SUFFIX: "sequence_groups",
}
# what a model's tblproperties may set among the adapter's own keys
USER_PROPERTIES = (P_VIEW_RECENT,)


def reserved_property(key: str) -> str | None:
    """Why a model's `tblproperties` may not set `key`, or None. The chain options live in the
    branches' TBLPROPERTIES under Paimon's keys and are written from the model config on every
    run (one set there would be dropped by the next run, after the checks of the config were
    passed by); the `chaintable.` keys are the chain's own state."""
    config = CONFIG_OF_PROPERTY.get(key)
    if config is None and key.startswith(P_FIELD_PREFIX):
        config = next((c for sfx, c in FIELD_CONFIG.items() if key.endswith(sfx)), None)
    if config is None and key.startswith("chaintable.compaction."):
        config = "chain_compaction"
    if config is not None:
        return f"it is a chain option; set it with the model config {config}"
    if key.startswith("chaintable.") and key not in USER_PROPERTIES:
        return "the adapter keeps the chain's own state under it"
    return None


def dropped_options(stored: Mapping[str, str], props: Mapping[str, str]) -> list[str]:
    """Options stored but no longer configured: a per-column option (`fields.<...>.<option>`:
    a group, function or ignore-retract taken out of the config), an optional one such as the
    compaction policy or expiration. Setting the new properties leaves them, and a later read
    of the options from the catalog would bring them back."""
    suffixes = (P_AGG_SUFFIX, P_RETRACT_SUFFIX, P_GROUP_SUFFIX)
    return sorted(
        k
        for k in stored
        if k not in props
        and ((k.startswith(P_FIELD_PREFIX) and k.endswith(suffixes)) or k in OPTIONAL_PROPERTIES)
    )


def stale_from_properties(props: Mapping[str, str]) -> dict[str, str]:
    """{partition path of a stale snapshot: partition path of the rewritten delta}."""
    raw = props.get(P_STALE)
    return json.loads(raw) if raw else {}


def history_from_properties(props: Mapping[str, str]) -> dict[str, str]:
    raw = props.get(P_HISTORY_START)
    return json.loads(raw) if raw else {}


def stale_to_property(stale: Mapping[str, str]) -> str:
    return json.dumps(dict(sorted(stale.items())), separators=(",", ":"))
