"""The lock's lease (safety.py has the rule): a thread that renews the held lock's heartbeat
while the holder works, through a connection of its own, and tells the holder when it could not
renew for so long that another writer may soon take the lock over."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from dbt.adapters.chaintable.base import statements as S
from dbt.adapters.chaintable.base.properties import read_back
from dbt.adapters.chaintable.base.runner import LeaseLostError, Runner, logger
from dbt.adapters.chaintable.publish import safety


class Heartbeat:
    """Renews `lock`'s heartbeat every `lease / HEARTBEATS_PER_LEASE`. Every statement that
    alters the lock view goes through `altering()`: Spark rewrites a view's whole property map
    on each ALTER, so a renewal running beside the holder's own change could undo it."""

    def __init__(self, runner: Runner, lock: str, lease: dt.timedelta, owner: str):
        # `owner`: the holder's writer token (safety.P_WRITER), unique to this hold of the lock
        self.runner, self.lock, self.lease, self.owner = runner, lock, lease, owner
        self._taken_by: str | None = None
        self.interval = lease.total_seconds() / safety.HEARTBEATS_PER_LEASE
        self.guard = threading.Lock()
        self._stop = threading.Event()
        self._renewed = time.monotonic()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._loop, name=f"chaintable-heartbeat {self.lock}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing (before the lock is dropped): waits for a renewal under way."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    @contextmanager
    def altering(self) -> Iterator[None]:
        with self.guard:
            yield

    def lost(self) -> str | None:
        """Why this holder may no longer act on its lock, or None: the lock names another
        owner, or it was not renewed for more than half the lease (a metastore out of reach:
        another writer may take it once the lease has run out)."""
        if self._taken_by is not None:
            return (
                f"the lock now belongs to {self._taken_by}: this writer could not renew it "
                f"within its lease ({self.lease}) and another one took it over"
            )
        silent = time.monotonic() - self._renewed
        if silent > self.lease.total_seconds() / 2:
            return (
                f"the lock's heartbeat could not be renewed for {int(silent)} s (lease "
                f"{self.lease}), and another writer may take it over once the lease has run out"
            )
        return None

    def taken(self, props: dict[str, str] | None) -> None:
        """The lock (its properties, None: gone) is no longer this holder's: every later
        check() refuses."""
        self._taken_by = (props or {}).get(safety.P_OWNER) or "(nobody: the lock is gone)"

    def check(self) -> None:
        """Refuse to go on when the lock may no longer be this holder's (lost())."""
        why = self.lost()
        if why is not None:
            raise LeaseLostError(
                f"{self.lock}: {why}; stopping before anything more is published. Rerun when "
                "the metastore answers again"
            )

    def _loop(self) -> None:
        """Renew until stopped or taken over; the connection is opened at the first renewal
        (most holders finish before it) and again after it failed."""
        while not self._stop.wait(self.interval):
            try:
                with self.runner.own_connection("chaintable-heartbeat"):
                    self.beat()
                    while self._taken_by is None and not self._stop.wait(self.interval):
                        self.beat()
            except Exception as e:  # the next renewal tries again; lost() tells the holder
                logger.warning(f"{self.lock}: could not renew the lock's heartbeat: {e}")
            if self._taken_by is not None:
                return

    def beat(self) -> None:
        """Read the lock, then renew it if it is still this holder's: a lock another writer
        broke and took (this one was out of reach for a lease) names that writer, and is never
        altered from here (an ALTER rewrites the view's whole property map)."""
        with self.guard:
            if self._stop.is_set():
                return
            rows = self.runner.fetch(S.show_properties(self.lock))
            props = read_back(self.lock, [(str(k), str(v)) for k, v in rows])
            if props.get(safety.P_WRITER) != self.owner:
                self.taken(props)
                return
            self.runner.run_on_lock(S.set_view_properties(self.lock, safety.heartbeat(self.lease)))
        self._renewed = time.monotonic()
