"""A run killed inside CREATE TABLE ... AS SELECT leaves the table's directory without a
metastore entry. The next run removes what is certainly the adapter's own and goes on; a
user's directory is never touched."""
from pathlib import Path
from urllib.parse import urlparse

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.functional.contract import assert_contract, spark
from tests.functional.dbt_helpers import failure_text, logstore_statuses

MODEL = """
{{ config(materialized='table', unique_key='id', log_system='kafka') }}
select * from values {% if var('step', 1) == 1 %} (1, 'a') {% else %} (1, 'b'), (2, 'c') {% endif %} as t(id, v)
"""


def _schema_dir(schema):
    rows = spark().sql(f"describe schema extended {schema}").collect()
    location = next(r[1] for r in rows if r[0].lower() == "location")
    return Path(urlparse(location).path)


def _leave(directory: Path):
    """What a CTAS killed mid-write leaves: a directory with data and no metastore entry."""
    (directory / "_temporary" / "0").mkdir(parents=True)
    (directory / "part-00000-killed.snappy.parquet").write_bytes(b"PAR1 half written")


class TestLeftoverDirectories:
    @pytest.fixture(scope="class")
    def models(self):
        return {"orders.sql": MODEL, "fresh.sql": MODEL}

    def test_leftovers_are_cleared(self, project, kafka_bootstrap_servers):
        schema = project.test_schema
        run_dbt(["run", "-s", "orders"])
        base = _schema_dir(schema)
        # every relation a run of an existing table and of a first build creates
        for name in ("orders__logstore_new", "orders__logstore_changes", "orders__logstore_lock",
                     "fresh__logstore_new", "fresh__logstore_changes"):
            _leave(base / name)
        _, out = run_dbt_and_capture(["run", "--vars", "{step: 2}"])
        text = " ".join(out.split())
        for name in ("orders__logstore_new", "orders__logstore_changes", "orders__logstore_lock",
                     "fresh__logstore_new", "fresh__logstore_changes"):
            assert f"removing file:{base / name}" in text or f"removing {base / name}" in text, name
            assert not (base / name).exists() or not any((base / name).iterdir())
        assert not [p.name for p in base.iterdir() if "__logstore_" in p.name]  # helpers included
        for model in ("orders", "fresh"):
            relation = f"{schema}.{model}"
            assert sorted(tuple(r) for r in spark().table(relation).collect()) == [(1, "b"), (2, "c")]
            assert_contract(kafka_bootstrap_servers, relation, relation)


USERS = "{{ config(materialized='table', log_system='kafka') }} select 1 as id"


class TestUsersDirectoryIsNeverRemoved:
    @pytest.fixture(scope="class")
    def models(self):
        return {"mine.sql": USERS}

    def test_user_directory_kept(self, project):
        base = _schema_dir(project.test_schema)
        _leave(base / "mine")  # the model's own name: not a relation of the adapter's
        out = failure_text(["run"])
        assert "LOCATION_ALREADY_EXISTS" in out
        assert (base / "mine" / "part-00000-killed.snappy.parquet").exists()


# dbt-tests-adapter's incremental_append_new_columns_remove_one, logged: its incremental run
# adds field3 and field4 to the table and then fails in Spark (the new rows lack field2), as it
# does on plain dbt-spark
REMOVE_ONE = """
{{ config(materialized='incremental', unique_key='id', on_schema_change='append_new_columns',
          log_system='kafka') }}
{% if is_incremental() %}
select id, cast(id as string) as field1, cast(id as string) as field3, cast(id as string) as field4
from range(4) as r(id) where id not in (select id from {{ this }})
{% else %}
select id, cast(id as string) as field1, cast(id as string) as field2 from range(4) as r(id)
{% endif %}
"""


class TestAFailedStatementLeavesNoChangeSet:
    @pytest.fixture(scope="class")
    def models(self):
        return {"remove_one.sql": REMOVE_ONE}

    def test_no_change_set_is_left(self, project, kafka_bootstrap_servers):
        schema = project.test_schema
        run_dbt(["run"])
        failure_text(["run"])  # fails in Spark
        tables = {r.tableName for r in spark().sql(f"show tables in {schema}").collect()
                  if not r.isTemporary}  # (the session's temporary views are listed too)
        assert tables == {"remove_one"}, tables
        statuses = logstore_statuses(project)
        assert statuses["remove_one"].agree, statuses["remove_one"].problems
