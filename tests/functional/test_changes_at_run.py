"""`logstore_changes(ref(...), at_run=...)` (issue 54): a downstream model reads its upstream's
changes between two cuts: from the run record it last read at up to the one it names (an
invocation id, or 'latest'), not up to the upstream's latest snapshot. On the suite's Apache
Kafka: the downstream table equals the upstream's table as of each cut, though the upstream
moved on; its confirmation names the upstream snapshot it read up to (not the table's newer
one); a first read at an old cut of a table without versions is refused before any table
changes, and so is a run that is not in the records."""
import json

import pytest
from dbt.tests.util import run_dbt

from dbt.adapters.logstore.reading.runs import run_at, run_records
from tests.functional.contract import assert_contract, spark, table_properties, table_state
from tests.functional.test_run_records import _project_name, invocation_of, last_confirmation

pytestmark = pytest.mark.apache_kafka  # run records and transactions proven on Apache Kafka

# ids step..19 (so each step deletes one), names changed each step
CUSTOMERS = """
{{ config(materialized='table', unique_key='id', log_system='kafka', log_system_partitions=2) }}
select id, concat('c', cast(id * {{ var('step', 1) }} as string)) as name
from range({{ var('step', 1) }}, 20) as r(id)
"""
MIRROR = """
{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id',
          log_system='kafka') }}
select id, name, _logstore_op
from {{ logstore_changes(ref('customers'), normalize=true, at_run=var('cut', none)) }}
"""


def customers_at(step: int):
    rows = spark().sql(f"select id, concat('c', cast(id * {step} as string)) as name "
                       f"from range({step}, 20) as r(id)").collect()
    return sorted((r["id"], r["name"]) for r in rows)


def rows_of(relation: str):
    return sorted((r["id"], r["name"]) for r in spark().sql(f"select id, name from {relation}").collect())


def inputs_of(bootstrap: str, topic: str):
    return last_confirmation(bootstrap, topic)["inputs"]


class TestChangesAtRun:
    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.sql": CUSTOMERS, "mirror.sql": MIRROR, "fresh.sql": MIRROR}

    def test_a_downstream_reads_between_two_cuts(self, project, kafka_bootstrap_servers):
        bootstrap, schema = kafka_bootstrap_servers, project.test_schema
        customers, mirror = f"{schema}.customers", f"{schema}.mirror"

        def run(select, step=None, cut=None, passes=True):
            variables = {k: v for k, v in (("step", step), ("cut", cut)) if v is not None}
            return run_dbt(["run", "--select", select, "--vars", json.dumps(variables)],
                           expect_pass=passes)

        run("customers", step=1)
        run("mirror", cut="latest")  # the first read: customers as the latest run left it
        assert rows_of(mirror) == customers_at(1)
        assert inputs_of(bootstrap, mirror) == [{"name": "customers", "topic": customers, "snapshot": 1}]

        run("customers", step=2)
        second = invocation_of(project)
        run("customers", step=3)
        # customers is at snapshot 3; the mirror reads up to the second run's cut: snapshot 2
        run("mirror", cut=second)
        assert rows_of(mirror) == customers_at(2) != customers_at(3)
        assert inputs_of(bootstrap, mirror) == [{"name": "customers", "topic": customers, "snapshot": 2}]
        record = run_at(run_records(bootstrap, _project_name(project), schema))
        assert (record.model("customers").snapshot, record.model("mirror").did) == (3, "changed")

        # an older cut than the one it read at: nothing to read, its position stays
        run("mirror", cut=second)
        assert rows_of(mirror) == customers_at(2)
        run("mirror", cut="latest")
        assert rows_of(mirror) == customers_at(3)
        assert inputs_of(bootstrap, mirror) == [{"name": "customers", "topic": customers, "snapshot": 3}]
        state = table_state(mirror)
        assert_contract(bootstrap, mirror, mirror)

        # refused before anything changes: a first read at a cut the parquet table has moved
        # past (it keeps no older rows), and a run that is not in the records
        run("customers", step=4)
        results = run("fresh", cut=second, passes=False)
        message = results.results[0].message
        assert "Model 'fresh'" in message and "needs that table at snapshot 2" in message \
            and "it is at 4 now" in message, message
        results = run("fresh", cut="no-such-run", passes=False)
        assert "no run record of invocation 'no-such-run'" in results.results[0].message
        relations = {r["tableName"] for r in spark().sql(f"show tables in {schema}").collect()}
        assert "fresh" not in relations
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            assert f"{schema}.fresh" not in admin.list_topics()
        finally:
            admin.close()
        assert table_state(mirror) == state  # not part of those runs


