"""The timestamp options a chain table's partitions are read with (docs/design.md#validation):
Paimon's durations and its Java timestamp formatters, translated or refused. Pure; the options
validate them when a model is configured and expiration reads partition times with them."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

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


# ---- durations and timestamps --------------------------------------------------------------------------------
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


def pattern_parts(pattern: str, keys: Sequence[str]) -> tuple[tuple[bool, str], ...]:
    """The pattern as (is_key, text) parts: a partition key's name or literal text."""
    return _pattern_parts(pattern, tuple(keys))


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


def partition_values(
    pattern: str, formatter: str, keys: Sequence[str], time: dt.datetime
) -> dict[str, str] | None:
    """The partition values whose time (partition_time) is `time`: the time formatted by the
    formatter, split along the pattern. None when the pattern and formatter cannot name that
    exact time (an hour under a pattern of days, a pattern that repeats a key)."""
    parts = _pattern_parts(pattern, tuple(keys))
    text = time.strftime(java_formatter_to_strptime(formatter))
    regex = "".join(f"(?P<k{i}>.+?)" if k else re.escape(t) for i, (k, t) in enumerate(parts))
    match = re.fullmatch(regex, text)
    if match is None:
        return None
    values: dict[str, str] = {}
    for i, (is_key, key) in enumerate(parts):
        if is_key and values.setdefault(key, match.group(f"k{i}")) != match.group(f"k{i}"):
            return None
    try:
        exact = partition_time(pattern, formatter, values) == time.replace(tzinfo=None)
    except ExpirationConfigError:
        return None
    return values if exact and set(values) == set(keys) else None


def sortable(formatter: str) -> bool:
    """Whether the formatter's texts sort as their times do: fixed-width fields from the year
    down, so that a string comparison of partition values is a comparison of times."""
    fields = re.findall(r"%[YmdHMS]", java_formatter_to_strptime(formatter))
    return fields == ["%Y", "%m", "%d", "%H", "%M", "%S"][: len(fields)]
