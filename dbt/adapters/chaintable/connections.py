"""Connections are dbt-spark's: every method (session, thrift, odbc, http) works unchanged.

Only the adapter type differs, so that profiles say `type: chaintable`.
"""

import socket
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from dbt.adapters.contracts.connection import Connection
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.connections import (
    SparkConnectionManager,
    SparkConnectionMethod,
    SparkCredentials,
)
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.chaintable.base import spark_log

logger = AdapterLogger("chaintable")

# session method against Spark Connect (SPARK_REMOTE): dbt-spark's builder calls
# enableHiveSupport(), a static config the server fixed at start-up, and pyspark warns about it
# on every statement; the server's catalog is what the user chose, so the warning is noise
warnings.filterwarnings(
    "ignore",
    message=r"(?s).*CANNOT_MODIFY_STATIC_CONFIG.*catalogImplementation",
    category=UserWarning,
)


@dataclass
class ChainTableCredentials(SparkCredentials):
    # dbt-spark polls a Thrift Server every 5 s by default; a chain run is a few dozen short
    # statements, so poll often (seconds, fractions allowed)
    poll_interval: float = 0.2  # type: ignore[assignment]  # widens dbt-spark's int for sleep()
    # session method: where the embedded catalog lives, as absolute paths (what `dbt init`
    # asks for); without them Spark uses ./spark-warehouse and ./metastore_db of the folder dbt
    # runs from, a new empty catalog in every other folder. Keys the profile's
    # server_side_parameters set themselves win.
    warehouse_dir: str | None = None
    metastore_dir: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.method != SparkConnectionMethod.SESSION:
            return
        paths: dict[str, str] = {}
        if self.warehouse_dir:
            paths["spark.sql.warehouse.dir"] = self.warehouse_dir
        if self.metastore_dir:
            paths["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
                f"jdbc:derby:;databaseName={self.metastore_dir};create=true"
            )
        if paths:
            self.server_side_parameters = {**paths, **(self.server_side_parameters or {})}

    @property
    def type(self) -> str:
        return "chaintable"

    def _connection_keys(self) -> tuple[str, ...]:
        return (*super()._connection_keys(), "method", "warehouse_dir", "metastore_dir")


class ChainTableConnectionManager(SparkConnectionManager):
    TYPE = "chaintable"

    def __init__(self, profile: Any, mp_context: Any) -> None:
        super().__init__(profile, mp_context)
        creds = profile.credentials
        if creds.method == SparkConnectionMethod.SESSION:
            # the JVM's start overlaps dbt's parsing of the project (docs/design.md#quiet-spark)
            spark_log.start_jvm_early(creds.server_side_parameters or {})

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        creds = connection.credentials
        if creds.method == SparkConnectionMethod.SESSION:
            check_metastore(creds.server_side_parameters or {})
            # the JVM starts here, quietly, if the early start did not (or failed: here it says
            # why); its cost is logged apart from the first statement's
            waited = time.monotonic()
            spark_log.start_jvm(creds.server_side_parameters or {})
            took = spark_log.take_start_time()
            if took is not None:
                log = spark_log.log_file()
                logger.debug(
                    f"Spark JVM started in {took:.1f}s (the first connection waited "
                    f"{time.monotonic() - waited:.1f}s for it)"
                    + (f"; its log: {log}" if log else "")
                )
        return super().open(connection)

    @contextmanager
    def exception_handler(self, sql: str) -> Iterator[None]:
        start = spark_log.offset()
        try:
            with super().exception_handler(sql):
                yield
        except Exception:
            lines = spark_log.failure_lines(start)
            if lines:
                logger.error(
                    "Spark's log while the statement ran "
                    f"(all of it: {spark_log.log_file()}):\n  " + "\n  ".join(lines)
                )
            raise


METASTORE_URIS = "spark.hadoop.hive.metastore.uris"


def check_metastore(params: dict[str, Any], timeout: float = 3.0) -> None:
    """Fail fast, naming the setting, when none of the profile's metastore services answers: the
    Hive client would retry for long and then fail the first statement under a stack trace."""
    raw = str(params.get(METASTORE_URIS) or "").strip()
    if not raw:
        return
    tried = []
    for uri in (u.strip() for u in raw.split(",") if u.strip()):
        parts = urlsplit(uri)
        if parts.scheme != "thrift" or not parts.hostname or not parts.port:
            raise DbtRuntimeError(
                f"{METASTORE_URIS} '{uri}' in the profile's server_side_parameters is not "
                "thrift://host:port"
            )
        try:
            with socket.create_connection((parts.hostname, parts.port), timeout=timeout):
                return
        except OSError as e:
            tried.append(f"{uri} ({e.strerror or e})")
    raise DbtRuntimeError(
        f"no Hive metastore service answers at {', '.join(tried)} ({METASTORE_URIS} in the "
        "profile's server_side_parameters): start it (locally: scripts/spark-local.sh start "
        "metastore) or correct the address; nothing was run"
    )
