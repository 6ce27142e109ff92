"""dbt's entry point to the adapter, `Plugin` (dbt reads it after importing this package). It
is made when first asked for: importing a part of the package alone (the dbt-logstore command
line, the log's code in a Spark executor) then does not load dbt's adapter classes, which take
seconds to import."""
from typing import Any


def __getattr__(name: str) -> Any:
    if name != "Plugin":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from dbt.adapters.base import AdapterPlugin

    from dbt.adapters.logstore.credentials import LogstoreCredentials
    from dbt.adapters.logstore.impl import LogstoreAdapter
    from dbt.include import logstore

    plugin = globals()["Plugin"] = AdapterPlugin(
        adapter=LogstoreAdapter,  # type: ignore[arg-type]
        credentials=LogstoreCredentials,
        include_path=logstore.PACKAGE_PATH,
        dependencies=["spark"],
    )
    return plugin
