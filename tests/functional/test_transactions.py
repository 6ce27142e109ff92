"""A change set of any size on a broker that enforces transaction.timeout.ms: the writer commits
along the way, every Kafka transaction well inside the timeout, and the attempt keeps its one
confirmation; the log still replays exactly once."""
import json

import pytest
from dbt.tests.util import run_dbt

from tests.functional.contract import assert_contract, read_topic

pytestmark = pytest.mark.apache_kafka  # proven on Apache Kafka (tests/kafka_cluster.py)

BIG = """
{{ config(materialized='table', unique_key='id', log_system='kafka', log_system_partitions=2,
          **{'kafka.transaction.timeout.ms': 1500}) }}
select id, concat('row ', cast(id as string)) as label from range({{ var('rows', 40000) }}) as r(id)
"""


class TestLongMirrorTakesSeveralTransactions:
    @pytest.fixture(scope="class")
    def models(self):
        return {"big.sql": BIG}

    def test_several_transactions_one_confirmation(self, project, kafka_bootstrap_servers):
        relation = topic = f"{project.test_schema}.big"
        (result,) = run_dbt(["run"])
        response = result.adapter_response
        assert response["rows_mirrored"] == 40000
        # a third of the 1.5 s timeout per transaction: 40,000 records cannot fit in one
        assert response["log_transactions"] > 1, response
        assert_contract(kafka_bootstrap_servers, topic, relation)
        (confirmation,) = [json.loads(m.value) for m in read_topic(kafka_bootstrap_servers,
                                                                     topic + "__logstore_commits")]
        assert confirmation["transactions"] == response["log_transactions"]
        assert confirmation["records"] == 40000
