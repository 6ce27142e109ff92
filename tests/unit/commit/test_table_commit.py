"""An incremental commit's intent (commit/table_commit.py): what recovery needs to judge a run
that died between the statement and its tag, and no more."""
from dbt.adapters.logstore import names
from dbt.adapters.logstore.commit.table_commit import intent_properties
from dbt.adapters.logstore.spark.catalog import Catalog


class _Tables:
    """A fake of dbt's adapter.execute: counts, the files fingerprint and Delta's history."""

    def __init__(self):
        self.sql = []

    def __call__(self, sql, fetch=False):
        from types import SimpleNamespace

        self.sql.append(sql)
        if sql.startswith("describe history"):
            rows = [{"operation": "MERGE", "version": 7}]
        elif sql.startswith("select sha2("):
            rows = [("abc",)]
        else:  # a count: the table 10 rows, the rows it replaces 4, the new rows 6
            rows = [(4 if "left semi join" in sql else 6 if "__logstore_new" in sql else 10,)]
        return None, SimpleNamespace(rows=rows)


def test_a_delta_tables_intent_is_its_version_without_counts():
    tables = _Tables()
    intent = intent_properties(Catalog(tables), "s.t__logstore_new", "s.t", None, ("id",),
                               old_properties={"delta.minReaderVersion": "1"})
    assert intent == {names.INTENT_TABLE_STATE: "version:7"}
    assert tables.sql == ["describe history s.t limit 20"]  # no count: no Spark job


def test_a_plain_tables_intent_has_its_files_and_row_counts():
    tables = _Tables()
    intent = intent_properties(Catalog(tables), "s.t__logstore_new", "s.t", None, ("id",), old_properties={})
    assert intent == {names.INTENT_TABLE_STATE: "files:abc", names.INTENT_ROWS_BEFORE: "10",
                      names.INTENT_ROWS_AFTER: str(10 - 4 + 6)}
    # the new rows counted here when the run did not count them; not again when it did
    assert sum("__logstore_new" in sql and "semi" not in sql for sql in tables.sql) == 1
    tables = _Tables()
    intent_properties(Catalog(tables), "s.t__logstore_new", "s.t", 6, ("id",), old_properties={})
    assert not any("__logstore_new" in sql and "semi" not in sql for sql in tables.sql)
