"""Run records and inputs when runs overlap (issue 54), behind the Spark Thrift Server on the
suite's Apache Kafka: a downstream model held after its build read its input, while another
invocation rebuilds that input, never names an input snapshot it may not have read (null, with
both snapshots it may have); each invocation's record names what it did and the other's
snapshot as it ended; a build with no run in between names the input's snapshot."""
import json
import uuid

import pytest

from dbt.adapters.logstore.reading.runs import run_records
from tests.functional.contract import wait_for_confirmations
from tests.functional.fault_project import FaultProject, dbt, wait_until_paused, write_project

pytestmark = pytest.mark.apache_kafka  # proven on Apache Kafka (tests/kafka_cluster.py)

CUSTOMERS = """
{{ config(materialized='table', unique_key='id', log_system='kafka') }}
select id, concat('c', cast(id * {{ var('step') }} as string)) as name from range(1, 8) as r(id)
"""
GOLD = """
{{ config(materialized='table', unique_key='id', log_system='kafka') }}
select id, upper(name) as name, {{ var('step') }} as step from {{ ref('customers') }}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory, kafka_bootstrap_servers, spark_thrift_server) -> FaultProject:
    root = tmp_path_factory.mktemp("overlapping_runs")
    schema = f"overlap_{uuid.uuid4().hex[:8]}"
    write_project(root, schema, kafka_bootstrap_servers, spark_thrift_server,
                  models={"customers": CUSTOMERS, "gold": GOLD})
    return FaultProject(root, schema, spark_thrift_server)


def _run(project: FaultProject, step: int, *select: str, **kwargs):
    args = ["run", "--vars", json.dumps({"step": step, "suffix": "x"})]
    return dbt(project.root, *args, *(["-s", *select] if select else []), **kwargs)


def test_an_input_changed_under_a_build_is_not_named_and_each_record_says_its_run(
        project, kafka_bootstrap_servers, tmp_path):
    bootstrap, schema = kafka_bootstrap_servers, project.schema
    assert _run(project, 1).returncode == 0
    gold = wait_for_confirmations(bootstrap, f"{schema}.gold", 1)[-1]
    assert gold["inputs"] == [{"name": "customers", "topic": f"{schema}.customers", "snapshot": 1}]

    # gold's run holds after its build read customers@1; customers is rebuilt meanwhile
    held = _run(project, 2, "gold", pause=f"before_table_commit:{tmp_path}", wait=False)
    try:
        wait_until_paused(tmp_path, held)
        rebuilt = _run(project, 2, "customers")
        assert rebuilt.returncode == 0, rebuilt.stdout[-3000:]
    finally:
        (tmp_path / "release").touch()
        output, _ = held.communicate(timeout=300)
    assert held.returncode == 0, output[-3000:]
    gold = wait_for_confirmations(bootstrap, f"{schema}.gold", 2)[-1]
    assert gold["snapshot"] == 2
    assert gold["inputs"] == [{"name": "customers", "topic": f"{schema}.customers",
                               "snapshot": None, "read_between": [1, 2]}]  # not guessed

    records = run_records(bootstrap, "faults", schema)
    by_command = {tuple(r.selection.get("select") or ()): r for r in records[-2:]}
    customers_run, gold_run = by_command[("customers",)], by_command[("gold",)]
    assert (customers_run.model("customers").did, customers_run.model("customers").snapshot) == ("changed", 2)
    assert customers_run.model("gold").did == "not selected"
    assert (gold_run.model("gold").did, gold_run.model("gold").snapshot) == ("changed", 2)
    # gold's run ended after customers' had: it names customers' newer snapshot, not selected
    assert (gold_run.model("customers").did, gold_run.model("customers").snapshot) == ("not selected", 2)
    assert records[-1].invocation_id == gold_run.invocation_id

    # with no run in between, the input is named again
    assert _run(project, 3, "gold").returncode == 0
    gold = wait_for_confirmations(bootstrap, f"{schema}.gold", 3)[-1]
    assert gold["inputs"] == [{"name": "customers", "topic": f"{schema}.customers", "snapshot": 2}]
