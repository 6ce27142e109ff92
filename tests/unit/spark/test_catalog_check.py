"""A partitioned logged model is refused on Spark's in-memory catalog, which loses a renamed
table's partitions (the adapter's check, with a fake session; no JVM)."""
from types import SimpleNamespace

import pytest
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore import impl
from dbt.adapters.logstore.config.log_config import LogConfig

LOG = LogConfig(model="by_day", system="kafka", topic="t", bootstrap_servers="x:1")


def _adapter(monkeypatch, catalog):
    spark = SimpleNamespace(conf=SimpleNamespace(get=lambda key, default=None: {
        "spark.sql.catalogImplementation": catalog}.get(key, default)))
    monkeypatch.setattr(impl, "active_spark", lambda handle: spark if catalog else None)
    connection = SimpleNamespace(handle=object())
    return SimpleNamespace(connections=SimpleNamespace(get_thread_connection=lambda: connection))


def check(adapter, partition_by):
    return impl.LogstoreAdapter.logstore_check_catalog(adapter, LOG, partition_by)


def test_a_partitioned_model_on_the_in_memory_catalog_is_refused(monkeypatch):
    with pytest.raises(DbtRuntimeError) as error:
        check(_adapter(monkeypatch, "in-memory"), ["day"])
    text = str(error.value)
    assert "Model 'by_day'" in text and "spark.sql.catalogImplementation = in-memory" in text
    assert "Hive" in text and "Nothing was changed" in text


@pytest.mark.parametrize("catalog, partition_by", [
    ("hive", ["day"]),  # dbt-spark's own session
    ("in-memory", None), ("in-memory", []),  # a rename without partitions keeps its rows
    (None, "day"),  # thrift: the server's catalog
])
def test_what_is_not_refused(monkeypatch, catalog, partition_by):
    assert check(_adapter(monkeypatch, catalog), partition_by) == ""
