"""Table properties as the adapter stores them and reads them back, whatever Spark redacts.

`SHOW TBLPROPERTIES` (and every other statement that lists a table's properties) replaces the
value of any property whose key or value matches Spark's redaction patterns with
`*********(redacted)`: by default `spark.sql.redaction.options.regex` = `(?i)url` and
`spark.redaction.regex` = `(?i)secret|password|token|access[.]?key` (docs/design.md#stored-state).
A warehouse path under a schema named `ods_hourly`, a group value `token`, a primary key column
`url` are all hit. The adapter keeps its own state and the chain options in properties, so
beside every one of its own properties that the default patterns match it writes a mirror: the key and the value
in hex (an alphabet those patterns cannot match) under `chaintable.hex.<hex key>`. Reading back
takes the mirror wherever the plain value came back redacted, and refuses a redacted value of the
adapter's own keys that has no mirror (a pattern beyond Spark's defaults): a redacted value is
never taken for state.
"""

from __future__ import annotations

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
MIRROR_PREFIX = "chaintable.hex."
# the keys the adapter reads back: its own state, Paimon's chain options (keys.py)
_OWN_PREFIXES = ("chaintable.", "chain-table.", P_FIELD_PREFIX, "partition.", "partial-update.")
_OWN_KEYS = (P_PRIMARY_KEY, P_PARTITION, P_SEQUENCE, P_ROWKIND, P_ENGINE)


class RedactedPropertyError(ChainConfigError):
    """A property the adapter needs came back redacted and has no mirror."""


def at_risk(key: str, value: str) -> bool:
    """Whether Spark's default patterns redact this property when it is read back."""
    return bool(DEFAULT_PATTERNS.search(key) or DEFAULT_PATTERNS.search(value))


def mirror_key(key: str) -> str:
    return MIRROR_PREFIX + key.encode().hex()


def stored(props: Mapping[str, str]) -> dict[str, str]:
    """`props` as written: each property, and the mirror of each of the adapter's own at risk
    (a user's own property, e.g. a password in the model's `tblproperties`, keeps Spark's
    redaction: the adapter never reads it)."""
    out = dict(props)
    for key, value in props.items():
        if is_own(key) and at_risk(key, value):
            out[mirror_key(key)] = str(value).encode().hex()
    return out


def stored_keys(keys: Iterable[str]) -> list[str]:
    """The keys to unset for `keys`: each, and its mirror (unset only where it exists)."""
    keys = list(keys)
    return sorted({*keys, *(mirror_key(k) for k in keys)})


def is_own(key: str) -> bool:
    return key.startswith(_OWN_PREFIXES) or key in _OWN_KEYS


def read_back(relation: str, rows: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The properties of `relation` from its (key, value) rows, mirrors resolved and left out.

    A plain value that came back whole wins over its mirror (a mirror left from an earlier value
    that was at risk is stale). A redacted value takes its mirror's; without one, a key the
    adapter reads is refused, and any other key (the user's own) is left as Spark gave it."""
    raw = {str(k): str(v) for k, v in rows}
    mirrors = {k: v for k, v in raw.items() if k.startswith(MIRROR_PREFIX)}
    out: dict[str, str] = {}
    for key, value in raw.items():
        if key in mirrors:
            continue
        mirror = mirrors.get(mirror_key(key))
        if value == REDACTED and mirror is not None and re.fullmatch(r"[0-9a-f]*", mirror):
            value = bytes.fromhex(mirror).decode()
        elif value == REDACTED and is_own(key):
            raise RedactedPropertyError(
                f"{relation}: table property '{key}' reads back as '{REDACTED}': a Spark "
                "redaction pattern (spark.redaction.regex or spark.sql.redaction.options.regex) "
                "matches its key or value, and the adapter cannot read its own state through it. "
                "The adapter keeps an unredacted copy only of what Spark's default patterns "
                f"match; narrow the patterns so that they do not match '{key}' or its value "
                "(schema, location, column and group names)"
            )
        out[key] = value
    return out
