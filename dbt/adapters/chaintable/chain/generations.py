"""The generation tokens of snapshot partitions (P_SNAPSHOT_GENERATIONS) and the records kept
against them, bounded, pure.

Every publish gives the snapshot partitions it writes a new token, and what was recorded about
a partition's rows under another token no longer counts (the anchors' highest sequence,
P_ANCHOR_SEQUENCE; the compactions' records, P_COMPACTED). One token per partition would grow
with the snapshot partitions for good, and a metastore refuses a property value over 32,672
characters (TABLE_PARAMS.PARAM_VALUE in the metastore's own schema, Derby's and PostgreSQL's
alike): a chain compacted daily would stop publishing after about 600 days. So the map keeps the
partitions published last, within BUDGET characters, and every partition without a token of
its own has the floor's (FLOOR): a fresh token each time the budget prunes. A token never
comes back once it is gone, so a record made under a floor counts only until the next pruning,
and a partition written again always gets a token of its own. A partition with neither (a
chain from before these tokens) has None, as it always had.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from dbt.adapters.chaintable.base.keys import P_SNAPSHOT_GENERATIONS

# the key of the floor's token: no partition path is empty
FLOOR = ""
# Characters of one record. A value Spark would redact also gets a hex mirror twice as long
# (base/properties.py), which must stay within 32,672 too.
BUDGET = 15_000


def tokens_of(props: Mapping[str, str]) -> dict[str, str]:
    """The tokens t__snapshot's properties hold ({} for none)."""
    return dict(json.loads(props.get(P_SNAPSHOT_GENERATIONS) or "{}"))


def token_of(tokens: Mapping[str, str], path: str) -> str | None:
    """The token of snapshot partition `path`: its own, else the floor's, else None."""
    return tokens.get(path, tokens.get(FLOOR))


def dumps(record: Mapping[str, Any]) -> str:
    return json.dumps(dict(sorted(record.items())), separators=(",", ":"))


def fitted(
    ranked: Iterable[tuple[str, Any]], budget: int = BUDGET, first: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """`first`, then the (key, value) pairs of `ranked` in order, as many as fit in `budget`
    characters of dumps()."""
    out = dict(first or {})
    # each entry below counts a comma before it, but the first into an empty one has none
    size = len(dumps(out)) - (not out)
    for key, value in ranked:
        size += len(json.dumps({key: value}, separators=(",", ":"))) - 1
        if size > budget:
            break
        out[key] = value
    return out


def renewed(
    tokens: Mapping[str, str],
    kept: Collection[str],
    written: Collection[str],
    token: str,
    floor: Callable[[], str],
    budget: int = BUDGET,
) -> dict[str, str]:
    """The tokens after a publish writes the partitions `written` with `token`, `kept` being
    the other partitions still there: the tokens of partitions gone dropped, and, over
    `budget`, those given longest ago (run ids sort by time) dropped until it fits, the floor
    then set to a fresh token, floor() (what was recorded under the floor before no longer
    counts)."""
    own = {k: v for k, v in tokens.items() if k in kept and k != FLOOR}
    own.update(dict.fromkeys(written, token))
    out = dict(own)
    if FLOOR in tokens:
        out[FLOOR] = tokens[FLOOR]
    if len(dumps(out)) <= budget:
        return out
    newest = sorted(own.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    return fitted(newest, budget, {FLOOR: floor()})


def current_entries(
    entries: Mapping[str, Any], tokens: Mapping[str, str], budget: int = BUDGET
) -> dict[str, Any]:
    """The entries ({partition path: [the token it was made under, ...]}) still made under
    their partition's token (token_of), those of the newest tokens first, within `budget`
    characters: an entry of another token never counts again (tokens never come back)."""
    valid = [  # those under a partition's own token first: the floor's are older
        (path in tokens, v[0] or "", path, v)
        for path, v in entries.items()
        if isinstance(v, list) and v and v[0] == token_of(tokens, path)
    ]
    kept = fitted(((path, v) for _, _, path, v in sorted(valid, reverse=True)), budget)
    return dict(sorted(kept.items()))
