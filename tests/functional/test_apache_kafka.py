"""What only a real broker shows: Apache Kafka 4.1 (tests/kafka_cluster.py: three KRaft nodes)
enforces transaction.timeout.ms, aborts the transaction of a fenced writer, hides aborted records
from read_committed readers and places replicas. The embedded broker (tansu) does not hide them:
the one test that reads both shows why the confirmation records exist.

The runs that must pause or die are dbt subprocesses against the Spark Thrift Server
(fault_project.py), held inside their open Kafka transaction with LOGSTORE_FAULT_PAUSE
(dbt/adapters/logstore/faults.py); the one that need not is an in-process dbt run.
(The split of a long mirror into several transactions is test_transactions.py, also on Apache Kafka.)
"""
import json
import os
import signal
import time
import uuid
from collections import Counter
from typing import Dict

import pytest
import yaml
from dbt.tests.util import run_dbt
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType

from dbt.adapters.logstore.reading.reader import ChangelogReader, open_log
from dbt.adapters.logstore.reading.replay import Replica
from tests.functional import contract
from tests.functional.contract import (
    assert_contract, canonical, confirmed, read_topic, replay, replay_confirmed, table_properties,
    wait_for_confirmations,
)
from tests.functional.fault_project import FaultProject, dbt, wait_until_paused, write_project

pytestmark = pytest.mark.apache_kafka

# A keyless log: a change delivered twice leaves an extra row, so a replay catches it.
# Step s has s % 4 + 2 rows, all with version 'v<s>'.
KEYLESS = """
{{{{ config(materialized='table', log_system='kafka', kafka_topic='{name}_' ~ var('suffix'){extra}) }}}}
select id, concat('v', cast({{{{ var('step') }}}} as string)) as version
from range({{{{ var('step') }}}} % 4 + 2) as r(id)
"""
TIMEOUT_MS = 3000  # the broker checks for expired transactions every 10 s
MODELS = {
    # held inside its transaction longer than this timeout: Kafka aborts it
    "held": KEYLESS.format(name="held", extra=f", **{{'kafka.transaction.timeout.ms': {TIMEOUT_MS}}}"),
    # killed inside its transaction, one log on each broker
    "killed_kafka": KEYLESS.format(name="killed_kafka", extra=""),
    "killed_tansu": KEYLESS.format(name="killed_tansu", extra=", kafka_bootstrap_servers=var('tansu')"),
    # held inside its transaction while a newer run takes the model over
    "fenced": KEYLESS.format(name="fenced", extra=""),
}
LEASE_SECONDS = 6  # so a newer run takes over the lock of a held one within the test


@pytest.fixture(scope="module")
def projects(tmp_path_factory, kafka_bootstrap_servers, embedded_broker, spark_thrift_server):
    """One dbt project per Kafka client (profile field kafka_client), made when first asked
    for; each has its own schema on the shared Thrift Server, a short lease, and the embedded
    broker's servers as the var 'tansu'."""
    made: Dict[str, FaultProject] = {}

    def project(client: str) -> FaultProject:
        if client not in made:
            root = tmp_path_factory.mktemp(f"apache_kafka_{client}")
            schema = f"ak_{client.replace('-', '_')}_{uuid.uuid4().hex[:6]}"
            write_project(root, schema, kafka_bootstrap_servers, spark_thrift_server, models=MODELS,
                          profile={"lock_lease_seconds": LEASE_SECONDS, "kafka_client": client})
            settings = yaml.safe_load((root / "dbt_project.yml").read_text())
            settings["vars"] = {"tansu": embedded_broker}
            (root / "dbt_project.yml").write_text(yaml.safe_dump(settings))
            made[client] = FaultProject(root, schema, spark_thrift_server)
        return made[client]

    return project


def _run(project: FaultProject, models: str, step: int, suffix: str, **kwargs):
    return dbt(project.root, "run", "-s", models, "--vars",
               json.dumps({"step": step, "suffix": suffix}), **kwargs)


def _flat(text: str) -> str:
    return " ".join(text.split())


def _end_offsets(servers: str, topic: str, isolation: str) -> Dict[int, int]:
    """Per partition, the end offset a reader of `isolation` sees: the high watermark
    (read_uncommitted) or the last stable offset (read_committed), below any open transaction."""
    consumer = KafkaConsumer(bootstrap_servers=servers, group_id=None, enable_auto_commit=False,
                             isolation_level=isolation)
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        return {tp.partition: o for tp, o in consumer.end_offsets(parts).items()} if parts else {}
    finally:
        consumer.close()


