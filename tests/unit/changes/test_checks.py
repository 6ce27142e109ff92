"""The checks before a table commit (changes/checks.py): inside the change set's own query
(checked_sql), and the query that says which one failed."""
from types import SimpleNamespace

import pytest

from dbt.adapters.logstore.changes import checks
from dbt.adapters.logstore.changes.diff import OP_DUPLICATE
from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.spark.catalog import Catalog

LOG = LogConfig(model="orders", system="kafka", topic="t", bootstrap_servers="b:9092", unique_key=("id",))


def _failing(sql: str) -> str:
    """The condition under which checked_sql's query stops."""
    return sql.split("select case when ", 1)[1].split(" then raise_error(", 1)[0]


def test_every_change_is_checked_against_the_record_limit():
    sql = checks.checked_sql(LOG, "select * from c")
    assert _failing(sql).endswith("+ 1024 > 1048576") and sql.endswith("from (select * from c)")
    assert f"raise_error('{checks.CHECK_FAILED}')" in sql
    tuned = LogConfig(**{**LOG.__dict__, "client_properties": {"max.request.size": "2000"}})
    assert _failing(checks.checked_sql(tuned, "select * from c")).endswith("+ 1024 > 2000")


def test_repeated_keys_are_checked_only_when_the_diff_marked_them():
    assert f"= '{OP_DUPLICATE}'" not in _failing(checks.checked_sql(LOG, "q"))
    assert f"__logstore_op = '{OP_DUPLICATE}'" in _failing(checks.checked_sql(LOG, "q", marked_duplicates=True))
    keyless = LogConfig(**{**LOG.__dict__, "unique_key": ()})
    assert f"= '{OP_DUPLICATE}'" not in _failing(checks.checked_sql(keyless, "q", marked_duplicates=True))


@pytest.mark.parametrize("log_format,mode,refused", [
    ("debezium-json", "all", False), ("json", "upsert", False), ("json", "all", True)])
def test_updates_and_deletes_are_stopped_where_the_format_cannot_write_them(log_format, mode, refused):
    log = LogConfig(**{**LOG.__dict__, "format": log_format, "changelog_mode": mode})
    assert ("__logstore_op <> 'c'" in _failing(checks.checked_sql(log, "q"))) is refused


def test_the_stopped_query_is_recognised_by_its_message_only():
    assert checks.failed_inside(RuntimeError(f"[USER_RAISED_EXCEPTION] {checks.CHECK_FAILED} SQLSTATE: P0001"))
    assert not checks.failed_inside(RuntimeError("[TABLE_OR_VIEW_NOT_FOUND] x"))


class _Recording:
    def __init__(self, rows):
        self.sql, self._rows = [], rows

    def __call__(self, sql, fetch=False):
        self.sql.append(sql)
        return None, SimpleNamespace(rows=[self._rows])


def test_the_query_without_the_checks_says_which_check_failed():
    # after a checked query failed, or a re-base's retraction added rows: one query, as before
    execute = _Recording((3, 0, 1, '{"id":1}', 5000, 200))
    big = LogConfig(**{**LOG.__dict__, "client_properties": {"max.request.size": "4000"}})
    with pytest.raises(Exception, match=r"Model 'orders'.*\{\"id\":1\}.*max.request.size = 4000.*Nothing was changed"):
        checks.check_change_set(Catalog(execute), big, "(select 1)")
    assert execute.sql[0].startswith("select count(*), count_if(") and execute.sql[0].endswith("from (select 1)")
