"""The one door every write to a chain goes through (docs/design.md#the-write-unit): the chain's
lock, whose taking recovers what a dead writer left and whose holder is checked before each
catalog change (publish/lock.py), and the tables derived from the branches, told in one order
around each write. A derived table registers here (write/derived.py) instead of being called by
each writer, so adding one touches its own package and the registration in impl.py."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

from dbt.adapters.chaintable.base.config import DEFAULT_LEASE
from dbt.adapters.chaintable.base.partitions import Values
from dbt.adapters.chaintable.chain.catalog import Loaded
from dbt.adapters.chaintable.chain.tables import ChainTables
from dbt.adapters.chaintable.cumulative.accumulate import Prebuilt
from dbt.adapters.chaintable.publish.publisher import Publisher
from dbt.adapters.chaintable.view.writer import ViewWriter


@dataclass(frozen=True)
class Write:
    """Partitions `written` to `branch` by one publish. `lowest`: the lowest sequence of each
    delta partition written (run/model.py WritePlan); `prebuilt`: a cumulative partition built
    before the publish; `stores_changes`: whether the write is a run's, after which the chain
    stores the days' changes (a compaction changes no day's state)."""

    branch: str
    written: tuple[Values, ...]
    lowest: Mapping[Values, float] = field(default_factory=dict)
    prebuilt: Prebuilt | None = None
    stores_changes: bool = False


class Derived(Protocol):
    """A table derived from the branches. Before a write it keeps readers off what the write
    changes in place; after the publish it is brought up to date, before the view (the view
    reads it) or after it (nothing reads it but through the view's days)."""

    def before_write(self, loaded: Loaded, write: Write) -> Loaded: ...

    def before_drop(self, loaded: Loaded, dropped: Sequence[Values]) -> Loaded: ...

    def before_view(self, loaded: Loaded, write: Write) -> Loaded: ...

    def after_view(self, loaded: Loaded, write: Write, check: Callable[[], None]) -> None: ...


class WriteUnit:
    def __init__(self, publisher: Publisher, views: ViewWriter, derived: Sequence[Derived]):
        self.publisher, self.views, self.derived = publisher, views, tuple(derived)

    @contextmanager
    def locked(
        self,
        tables: ChainTables,
        operation: str,
        stage: Mapping[str, str] | None = None,
        lease: dt.timedelta = DEFAULT_LEASE,
    ) -> Iterator[frozenset[str] | None]:
        """Hold the chain's lock for `operation` (ChainLock.locked: the names of the chain's
        tables as its recovery listed them, None when this thread held it already)."""
        with self.publisher.lock.locked(tables, operation, stage, lease) as names:
            yield names

    def before_write(self, loaded: Loaded, write: Write) -> Loaded:
        """Every derived table told, in registration order, before `write` is published."""
        for d in self.derived:
            loaded = d.before_write(loaded, write)
        return loaded

    def before_drop(self, loaded: Loaded, dropped: Sequence[Values]) -> Loaded:
        """Every derived table told before partitions a writer drops by hand go."""
        for d in self.derived:
            loaded = d.before_drop(loaded, dropped)
        return loaded

    def published(
        self,
        loaded: Loaded,
        write: Write,
        wait: Callable[[], None] | None = None,
        view_exists: bool | None = None,
    ) -> Loaded:
        """After `write` is published (`loaded`: the catalog after it): the derived tables the
        view reads are brought up to date, then (after `wait`) the view points at the new state."""
        for d in self.derived:
            loaded = d.before_view(loaded, write)
        if wait is not None:
            wait()
        return self.views.refresh(loaded, view_exists=view_exists)

    def settled(self, loaded: Loaded, write: Write) -> None:
        """The derived tables no read needs at once, after the view reads the write."""
        lock = str(loaded.tables.lock)
        for d in self.derived:
            d.after_view(loaded, write, lambda: self.publisher.lock.check_lease(lock))
