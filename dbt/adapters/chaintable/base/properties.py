"""Table properties as the adapter stores them and reads them back, whatever Spark redacts and
whatever the metastore refuses.

`SHOW TBLPROPERTIES` (and every other statement that lists a table's properties) replaces the
value of any property whose key or value matches Spark's redaction patterns with
`*********(redacted)`: by default `spark.sql.redaction.options.regex` = `(?i)url` and
`spark.redaction.regex` = `(?i)secret|password|token|access[.]?key` (docs/design.md#stored-state).
A warehouse path under a schema named `ods_hourly`, a group value `token`, a primary key column
`url` are all hit. The adapter keeps its own state and the chain options in properties, so
beside every one of its own properties that the default patterns match it writes a mirror: the
value in hex (an alphabet those patterns cannot match) under `chaintable.hex.<hex key>`, or
`chaintable.hex.sha1-<sha1 of the key>` where that name would be too long (then the mirror's
value is `<hex key>.<hex value>`). Reading back takes the mirror wherever the plain value came
back redacted, and refuses a redacted value of the adapter's own keys that has no mirror, or
only one left from an earlier value (a pattern beyond Spark's defaults): a redacted value is
never taken for state.

The metastore caps a key at 256 characters and a value at 32,672 (TABLE_PARAMS in its schema,
Derby's and PostgreSQL's alike). A value of the adapter's own over CHUNK_BUDGET bytes is
stored in pieces: the first under its key behind a header naming the count and a digest of the
whole value, the others under `chaintable.chunk.<sha1 of the key>.<n>`; reading joins them
and checks the digest.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence

from dbt.adapters.chaintable.base.keys import (
    P_ENGINE,
    P_FIELD_PREFIX,
    P_PARTITION,
    P_PRIMARY_KEY,
    P_ROWKIND,
    P_SEQUENCE,
)
from dbt.adapters.chaintable.base.values import ChainConfigError

REDACTED = "*********(redacted)"  # Spark's replacement text (Utils.REDACTION_REPLACEMENT_TEXT)
# Spark's two default redaction patterns, one regex (both are matched case-insensitively)
DEFAULT_PATTERNS = re.compile(r"secret|password|token|access[.]?key|url", re.IGNORECASE)
# TABLE_PARAMS.PARAM_KEY and PARAM_VALUE in the metastore's schema (Derby and PostgreSQL alike)
KEY_LIMIT = 256
VALUE_LIMIT = 32_672
# UTF-8 bytes of one stored piece of a value: its hex mirror (twice as long), the header and a
# long key's hex stay within VALUE_LIMIT
CHUNK_BUDGET = 15_000
MIRROR_PREFIX = "chaintable.hex."
_DIGEST_MIRROR = MIRROR_PREFIX + "sha1-"  # not hex: never the mirror of a key named in hex
# `chaintable.written.<sha1 of key>`: what the last write of the key left beside it, the digest
# of the value its mirror holds or NO_MIRROR. Spark shows nothing of a redacted value, so only
# a property written in the same statement can tell a mirror of this value from one an earlier
# value left; written with every one of the adapter's own keys (but those the default
# patterns match by name: every write of them has its mirror). The name sorts after the
# adapter's other `chaintable.` keys, so statements still begin with the key they set.
WRITTEN_PREFIX = "chaintable.written."
NO_MIRROR = "none"
CHUNK_PREFIX = "chaintable.chunk."
CHUNKED = "chaintable.chunks:"  # a head's header: CHUNKED<count>:<digest of the whole value>:
_HEADER = re.compile(r"chaintable\.chunks:([1-9][0-9]*):([0-9a-f]{16}):")
_INTERNAL = (MIRROR_PREFIX, WRITTEN_PREFIX, CHUNK_PREFIX)
# the keys the adapter reads back: its own state, Paimon's chain options (keys.py)
_OWN_PREFIXES = ("chaintable.", "chain-table.", P_FIELD_PREFIX, "partition.", "partial-update.")
_OWN_KEYS = (P_PRIMARY_KEY, P_PARTITION, P_SEQUENCE, P_ROWKIND, P_ENGINE)


class RedactedPropertyError(ChainConfigError):
    """A property the adapter needs came back redacted and has no mirror of its value."""


def at_risk(key: str, value: str) -> bool:
    """Whether Spark's default patterns redact this property when it is read back."""
    return bool(DEFAULT_PATTERNS.search(key) or DEFAULT_PATTERNS.search(value))


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def digest(value: str) -> str:
    return _sha1(value)[:16]


def mirror_key(key: str) -> str:
    """The key of `key`'s mirror: the key in hex as it always was (chains written before keep
    theirs), a digest of it where that would be over KEY_LIMIT."""
    named = MIRROR_PREFIX + key.encode().hex()
    return named if len(named) <= KEY_LIMIT else _DIGEST_MIRROR + _sha1(key)


def written_key(key: str) -> str:
    return WRITTEN_PREFIX + _sha1(key)


def chunk_key(key: str, n: int) -> str:
    return f"{CHUNK_PREFIX}{_sha1(key)}.{n}"


def is_own(key: str) -> bool:
    return key.startswith(_OWN_PREFIXES) or key in _OWN_KEYS


def _pieces(value: str) -> list[str]:
    """`value` cut into pieces of at most CHUNK_BUDGET bytes, never inside a character."""
    data, out, start = value.encode(), [], 0
    while start < len(data):
        end = min(start + CHUNK_BUDGET, len(data))
        while end < len(data) and data[end] & 0xC0 == 0x80:  # a continuation byte
            end -= 1
        out.append(data[start:end].decode())
        start = end
    return out or [""]


