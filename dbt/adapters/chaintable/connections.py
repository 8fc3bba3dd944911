"""Connections are dbt-spark's: every method (session, thrift, odbc, http) works unchanged.

Only the adapter type differs, so that profiles say `type: chaintable`.
"""

import warnings
from dataclasses import dataclass

from dbt.adapters.spark.connections import SparkConnectionManager, SparkCredentials

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

    @property
    def type(self) -> str:
        return "chaintable"


class ChainTableConnectionManager(SparkConnectionManager):
    TYPE = "chaintable"
