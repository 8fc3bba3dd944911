"""The model config of a chain_incremental model: declared for dbt (ChainTableConfig) and
parsed once per run into an immutable value (ModelSettings) that the rest of the run reads."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dbt.adapters.spark.impl import SparkConfig

from dbt.adapters.chaintable.base import conventions
from dbt.adapters.chaintable.base.keys import BRANCHES, reserved_property
from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.partitions import Layout, parse_partition_spec
from dbt.adapters.chaintable.base.timestamps import ExpirationConfigError, parse_duration
from dbt.adapters.chaintable.base.values import ChainConfigError

DEFAULT_LEASE = dt.timedelta(minutes=5)


# below this a renewal (one metastore statement every quarter lease) under load, or a clock
# difference of a few seconds, could let a live holder's lock be broken
MIN_LEASE = dt.timedelta(seconds=10)


def lease_of(model: str, raw: object) -> dt.timedelta:
    """Model config `chain_lock_lease` ('5 min', '90 s'; None: the default), refused when too
    short to be safe."""
    if raw is None or str(raw).strip() == "":
        return DEFAULT_LEASE
    try:
        lease = parse_duration(str(raw).strip())
    except ExpirationConfigError as e:
        raise ChainConfigError(
            f"chain_incremental model '{model}': chain_lock_lease: {e}"
        ) from None
    if lease < MIN_LEASE:
        raise ChainConfigError(
            f"chain_incremental model '{model}': chain_lock_lease '{raw}' is shorter than "
            f"{int(MIN_LEASE.total_seconds())} s: a live writer's lock could be broken by "
            "another writer; give a lease of minutes (default 5 min)"
        )
    return lease


@dataclass
class ChainTableConfig(SparkConfig):
    """Every option a chain_incremental model takes beyond dbt-spark's (which declares
    file_format, location_root, partition_by, clustered_by, buckets). README's config table
    says what each one means; base/options.py and option_rules.py validate them."""

    chain_partition_keys: list[str] | str | None = None
    primary_key: list[str] | str | None = None
    sequence_field: str | None = None
    rowkind_field: str | None = None
    merge_engine: str | None = None
    aggregate_functions: dict[str, str] | None = None
    ignore_retract: list[str] | str | dict[str, Any] | None = None
    partial_update_remove_record_on_delete: bool | None = None
    partial_update_ignore_delete: bool | None = None
    sequence_groups: dict[str, list[str] | str] | None = None
    partition_timestamp_pattern: str | None = None
    partition_timestamp_formatter: str | None = None
    partition_expiration_time: str | None = None
    partition_expiration_check_interval: str | None = None
    partition_expiration_max_num: int | None = None
    chain_branch: str | None = None
    chain_partition: dict[str, Any] | str | None = None
    cumulative_delta: bool | None = None
    chain_store_changes: bool | None = None
    chain_input: str | None = None
    chain_compaction: dict[str, Any] | None = None
    chain_lock_lease: str | None = None
    chain_table: bool | None = None  # an `incremental` microbatch model that is a chain
    tblproperties: dict[str, str] | None = None


@dataclass(frozen=True)
class ModelSettings:
    """A model's config, validated: the chain options plus how this model's tables are laid out
    and what each run may write."""

    model: str
    opts: ChainOptions
    chain_branch: str | None = None
    chain_partition: Mapping[str, str] | None = None
    on_schema_change: str = "ignore"
    file_format: str = "parquet"
    location_root: str | None = None
    clustered_by: tuple[str, ...] = ()
    buckets: int | None = None
    tblproperties: Mapping[str, str] = field(default_factory=dict)
    lock_lease: dt.timedelta = DEFAULT_LEASE
    grants: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # on the view only
    persist_docs: tuple[bool, bool] = (False, False)  # (relation, columns)

    @classmethod
    def from_config(cls, model: str, config: Mapping[str, Any]) -> ModelSettings:
        config = dict(config)

        def fail(msg: str) -> ChainConfigError:
            return ChainConfigError(f"chain_incremental model '{model}': {msg}")

        opts = ChainOptions.from_config(model, config)
        forced = config.get("chain_branch")
        if forced is not None and forced not in BRANCHES:
            raise ChainConfigError(
                f"chain_incremental model '{model}': chain_branch '{forced}' "
                f"is not one of {list(BRANCHES)}"
            )
        chain_partition = config.get("chain_partition")
        clustered = config.get("clustered_by") or ()
        tblproperties = dict(config.get("tblproperties") or {})
        for key in tblproperties:
            why = reserved_property(str(key))
            if why:
                raise ChainConfigError(
                    f"chain_incremental model '{model}': tblproperties key '{key}': {why}"
                )
        return cls(
            model=model,
            opts=opts,
            chain_branch=forced,
            chain_partition=parse_partition_spec(chain_partition) if chain_partition else None,
            on_schema_change=conventions.read_on_schema_change(config, fail),
            file_format=conventions.read_file_format(config, fail),
            location_root=config.get("location_root") or None,
            clustered_by=(clustered,) if isinstance(clustered, str) else tuple(clustered),
            buckets=config.get("buckets"),
            tblproperties=tblproperties,
            lock_lease=lease_of(model, config.get("chain_lock_lease")),
            grants=conventions.read_grants(config, fail),
            persist_docs=conventions.read_persist_docs(config, fail),
        )

    @property
    def layout(self) -> Layout:
        return Layout.of(self.opts)

    def location_of(self, identifier: str) -> str | None:
        """Where a branch table lives when `location_root` is set (else the warehouse)."""
        if not self.location_root:
            return None
        return f"{self.location_root.rstrip('/')}/{identifier}"
