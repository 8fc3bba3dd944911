"""The small SQL runner every adapter module is handed: statements go through the dbt
connection, never a PySpark object, so session, thrift, odbc and http work the same."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.chaintable.base.values import ChainConfigError

logger = AdapterLogger("chaintable")


class LeaseLostError(ChainConfigError):
    """The writer no longer holds the chain's lock (its lease ran out, or another writer took
    the lock over): it stops before its next catalog change (Runner.guard)."""


class UnlockedWriteError(DbtRuntimeError):
    """A statement that changes the catalog was sent without the chain's lock: a defect of the
    adapter, refused before it runs (docs/design.md#crash-safety-and-locking)."""


class Runner:
    def __init__(self, connections: Callable[[], Any]):
        # the adapter's connection manager, looked up at each statement (dbt may swap it)
        self._connections = connections
        # {thread: a check run before each statement of that thread that changes the catalog}:
        # the chain's lock installs one while the thread holds it, so a writer whose lock is
        # gone stops before its next change, whatever it was doing and whoever caught an error
        # (docs/design.md#crash-safety-and-locking)
        self._guards: dict[int, Callable[[], None]] = {}

    @contextmanager
    def guard(self, check: Callable[[], None]) -> Iterator[None]:
        """Run `check` before every statement this thread sends through run() meanwhile."""
        me = threading.get_ident()
        outer = self._guards.get(me)
        self._guards[me] = check
        try:
            yield
        finally:
            if outer is None:
                self._guards.pop(me, None)
            else:
                self._guards[me] = outer

    def fetch(self, sql: str) -> list[tuple[Any, ...]]:
        """Rows as plain tuples (no agate type inference: '20250101' must stay a string)."""
        with _as_dbt_error():
            _, cursor = self._connections().add_query(sql, auto_begin=False)
            rows = cursor.fetchall() or []  # a session runs a query's job here
        return [tuple(r) for r in rows]

    def shared_server(self) -> bool:
        """Whether other sessions may read the chain while this one writes: a server (thrift,
        http, odbc), Spark Connect, or a session on a shared catalog (a metastore service or a
        metastore database other than embedded Derby, which other drivers use too); not an
        embedded session on its own Derby."""
        creds = getattr(getattr(self._connections(), "profile", None), "credentials", None)
        method = str(getattr(creds, "method", ""))
        if method in ("thrift", "http", "odbc"):
            return True
        if method != "session":
            return False
        params = getattr(creds, "server_side_parameters", None) or {}
        return bool(os.environ.get("SPARK_REMOTE")) or shared_catalog(params)

    @contextmanager
    def own_connection(self, name: str) -> Iterator[None]:
        """Statements of the calling thread (not dbt's) through a connection of its own, closed
        and forgotten at the end: dbt keys connections by thread."""
        manager = self._connections()
        manager.set_connection_name(name)
        try:
            yield
        finally:
            try:
                manager.release()
            finally:
                manager.clear_thread_connection()

    def run(self, sql: str | None) -> None:
        """Run a statement that changes the catalog; None (nothing to do, e.g. no partitions to
        drop) runs nothing. Only a thread that holds a chain's lock may (guard): every write of
        the adapter goes through the lock, and one that does not is refused, not run."""
        if sql:
            check = self._guards.get(threading.get_ident())
            if check is None:
                raise UnlockedWriteError(
                    "chaintable: a statement that changes the catalog was about to run without "
                    f"the chain's lock, and was refused: {sql[:200]}"
                )
            check()
            self._send(sql)

    def run_on_lock(self, sql: str) -> None:
        """A statement on a chain's lock itself (take, break, renew it): the one kind of change
        made without holding the lock (publish/lock.py, publish/lease.py)."""
        self._send(sql)

    def _send(self, sql: str) -> None:
        with _as_dbt_error():
            self._connections().add_query(sql, auto_begin=False)


def shared_catalog(params: dict[str, str]) -> bool:
    """Whether a session's Spark settings point it at a catalog other drivers share: a Hive
    metastore service, or a metastore database that is not embedded Derby."""
    uris = str(params.get("spark.hadoop.hive.metastore.uris") or "").strip()
    url = str(params.get("spark.hadoop.javax.jdo.option.ConnectionURL") or "").strip()
    return bool(uris) or bool(url and not url.startswith("jdbc:derby:"))


@contextmanager
def _as_dbt_error() -> Iterator[None]:
    """A failed statement as dbt's DbtRuntimeError whatever the connection method: dbt-spark
    passes a session's PySpark exception through as it is (it carries no args), so the
    adapter's own fallbacks (a view created when altering it fails, a failed cumulative build
    or inline compaction that leaves the day published) would miss it there."""
    try:
        yield
    except DbtRuntimeError:
        raise
    except Exception as e:
        if type(e).__module__.split(".")[0] in ("pyspark", "py4j"):
            raise DbtRuntimeError(str(e)) from e
        raise
