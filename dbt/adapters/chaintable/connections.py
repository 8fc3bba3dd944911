"""Connections are dbt-spark's: every method (session, thrift, odbc, http) works unchanged.

Only the adapter type differs, so that profiles say `type: chaintable`.
"""
from dataclasses import dataclass

from dbt.adapters.spark.connections import SparkConnectionManager, SparkCredentials


@dataclass
class ChainTableCredentials(SparkCredentials):
    # dbt-spark polls a Thrift Server every 5 s by default; a chain run is a few dozen short
    # statements, so poll often (seconds, fractions allowed)
    poll_interval: float = 0.2  # type: ignore[assignment]

    @property
    def type(self) -> str:
        return "chaintable"


class ChainTableConnectionManager(SparkConnectionManager):
    TYPE = "chaintable"
