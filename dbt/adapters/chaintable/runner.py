"""The small SQL runner every adapter module is handed: statements go through the dbt
connection, never a PySpark object, so session, thrift, odbc and http work the same."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from dbt.adapters.events.logging import AdapterLogger

logger = AdapterLogger("chaintable")


class Runner:
    def __init__(self, connections: Callable[[], Any]):
        # the adapter's connection manager, looked up at each statement (dbt may swap it)
        self._connections = connections

    def fetch(self, sql: str) -> list[tuple[Any, ...]]:
        """Rows as plain tuples (no agate type inference: '20250101' must stay a string)."""
        _, cursor = self._connections().add_query(sql, auto_begin=False)
        rows = cursor.fetchall() or []
        return [tuple(r) for r in rows]

    def shared_server(self) -> bool:
        """Whether other sessions may read the chain while this one writes: a server (thrift,
        http, odbc) or Spark Connect; not an embedded session."""
        creds = getattr(getattr(self._connections(), "profile", None), "credentials", None)
        method = str(getattr(creds, "method", ""))
        return method in ("thrift", "http", "odbc") or (
            method == "session" and bool(os.environ.get("SPARK_REMOTE"))
        )

    def run(self, sql: str | None) -> None:
        """Run a statement; None (nothing to do, e.g. no partitions to drop) runs nothing."""
        if sql:
            self._connections().add_query(sql, auto_begin=False)
