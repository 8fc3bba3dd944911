from dbt.adapters.base import AdapterPlugin

from dbt.adapters.chaintable.connections import ChainTableConnectionManager  # noqa: F401
from dbt.adapters.chaintable.connections import ChainTableCredentials
from dbt.adapters.chaintable.impl import ChainTableAdapter
from dbt.include import chaintable

Plugin = AdapterPlugin(
    adapter=ChainTableAdapter,  # type: ignore[arg-type]
    credentials=ChainTableCredentials,
    include_path=chaintable.PACKAGE_PATH,
    dependencies=["spark"],
)
