"""Logged models on Iceberg and on Delta, in a Spark session with the format's own catalog
(tests/table_formats.py): a keyed `table` rebuilt with the format's atomic `create or replace`
(never dropped and renamed), an incremental `merge` through MERGE INTO, an `insert_overwrite`
of one partition a run, a schema change, a `dbt snapshot`. After every run, for every model:
the confirmed records replay to the table; the table and its log's last confirmation name the
same format version (Iceberg snapshot id, Delta version), and the table AS OF that version is
the table; every earlier version is still there and holds the rows it held (the history kept).
Last, the hybrid read (`latest-full`) of a table a newer commit has changed but not logged yet
reads exactly the logged version; a downstream's first read at the first run's cut
(`logstore_changes(..., at_run=...)`) reads the version that run's record names. (Kills and recovery on these formats:
tests/functional/test_faults_random_iceberg.py and _delta.py.)"""
import json

import pytest
from dbt.tests.util import run_dbt

from dbt.adapters.logstore.reading.project import DbtProject
from tests.functional.contract import (
    TEST_SESSION, confirmed, read_topic, replay, spark, stop_spark, table_properties, table_state,
    wait_for_confirmations,
)
from tests.functional.dbt_helpers import logstore_statuses
from tests.functional.test_run_records import invocation_of
from tests.table_formats import SESSION_SETTINGS

ORDERS = """
{{ config(materialized='table', unique_key='id', log_system='kafka', log_system_partitions=2) }}
select id, concat('v', cast((id * {{ var('step') }}) % 5 as string)) as version
{%- if var('step', 1) >= 3 %}, id * 10 as added{% endif %}
from range({{ var('step') }} % 3, 12) as r(id)
"""
MERGED = """
{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id',
          log_system='kafka') }}
select id, {{ var('step') }} as seen from range({{ var('step') }} * 2, {{ var('step') }} * 2 + 4) as r(id)
"""
# a run overwrites one day's partition: steps 1 and 3 the same day (3 with a row fewer), step 2 the other
DAILY = """
{{ config(materialized='incremental', incremental_strategy='insert_overwrite', partition_by=['day'],
          unique_key='id', log_system='kafka') }}
select id, {{ var('step') }} as seen, date_add(date'2024-01-01', {{ var('step') }} % 2) as day
from range(({{ var('step') }} % 2) * 10, ({{ var('step') }} % 2) * 10 + 2 + {{ var('step') }} % 3) as r(id)
"""
HISTORY = """
{% snapshot orders_history %}
{{ config(strategy='check', check_cols=['version'], unique_key='id', log_system='kafka') }}
select id, version from {{ ref('orders') }}
{% endsnapshot %}
"""
LOGGED = ("orders", "merged", "daily", "orders_history")
# orders read between two cuts (built only when asked): a first read at the first run's cut is
# orders as of that run's version (without the column step 3 added), then the latest cut
ORDERS_AT_CUT = """
{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id',
          log_system='kafka', enabled=var('at_cut', false)) }}
select id, version, _logstore_op from {{ logstore_changes(ref('orders'), normalize=true, at_run=var('cut', 'latest')) }}
"""


def _versions(relation: str, table_format: str):
    """The format's versions of a table, oldest first."""
    if table_format == "iceberg":
        rows = spark().sql(f"select snapshot_id from {relation}.snapshots order by committed_at").collect()
        return [str(r[0]) for r in rows]
    rows = spark().sql(f"describe history {relation}").collect()
    return sorted((str(r["version"]) for r in rows), key=int)


