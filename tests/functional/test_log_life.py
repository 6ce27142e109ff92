"""The log's life after it is written (dbt/adapters/logstore/log/lifecycle/), on Apache Kafka: a
cluster of this module's own (one KRaft node, tests/kafka_cluster.py) whose retention check and
log cleaner run every half second, so the broker really deletes and compacts within a test.

- topics deleted between runs (data and control, data only, control only; and recreated empty):
  the run refuses with `log.on-lost: fail` and changes nothing, plain `status` reports it, and
  `restart` starts a new generation whose copy equals the table;
- a table whose topic already holds its log (dropped by hand and rebuilt; dbt's table -> view ->
  incremental switch; the log off for one run): refused, never a second "snapshot 1";
- retention that deleted the log's start: `status`, `tail --from earliest` and the run say so;
  a generation re-bases the log; `log.generation.interval` starts generations on a schedule;
- compaction of a keyed log by the broker's cleaner: the tests' replay, the package's reader, and
  Flink from the earliest offset (debezium-json with the key and CDC de-duplication; upsert-kafka)
  still end equal to the table;
- a new cluster behind the same address (stopped, and a fresh one started on its ports).

Each consumer check here replays with tests/functional/contract.py (the tests' own consumer, not
the package's reader) from the start offsets the latest confirmation of a generation states.
"""
import json
import time
from typing import Dict, List

import pytest
from dbt.tests.util import run_dbt_and_capture
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

from dbt.adapters.logstore.reading.project import DbtProject
from dbt.adapters.logstore.reading.reader import StartPoint, UsageError, read_changelog
from dbt.adapters.logstore.reading.replay import Replica
from dbt.adapters.logstore.reading.status import model_status
from tests.functional.contract import (
    confirmed, read_topic, replay, spark, table_properties, table_state,
)
from tests.functional.dbt_helpers import failure_text, logstore_statuses
from tests.functional.flink_peer import (
    differences, errors_of, kafka_case, kafka_options, state_and_kinds, upsert_kafka_options,
)
from tests.kafka_cluster import KafkaCluster, Node

pytestmark = pytest.mark.apache_kafka

# the broker deletes and compacts within a second of a record becoming eligible
FAST_BROKER = {
    "log.retention.check.interval.ms": "500",
    "log.cleaner.backoff.ms": "500",
    "log.segment.delete.delay.ms": "0",
    "log.cleaner.dedupe.buffer.size": "8388608",
}


@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory):
    with KafkaCluster(tmp_path_factory.mktemp("log_life"), nodes=1, config=FAST_BROKER) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def kafka_bootstrap_servers(own_cluster):
    return own_cluster.bootstrap_servers


KEYED = """
{{ config(materialized=var('materialized', 'table'), unique_key='id',
          log_system=var('log_system', 'kafka'), log_on_lost=var('on_lost', 'fail'),
          log_system_partitions=2) }}
select id, concat('v', cast(id * {{ var('step', 1) }} as string)) as version
from range({{ var('step', 1) }}, 8 + {{ var('step', 1) }}) as r(id)
"""


def _run(project, expect_pass=True, **variables):
    args = ["run", "--vars", json.dumps(variables)] if variables else ["run"]
    return run_dbt_and_capture(args, expect_pass=expect_pass)


def _admin(servers: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=30000)


def _delete_topics(servers: str, topics: List[str]) -> None:
    admin = _admin(servers)
    try:
        admin.delete_topics(topics)
        deadline = time.monotonic() + 60
        while set(topics) & set(admin.list_topics()):
            assert time.monotonic() < deadline, f"topics {topics} not deleted"
            time.sleep(0.3)
    finally:
        admin.close()


def _create_topic(servers: str, topic: str, partitions: int, **config: str) -> None:
    admin = _admin(servers)
    deadline = time.monotonic() + 60
    try:
        while True:  # a topic just deleted may still be going
            try:
                admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=config)])
                return
            except Exception:
                assert time.monotonic() < deadline, f"could not create {topic}"
                time.sleep(0.5)
    finally:
        admin.close()


def _alter_topic(servers: str, topic: str, **config: str) -> None:
    admin = _admin(servers)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs=config)])
    finally:
        admin.close()


def _settings(servers: str, topic: str) -> Dict[str, str]:
    admin = _admin(servers)
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)],
                                           config_filter="all")
        return {k: (v.get("value") if isinstance(v, dict) else v)
                for k, v in described["topic"][topic].items()}
    finally:
        admin.close()


def _start_offsets(servers: str, topic: str) -> Dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=servers)
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        return {tp.partition: o for tp, o in consumer.beginning_offsets(parts).items()}
    finally:
        consumer.close()


