"""kafka_client: confluent - the same contract with the confluent-kafka writer, driver-written
and parallel."""
import json

import pytest
from dbt.tests.util import run_dbt

from tests.functional.contract import assert_contract
from tests.functional.test_contract import KEYED_TABLE
from tests.functional.test_parallel_mirror import KEYLESS

pytest.importorskip("confluent_kafka")


class TestConfluentClient:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, dbt_profile_target):
        return {**dbt_profile_target, "kafka_client": "confluent"}

    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.sql": KEYED_TABLE, "bag.sql": KEYLESS}

    def test_confluent_writer_keeps_the_contract(self, project, kafka_bootstrap_servers):
        for step in (1, 2):
            results = run_dbt(["run", "--vars", json.dumps({"step": step})])
            for model in ("customers", "bag"):
                relation = f"{project.test_schema}.{model}"
                assert_contract(kafka_bootstrap_servers, relation, relation)
        mirrored = {r.node.name: r.adapter_response["rows_mirrored"] for r in results}
        assert mirrored == {"customers": 4, "bag": 5}  # customers: u, d and its tombstone, c