SOURCES_YML = """
version: 2
sources:
  - name: crm
    schema: "{{ target.schema }}"
    tables:
      - name: accounts
        identifier: customers
      - name: flat
        identifier: plain
"""
PLAIN = """
{{ config(materialized='table') }}
select 2 as id
"""
FROM_SOURCES = """
{{ config(materialized='table', unique_key='id', log_system='kafka') }}
select a.id, a.name from {{ source('crm', 'accounts') }} a join {{ source('crm', 'flat') }} f on f.id = a.id
"""


class TestSourceInputs:
    """A `source()` whose table is logged (here this project's own customers, read as another
    project would) is named among the inputs with its topic; a source that is not logged is not."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.sql": CUSTOMERS, "plain.sql": PLAIN, "from_sources.sql": FROM_SOURCES,
                "sources.yml": SOURCES_YML}

    def test_a_logged_source_is_an_input(self, project, kafka_bootstrap_servers):
        bootstrap, schema = kafka_bootstrap_servers, project.test_schema
        run_dbt(["run", "--select", "customers", "plain", "--vars", json.dumps({"step": 2})])
        run_dbt(["run", "--select", "from_sources"])
        assert inputs_of(bootstrap, f"{schema}.from_sources") == [
            {"name": "crm.accounts", "topic": f"{schema}.customers", "snapshot": 1}]
        assert rows_of(f"{schema}.from_sources") == [(2, "c4")]


ACCOUNTS = """
{{ config(materialized='table', unique_key='id', log_system='kafka') }}
select id, concat('a', cast(id + {{ var('step', 1) }} as string)) as name
from range(100, 110 + {{ var('step', 1) }}) as r(id)
"""
# both upstreams' changes at one cut, in one model (ids do not overlap)
BOTH = """
{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id',
          log_system='kafka') }}
select id, name, _logstore_op from {{ logstore_changes(ref('customers'), normalize=true, at_run='latest') }}
union all
select id, name, _logstore_op from {{ logstore_changes(ref('accounts'), normalize=true, at_run='latest') }}
"""


class TestTwoUpstreamsAtOneCut:
    """A model that reads two upstreams' changes at one run record keeps both positions (each
    call of the render adds its own), so a run after reads each upstream from where it got to."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.sql": CUSTOMERS, "accounts.sql": ACCOUNTS, "both.sql": BOTH}

    def test_both_positions_move_together(self, project, kafka_bootstrap_servers):
        bootstrap, schema = kafka_bootstrap_servers, project.test_schema
        both = f"{schema}.both"

        def expected():
            return sorted(rows_of(f"{schema}.customers") + rows_of(f"{schema}.accounts"))

        def positions():
            sources = json.loads(table_properties(both)["logstore.sources"])
            return {name.split(".")[-1]: at["snapshot"] for name, at in sources.items()}

        run_dbt(["run", "--select", "customers", "accounts", "--vars", json.dumps({"step": 1})])
        run_dbt(["run", "--select", "both"])
        assert rows_of(both) == expected()
        assert positions() == {"customers": 1, "accounts": 1}
        run_dbt(["run", "--select", "customers", "accounts", "--vars", json.dumps({"step": 2})])
        run_dbt(["run", "--select", "both"])
        assert rows_of(both) == expected()
        assert positions() == {"customers": 2, "accounts": 2}
        assert sorted(i["name"] for i in inputs_of(bootstrap, both)) == ["accounts", "customers"]
        assert all(i["snapshot"] == 2 for i in inputs_of(bootstrap, both))