def _confirmations(servers: str, topic: str) -> List[dict]:
    return [json.loads(m.value) for m in read_topic(servers, topic + "__logstore_commits")]


def generation_replay(servers: str, topic: str, relation: str) -> None:
    """A fresh consumer that starts where the latest generation's copy starts (the offsets its
    confirmation states) and applies every confirmed record after, ends equal to the table."""
    starts = [c for c in _confirmations(servers, topic) if "generation_start" in c]
    assert starts, f"no generation is confirmed in {topic}"
    begin = {int(p): o for p, o in starts[-1]["generation_start"].items()}
    messages = [m for m in confirmed(servers, topic, read_topic(servers, topic))
                if m.offset >= begin.get(m.partition, 0)]
    types, table = table_state(relation)
    assert replay(messages, types) == table, f"{topic} from generation {starts[-1]['generation']}"


def _plain_status(project):
    dbt_project = DbtProject(project.project_root, profiles_dir=project.profiles_dir)
    with dbt_project.connection():
        return {m.name: model_status(dbt_project, m) for m in dbt_project.logged_models()}


def _snapshot(relation: str) -> int:
    return int(table_properties(relation)["logstore.snapshot.id"])


# which of a model's topics are deleted behind dbt's back (one model each, in the same runs)
DELETED = {"lost_both": "data and control", "lost_data": "data", "lost_control": "control"}


class TestDeletedTopics:
    @pytest.fixture(scope="class")
    def models(self):
        return {f"{model}.sql": KEYED for model in DELETED}

    def test_a_lost_log_is_refused_then_restarted_as_a_new_generation(
            self, project, kafka_bootstrap_servers):
        """Three models, each losing other topics: data and control (and the data topic
        created again, empty, as infrastructure-as-code would), data only, control only."""
        servers = kafka_bootstrap_servers
        relations = {model: f"{project.test_schema}.{model}" for model in DELETED}
        _run(project, step=1)
        assert all(s.agree for s in _plain_status(project).values())
        before = {model: _snapshot(relation) for model, relation in relations.items()}
        for model, deleted in DELETED.items():
            topic = relations[model]
            control = topic + "__logstore_commits"
            _delete_topics(servers, {"data and control": [topic, control], "data": [topic],
                                     "control": [control]}[deleted])
            if deleted == "data and control":
                _create_topic(servers, topic, 2)

        statuses = _plain_status(project)  # plain: no --verify
        for model, deleted in DELETED.items():
            status = statuses[model]
            assert not status.agree and any("the log is lost" in p for p in status.problems), \
                (deleted, status.problems)

        text = failure_text(["run", "--vars", json.dumps({"step": 2})])
        for model, deleted in DELETED.items():  # every model refused in the one run
            assert f"Model '{model}': the log in topic '{relations[model]}' is not the table's log any more" \
                in text, (deleted, text)
        assert "Nothing was changed" in text and "log.on-lost: restart" in text and "logstore_resnapshot" in text
        assert {model: _snapshot(relation) for model, relation in relations.items()} == before  # unchanged

        _, out = _run(project, step=2, on_lost="restart")
        verified = logstore_statuses(project)  # --verify: replay equals the table
        for model, deleted in DELETED.items():
            relation = relations[model]
            assert any(model in line and "starts generation" in line for line in out.splitlines()), \
                (deleted, out)
            # the generation's snapshot, then the run's own: never 1 again
            assert _snapshot(relation) > before[model] + 1, deleted
            generation_replay(servers, relation, relation)
            assert verified[model].agree, (deleted, verified[model].problems)
        _run(project, step=3)  # and the logs go on with fail again
        statuses = _plain_status(project)
        for model, deleted in DELETED.items():
            generation_replay(servers, relations[model], relations[model])
            assert statuses[model].agree, (deleted, statuses[model].problems)


