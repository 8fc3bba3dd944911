"""Partition expiration of a chain table (docs/design.md#expiration) and the timestamp options it
needs (docs/design.md#validation).

Pure Python: the adapter lists partitions, asks `plan_expiration` what to drop and renders the
plan as SQL. Expiration must never leave a delta partition without the snapshot it is read
from, which is why a snapshot goes only together with the deltas that lead up to the next one,
and the newest snapshot before the cutoff always stays as the anchor.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

Values = tuple[str, ...]
Partition = tuple[Values, Values]  # (group values, chain values)

PATTERN_OPTION = "partition_timestamp_pattern"
FORMATTER_OPTION = "partition_timestamp_formatter"

_UNITS: dict[str, dt.timedelta] = {}
for _names, _unit in (
    (("ms", "milli", "millis", "millisecond", "milliseconds"), dt.timedelta(milliseconds=1)),
    (("s", "sec", "secs", "second", "seconds"), dt.timedelta(seconds=1)),
    (("m", "min", "mins", "minute", "minutes"), dt.timedelta(minutes=1)),
    (("h", "hour", "hours"), dt.timedelta(hours=1)),
    (("d", "day", "days"), dt.timedelta(days=1)),
):
    _UNITS.update(dict.fromkeys(_names, _unit))
_DURATION = re.compile(r"\s*(\d+)\s*([a-z]+)\s*", re.IGNORECASE)

# Java DateTimeFormatter letters we can translate; every other letter run is refused rather
# than guessed, so a formatter never parses to a silently different time than Paimon's.
_JAVA_FIELDS = {"yyyy": "%Y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}
_DATE_FIELDS = ("yyyy", "MM", "dd")
_JAVA_RESERVED = set("[]{}#")  # optional sections and padding: not translatable


class ExpirationConfigError(ValueError):
    """A timestamp or expiration option that cannot work; the message names option and value."""


# ---- options --------------------------------------------------------------------------------
def parse_duration(text: str) -> dt.timedelta:
    """Paimon's duration syntax ('30 d', '12h', '90 min', '2 days'). A bare number is refused:
    Paimon would read it as milliseconds, which for an expiration time is surely a mistake."""
    match = _DURATION.fullmatch(str(text))
    unit = _UNITS.get(match.group(2).lower()) if match else None
    if match is None or unit is None:
        raise ExpirationConfigError(
            f"cannot parse duration '{text}': expected a number and a unit (ms, s, min, h, d), "
            "e.g. '30 d' or '12 h'"
        )
    return int(match.group(1)) * unit


@lru_cache(maxsize=64)  # called once per partition by partition_time
def java_formatter_to_strptime(formatter: str) -> str:
    """Translate the Java DateTimeFormatter subset Paimon users write ('yyyyMMdd HH:mm:ss',
    "yyyy-MM-dd'T'HH") into a strptime format; refuse what we cannot translate exactly."""

    def fail(problem: str) -> ExpirationConfigError:
        return ExpirationConfigError(f"{FORMATTER_OPTION} '{formatter}' {problem}")

    out: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(formatter):
        ch = formatter[i]
        if ch == "'":  # quoted literal; '' is a quote
            end = formatter.find("'", i + 1)
            if end < 0:
                raise fail("has an unterminated quoted literal")
            out.append(formatter[i + 1 : end].replace("%", "%%") if end > i + 1 else "'")
            i = end + 1
        elif ch.isascii() and ch.isalpha() and ch != "T":  # a bare T: the ISO separator
            j = i
            while j < len(formatter) and formatter[j] == ch:
                j += 1
            token = formatter[i:j]
            if token not in _JAVA_FIELDS:
                raise fail(
                    f"uses unsupported pattern letters '{token}' "
                    f"(supported: {', '.join(_JAVA_FIELDS)} and quoted literals)"
                )
            if token in seen:
                raise fail(f"repeats '{token}'")
            seen.add(token)
            out.append(_JAVA_FIELDS[token])
            i = j
        elif ch in _JAVA_RESERVED:
            raise fail(f"uses unsupported pattern character '{ch}'")
        else:
            out.append("%%" if ch == "%" else ch)
            i += 1
    missing = [f for f in _DATE_FIELDS if f not in seen]
    if missing:
        raise fail(f"does not give a complete date (missing {', '.join(missing)})")
    return "".join(out)


@lru_cache(maxsize=64)
def _pattern_parts(pattern: str, keys: tuple[str, ...]) -> tuple[tuple[bool, str], ...]:
    """Split a timestamp pattern into (is_key, text) parts. `$name` takes the LONGEST partition
    key it starts with ('$hr_min' is hr_min, not hr), case-insensitively like Spark columns;
    Paimon replaces keys one by one, which lets a short key eat the start of a longer one."""

    def fail(problem: str) -> ExpirationConfigError:
        return ExpirationConfigError(
            f"{PATTERN_OPTION} '{pattern}' {problem} (partition keys: {', '.join(keys)})"
        )

    by_length = sorted(keys, key=len, reverse=True)
    parts: list[tuple[bool, str]] = []
    literal_start = i = 0
    while i < len(pattern):
        if pattern[i] != "$":
            i += 1
            continue
        rest = pattern[i + 1 :].lower()
        key = next((k for k in by_length if k and rest.startswith(k.lower())), None)
        if key is None:
            name = re.split(r"\W", pattern[i + 1 :], maxsplit=1)[0]
            raise fail(f"refers to '${name}', which is not a partition key")
        parts += [(False, pattern[literal_start:i]), (True, key)]
        i = literal_start = i + 1 + len(key)
    parts.append((False, pattern[literal_start:]))
    if not any(is_key for is_key, _ in parts):
        raise fail("refers to no partition key; use $name, e.g. '$dt'")
    return tuple(p for p in parts if p[1])


def validate_timestamp_config(pattern: str, formatter: str, partition_keys: Sequence[str]) -> None:
    """Refuse at config time what would otherwise fail in the middle of an expiration."""
    _pattern_parts(pattern, tuple(partition_keys))
    java_formatter_to_strptime(formatter)


def partition_time(pattern: str, formatter: str, values: Mapping[str, str]) -> dt.datetime:
    """The timestamp of one partition: its values put into the pattern, parsed by the formatter."""
    parts = _pattern_parts(pattern, tuple(values))
    text = "".join(values[t] if is_key else t for is_key, t in parts)
    try:
        return dt.datetime.strptime(text, java_formatter_to_strptime(formatter))
    except ValueError:
        raise ExpirationConfigError(
            f"partition values {dict(values)} give '{text}' through {PATTERN_OPTION} '{pattern}', "
            f"which does not parse with {FORMATTER_OPTION} '{formatter}'"
        ) from None


# ---- plan -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ExpireSegment:
    """A snapshot dropped with the deltas read from it (time in [snapshot, next snapshot))."""

    snapshot: Values
    deltas: tuple[Values, ...]


@dataclass(frozen=True)
class GroupExpiration:
    group: Values
    anchor: Values | None  # the newest snapshot before the cutoff, kept; None: nothing expires
    segments: tuple[ExpireSegment, ...]
    orphan_deltas: tuple[Values, ...]  # older than the group's first snapshot
    # the oldest snapshot kept, where the group's history now starts: the anchor, or with
    # partition_expiration_max_num reached the snapshot after the last segment dropped
    kept_from: Values | None = None

    def dropped_deltas(self) -> list[Values]:
        return list(self.orphan_deltas) + [d for s in self.segments for d in s.deltas]

    def dropped_snapshots(self) -> list[Values]:
        return [s.snapshot for s in self.segments]


@dataclass(frozen=True)
class ExpirationPlan:
    cutoff: dt.datetime
    groups: tuple[GroupExpiration, ...]  # every group with snapshot partitions, sorted

    def is_empty(self) -> bool:
        return not any(g.segments for g in self.groups)

    def delta_drops(self) -> list[Partition]:
        return [(g.group, c) for g in self.groups for c in g.dropped_deltas()]

    def snapshot_drops(self) -> list[Partition]:
        return [(g.group, c) for g in self.groups for c in g.dropped_snapshots()]


def _by_group(partitions: Iterable[Partition]) -> dict[Values, set[Values]]:
    out: dict[Values, set[Values]] = {}
    for group, chain in partitions:
        out.setdefault(tuple(group), set()).add(tuple(chain))
    return out


def plan_expiration(
    snapshots: Iterable[Partition],
    deltas: Iterable[Partition],
    time_of: Callable[[Values, Values], dt.datetime],
    now: dt.datetime,
    expiration_time: dt.timedelta,
    max_num: int | None,
) -> ExpirationPlan:
    """What expiration drops (docs/design.md#expiration): only groups with snapshots are
    visited, so delta-only groups never expire. `max_num` None means no limit."""
    if max_num is not None and max_num < 1:
        raise ExpirationConfigError(f"partition_expiration_max_num must be >= 1, got {max_num}")
    cutoff = now - expiration_time
    deltas_by_group = _by_group(deltas)
    return ExpirationPlan(
        cutoff,
        tuple(
            _plan_group(group, snaps, deltas_by_group.get(group, set()), time_of, cutoff, max_num)
            for group, snaps in sorted(_by_group(snapshots).items())
        ),
    )


def _plan_group(
    group: Values,
    snapshots: Iterable[Values],
    deltas: Iterable[Values],
    time_of: Callable[[Values, Values], dt.datetime],
    cutoff: dt.datetime,
    max_num: int | None,
) -> GroupExpiration:
    """One group. Ties in time are broken by chain values so that every run plans the same.
    With `max_num` reached, the first snapshot kept bounds the last segment dropped, so the
    deltas read from it stay."""
    before = sorted((t, c) for t, c in ((time_of(group, c), c) for c in snapshots) if t < cutoff)
    if len(before) < 2:
        return GroupExpiration(group, None, (), ())
    timed_deltas = sorted((time_of(group, c), c) for c in deltas)

    def between(start: dt.datetime | None, end: dt.datetime) -> tuple[Values, ...]:
        return tuple(c for t, c in timed_deltas if (start is None or start <= t) and t < end)

    segments = tuple(
        ExpireSegment(snap, between(start, before[i + 1][0]))
        for i, (start, snap) in enumerate(before[:-1][:max_num])
    )
    return GroupExpiration(
        group, before[-1][1], segments, between(None, before[0][0]), before[len(segments)][1]
    )


# ---- manual drop guard and rendering ----------------------------------------------------------
def check_snapshot_drop(
    group: Values,
    chain: Values,
    snapshots_of_group: Iterable[Values],
    deltas_of_group: Iterable[Values],
    sort_key: Callable[[Values], Any],
) -> str | None:
    """Refuse (return why) dropping a snapshot that later deltas are read from when no earlier
    snapshot could anchor them instead: they would silently lose the full state before them.
    A delta depends on it when it is the delta's nearest strictly earlier snapshot (read rule 2).
    A delta at the next snapshot's value counts too, though that snapshot shadows it (Paimon's
    drop check counts only the deltas before it): a recompaction of that snapshot with
    overwrite, or a rewrite of the delta, which drops the snapshot, reads that day from the
    snapshot dropped here."""
    key = sort_key(chain)
    others = [sort_key(s) for s in snapshots_of_group if sort_key(s) != key]
    if any(k < key for k in others):
        return None
    following = min((k for k in others if k > key), default=None)
    dependents = sorted(
        (
            d
            for d in deltas_of_group
            if key < sort_key(d) and (following is None or sort_key(d) <= following)
        ),
        key=sort_key,
    )
    if not dependents:
        return None
    where = f" of group {_label(group)}" if group else ""
    return (
        f"refusing to drop snapshot partition {_label(chain)}{where}: delta partition(s) "
        f"{', '.join(_label(d) for d in dependents)} are read from it and no earlier snapshot "
        "in the group can anchor them; compact a later partition first"
    )


def _label(values: Values) -> str:
    return "/".join(values)


def format_plan(
    plan: ExpirationPlan, render_partition: Callable[[Values, Values], str]
) -> list[str]:
    """One line per kept anchor, dropped segment and set of orphan deltas, for logs and dry
    runs. Groups that lose nothing are left out: the lines list what changes."""

    def render(group: Values, chains: Iterable[Values]) -> str:
        return ", ".join(render_partition(group, c) for c in chains) or "no deltas"

    lines = []
    for g in plan.groups:
        if not g.segments:
            continue
        assert g.anchor is not None  # a group with segments keeps its anchor
        lines.append(f"keep anchor snapshot {render_partition(g.group, g.anchor)}")
        if g.orphan_deltas:
            lines.append(
                "drop deltas older than the first snapshot: " + render(g.group, g.orphan_deltas)
            )
        lines += [
            f"drop snapshot {render_partition(g.group, s.snapshot)} "
            f"with {render(g.group, s.deltas)}"
            for s in g.segments
        ]
    return lines
