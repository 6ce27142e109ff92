from dbt.adapters.base import AdapterPlugin

from dbt.adapters.logstore.connections import LogstoreConnectionManager  # noqa: F401
from dbt.adapters.logstore.credentials import LogstoreCredentials
from dbt.adapters.logstore.impl import LogstoreAdapter
from dbt.include import logstore

Plugin = AdapterPlugin(
    adapter=LogstoreAdapter,  # type: ignore[arg-type]
    credentials=LogstoreCredentials,
    include_path=logstore.PACKAGE_PATH,
    dependencies=["spark"],
)