def _every_record(servers: str, topic: str):
    """Every data record the broker holds, committed, aborted or still open (read_uncommitted)."""
    level = contract.ISOLATION["level"]
    contract.ISOLATION["level"] = "read_uncommitted"
    try:
        return read_topic(servers, topic)
    finally:
        contract.ISOLATION["level"] = level


def _until(condition, what: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"not within {limit:.0f} s: {what}"
        time.sleep(0.3)


def _check_log(project: FaultProject, servers: str, topic: str, model: str, snapshots: int):
    """Every snapshot confirmed once, in order; the confirmed records replay to the table.
    Returns the confirmations, the table's column types and rows, and the plain read_committed
    records (no confirmation filtering)."""
    confirmations = wait_for_confirmations(servers, topic, snapshots)
    assert [c["snapshot"] for c in confirmations] == list(range(1, snapshots + 1)), confirmations
    types, table = project.rows(model)
    assert replay_confirmed(servers, topic, types, table) == table
    assert {t for t in project.tables() if t.startswith(model)} == {model}, "protocol tables left"
    return confirmations, types, table, read_topic(servers, topic)


def _unconfirmed(messages, confirmations):
    attempts = {c["attempt"] for c in confirmations}
    return [m for m in messages if m.header("logstore.attempt") not in attempts]


def test_a_transaction_held_past_its_timeout_is_aborted_by_kafka_and_the_run_says_so(
        projects, kafka_bootstrap_servers, tmp_path):
    """The writer commits along the way only every 1000 records (TransactionClock), so a small
    change set held inside its transaction is not split: Apache Kafka aborts the transaction
    once it outlives transaction.timeout.ms, the run fails saying so, and the next run writes
    the committed change set again."""
    project, suffix = projects("kafka-python"), uuid.uuid4().hex[:8]
    servers, topic = kafka_bootstrap_servers, f"held_{suffix}"
    held = _run(project, "held", 1, suffix, pause=f"mid_log_write:{tmp_path}", wait=False)
    try:
        wait_until_paused(tmp_path, held)
        # The attempt's first two records are in Kafka, in the open transaction: read_committed
        # readers stop before them (the last stable offset stays at 0) ...
        _until(lambda: _end_offsets(servers, topic, "read_uncommitted").get(0, 0) >= 2,
               "the held attempt's first records reach Kafka")
        assert _end_offsets(servers, topic, "read_committed") == {0: 0}
        # ... until Kafka aborts the transaction (its check runs every 10 s) while the writer is
        # still held: the abort marker moves the last stable offset to the end of the partition.
        _until(lambda: (_end_offsets(servers, topic, "read_committed")
                        == _end_offsets(servers, topic, "read_uncommitted")),
               "Kafka aborts the transaction held past transaction.timeout.ms", limit=TIMEOUT_MS / 1000 + 30)
        assert held.poll() is None, "the writer was still held when Kafka aborted its transaction"
    finally:
        (tmp_path / "release").touch()
        output, _ = held.communicate(timeout=300)
    out = _flat(output)
    assert held.returncode == 1, out[-3000:]
    assert f"Model 'held': writing to Kafka topic '{topic}' failed" in out, out[-3000:]
    # the cause in plain words, naming the setting (kafka.errors.transaction_lost)
    assert "Kafka aborted this run's transaction" in out, out[-3000:]
    assert f"transaction.timeout.ms ({TIMEOUT_MS} ms)" in out, out[-3000:]
    assert "The table's change is committed" in out and "logstore_recover" in out
    # nothing of the aborted attempt was ever committed
    assert read_topic(servers, topic) == [] and read_topic(servers, topic + "__logstore_commits") == []

    recovered = _run(project, "held", 2, suffix)
    assert recovered.returncode == 0, recovered.stdout[-3000:]
    assert "re-sending change set" in recovered.stdout
    confirmations, types, table, plain = _check_log(project, servers, topic, "held", snapshots=2)
    assert table == Counter(canonical({"id": i, "version": "v2"}, types) for i in range(4))
    # the aborted attempt's records stay in the partition, and Apache Kafka hides them from a
    # plain read_committed reader: its replay is the table, without confirmations
    assert len(_unconfirmed(_every_record(servers, topic), confirmations)) >= 2
    assert _unconfirmed(plain, confirmations) == [] and replay(plain, types) == table


def _changelog(servers: str, topic: str, table_id: str, types: Dict[str, str]) -> Counter:
    """The table as the package's own reader replays it."""
    replica = Replica(columns=list(types))
    for record in ChangelogReader(open_log(servers, topic), table_id).changes(idle_seconds=0.5):
        replica.apply(record)
    return Counter(canonical(row, types) for row in replica.rows())


def test_read_committed_never_sees_a_killed_attempt_on_apache_kafka_but_does_on_tansu(
        projects, kafka_bootstrap_servers, embedded_broker, tmp_path):
    """A run SIGKILLed in the middle of its log write leaves records of an attempt that never
    committed. The next run fences the dead writer and writes the change set again. On Apache
    Kafka the fence aborts the dead transaction, so a plain read_committed reader never sees
    it; the embedded broker (tansu) shows it to read_committed readers, and only the
    confirmations tell it apart. The confirmed replay and the package's reader are right on both."""
    project, suffix = projects("kafka-python"), uuid.uuid4().hex[:8]
    servers = {"killed_kafka": kafka_bootstrap_servers, "killed_tansu": embedded_broker}
    topics = {model: f"{model}_{suffix}" for model in servers}
    held = {}
    try:
        for model in servers:  # both at once: different models, different locks
            (tmp_path / model).mkdir()
            held[model] = _run(project, model, 1, suffix, pause=f"mid_log_write:{tmp_path / model}",
                               wait=False)
        for model, process in held.items():
            wait_until_paused(tmp_path / model, process)
            # the killed attempt's first records really reach the broker before the kill
            _until(lambda: len(_every_record(servers[model], topics[model])) >= 2,
                   f"{model}: the held attempt's first records reach the broker")
            os.kill(process.pid, signal.SIGKILL)
            assert process.wait(timeout=60) == -signal.SIGKILL
    finally:
        for model, process in held.items():
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=60)
            process.stdout.close()

    recovered = _run(project, " ".join(servers), 2, suffix)
    assert recovered.returncode == 0, recovered.stdout[-3000:]
    assert recovered.stdout.count("re-sending change set") == 2, recovered.stdout[-3000:]
    for model, bootstrap in servers.items():
        topic = topics[model]
        confirmations, types, table, plain = _check_log(project, bootstrap, topic, model, snapshots=2)
        # the killed attempt's records (the two it had sent, at least) are on the broker ...
        dead = _unconfirmed(_every_record(bootstrap, topic), confirmations)
        assert len(dead) >= 2 and {m.header("logstore.snapshot") for m in dead} == {"1"}, dead
        if model == "killed_kafka":
            # ... and Apache Kafka, having aborted them at the fence, hides them from read_committed
            assert _unconfirmed(plain, confirmations) == [], "aborted records shown to read_committed"
            assert replay(plain, types) == table
        else:
            # ... and tansu shows them to read_committed: a plain replay has their rows on top
            assert _unconfirmed(plain, confirmations) == dead
            assert replay(plain, types) == table + replay(dead, types)
        assert replay(confirmed(bootstrap, topic, plain), types) == table
        assert _changelog(bootstrap, topic, f"{project.schema}.{model}", types) == table


