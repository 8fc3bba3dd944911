"""The tables derived from a chain's branches, as the write unit knows them (write/unit.py): the
cumulative delta (cumulative/accumulate.py) and the stored changes (history/stored.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.chain.catalog import Loaded
from dbt.adapters.chaintable.cumulative.accumulate import Accumulator
from dbt.adapters.chaintable.history.stored import ChangesStore
from dbt.adapters.chaintable.write.unit import Write


class CumulativeDelta:
    """The view reads it: rebuilt before the view is refreshed."""

    def __init__(self, accumulator: Accumulator):
        self.accumulator = accumulator

    def before_write(self, loaded: Loaded, write: Write) -> Loaded:
        return self.accumulator.before_write(loaded, write.branch, write.written)

    def before_drop(self, loaded: Loaded, dropped: Sequence[Values]) -> Loaded:
        # a cumulative partition names the deltas it was built from (its stamp): once one of
        # them is dropped no view serves a day from it, and the refresh drops it
        return loaded

    def before_view(self, loaded: Loaded, write: Write) -> Loaded:
        lowest = write.lowest if write.branch == "delta" else {}  # of delta rows only
        return self.accumulator.after_write(loaded, write.written, lowest, write.prebuilt)

    def after_view(self, loaded: Loaded, write: Write, check: Callable[[], None]) -> None:
        return None


class StoredChanges:
    """Read only for the days the view reads: stored after the view is refreshed."""

    def __init__(self, store: ChangesStore):
        self.store = store

    def before_write(self, loaded: Loaded, write: Write) -> Loaded:
        return self.store.before_write(loaded, write.written)

    def before_drop(self, loaded: Loaded, dropped: Sequence[Values]) -> Loaded:
        # a day dropped, then written again, is a new day whose cumulative partition may get
        # its old stamp: its stored changes go void with it
        return self.store.before_write(loaded, dropped)

    def before_view(self, loaded: Loaded, write: Write) -> Loaded:
        return loaded

    def after_view(self, loaded: Loaded, write: Write, check: Callable[[], None]) -> None:
        if write.stores_changes:
            written = write.written if write.branch == "delta" else ()
            self.store.after_write(loaded, written, check)