def _chunked(key: str, value: str) -> dict[str, str]:
    """`key` = `value` as stored: whole, or in pieces behind a header (also a short value that
    begins like a header, so that no value is ever read as one it is not)."""
    if len(value.encode()) <= CHUNK_BUDGET and not value.startswith(CHUNKED):
        return {key: value}
    pieces = _pieces(value)
    head = f"{CHUNKED}{len(pieces)}:{digest(value)}:{pieces[0]}"
    return {key: head, **{chunk_key(key, n): p for n, p in enumerate(pieces[1:], 1)}}


def _mirror(key: str, value: str) -> str:
    """A mirror's value: the value in hex, after the key in hex where the mirror's name is a
    digest (so the key stays recoverable from it)."""
    if mirror_key(key).startswith(_DIGEST_MIRROR):
        return f"{key.encode().hex()}.{value.encode().hex()}"
    return value.encode().hex()


def stored(props: Mapping[str, str]) -> dict[str, str]:
    """`props` as written: each property (a long one of the adapter's own in pieces), the
    mirror of each of the adapter's own at risk and the record of what each of its own writes
    left (WRITTEN_PREFIX). A user's own property, e.g. a password in the model's
    `tblproperties`, keeps Spark's redaction: the adapter never reads it. A later write of a
    key sets its head again, so pieces an earlier longer value left are joined by nothing."""
    out: dict[str, str] = {}
    for key, value in props.items():
        if not is_own(key):
            out[key] = value
            continue
        for k, v in _chunked(key, str(value)).items():
            out[k] = v
            risky = at_risk(k, v)
            if risky:
                out[mirror_key(k)] = _mirror(k, v)
            if k == key and not DEFAULT_PATTERNS.search(key):
                out[written_key(key)] = digest(v) if risky else NO_MIRROR
    return out


def stored_keys(keys: Iterable[str]) -> list[str]:
    """The keys to unset for `keys`: each, and its mirror (unset only where it exists). An
    UNSET cannot know how many pieces a value had: they and the record of the key's last write
    stay, read by nothing once the key is gone, and its next write sets them again."""
    keys = list(keys)
    return sorted({*keys, *(mirror_key(k) for k in keys)})


def _decoded(key: str, mirror: str) -> str | None:
    """The value a mirror of `key` holds, None when it is not one (redacted itself, or
    another key's)."""
    named, dot, hex_value = mirror.rpartition(".")
    if dot and named != key.encode().hex():
        return None
    if not re.fullmatch(r"(?:[0-9a-f]{2})*", hex_value):
        return None
    try:
        return bytes.fromhex(hex_value).decode()
    except UnicodeDecodeError:
        return None


def _refusal(relation: str, key: str) -> RedactedPropertyError:
    return RedactedPropertyError(
        f"{relation}: table property '{key}' reads back as '{REDACTED}': a Spark "
        "redaction pattern (spark.redaction.regex or spark.sql.redaction.options.regex) "
        "matches its key or value, and the adapter cannot read its own state through it. "
        "The adapter keeps an unredacted copy only of what Spark's default patterns "
        f"match; narrow the patterns so that they do not match '{key}' or its value "
        "(schema, location, column and group names)"
    )


def _resolved(relation: str, raw: Mapping[str, str], key: str, name: str) -> tuple[str, bool]:
    """The stored value of `key` (`name`: the property it belongs to) and whether it came from
    its mirror. A plain value that came back whole wins over a mirror; a mirror counts only
    when the record of the key's last write names its value (none: written before records)."""
    value = raw[key]
    if value != REDACTED:
        return value, False
    mirror = raw.get(mirror_key(key))
    decoded = None if mirror is None else _decoded(key, mirror)
    record = raw.get(written_key(key))
    if decoded is not None and (record is None or record == digest(decoded)):
        return decoded, True
    raise _refusal(relation, name)


def _joined(relation: str, raw: Mapping[str, str], key: str, head: str, mirrored: bool) -> str:
    """The whole value of `key` whose stored `head` begins with a header."""
    header = _HEADER.match(head)
    if header is None:
        raise ChainConfigError(f"{relation}: table property '{key}' has a malformed header")
    pieces = [head[header.end() :]]
    for n in range(1, int(header.group(1))):
        if chunk_key(key, n) not in raw:
            break
        piece, from_mirror = _resolved(relation, raw, chunk_key(key, n), key)
        pieces.append(piece)
        mirrored = mirrored or from_mirror
    value = "".join(pieces)
    if len(pieces) != int(header.group(1)) or digest(value) != header.group(2):
        error = RedactedPropertyError if mirrored else ChainConfigError
        raise error(
            f"{relation}: table property '{key}' is stored in {header.group(1)} pieces that "
            "do not join into the value its first piece names (a piece is missing, or a Spark "
            "redaction pattern beyond the defaults hides one)"
        )
    return value


def read_back(relation: str, rows: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The properties of `relation` from its (key, value) rows: mirrors resolved, pieces
    joined, both left out, as the records of writes are. A redacted value of the adapter's own
    keys without a mirror of that value is refused; any other key (the user's own) is left as
    Spark gave it."""
    raw = {str(k): str(v) for k, v in rows}
    out: dict[str, str] = {}
    for key, value in raw.items():
        if key.startswith(_INTERNAL):
            continue
        if not is_own(key):
            out[key] = value
            continue
        value, mirrored = _resolved(relation, raw, key, key)
        if value.startswith(CHUNKED):
            value = _joined(relation, raw, key, value, mirrored)
        out[key] = value
    return out
