"""What chain_changes and chain_history must give (docs/design.md#history-by-business-day), computed in Python from each day's
full state read through the view: a full diff of two days, and the versions `dbt snapshot`
records when run on each day in turn. Used by tests/functional/test_history.py (hand-written
histories) and tests/functional/test_cumulative_random.py (random ones).

A state is {key: the key's row}, the row holding the model's columns without the chain key;
the rows the macros give hold those columns, then the chain key, then their own columns."""

from __future__ import annotations

from typing import Any

State = dict[Any, tuple]


def norm(v: Any) -> Any:
    """A value as compared: a struct (a Row, a tuple) as a tuple of its values."""
    if isinstance(v, tuple):
        return tuple(norm(x) for x in v)
    return v


def ordered(rows) -> list[tuple]:
    return sorted((norm(tuple(r)) for r in rows), key=repr)


def changes(before: State, after: State, start: str, end: str) -> list[tuple]:
    """chain_changes from `start` to `end`: per key whose row differs, the `end` row (the
    `start` row for a delete) on `end`, the kind, and the `start` row on `start` (None for an
    insert)."""
    out = []
    for key in set(before) | set(after):
        b, a = before.get(key), after.get(key)
        if a == b:
            continue
        kind = "insert" if b is None else "delete" if a is None else "update"
        out.append((*(a or b), end, kind, None if b is None else (*b, start)))
    return ordered(out)


def versions(states: dict[str, State], days: list[str]) -> list[tuple]:
    """chain_history over `days` (the published days of the range, in order): what `dbt
    snapshot` (check_cols: all) records when run on each day's state in turn, a version per key
    and run of equal rows, valid from its first day to the first day it no longer was the state
    (None: still the state on the last day)."""
    out = []
    for key in {k for d in days for k in states[d]}:
        current, since = None, None
        for d in days:
            now = states[d].get(key)
            if now != current:
                if current is not None:
                    out.append((*current, since, d))
                current, since = now, d
        if current is not None:
            out.append((*current, since, None))
    return ordered(out)
