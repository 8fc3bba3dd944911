"""Batches of a chain model (docs/design.md#batches): the chain partition each of dbt's
microbatch batches writes, whether a batch is written or skipped, which later batches of a run
wait for a failed one, and the event-time filter a chain's refs read with. Pure: times, config
and the chain's partitions in, decisions and SQL out."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dbt.adapters.chaintable.base.options import ChainOptions
from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.base.quoting import q
from dbt.adapters.chaintable.base.timestamps import (
    ExpirationConfigError,
    java_formatter_to_strptime,
    partition_time,
    partition_values,
    pattern_parts,
    sortable,
)
from dbt.adapters.chaintable.base.values import ChainConfigError, as_flag

SIZES = {"day": dt.timedelta(days=1), "hour": dt.timedelta(hours=1)}


def utc(value: Any) -> dt.datetime:
    """A batch bound as dbt gives it (an aware datetime, or its ISO text) as naive UTC."""
    time = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
    return time.astimezone(dt.UTC).replace(tzinfo=None) if time.tzinfo else time


@dataclass(frozen=True)
class Batch:
    """One batch of a chain model: the chain partition it writes."""

    model: str
    start: dt.datetime  # naive UTC
    size: str
    partition: Mapping[str, str]  # chain key -> value

    @property
    def label(self) -> str:
        """As dbt names the batch in its log (2025-08-01, 2025-08-01T22)."""
        return self.start.strftime("%Y-%m-%d" if self.size == "day" else "%Y-%m-%dT%H")

    @property
    def where(self) -> str:
        return "/".join(f"{k}={v}" for k, v in self.partition.items())

    def describe(self) -> str:
        return f"model '{self.model}', batch {self.label} ({self.where})"


@dataclass(frozen=True)
class BatchSpec:
    """How a chain model's batches map to its chain partitions: the chain partition whose time
    (partition_timestamp_pattern through partition_timestamp_formatter) is the batch's start."""

    model: str
    size: str
    chain_keys: tuple[str, ...]
    pattern: str
    formatter: str

    @classmethod
    def of(cls, model: str, opts: ChainOptions, config: Mapping[str, Any]) -> BatchSpec:
        def fail(problem: str) -> ChainConfigError:
            return ChainConfigError(f"chain model '{model}' with batches: {problem}")

        # chain_incremental runs its batches itself (batch/loop.py); an incremental model's
        # batches are dbt's, which it runs only for microbatch
        looped = config.get("materialized") == "chain_incremental"
        if not looped and config.get("incremental_strategy") != "microbatch":
            raise fail("set incremental_strategy='microbatch' (dbt runs batches only for it)")
        size = str(config.get("batch_size") or "")
        if size not in SIZES:
            raise fail(f"batch_size '{size}' is not one of {list(SIZES)}")
        if config.get("chain_partition"):
            raise fail(
                "chain_partition and batches both say which day a run writes; drop "
                "chain_partition (each batch writes its own)"
            )
        if not (opts.timestamp_pattern and opts.timestamp_formatter):
            raise fail(
                "partition_timestamp_pattern and partition_timestamp_formatter name each "
                "batch's chain partition and are required (e.g. '$dt' and 'yyyyMMdd')"
            )
        keys = {
            k for is_key, k in pattern_parts(opts.timestamp_pattern, opts.partition_by) if is_key
        }
        if keys != set(opts.chain_keys):
            raise fail(
                f"partition_timestamp_pattern '{opts.timestamp_pattern}' must name every chain "
                f"key {list(opts.chain_keys)} and nothing else"
            )
        return cls(
            model, size, tuple(opts.chain_keys), opts.timestamp_pattern, opts.timestamp_formatter
        )

    def batch(self, start: Any) -> Batch:
        time = utc(start)
        values = partition_values(self.pattern, self.formatter, self.chain_keys, time)
        label = Batch(self.model, time, self.size, {}).label
        if values is None:
            raise ChainConfigError(
                f"chain model '{self.model}', batch {label}: no chain partition has this "
                f"{self.size}'s time under partition_timestamp_pattern '{self.pattern}' and "
                f"partition_timestamp_formatter '{self.formatter}' (batch_size '{self.size}' "
                "needs a field for each of its units)"
            )
        return Batch(self.model, time, self.size, {k: values[k] for k in self.chain_keys})


def truncate(time: dt.datetime, size: str) -> dt.datetime:
    """The start of the batch `time` lies in."""
    hour = time.hour if size == "hour" else 0
    return time.replace(hour=hour, minute=0, second=0, microsecond=0)


def loop_starts(
    size: str,
    now: Any,
    args: Mapping[str, Any],
    begin: Any,
    lookback: Any,
    new_chain: bool,
) -> list[dt.datetime]:
    """The batches a chain_incremental model with batches writes in one run, as dbt's
    microbatch runner would split it: each batch start in [--event-time-start,
    --event-time-end); without flags, the current batch and `lookback` before it, or on a new
    chain every batch from `begin` on. Naive UTC, in order."""
    step = SIZES[size]
    end = utc(args.get("event_time_end") or now)
    end = end if truncate(end, size) == end else truncate(end, size) + step
    if args.get("event_time_start"):
        start = truncate(utc(args["event_time_start"]), size)
    elif new_chain:
        if not begin:
            raise ChainConfigError("a chain model with batches needs `begin` for its first run")
        start = truncate(utc(begin), size)
    else:
        current = truncate(utc(now), size)
        # as dbt's: a run exactly on a batch's start ends with the batch before it
        back = int(lookback or 0) + (1 if current == utc(now) else 0)
        start = current - back * step
    starts = [start]
    while starts[-1] + step < end:
        starts.append(starts[-1] + step)
    return starts


