"""Connections are dbt-spark's: every method (session, thrift, odbc, http) works unchanged.

Only the adapter type differs, so that profiles say `type: chaintable`.
"""
from dataclasses import dataclass

from dbt.adapters.spark.connections import SparkConnectionManager, SparkCredentials


@dataclass
class ChainTableCredentials(SparkCredentials):
    @property
    def type(self) -> str:
        return "chaintable"


class ChainTableConnectionManager(SparkConnectionManager):
    TYPE = "chaintable"
