from dbt.adapters.base import AdapterPlugin

from dbt.adapters.chaintable.connections import (
    ChainTableConnectionManager,
    ChainTableCredentials,
)
from dbt.adapters.chaintable.impl import ChainTableAdapter
from dbt.include import chaintable

Plugin = AdapterPlugin(
    # AdapterPlugin types the adapter as dbt's generic AdapterProtocol, whose type variables
    # SparkAdapter's own class attributes do not match for mypy
    adapter=ChainTableAdapter,  # type: ignore[arg-type]  # dbt-spark's own Plugin ignores it too
    credentials=ChainTableCredentials,
    include_path=chaintable.PACKAGE_PATH,
    dependencies=["spark"],
)

__all__ = ["ChainTableAdapter", "ChainTableConnectionManager", "ChainTableCredentials", "Plugin"]