def batch_sql(compiled_code: str, batch: Batch) -> str:
    """The model's rows of `batch`: dbt filters no ref of a node it does not split, so the
    model's output is kept to the batch's chain partition instead."""
    where = " and ".join(f"{q(k)} = {_literal(v)}" for k, v in batch.partition.items())
    body = compiled_code.strip().rstrip(";")
    return f"select * from (\n{body}\n) as chain_batch where {where}"


def ranged(args: Mapping[str, Any]) -> bool:
    """Whether the invocation names its batches (--event-time-start/--event-time-end; a retry
    keeps its run's flags)."""
    return bool(args.get("event_time_start") or args.get("event_time_end"))


def skip_reason(
    batch: Batch, held: bool, ranged: bool, rewrite: Any, full_refresh: bool
) -> str | None:
    """Why a batch is not written, or None to write it. A range (event-time flags, and its
    retry) writes the batches the chain lacks and leaves the ones it holds, so that running it
    again, or retrying it, continues where it stopped; `rewrite` (var chain_rewrite) writes them
    again. A run without flags writes what dbt gives it: the current batch and `lookback`
    earlier ones, rewritten as lookback means."""
    if not held or not ranged or full_refresh or as_flag(rewrite):
        return None
    return (
        f"{batch.describe()}: skipped, the chain holds {batch.where} already "
        "(--vars '{chain_rewrite: true}' writes it again)"
    )


def holds(spec: BatchSpec, parts: Sequence[Values], batch: Batch) -> bool:
    """Whether the chain holds the batch's partition (`parts`: both branches' partitions, group
    values then chain values): some group holds it, and so does every group with a partition
    at or before it. A run of a day writes every group the chain knows (an empty partition for
    one without rows, docs/design.md#branches-and-relations), so a day some of them lack was left part-way (an
    interrupted publish) and is written again; a group whose first partition is later was
    not known when the day was written, and needs none."""
    n = len(spec.chain_keys)
    wanted = tuple(batch.partition[k] for k in spec.chain_keys)
    holding, known = set(), set()
    for p in parts:
        group, chain = tuple(p[: len(p) - n]), tuple(p[len(p) - n :])
        if chain == wanted:
            holding.add(group)
        elif _before(spec, chain, batch.start):
            known.add(group)
    return bool(holding) and known <= holding


def _before(spec: BatchSpec, chain: Values, start: dt.datetime) -> bool:
    """Whether chain values name a time before `start`; a value the pattern and formatter do
    not parse (written without batches) says nothing of when its group became known."""
    try:
        time = partition_time(
            spec.pattern, spec.formatter, dict(zip(spec.chain_keys, chain, strict=True))
        )
    except ExpirationConfigError:
        return False
    return time < start


@dataclass
class Ledger:
    """The batch of each model that began and did not finish, per dbt invocation: dbt goes on
    with a range's later batches after one fails, and a chain is written in order, so they are
    refused (and so stay failed, for dbt retry). And the models whose view a skipped batch of
    the invocation refreshed (view_behind)."""

    open: dict[tuple[str, str], Batch] = field(default_factory=dict)
    # the models whose view a skipped batch of the invocation brought up to the chain's state
    viewed: set[tuple[str, str]] = field(default_factory=set)

    def begin(self, invocation: str, batch: Batch) -> None:
        failed = self.open.get((invocation, batch.model))
        if failed is not None and failed.start < batch.start:
            raise ChainConfigError(
                f"{batch.describe()}: not written, batch {failed.label} failed before it; "
                f"dbt retry (or the same command again) writes from {failed.label} on"
            )
        self.open[(invocation, batch.model)] = batch

    def finish(self, invocation: str, batch: Batch) -> None:
        if self.open.get((invocation, batch.model)) == batch:
            del self.open[(invocation, batch.model)]

    def view_behind(self, invocation: str, model: str) -> bool:
        """Whether a skipped batch must bring the view up to the chain's state: a batch that
        failed after its publish left its day published and the view not refreshed, and a
        range skips that day as held. Once per model and invocation: after it, each batch is
        skipped (the chain unchanged) or written (its run refreshes the view)."""
        return (invocation, model) not in self.viewed

    def view_refreshed(self, invocation: str, model: str) -> None:
        self.viewed.add((invocation, model))


def event_time_filter(
    keys: Sequence[str],
    pattern: str,
    formatter: str,
    start: Any | None,
    end: Any | None,
) -> str:
    """The predicate that keeps a chain's partitions whose time lies in [start, end), over its
    chain keys: a chain key is a string such as 20250801, which dbt's own filter (`dt >=
    '2025-08-01 00:00:00+00:00'`) compares as text and never matches. Bounds that name a
    partition compare as text when the formatter sorts as time does (the metastore prunes
    on it); others go through to_timestamp on both sides, in the session's time zone alike."""
    parts = pattern_parts(pattern, keys)
    expr = (
        parts[0][1]
        if len(parts) == 1
        else "concat(" + ", ".join(t if k else _literal(t) for k, t in parts) + ")"
    )
    bounds = [(op, utc(b)) for op, b in ((">=", start), ("<", end)) if b is not None]
    exact = sortable(formatter) and all(
        partition_values(pattern, formatter, keys, b) is not None for _, b in bounds
    )
    strf = java_formatter_to_strptime(formatter)
    if exact:
        return " and ".join(f"{expr} {op} {_literal(b.strftime(strf))}" for op, b in bounds)
    return " and ".join(
        f"to_timestamp({expr}, {_literal(formatter)}) {op} "
        f"timestamp{_literal(b.strftime('%Y-%m-%d %H:%M:%S'))}"
        for op, b in bounds
    )


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
