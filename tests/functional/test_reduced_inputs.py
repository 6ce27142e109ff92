"""Runs from reduced inputs never reach the log (dbt/adapters/logstore/commit/run_modes.py).

`dbt run --empty` reads refs and sources as zero rows; replacing a logged table with its result
logged the deletion of every row. Here, a first build under --empty creates the tables with no
rows and no log; later `run --empty` and `build --empty` leave every table and every topic (data
and control) exactly as they were, say so in the run result, and the next full runs log exactly
what changed, with each log replaying to its table."""
import json
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt
from kafka import KafkaAdminClient

from tests.functional.contract import assert_contract, end_offsets, table_state
from tests.functional.dbt_helpers import logstore_statuses

RAW = """
{{ config(materialized='table') }}
select * from values
{% if var('step', 1) == 1 %}
  (1, 'Ada', 10), (2, 'Bo', 20), (3, 'Cy', 30)
{% else %}
  (1, 'Ada', 11), (3, 'Cy', 30), (4, 'Di', 40)
{% endif %}
as t(id, name, amount)
"""
# keyed table, keyless table, incremental merge, and a model reading the table's log
CUSTOMERS = """
{{ config(materialized='table', unique_key='id', log_system='kafka') }}
select * from {{ ref('raw_customers') }}
"""
NAMES = """
{{ config(materialized='table', log_system='kafka') }}
select name from {{ ref('raw_customers') }} -- a trailing comment
"""
BALANCES = """
{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id',
          log_system='kafka') }}
select id, amount from {{ ref('raw_customers') }}
"""
FOLLOWER = """
{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id',
          log_system='kafka') }}
select id, name, amount, _logstore_op from {{ logstore_changes(ref('customers'), normalize=true) }}
"""
# an unlogged model downstream: `build --empty` must be able to check it
REPORT = """
{{ config(materialized='view') }}
select count(*) as customers from {{ ref('customers') }}
"""
LOGGED = ("customers", "names", "balances", "follower")


def _topics(servers):
    admin = KafkaAdminClient(bootstrap_servers=servers)
    try:
        return set(admin.list_topics())
    finally:
        admin.close()



def _responses(results):
    return {r.node.name: r.adapter_response for r in results if r.node.resource_type == "model"}


class TestReducedInputRuns:
    @pytest.fixture(scope="class")
    def models(self):
        return {"raw_customers.sql": RAW, "customers.sql": CUSTOMERS, "names.sql": NAMES,
                "balances.sql": BALANCES, "follower.sql": FOLLOWER, "report.sql": REPORT}

    def test_empty_runs_never_reach_the_log(self, project, kafka_bootstrap_servers):
        servers, schema = kafka_bootstrap_servers, project.test_schema
        topics = {f"{schema}.{m}" for m in LOGGED}
        topics |= {f"{t}__logstore_commits" for t in topics}

        # a first build under --empty: tables with the model's columns, no rows, no topic
        responses = _responses(run_dbt(["build", "--empty"]))
        for model in LOGGED:
            assert responses[model]["rows_mirrored"] == 0
            assert responses[model]["log_skipped"] == "--empty"
            assert "NOT LOGGED (--empty)" in responses[model]["_message"]
            assert "created the table with no rows" in responses[model]["_message"]
            types, rows = table_state(f"{schema}.{model}")
            assert not rows and types, model
        assert set(table_state(f"{schema}.customers")[0]) == {"id", "name", "amount"}
        assert not topics & _topics(servers)
        assert all(s.agree for s in logstore_statuses(project).values())

        # full runs start the logs (the follower reads what customers logged)
        run_dbt(["run"])
        run_dbt(["run", "--select", "follower"])
        for model in LOGGED:
            assert_contract(servers, f"{schema}.{model}", f"{schema}.{model}")
        assert table_state(f"{schema}.follower") == table_state(f"{schema}.customers")
        before = end_offsets(servers, topics)
        tables = {m: table_state(f"{schema}.{m}") for m in LOGGED}

        # --empty over existing logged tables: nothing written anywhere, tables unchanged
        for args in (["run", "--empty"], ["build", "--empty"], ["run", "--empty", "--full-refresh"]):
            responses = _responses(run_dbt(args))
            for model in LOGGED:
                assert responses[model]["rows_mirrored"] == 0, (args, model)
                assert "left the table and its log as they are" in responses[model]["_message"]
            assert end_offsets(servers, topics) == before, args
            assert {m: table_state(f"{schema}.{m}") for m in LOGGED} == tables, args
        statuses = logstore_statuses(project)
        assert all(statuses[m].agree for m in LOGGED), {m: statuses[m].problems for m in LOGGED}

        # the next full runs log exactly what changed: the follower is not behind
        results = run_dbt(["run", "--vars", json.dumps({"step": 2})])
        assert _responses(results)["customers"]["rows_mirrored"] == 4  # u(1) d(2)+tombstone c(4)
        run_dbt(["run", "--select", "follower", "--vars", json.dumps({"step": 2})])
        for model in LOGGED:
            assert_contract(servers, f"{schema}.{model}", f"{schema}.{model}")
        assert table_state(f"{schema}.follower")[1] == table_state(f"{schema}.customers")[1]
        statuses = logstore_statuses(project)
        assert all(statuses[m].agree for m in LOGGED), {m: statuses[m].problems for m in LOGGED}

    def test_a_broken_query_fails_under_empty_before_anything_changes(self, project):
        (Path(project.project_root) / "models" / "names.sql").write_text(
            NAMES.replace("select name", "select no_such_column"))
        results = run_dbt(["run", "--empty", "--select", "names"], expect_pass=False)
        assert "no_such_column" in str(results[0].message).lower()
