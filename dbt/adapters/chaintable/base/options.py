"""Chain table options: parsed from a model's config, validated, and stored in TBLPROPERTIES.

The TBLPROPERTIES use Paimon's option keys so that every operation (compaction, expiration,
status) works from the catalog alone, without the dbt project that created the table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dbt.adapters.chaintable.base import timestamps
from dbt.adapters.chaintable.base.compaction_policy import CompactionPolicy
from dbt.adapters.chaintable.base.keys import (
    DEFAULT_AGGREGATE_FUNCTION,
    FULL_KIND,
    P_AGG_SUFFIX,
    P_CHAIN_INPUT,
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
    P_STORE_CHANGES,
    P_TS_FORMATTER,
    P_TS_PATTERN,
    SEQUENCE_GROUP_TYPES,
)
from dbt.adapters.chaintable.base.option_rules import (
    check_groups,
    read_aggregates,
    read_deletes,
    read_engine,
    read_ignore_retract,
    read_input,
    read_keys,
    read_max_num,
)
from dbt.adapters.chaintable.base.values import (
    ChainConfigError,
    as_bool,
    as_list,
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
    store_changes: bool = False  # chain_store_changes (history/stored.py)
    # partial-update: ((sequence columns, member columns), ...): the members (and the sequence
    # columns) take the values of the row with the highest group sequence
    sequence_groups: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()
    compaction: CompactionPolicy | None = None  # chain_compaction; None: compact when asked
    chain_input: str = "changes"  # or 'full': the model returns each group's full state

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

        partition_by, chain_keys, primary_key = read_keys(config, fail)
        engine, sequence_field, rowkind_field = read_engine(config, primary_key, fail)
        chain_input = read_input(config, engine, sequence_field, rowkind_field, fail)
        aggs, groups = read_aggregates(
            config, engine, primary_key, sequence_field, rowkind_field, fail
        )
        remove_on_delete, ignore_delete = read_deletes(config, fail)
        if groups:
            check_groups(
                groups, aggs, primary_key, partition_by, sequence_field, rowkind_field, fail
            )
            if remove_on_delete:
                raise fail(
                    "partial_update_remove_record_on_delete cannot be used with sequence_groups: "
                    "a -U/-D retracts the columns of its sequence groups instead (as in Paimon)"
                )

        max_num = read_max_num(config, fail)
        opts = cls(
            partition_by=partition_by,
            chain_keys=chain_keys,
            primary_key=primary_key,
            sequence_field=sequence_field,
            rowkind_field=FULL_KIND if chain_input == "full" else rowkind_field,
            merge_engine=engine,
            timestamp_pattern=config.get("partition_timestamp_pattern") or None,
            timestamp_formatter=config.get("partition_timestamp_formatter") or None,
            expiration_time=config.get("partition_expiration_time") or None,
            check_interval=config.get("partition_expiration_check_interval") or None,
            max_num=max_num,
            aggregate_functions=aggs,
            ignore_retract=read_ignore_retract(config, fail),
            remove_record_on_delete=remove_on_delete,
            ignore_delete=ignore_delete,
            cumulative_delta=parse_bool(
                config.get("cumulative_delta"), True, "cumulative_delta", fail
            ),
            store_changes=parse_bool(
                config.get("chain_store_changes"), False, "chain_store_changes", fail
            ),
            sequence_groups=groups,
            compaction=CompactionPolicy.from_config(config.get("chain_compaction"), fail),
            chain_input=chain_input,
        )
        opts.check_together(fail)
        return opts

    def check_together(self, fail: Any) -> None:
        """Options that need one another (from_config)."""
        if self.store_changes and not self.cumulative_delta:
            raise fail(
                "chain_store_changes needs cumulative_delta: a day's stored changes are read "
                "while its cumulative delta partition serves the day"
            )
        try:
            self.validate_timestamps()
        except timestamps.ExpirationConfigError as e:
            raise fail(str(e)) from None

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
        if self.chain_input == "full":  # the kind column is the adapter's (run/full.py)
            if FULL_KIND in present:
                raise ChainConfigError(
                    f"chain_incremental model '{model}': column '{FULL_KIND}' is the row kind "
                    "chain_input 'full' keeps; rename the model's column"
                )
        elif self.rowkind_field:
            wanted += [("rowkind_field", self.rowkind_field)]
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
        if self.store_changes:  # only when on: a chain that never stores them keeps its record
            props[P_STORE_CHANGES] = "true"
        if self.chain_input != "changes":
            props[P_CHAIN_INPUT] = self.chain_input
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
            store_changes=as_bool(props.get(P_STORE_CHANGES, "false")),
            sequence_groups=tuple(sorted(groups)),
            compaction=CompactionPolicy.from_properties(props),
            chain_input=props.get(P_CHAIN_INPUT, "changes"),
        )

    def structural_differences(self, other: ChainOptions) -> dict[str, tuple[Any, Any]]:
        """Options whose change would reinterpret stored data (a full refresh is needed)."""
        # chain_input: a chain of changes has no row kind of the adapter's in its partitions
        keys = ("partition_by", "chain_keys", "primary_key", "chain_input")
        return {
            k: (getattr(other, k), getattr(self, k))
            for k in keys
            if getattr(self, k) != getattr(other, k)
        }
