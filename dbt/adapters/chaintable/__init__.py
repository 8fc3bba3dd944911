from dbt.adapters.base import AdapterPlugin

from dbt.adapters.chaintable.connections import (
    ChainTableConnectionManager,
    ChainTableCredentials,
)
from dbt.adapters.chaintable.impl import ChainTableAdapter
from dbt.include import chaintable

Plugin = AdapterPlugin(
    # AdapterPlugin wants a Type[BaseAdapter], but declares it through the adapter protocol's
    # type variables, which SparkAdapter's own class attributes do not match for mypy
    adapter=ChainTableAdapter,  # type: ignore[arg-type]
    credentials=ChainTableCredentials,
    include_path=chaintable.PACKAGE_PATH,
    dependencies=["spark"],
)

__all__ = ["ChainTableAdapter", "ChainTableConnectionManager", "ChainTableCredentials", "Plugin"]
