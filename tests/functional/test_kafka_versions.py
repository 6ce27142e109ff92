"""Apache Kafka 3.9 beside the suite's Apache Kafka 4.1 (tests/kafka_cluster.py): this module's
own cluster of three KRaft nodes of Apache Kafka 3.9.1 (jars/kafka-3.9/pom.xml, `make jars`),
replication factor 3 and min.insync.replicas 2 as the suite's, started by a module fixture and
stopped by its pids. On it, with dbt runs in this process (the session method):

- the transactional contract: a keyed table's first build and a rebuild with updates, a delete
  and an insert, and an incremental merge model's two runs: after each run every snapshot is
  confirmed once, in order, and a consumer that reads each topic from the start with
  read_committed and applies the records in order ends with exactly the table's rows (with and
  without the confirmations: Apache Kafka hides aborted records);
- the identity checks (dbt/adapters/logstore/log/lifecycle/identity.py): the table records this
  cluster's id and the topics' ids, new topics get the contract's settings (compaction for a
  keyed log, the control topic kept forever), `status` and `status --verify` agree; the data
  topic deleted and created again behind dbt's back is found by `status` and refused by the next
  run, which changes nothing; `log.on-lost: restart` then re-bases the log as generation 2.
"""
import json
import time
from typing import Dict, List

import pytest
from dbt.tests.util import run_dbt_and_capture
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.errors import UnknownBrokerIdError

from dbt.adapters.logstore.names import LOG_CLUSTER_ID, LOG_CONTROL_TOPIC_ID, LOG_TOPIC_ID, SNAPSHOT_ID
from dbt.adapters.logstore.reading.project import DbtProject
from dbt.adapters.logstore.reading.status import model_status
from tests.functional.contract import (
    new_messages, read_topic, replay, replay_confirmed, table_properties, table_state,
    wait_for_confirmations,
)
from tests.functional.dbt_helpers import failure_text, logstore_statuses
from tests.kafka_cluster import KAFKA_3_9_JARS, KafkaCluster

pytestmark = pytest.mark.apache_kafka


@pytest.fixture(scope="module")
def kafka_3_9(tmp_path_factory):
    """Three Apache Kafka 3.9.1 nodes (KRaft), stopped by pid (KafkaCluster.stop) at the end."""
    with KafkaCluster(tmp_path_factory.mktemp("kafka_3_9"), nodes=3, jars=KAFKA_3_9_JARS) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def kafka_bootstrap_servers(kafka_3_9):
    return kafka_3_9.bootstrap_servers


# Step 1: four customers; step 2: 2 and 4 updated, 3 deleted, 5 inserted.
CUSTOMERS = """
{{ config(materialized='table', unique_key='id', log_system='kafka', log_system_partitions=2,
          log_system_replication=3, log_on_lost=var('on_lost', 'fail')) }}
select id, name, cast(amount as decimal(10, 2)) as amount
from values
{% if var('step', 1) == 1 %}
  (1, 'Ada', '10.50'), (2, 'Bo', '0.01'), (3, 'Cy', '7.00'), (4, 'Di', '1.00')
{% else %}
  (1, 'Ada', '10.50'), (2, 'Bo', '2.02'), (4, 'Di Ø', '1.00'), (5, 'Ed', '3.30')
{% endif %}
as t(id, name, amount)
"""
# Step s merges ids s..s+2 with note 'b<s>': step 2 updates 2 and 3 and inserts 4.
BALANCES = """
{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id',
          log_system='kafka') }}
select id, concat('b', cast({{ var('step', 1) }} as string)) as note
from range({{ var('step', 1) }}, {{ var('step', 1) }} + 3) as r(id)
"""


def _run(**variables):
    return run_dbt_and_capture(["run", "--vars", json.dumps(variables)])


def _admin(servers: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=30000)


def _check_contract(servers: str, relation: str, snapshots: int) -> List:
    """Every snapshot confirmed once, in order; the confirmed records, and every read_committed
    record, replay to the table. Returns the read_committed records."""
    confirmations = wait_for_confirmations(servers, relation, snapshots)
    assert [c["snapshot"] for c in confirmations] == list(range(1, snapshots + 1)), confirmations
    types, table = table_state(relation)
    assert replay_confirmed(servers, relation, types, table) == table, relation
    messages = read_topic(servers, relation)  # no confirmation filter: nothing aborted shows
    assert replay(messages, types) == table, relation
    return messages


def _plain_status(project) -> Dict:
    dbt_project = DbtProject(project.project_root, profiles_dir=project.profiles_dir)
    with dbt_project.connection():
        return {m.name: model_status(dbt_project, m) for m in dbt_project.logged_models()}


def _settings(servers: str, topic: str) -> Dict[str, str]:
    admin = _admin(servers)
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        return {k: (v.get("value") if isinstance(v, dict) else v)
                for k, v in described["topic"][topic].items()}
    finally:
        admin.close()