class TestATableWhoseTopicHoldsItsLog:
    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.sql": KEYED}

    def _refused_then_restarted(self, project, servers, relation, **variables):
        text = failure_text(["run", "--vars", json.dumps(variables)])
        assert "already holds a log of this table" in text and "Nothing was changed" in text, text
        _, out = _run(project, on_lost="restart", **variables)
        assert "starts generation" in out, out
        confirmations = _confirmations(servers, relation)
        snapshots = [c["snapshot"] for c in confirmations]
        assert len(snapshots) == len(set(snapshots)), f"a snapshot confirmed twice: {snapshots}"
        generation_replay(servers, relation, relation)
        assert logstore_statuses(project)["customers"].agree

    def test_dropped_by_hand_and_rebuilt(self, project, kafka_bootstrap_servers):
        relation = f"{project.test_schema}.customers"
        _run(project, step=1)
        _run(project, step=2)
        spark().sql(f"drop table {relation}")
        self._refused_then_restarted(project, kafka_bootstrap_servers, relation, step=3)

    def test_the_log_off_for_one_run_and_on_again(self, project, kafka_bootstrap_servers):
        relation = f"{project.test_schema}.customers"
        _run(project, step=4)
        _run(project, step=5, log_system="none")
        self._refused_then_restarted(project, kafka_bootstrap_servers, relation, step=6)

    def test_dbts_table_view_incremental_switch(self, project, kafka_bootstrap_servers):
        # dbt's own `swappable` case (dbt-tests-adapter BaseSimpleMaterializations)
        relation = f"{project.test_schema}.customers"
        _run(project, step=7)
        _run(project, step=7, materialized="view", log_system="none")
        self._refused_then_restarted(project, kafka_bootstrap_servers, relation, step=8,
                                     materialized="incremental")


KEYLESS_SHORT_RETENTION = """
{{ config(materialized='table', log_system='kafka', log_on_lost=var('on_lost', 'fail'),
          **{'kafka.topic-config.retention.ms': '1000', 'kafka.topic-config.segment.ms': '500',
             'log.generation.interval': var('interval', '')}) }}
select id, {{ var('step', 1) }} as step from range(5) as r(id)
"""


class TestRetention:
    @pytest.fixture(scope="class")
    def models(self):
        return {"events.sql": KEYLESS_SHORT_RETENTION}

    def test_the_broker_deletes_the_logs_start_and_every_reader_says_so(
            self, project, kafka_bootstrap_servers):
        servers = kafka_bootstrap_servers
        relation = topic = f"{project.test_schema}.events"
        _, out = _run(project, step=1)
        assert "deletes old records" in " ".join(out.split())  # the run warns of its retention
        deadline = time.monotonic() + 90  # the broker's retention check really deletes them
        while not any(_start_offsets(servers, topic).values()):
            assert time.monotonic() < deadline, "the broker deleted nothing"
            time.sleep(0.5)
        assert read_topic(servers, topic) == []

        status = _plain_status(project)["events"]
        assert not status.agree and status.start is None, (status.problems, status.start)
        assert any("deleted records" in p for p in status.problems), status.problems
        with pytest.raises(UsageError, match="no longer all in the topic"):
            list(read_changelog(servers, topic, start="earliest", table=relation))
        text = failure_text(["run", "--vars", json.dumps({"step": 2})])
        assert "deleted records" in text and "Nothing was changed" in text, text

        # the operator keeps records again; the next run re-bases the log on the table
        _alter_topic(servers, topic, **{"retention.ms": "-1"})
        _, out = _run(project, step=2, on_lost="restart")
        assert "starts generation 2" in out, out
        generation_replay(servers, topic, relation)
        status = _plain_status(project)["events"]
        assert status.agree and status.start == "generation:2", (status.problems, status.start)
        # a reader from earliest is refused, naming the generation; from it, it reaches the table
        with pytest.raises(UsageError, match="latest-generation"):
            list(read_changelog(servers, topic, start="earliest", table=relation))
        changes = list(read_changelog(servers, topic, start=StartPoint("latest-generation"),
                                      table=relation))
        # on the wire, the generation's copy is Debezium's snapshot events (op 'r',
        # source.snapshot) with the generation header; the reader marks the generation's start
        # (op 'g'), then delivers them as they are on the wire
        copy = [m for m in read_topic(servers, topic) if m.header("logstore.starts-generation")]
        assert [m.envelope["op"] for m in copy] == ["r"] * 5
        assert {m.envelope["source"]["snapshot"] for m in copy} == {"true"}
        assert [(c.op, c.generation) for c in changes[:6]] == [("g", 2)] + [("r", 2)] * 5
        replica = Replica()
        for change in changes:
            replica.apply(change)
        assert sorted(row["step"] for row in replica.rows()) == [2] * 5

    def test_a_generation_on_a_schedule(self, project, kafka_bootstrap_servers):
        servers = kafka_bootstrap_servers
        relation = topic = f"{project.test_schema}.events"
        # (alone, this test starts from a log of its own; the broker keeps its records from here)
        _run(project, step=3, on_lost="restart")
        _alter_topic(servers, topic, **{"retention.ms": "-1"})
        before = [c["generation"] for c in _confirmations(servers, topic) if "generation_start" in c]
        _run(project, step=4, interval="1 ms", on_lost="restart")  # every run is past the interval
        after = [c["generation"] for c in _confirmations(servers, topic) if "generation_start" in c]
        assert after == before + [max(before) + 1]
        generation_replay(servers, topic, relation)


