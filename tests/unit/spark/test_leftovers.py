"""Leftover directories of the adapter's own relations: what is recognised as ours."""
from dbt.adapters.logstore.spark.leftovers import drop_sql, orphan_location, removal_sql, location_of, uncommitted_output

ERROR = ("[LOCATION_ALREADY_EXISTS] Cannot name the managed table as "
         "`spark_catalog`.`analytics`.`orders__logstore_new`, as its associated location "
         "'file:/wh/analytics.db/orders__logstore_new' already exists. Please pick a different "
         "table name, or remove the existing location first. SQLSTATE: 42710")


def test_our_leftover_is_recognised():
    assert orphan_location(ERROR, "orders__logstore_new") == "file:/wh/analytics.db/orders__logstore_new"
    assert orphan_location(ERROR, "ORDERS__logstore_NEW") == "file:/wh/analytics.db/orders__logstore_new"


def test_a_users_table_is_never_ours():
    error = ERROR.replace("orders__logstore_new", "orders")
    assert orphan_location(error, "orders") is None


def test_the_directory_must_be_the_relations_own():
    # an error naming another directory (or another relation's) is not acted on
    assert orphan_location(ERROR, "orders__logstore_changes") is None
    other = ERROR.replace("'file:/wh/analytics.db/orders__logstore_new'", "'file:/wh/analytics.db/data'")
    assert orphan_location(other, "orders__logstore_new") is None


def test_other_errors_are_not_leftovers():
    assert orphan_location("[TABLE_OR_VIEW_ALREADY_EXISTS] orders__logstore_new", "orders__logstore_new") is None
    assert orphan_location("", "orders__logstore_new") is None


def test_removal_points_a_managed_table_at_the_directory_and_drops_it():
    statements = removal_sql("analytics.orders__logstore_new__gc", "file:/wh/a'b")
    # purged: Iceberg's session catalog keeps a plain table's files on a drop without PURGE
    assert statements[0] == "drop table if exists analytics.orders__logstore_new__gc purge"
    assert statements[1].startswith("create table analytics.orders__logstore_new__gc")
    assert statements[2] == "alter table analytics.orders__logstore_new__gc set location 'file:/wh/a\\'b'"
    assert statements[3] == statements[0]
    # and the helper's own directory goes too
    assert statements[4:] == [statements[1], statements[3]]


def test_the_adapters_own_tables_are_dropped_with_their_files():
    assert drop_sql("analytics.orders__logstore_changes") == \
        "drop table if exists analytics.orders__logstore_changes purge"
    assert drop_sql("orders__logstore_changes_events", "view") == \
        "drop view if exists orders__logstore_changes_events"


def test_a_killed_inserts_output_is_the_committers_scratch_directory_of_the_table():
    assert uncommitted_output("file:/wh/analytics.db/orders/") == "file:/wh/analytics.db/orders/_temporary"
    described = [("id", "bigint", None), ("", "", ""), ("# Detailed Table Information", "", ""),
                 ("Location", "file:/wh/analytics.db/orders", ""), ("Provider", "parquet", "")]
    assert location_of(described) == "file:/wh/analytics.db/orders"
    assert location_of([("id", "bigint", None)]) is None  # no location: nothing to remove


def test_the_models_own_relations_in_one_listing_without_temporary_views():
    from types import SimpleNamespace

    from dbt.adapters.logstore.spark.leftovers import own_relations

    class Listing:
        sql = None

        def rows(self, sql):
            self.sql = sql
            return [("s", "orders__logstore_new", False), ("s", "ORDERS__LOGSTORE_LOCK", False),
                    ("", "orders__logstore_held", True)]  # a view of the session, any schema

    catalog = Listing()
    target = SimpleNamespace(schema="s", identifier="orders")
    assert own_relations(catalog, target) == {"orders__logstore_new", "orders__logstore_lock"}
    assert catalog.sql == "show tables in s like 'orders__logstore_*'"


def test_the_models_own_relations_from_dbts_cache_without_a_statement():
    # a run that found its lock free reads what dbt listed as the invocation began
    from types import SimpleNamespace

    from dbt.adapters.logstore.spark.leftovers import own_relations

    class NoStatements:
        def rows(self, sql):
            raise AssertionError(f"no statement expected: {sql}")

    cached = [SimpleNamespace(identifier=i) for i in
              ("orders", "ORDERS__LOGSTORE_MERGED", "orders_daily", "customers__logstore_new")]
    target = SimpleNamespace(schema="s", identifier="orders")
    assert own_relations(NoStatements(), target, cached) == {"orders__logstore_merged"}
    assert own_relations(NoStatements(), target, []) == set()