class TestOnApacheKafka39:
    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.sql": CUSTOMERS, "balances.sql": BALANCES}

    def test_the_cluster_is_apache_kafka_3_9_on_three_nodes(self, kafka_3_9):
        deadline = time.monotonic() + 60
        while True:  # a broker registered last may not be in every node's metadata yet
            # A fresh client each try: an admin client's own metadata, learned once at its
            # bootstrap, may never name a broker that registered after it (CI saw 60 s of that).
            admin = _admin(kafka_3_9.bootstrap_servers)
            try:
                described = admin.describe_cluster()
                brokers = sorted(b["broker_id"] for b in described["brokers"])
                try:  # from the API versions each broker announces (4.x's differ)
                    versions = {b: tuple(admin.get_broker_version_data(b).broker_version[:2])
                                for b in brokers}
                except UnknownBrokerIdError:  # not yet in the admin client's own metadata
                    versions = {}
            finally:
                admin.close()
            if (brokers == [1, 2, 3] and versions) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert described["cluster_id"] == kafka_3_9.cluster_id
        assert versions == {1: (3, 9), 2: (3, 9), 3: (3, 9)}, versions

    def test_the_contract_holds_on_kafka_3_9(self, project, kafka_bootstrap_servers):
        servers = kafka_bootstrap_servers
        customers, balances = (f"{project.test_schema}.{m}" for m in ("customers", "balances"))
        _run(step=1)
        first = _check_contract(servers, customers, 1)
        assert sorted(m.op for m in first) == ["c"] * 4
        merged_first = _check_contract(servers, balances, 1)
        assert sorted(m.op for m in merged_first) == ["c"] * 3

        _run(step=2)
        second = _check_contract(servers, customers, 2)
        ops = sorted(m.op for m in new_messages(second, first) if not m.repeats_delete)
        assert ops == ["c", "d", "u", "u"], ops
        merged = _check_contract(servers, balances, 2)
        assert sorted(m.op for m in new_messages(merged, merged_first)) == ["c", "u", "u"]

    def test_identity_on_kafka_3_9(self, project, kafka_3_9, kafka_bootstrap_servers):
        servers = kafka_bootstrap_servers
        relation = topic = f"{project.test_schema}.customers"
        props = table_properties(relation)
        admin = _admin(servers)
        try:
            ids = {d["name"]: str(d["topic_id"])
                   for d in admin.describe_topics([topic, topic + "__logstore_commits"])}
            replicas = {len(p["replica_nodes"]) for d in admin.describe_topics([topic])
                        for p in d["partitions"]}
        finally:
            admin.close()
        # what the table recorded of its log: this cluster and these topics
        assert props[LOG_CLUSTER_ID] == kafka_3_9.cluster_id
        assert props[LOG_TOPIC_ID] == ids[topic]
        assert props[LOG_CONTROL_TOPIC_ID] == ids[topic + "__logstore_commits"]
        assert replicas == {3}  # log.system.replication
        # the settings new topics get: a keyed log compacted, its confirmations kept forever
        assert _settings(servers, topic)["cleanup.policy"] == "compact"
        assert _settings(servers, topic + "__logstore_commits")["retention.ms"] == "-1"
        assert all(s.agree for s in _plain_status(project).values()), _plain_status(project)
        verified = logstore_statuses(project)  # --verify: the package's replay against the table
        assert all(s.agree for s in verified.values()), {m: s.problems for m, s in verified.items()}

        # the data topic deleted and created again behind dbt's back (empty, two partitions)
        admin = _admin(servers)
        try:
            admin.delete_topics([topic])
            deadline = time.monotonic() + 60
            while True:  # a topic just deleted may still be going
                try:
                    admin.create_topics([NewTopic(topic, 2, 3)])
                    break
                except Exception:
                    assert time.monotonic() < deadline, f"could not create {topic} again"
                    time.sleep(0.5)
            while True:  # the new topic's id, once the metadata has it
                recreated = str(admin.describe_topics([topic])[0].get("topic_id"))
                if recreated not in ("None", "00000000-0000-0000-0000-000000000000"):
                    break
                assert time.monotonic() < deadline, f"no id for {topic} created again"
                time.sleep(0.3)
        finally:
            admin.close()
        assert recreated != ids[topic]
        status = _plain_status(project)["customers"]
        assert not status.agree and any("the log is lost" in p for p in status.problems), status.problems
        text = failure_text(["run", "--select", "customers", "--vars", json.dumps({"step": 2})])
        assert (f"Model 'customers': the log in topic '{topic}' is not the table's log any more"
                in text), text
        assert (f"the topic '{topic}' was deleted and created again (its id is now {recreated}, "
                f"the table recorded {ids[topic]})" in text), text
        assert "Nothing was changed" in text, text
        assert table_properties(relation)[SNAPSHOT_ID] == props[SNAPSHOT_ID]  # unchanged

        # restart: a new generation, the table's rows, in the recreated topic
        _, out = run_dbt_and_capture(["run", "--select", "customers", "--vars",
                                      json.dumps({"step": 2, "on_lost": "restart"})])
        assert "starts generation 2" in out, out
        types, table = table_state(relation)
        assert replay_confirmed(servers, topic, types, table) == table
        assert table_properties(relation)[LOG_TOPIC_ID] == recreated
        assert _plain_status(project)["customers"].agree