def test_a_writer_held_in_its_transaction_is_fenced_by_the_run_that_takes_the_model_over(
        projects, kafka_bootstrap_servers, tmp_path):
    """On both clients (profile field kafka_client; one project each, side by side): run A is
    held in the middle of its log write, inside its open transaction, past its lease. Run B
    takes the lock over, fences A's transactional id (Kafka aborts A's transaction and bumps
    the epoch), writes A's committed change set and its own. Released, A cannot commit: Kafka
    refuses its old epoch, and A fails saying so."""
    clients = ("kafka-python", "confluent")
    suffixes = {client: uuid.uuid4().hex[:8] for client in clients}
    topics = {client: f"fenced_{suffixes[client]}" for client in clients}
    first, outputs = {}, {}
    try:
        for client in clients:
            (tmp_path / client).mkdir()
            first[client] = _run(projects(client), "fenced", 1, suffixes[client],
                                 pause=f"mid_log_write:{tmp_path / client}", wait=False)
        for client in clients:
            wait_until_paused(tmp_path / client, first[client])
        time.sleep(LEASE_SECONDS + 1)  # A renews nothing while held: its lease runs out
        second = {client: _run(projects(client), "fenced", 2, suffixes[client], wait=False)
                  for client in clients}
        for client, process in second.items():
            out = _flat(process.communicate(timeout=300)[0])
            assert process.returncode == 0, f"{client}: {out[-3000:]}"
            assert "whose lease expired" in out and "re-sending change set" in out, out[-3000:]
            assert first[client].poll() is None, f"{client}: A was still held while B completed"
    finally:
        for client, process in first.items():
            (tmp_path / client / "release").touch()
            outputs[client] = _flat(process.communicate(timeout=300)[0])
    for client, text in outputs.items():
        assert first[client].returncode == 1, f"{client}: {text[-3000:]}"
        assert f"Model 'fenced': writing to Kafka topic '{topics[client]}' failed" in text, text[-3000:]
        assert "Kafka aborted this run's transaction" in text, f"{client}: {text[-3000:]}"
        assert "a newer writer of the table" in text, text[-3000:]

        # B's rows (step 2); A's change logged once (by B), B's once; A added nothing released
        project = projects(client)
        confirmations, types, table, plain = _check_log(project, kafka_bootstrap_servers,
                                                        topics[client], "fenced", snapshots=2)
        assert len(confirmations) == 2, f"{client}: {confirmations}"
        assert table == Counter(canonical({"id": i, "version": "v2"}, types) for i in range(4))
        assert _unconfirmed(plain, confirmations) == [] and replay(plain, types) == table, client


