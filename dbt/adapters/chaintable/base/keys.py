"""The names a chain table keeps in its branches' TBLPROPERTIES (Paimon's option keys, plus the
adapter's own under `chaintable.`), the values those options may take, and which model config sets
each: one place for every key the options, the lock and the features read back."""

from __future__ import annotations

import json
from collections.abc import Mapping

MERGE_ENGINES = ("deduplicate", "partial-update", "aggregation", "first-row")


# what a model returns (model config chain_input): the day's changes, or the day's full state of
# each group it returns rows for, which the run compares with the chain's state (run/full.py)
CHAIN_INPUTS = ("changes", "full")
# a full chain's rowkind field: the adapter's own column, '+I' or '-D', never read out
FULL_KIND = "ct__kind"


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


# on t__snapshot: {partition path: a token}, a new token (unique for good) for each partition
# every publish of the snapshot branch writes, given before the partition switches
# (publish/publisher.py): what was recorded about a partition's rows under an older token (or
# none) no longer counts
P_SNAPSHOT_GENERATIONS = "chaintable.snapshot-generations"
# on t__snapshot: {anchor partition path: [its token when scanned, "<sequence field>:<kind>",
# the highest sequence in it]}, the anchors' bounds that let a cumulative build leave the
# anchor out (cumulative.anchor_can_win); an entry counts while its partition keeps the token
# and the sequence field keeps its name and kind. (The key before it,
# chaintable.anchor-sequence-max, held each partition's location instead, and a build asked
# every anchor's location to check it: one DESCRIBE per group a run.)
P_ANCHOR_SEQUENCE = "chaintable.anchor-sequence"
# on t__snapshot: {snapshot partition path: [its token, its anchor's path, the anchor's token, a
# digest of the delta partitions read]} for each partition compaction wrote, recorded after the
# publish: the reads it still equals (chain/lineage.py)
P_COMPACTED = "chaintable.compacted"


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


# whether each day's changes from the group's day before are stored by the run that writes the
# day (model config chain_store_changes), so chain_changes of consecutive days reads them
P_STORE_CHANGES = "chaintable.store-changes"


# chain_input 'full' (stored only then: a chain of changes keeps its record)
P_CHAIN_INPUT = "chaintable.chain-input"


# on t__snapshot: t__changes exists with these columns (a digest of the chain's columns and
# types, history/stored.py); unset before the table is dropped
P_CHANGES_COLUMNS = "chaintable.changes-columns"


# on t__snapshot: t__changes partitions no read may use (their states were written again in
# place), until a run drops them (history/stored.py)
P_CHANGES_VOID = "chaintable.changes-void"


COMPACTION_MODES = ("inline", "deferred")


COMPACTION_KEYS = ("max_chain_length", "max_cumulative_ratio", "mode")


# the compaction policy (model config chain_compaction) in TBLPROPERTIES, ours: a deferred
# compaction is planned from the catalog alone
P_COMPACTION_LENGTH = "chaintable.compaction.max-chain-length"


P_COMPACTION_RATIO = "chaintable.compaction.max-cumulative-ratio"


P_COMPACTION_MODE = "chaintable.compaction.mode"


COMPACTION_PROPERTIES = (P_COMPACTION_LENGTH, P_COMPACTION_RATIO, P_COMPACTION_MODE)


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
    P_STORE_CHANGES,
    P_CHAIN_INPUT,
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
    P_STORE_CHANGES: "chain_store_changes",
    P_CHAIN_INPUT: "chain_input",
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
