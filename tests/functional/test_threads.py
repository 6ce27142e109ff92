"""Many logged models at once: `dbt run --threads 4` over six models sharing one Spark
session, each with its own producer. Every topic replays to its table, and no transactional id
is shared (each confirmation's table is its own topic's)."""
import json

import pytest
from dbt.tests.util import run_dbt

from tests.functional.contract import assert_contract, read_topic

KEYED = """
{{{{ config(materialized='table', unique_key='id', log_system='kafka', log_system_partitions={parts}) }}}}
select id, concat('{name}-', cast(id * {{{{ var('step', 1) }}}} as string)) as v
from range({{{{ var('step', 1) }}}}, 200 + {{{{ var('step', 1) }}}} * 7) as r(id)
"""
KEYLESS = """
{{{{ config(materialized='table', log_system='kafka') }}}}
select id % 5 as bucket, '{name}' as tag from range(50 + {{{{ var('step', 1) }}}}) as r(id)
"""
NAMES = [f"m{i}" for i in range(6)]


class TestManyModelsAtOnce:
    @pytest.fixture(scope="class")
    def models(self):
        return {f"{name}.sql": (KEYED if i % 2 == 0 else KEYLESS).format(name=name, parts=1 + i % 3)
                for i, name in enumerate(NAMES)}

    def test_threads(self, project, kafka_bootstrap_servers):
        for step in (1,):  # one run: six commits and mirrors at once
            results = run_dbt(["run", "--threads", "4", "--vars", json.dumps({"step": step})])
            assert len(results) == len(NAMES)
            attempts = {}
            for name in NAMES:
                relation = topic = f"{project.test_schema}.{name}"
                assert_contract(kafka_bootstrap_servers, topic, relation)
                confirmations = [json.loads(m.value) for m in
                                 read_topic(kafka_bootstrap_servers, topic + "__logstore_commits")]
                assert [c["snapshot"] for c in confirmations] == list(range(1, step + 1)), name
                assert {c["table"] for c in confirmations} == {relation}  # its own writer only
                for c in confirmations:
                    assert c["attempt"] not in attempts, f"{name} shares attempt with {attempts.get(c['attempt'])}"
                    attempts[c["attempt"]] = name
            responses = {r.node.name: r.adapter_response for r in results}
            assert all(responses[n]["topic"] == f"{project.test_schema}.{n}" for n in NAMES)