class LoggedModelsOnAFormat:
    """One format's test (a class each: dbt's project fixtures are per class)."""

    table_format = "parquet"

    @pytest.fixture(scope="class", autouse=True)
    def format_session(self):
        """This worker's Spark session restarted with the format's catalog, and ended after.
        The JVM is started plain first: the settings of the session that starts a JVM stay its
        defaults (system properties) for every later session in it."""
        spark()
        stop_spark()
        spark(SESSION_SETTINGS[self.table_format])
        yield
        stop_spark()

    @pytest.fixture(scope="class")
    def dbt_profile_target(self, kafka_bootstrap_servers, spark_session_dir):
        return {"type": "logstore", "method": "session", "host": "localhost", "threads": 1,
                "kafka_bootstrap_servers": kafka_bootstrap_servers, "session_dir": spark_session_dir,
                "server_side_parameters": {**TEST_SESSION, **SESSION_SETTINGS[self.table_format]}}

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"+file_format": self.table_format},
                "snapshots": {"+file_format": self.table_format}}

    @pytest.fixture(scope="class")
    def models(self):
        return {"orders.sql": ORDERS, "merged.sql": MERGED, "daily.sql": DAILY,
                "orders_at_cut.sql": ORDERS_AT_CUT}

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"orders_history.sql": HISTORY}

    def _check(self, project, servers, table_format, model, history):
        """The contract and the version tie of one model after a run, which is added to
        `history` (version -> rows)."""
        relation = f"{project.test_schema}.{model}"
        where = f"{table_format} {model}"
        messages = confirmed(servers, relation, read_topic(servers, relation))
        types, table = table_state(relation)
        assert replay(messages, types) == table, where
        version = table_properties(relation)["logstore.snapshot.table-version"]
        last = wait_for_confirmations(servers, relation, 1)[-1]
        assert last["table_version"] == version, (where, last)
        assert version == self._data_version(relation, table_format), where
        assert table_state(f"{relation} version as of {version}") == (types, table), where
        history[version] = (types, table)
        return messages

    @staticmethod
    def _check_history(project, table_format, model, history):
        """Every version a run committed is still readable as it was (after the last run: a
        version lost earlier is lost then too)."""
        relation = f"{project.test_schema}.{model}"
        versions = _versions(relation, table_format)
        for old_version, (old_types, old_rows) in history.items():
            assert old_version in versions, (table_format, model, old_version)
            assert table_state(f"{relation} version as of {old_version}")[1] == old_rows, \
                f"{table_format} {model}: version {old_version} lost its rows"

    @staticmethod
    def _check_reads_at_cuts(project, orders, first_run):
        """logstore_changes(..., at_run=...): the first read at the first run's cut reads orders
        at the version that run's record names (the table has moved on twice and gained a
        column since); the next, at the latest cut, reaches the table now."""
        at_cut = f"{project.test_schema}.orders_at_cut"

        def rows(relation):
            return sorted((r["id"], r["version"]) for r in spark().sql(f"select id, version from {relation}").collect())

        run_dbt(["run", "-s", "orders_at_cut", "--vars", json.dumps({"step": 3, "at_cut": True, "cut": first_run})])
        assert rows(at_cut) == [(i, f"v{i % 5}") for i in range(1, 12)] != rows(orders)
        run_dbt(["run", "-s", "orders_at_cut", "--vars", json.dumps({"step": 3, "at_cut": True})])
        assert rows(at_cut) == rows(orders)

    @staticmethod
    def _data_version(relation, table_format):
        if table_format == "iceberg":
            return table_properties(relation)["current-snapshot-id"]
        rows = spark().sql(f"describe history {relation}").collect()
        return str(max(r["version"] for r in rows if r["operation"] not in (
            "SET TBLPROPERTIES", "UNSET TBLPROPERTIES", "ADD COLUMNS")))

    def test_logged_models_keep_the_tables_history(self, project, kafka_bootstrap_servers):
        servers, table_format = kafka_bootstrap_servers, self.table_format
        histories = {model: {} for model in LOGGED}
        for step in (1, 2, 3):  # 3: orders gains a column, gets keys 0 and 1 back
            variables = ["--vars", json.dumps({"step": step})]
            results = run_dbt(["run", *variables])
            assert all(r.adapter_response.get("log_table_version") for r in results), \
                [r.adapter_response for r in results]
            if step == 1:
                first_run = invocation_of(project)  # for the reads at cuts
            run_dbt(["snapshot", *variables])
            for model in LOGGED:
                self._check(project, servers, table_format, model, histories[model])
        for model in LOGGED:
            self._check_history(project, table_format, model, histories[model])
        orders = f"{project.test_schema}.orders"
        assert "added" in table_state(orders)[0]
        self._check_reads_at_cuts(project, orders, first_run)
        # every run a commit of the table's own (create or replace, MERGE, overwrite)
        for model in ("orders", "merged", "daily"):
            assert len(histories[model]) == 3, (model, list(histories[model]))
        if table_format == "delta":
            operations = {r["operation"] for r in spark().sql(f"describe history {orders}").collect()}
            assert "CREATE OR REPLACE TABLE AS SELECT" in operations, operations
            merged = spark().sql(f"describe history {project.test_schema}.merged").collect()
            assert "MERGE" in {r["operation"] for r in merged}
        statuses = logstore_statuses(project)
        assert all(s.agree for s in statuses.values()), {m: s.problems for m, s in statuses.items()}

        # a newer commit on its way to the log (changed, tagged, not yet mirrored): the hybrid
        # read takes the version its log confirmed, not the table's newest rows
        logged_version = table_properties(orders)["logstore.snapshot.table-version"]
        _, logged_rows = table_state(orders)
        spark().sql(f"insert into {orders} values (999, 'unlogged', 9990)")
        spark().sql(f"alter table {orders} set tblproperties "
                    f"('logstore.changeset.committed' = 'a-run-still-mirroring')")
        dbt_project = DbtProject(project.project_root, profiles_dir=project.profiles_dir)
        with dbt_project.connection():
            model = next(m for m in dbt_project.logged_models() if m.name == "orders")
            snapshot, rows = dbt_project.snapshot_rows(model)
            read = [row for _, row in rows]
        assert snapshot == wait_for_confirmations(servers, orders, 1)[-1]["snapshot"]
        assert len(read) == sum(logged_rows.values()) and all(r["id"] != 999 for r in read)
        assert table_state(f"{orders} version as of {logged_version}")[1] == logged_rows


class TestIceberg(LoggedModelsOnAFormat):
    table_format = "iceberg"


class TestDelta(LoggedModelsOnAFormat):
    table_format = "delta"
