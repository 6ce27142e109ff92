"""The parallel mirror (log.mirror.parallelism > 1): Spark tasks write the change set with their
own producers, the driver confirms the attempt; the contract holds after every run."""
import json

import pytest
from dbt.tests.util import run_dbt

from tests.functional.contract import assert_contract, read_topic

KEYED = """
{{ config(materialized='table', unique_key='id',
          **{'log.system': 'kafka', 'log.changelog-mode': 'all', 'log.system.partitions': 3,
             'log.mirror.parallelism': 3, 'log.consistency': var('consistency', 'transactional'),
             'kafka.topic': this.schema ~ '.' ~ this.name}) }}
{% set step = var('step', 1) %}
select id, concat('name-', cast(id as string)) as name,
       {% if step == 1 %} 'old' {% else %} case when id % 10 = 0 then 'new' else 'old' end {% endif %} as note
from range({% if step == 1 %} 0, 60 {% else %} 5, 70 {% endif %}) as r(id)
"""

KEYLESS = """
{{ config(materialized='table', log_system='kafka', log_system_partitions=2,
          log_mirror_parallelism=2) }}
{% set step = var('step', 1) %}
select id % 7 as k, 'v' as v from range({% if step == 1 %} 40 {% else %} 10, 45 {% endif %}) as r(id)
"""


def _run(step, **variables):
    return run_dbt(["run", "--vars", json.dumps({"step": step, **variables})])


def _writers(bootstrap_servers, topic):
    return [json.loads(m.value).get("writers")
            for m in read_topic(bootstrap_servers, topic + "__logstore_commits")]


class TestParallelMirror:
    @pytest.fixture(scope="class")
    def models(self):
        return {"wide.sql": KEYED, "bag.sql": KEYLESS}

    def test_parallel_runs_keep_the_contract(self, project, kafka_bootstrap_servers):
        servers = kafka_bootstrap_servers
        wide, bag = f"{project.test_schema}.wide", f"{project.test_schema}.bag"
        results = _run(1)
        log = assert_contract(servers, wide, wide)
        assert_contract(servers, bag, bag)
        assert {r.node.name: r.adapter_response["rows_mirrored"] for r in results} == {"wide": 60, "bag": 40}
        # every record names its writer, a Spark task attempt; one attempt, confirmed once
        assert {m.header("logstore.writer") for m in log} == {f"task-{i}.0" for i in range(3)}
        assert len({m.header("logstore.attempt") for m in log}) == 1
        (writers,) = _writers(servers, wide)
        assert sorted(writers) == ["task-0.0", "task-1.0", "task-2.0"]

        # ids 0-4 deleted, 60-69 inserted, 10, 20, ..., 50 updated
        results = _run(2)
        log = assert_contract(servers, wide, wide)
        assert_contract(servers, bag, bag)
        # 20 changes, and a tombstone after each of the 5 deletes
        assert {r.node.name: r.adapter_response["rows_mirrored"] for r in results}["wide"] == 25
        ops = sorted(m.op for m in log if m.header("logstore.snapshot") == "2" and not m.repeats_delete)
        assert ops == ["c"] * 10 + ["d"] * 5 + ["u"] * 5
        assert len(_writers(servers, wide)) == 2

    def test_eventual_parallel(self, project, kafka_bootstrap_servers):
        results = run_dbt(["run", "--select", "wide", "--vars",
                           json.dumps({"step": 1, "consistency": "eventual"})])
        wide = f"{project.test_schema}.wide"
        assert_contract(kafka_bootstrap_servers, wide, wide)
        assert results[0].adapter_response["rows_mirrored"] == 30  # back to step 1: 20 changes, 10 of them deletes with their tombstones