COMPACTED = """{{ config(materialized='table', unique_key='id', log_system='kafka',
          **{'kafka.topic-config.segment.ms': '100',
             'kafka.topic-config.min.cleanable.dirty.ratio': '0.01',
             'kafka.topic-config.delete.retention.ms': '100',
             'kafka.topic-config.min.compaction.lag.ms': '0', %s}) }}
select id, concat('v', cast({{ var('step') }} as string)) as version
from range(0, 20 - {{ var('step') }}) as r(id)
"""
FLINK_DEDUPLICATES = {"table.exec.source.cdc-events-duplicate": "true"}


class TestCompaction:
    @pytest.fixture(scope="class")
    def models(self):
        # a keyed log is compacted by default (lifecycle/retention.py); these roll segments fast
        return {"accounts.sql": COMPACTED % "'log.format': 'debezium-json'",
                "balances.sql": COMPACTED % "'log.format': 'json'"}

    def test_a_compacted_keyed_log_still_replays_to_the_table(self, project, kafka_bootstrap_servers,
                                                               flink_kafka_decoder):
        servers = kafka_bootstrap_servers
        topics = {m: f"{project.test_schema}.{m}" for m in ("accounts", "balances")}
        written = {m: 0 for m in topics}
        for step in range(1, 7):  # every row updated each run, one deleted
            results, _ = _run(project, step=step)
            for result in results:
                written[result.node.name] += result.adapter_response["rows_mirrored"]
            time.sleep(0.3)  # the next run's records roll the segment (segment.ms)
        assert _settings(servers, topics["accounts"])["cleanup.policy"] == "compact"
        deadline = time.monotonic() + 90  # the broker's log cleaner really compacts
        while any(len(read_topic(servers, t)) >= written[m] for m, t in topics.items()):
            assert time.monotonic() < deadline, "the log cleaner compacted nothing"
            time.sleep(1)
        types, table = table_state(topics["accounts"])
        messages = confirmed(servers, topics["accounts"], read_topic(servers, topics["accounts"]))
        assert replay(messages, types) == table  # the tests' own consumer
        assert logstore_statuses(project)["accounts"].agree  # the package's reader
        assert logstore_statuses(project)["balances"].agree
        # Flink from the earliest offset: debezium-json with the key and Flink's de-duplication
        # of CDC events (a compacted key starts with its latest update), and upsert-kafka
        cases = {
            "accounts": kafka_case("accounts", types, kafka_options(topics["accounts"], servers), ["id"]),
            "balances": kafka_case("balances", types, upsert_kafka_options(topics["balances"], servers),
                                   ["id"]),
        }
        cases["accounts"].config.update(FLINK_DEDUPLICATES)
        results = flink_kafka_decoder.decode(list(cases.values()))
        assert not errors_of(results), errors_of(results)
        for model, case in cases.items():
            state, _ = state_and_kinds(results, case, types)
            assert state == table_state(topics[model])[1], model + differences(state, table_state(topics[model])[1])


class TestANewClusterAtTheSameAddress:
    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.sql": KEYED}

    @pytest.fixture(scope="class")
    def kafka_bootstrap_servers(self, tmp_path_factory):
        cluster = KafkaCluster(tmp_path_factory.mktemp("first_cluster"), nodes=1)
        with cluster:
            self.__class__.cluster = cluster
            yield cluster.bootstrap_servers

    def test_a_failover_to_an_empty_cluster_is_refused_then_restarted(
            self, project, kafka_bootstrap_servers, tmp_path_factory):
        relation = topic = f"{project.test_schema}.customers"
        old = self.cluster
        _run(project, step=1)
        old.stop()  # the same servers, a new cluster (a disaster-recovery failover)
        new = KafkaCluster(tmp_path_factory.mktemp("second_cluster"), nodes=1)
        new._nodes = [Node(n.id, n.port, n.controller_port, new.base_dir / f"node-{n.id}")
                      for n in old._nodes]
        with new:
            assert new.bootstrap_servers == kafka_bootstrap_servers
            text = failure_text(["run", "--vars", json.dumps({"step": 2})])
            assert "another Kafka cluster" in text and "Nothing was changed" in text, text
            _, out = _run(project, step=2, on_lost="restart")
            assert "starts generation 2" in out, out
            generation_replay(kafka_bootstrap_servers, topic, relation)
            assert _plain_status(project)["customers"].agree
            old._nodes = []  # already stopped
