from types import SimpleNamespace

from dbt.adapters.spark.relation import SparkRelation

from dbt.adapters.logstore.spark.table_formats import (
    as_of, committed_version, format_of, is_version_state, replaces_in_place, table_state,
)


def table(**kwargs):
    return SparkRelation.create(schema="analytics", identifier="orders", type="table", **kwargs)


ICEBERG_LISTED = table(information="Type: EXTERNAL\nProvider: hive\nTable Properties: [owner=root, "
                                   "table_type=ICEBERG, uuid=2fa9]\n")


def test_the_format_of_a_listed_table():
    assert format_of(table(is_delta=True)) == "delta"
    assert format_of(table(is_iceberg=True)) == "iceberg"
    # Iceberg's session catalog lists its tables as Hive's: its metastore parameter tells
    assert format_of(ICEBERG_LISTED) == "iceberg"
    assert format_of(table(information="Provider: parquet\n")) is None
    assert format_of(None) is None


def test_a_versioned_model_replaces_its_own_tables_and_swaps_anything_else():
    assert replaces_in_place("iceberg", ICEBERG_LISTED)
    assert replaces_in_place("delta", table(is_delta=True))
    assert replaces_in_place("delta", None)  # a first build creates by `create or replace`
    assert not replaces_in_place("delta", ICEBERG_LISTED)  # a change of format
    assert not replaces_in_place("delta", table(information="Provider: parquet\n"))
    assert not replaces_in_place("delta", SparkRelation.create(schema="a", identifier="o", type="view"))
    assert not replaces_in_place("parquet", None) and not replaces_in_place(None, None)


class FakeCatalog:
    def __init__(self, props, history=()):
        self.props, self.history = props, history

    def properties(self, relation):
        return self.props

    def rows(self, sql):
        assert sql.startswith("describe history analytics.orders")
        return [dict(version=v, operation=o) for v, o in self.history]


def test_the_version_a_commit_made():
    iceberg = FakeCatalog({"format": "iceberg/parquet", "current-snapshot-id": "8470"})
    assert committed_version(iceberg, "analytics.orders") == "8470"
    assert committed_version(FakeCatalog({"format": "iceberg/parquet", "current-snapshot-id": "none"}),
                             "analytics.orders") is None
    # Delta: the newest version that changed rows, not the property updates after it
    delta = FakeCatalog({"delta.minReaderVersion": "1"},
                        [(7, "SET TBLPROPERTIES"), (6, "SET TBLPROPERTIES"), (5, "MERGE"), (4, "WRITE")])
    assert committed_version(delta, "analytics.orders") == "5"
    assert committed_version(FakeCatalog({"numFiles": "3"}), "analytics.orders") is None  # parquet


def test_reading_as_of_a_version():
    assert as_of("analytics.orders", "12") == "analytics.orders version as of 12"
    assert as_of("analytics.orders", None) == "analytics.orders"


def test_a_table_dbt_cached_from_its_create_is_known_by_its_properties():
    cached = table()  # no listing information: dbt added it to its cache after a create
    assert format_of(cached) is None
    assert format_of(cached, FakeCatalog({"format": "iceberg/parquet"})) == "iceberg"
    assert format_of(cached, FakeCatalog({"delta.minWriterVersion": "2"})) == "delta"
    assert replaces_in_place("delta", cached, FakeCatalog({"delta.minWriterVersion": "2"}))
    assert not replaces_in_place("delta", cached, FakeCatalog({"numFiles": "1"}))


def test_a_versioned_tables_state_is_its_version():
    state = table_state(FakeCatalog({"format": "iceberg/parquet", "current-snapshot-id": "8470"}),
                        "analytics.orders")
    assert state == "version:8470" and is_version_state(state)
    assert not is_version_state("files:ab12") and not is_version_state(None)