REPLICATED = """
{{ config(materialized='table', unique_key='id', log_system='kafka',
          **{'log.system.partitions': 3, 'log.system.replication': 3,
             'kafka.topic-config.retention.ms': 3600000}) }}
select id, concat('row ', cast(id as string)) as label from range(30) as r(id)
"""


def _topic_configs(admin: KafkaAdminClient, topic: str) -> Dict[str, str]:
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)],
                                       config_filter="all")
    return {name: entry["value"] for name, entry in described["topic"][topic].items()}


class TestPartitionsAndReplicationHonoured:
    @pytest.fixture(scope="class")
    def models(self):
        return {"replicated.sql": REPLICATED}

    def test_topic_and_control_topic_as_configured(self, project, kafka_bootstrap_servers):
        relation = topic = f"{project.test_schema}.replicated"
        (result,) = run_dbt(["run"])
        assert result.adapter_response["rows_mirrored"] == 30
        admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap_servers)
        try:
            (data,) = admin.describe_topics([topic])
            (control,) = admin.describe_topics([topic + "__logstore_commits"])
            data_configs = _topic_configs(admin, topic)
            control_configs = _topic_configs(admin, topic + "__logstore_commits")
            brokers = {b["broker_id"] for b in admin.describe_cluster()["brokers"]}
        finally:
            admin.close()
        assert len(brokers) == 3
        assert sorted(p["partition_index"] for p in data["partitions"]) == [0, 1, 2]
        # the control topic: one partition (readers read partition 0), as durable as the data
        assert [p["partition_index"] for p in control["partitions"]] == [0]
        for partition in data["partitions"] + control["partitions"]:
            assert set(partition["replica_nodes"]) == brokers, partition
            assert set(partition["isr_nodes"]) == brokers, partition
        assert data_configs["retention.ms"] == "3600000"  # kafka.topic-config.* on the data topic
        # ... but never on the control topic: a confirmation must outlive the records it confirms
        assert control_configs["retention.ms"] == "-1" and control_configs["cleanup.policy"] == "delete"
        # with 3 replicas and the cluster's min.insync.replicas 2, an acks=all write survives a broker
        assert control_configs["min.insync.replicas"] == data_configs["min.insync.replicas"] == "2"
        # records landed in all three partitions, placed by key, and the log replays to the table
        messages = assert_contract(kafka_bootstrap_servers, topic, relation)
        assert {m.partition for m in messages} == {0, 1, 2}
        assert table_properties(relation)["logstore.topic.partitions"] == "3"
