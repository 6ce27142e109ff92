"""Every reader reaches the table after a re-base (issue 41), on Apache Kafka.

- TestRebasedCompactedLogs: two keyed models (json and debezium-json, two partitions each) are
  re-based in each of the three ways a generation after the first starts, each time with keys
  the table no longer has: (1) the table dropped and rebuilt with fewer keys under
  `log.on-lost: restart`, (2) keys deleted while `log.system: none`, then `logstore_resnapshot`,
  (3) deletes, then a generation of `log.generation.interval`. After each, the retraction is on
  the wire (debezium-json: a `d` with the last image as `before`, then the tombstone; json: the
  tombstone) and a plain upsert reader and the package's reader end with the table. Then runs
  that update every row, the broker's own cleaner compacts the topics (fewer records than were
  written), and four readers from the earliest offset end with the table: the package's reader
  (read_changelog + replay.Replica), a plain upsert-by-key reader (confluent-kafka: a new
  consumer group, auto.offset.reset=earliest, the latest value per key, tombstones delete: what
  Kafka Streams, ksqlDB or a JDBC upsert sink do), Flink `upsert-kafka` and Flink
  `debezium-json` with a primary key.
- TestAnEmptyGeneration: a keyed and a keyless table dropped and rebuilt empty under `restart`,
  then rows again: after each run the package's reader from the earliest offset (both) and the
  plain upsert reader (keyed: a keyless log needs the generation's start offsets, documented)
  end with the table.
"""
import json
import time
import uuid
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Tuple

import pytest
from confluent_kafka import Consumer, KafkaError
from dbt.tests.util import run_dbt_and_capture

from dbt.adapters.logstore.reading.reader import read_changelog
from dbt.adapters.logstore.reading.replay import Replica
from tests.functional.contract import canonical, read_topic, spark, table_state
from tests.functional.flink_peer import (
    differences, errors_of, kafka_case, kafka_options, state_and_kinds, upsert_kafka_options,
)

pytestmark = pytest.mark.apache_kafka

KEYED = """{{ config(materialized='table', unique_key='id', log_system=var('log_system', 'kafka'),
          log_on_lost=var('on_lost', 'fail'), log_system_partitions=2,
          **{'log.format': '%s', 'log.generation.interval': var('interval', ''),
             'kafka.topic-config.segment.ms': '100',
             'kafka.topic-config.min.cleanable.dirty.ratio': '0.01',
             'kafka.topic-config.delete.retention.ms': '100',
             'kafka.topic-config.min.compaction.lag.ms': '0'}) }}
select id, concat('v', cast({{ var('step') }} as string)) as version
from range(1, {{ var('keys') }} + 1) as r(id)
"""
MODELS = {"accounts": "debezium-json", "balances": "json"}
FLINK_DEDUPLICATES = {"table.exec.source.cdc-events-duplicate": "true"}


def _run(*args: str, expect_pass: bool = True, **variables) -> Tuple[list, str]:
    return run_dbt_and_capture([*args, "--vars", json.dumps(variables)], expect_pass=expect_pass)


def package_reading(servers: str, topic: str, relation: str, types: Dict[str, str]) -> Counter:
    """The package's reader from the earliest offset, applied to a replay.Replica."""
    replica = Replica()
    for change in read_changelog(servers, topic, start="earliest", table=relation):
        replica.apply(change)
    return Counter(canonical(row, types) for row in replica.rows())


def plain_reading(servers: str, topic: str, types: Dict[str, str], value_format: str) -> Counter:
    """A consumer that knows nothing of generations or confirmations: a new group from the
    earliest offset, the latest value per key, a tombstone (or a Debezium `d`) deletes. It is
    librdkafka's (confluent-kafka), not the package's own client (kafka-python)."""
    # kafka-python's group once stayed assigned nothing for 300 s in a full run (twice, with a
    # 2 s metadata refresh too); librdkafka joins again as soon as the topic's metadata changes.
    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"plain-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    consumer.subscribe([topic])
    try:
        partitions = set(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        latest: Dict[bytes, dict] = {}
        at_end: set = set()  # the partitions read to their end (read_committed: the stable end)
        deadline = time.monotonic() + 300  # a group's join is slow on a busy machine
        while not (partitions and at_end >= partitions):
            assert time.monotonic() < deadline, (
                f"the plain reader did not reach the end of {topic}: partitions {sorted(partitions)}, "
                f"assigned {sorted(tp.partition for tp in consumer.assignment())}, at the end "
                f"{sorted(at_end)}")
            m = consumer.poll(0.3)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, f"{topic}: {m.error()}"
                at_end.add(m.partition())
                continue
            value = None if m.value() is None else json.loads(m.value())
            if value is not None and value_format == "debezium-json":
                value = None if value["op"] == "d" else value["after"]
            if value is None:
                latest.pop(m.key(), None)
            else:
                latest[m.key()] = value
        return Counter(canonical(row, types) for row in latest.values())
    finally:
        consumer.close()


def assert_readers_reach_the_table(servers: str, formats: Dict[str, str], context: str,
                                   keyed: Dict[str, bool]) -> None:
    """Each topic's readers (`formats`: each topic's value format; the topics are named as the
    relations) at once: each waits on the broker, mostly (a plain reader's group join)."""
    tables = {topic: table_state(topic) for topic in formats}
    with ThreadPoolExecutor(max_workers=2 * len(formats)) as pool:
        readings = {(topic, "package reader"): pool.submit(package_reading, servers, topic, topic,
                                                           tables[topic][0]) for topic in formats}
        readings.update({(topic, "plain upsert reader"): pool.submit(
            plain_reading, servers, topic, tables[topic][0], value_format)
            for topic, value_format in formats.items() if keyed[topic]})
    for (topic, reader), reading in readings.items():
        state, table = reading.result(), tables[topic][1]
        assert state == table, f"{context}: {reader} of {topic}" + differences(state, table)


def assert_retracted(messages: list, topic: str, value_format: str, gone: List[int],
                     context: str) -> None:
    """On the wire (`messages`: the topic's records): each key the table lost ends, in the
    topic, with its retraction (or has no record left at all, once the cleaner removed the
    tombstone too)."""
    by_key: Dict[int, list] = defaultdict(list)
    for m in messages:
        by_key[json.loads(m.key)["id"]].append(m)
    for key in gone:
        records = by_key[key]
        if not records:
            continue
        assert records[-1].value is None, \
            f"{context}: {topic} key {key} is not retracted (its last record is not a tombstone)"
        if value_format == "debezium-json" and len(records) >= 2:  # unless the cleaner took it
            delete = json.loads(records[-2].value)
            assert delete["op"] == "d", f"{context}: {topic} key {key}: no `d` before the tombstone"
            if len(records) >= 3:
                assert delete["before"] == json.loads(records[-3].value)["after"], \
                    f"{context}: {topic} key {key}: the `d` does not carry the last image"


class TestRebasedCompactedLogs:
    @pytest.fixture(scope="class")
    def models(self):
        return {f"{name}.sql": KEYED % value_format for name, value_format in MODELS.items()}

    def test_every_reader_reaches_the_table_after_each_kind_of_rebase(
            self, project, kafka_bootstrap_servers, flink_kafka_decoder):
        servers = kafka_bootstrap_servers
        topics = {m: f"{project.test_schema}.{m}" for m in MODELS}
        seen: Dict[str, set] = {t: set() for t in topics.values()}  # (partition, offset) ever read
        formats = {topics[m]: value_format for m, value_format in MODELS.items()}

        def written() -> Dict[str, list]:
            records = {topic: read_topic(servers, topic) for topic in topics.values()}
            for topic, messages in records.items():
                seen[topic] |= {(m.partition, m.offset) for m in messages}
            return records

        def check(context: str, gone: List[int]) -> None:
            records = written()
            for topic, value_format in formats.items():
                assert_retracted(records[topic], topic, value_format, gone, context)
            assert_readers_reach_the_table(servers, formats, context, dict.fromkeys(formats, True))

        _run("run", step=1, keys=60)
        written()
        # (1) dropped and rebuilt with fewer keys behind the log: `restart` re-bases
        for topic in topics.values():
            spark().sql(f"drop table {topic}")
        _, out = _run("run", step=2, keys=40, on_lost="restart")
        assert "starts generation" in out, out
        check("(1) rebuilt with ids <= 40 under restart", gone=list(range(41, 61)))
        # (2) keys deleted while the log is off, then logstore_resnapshot
        _run("run", step=3, keys=30, log_system="none")
        for model in MODELS:
            _, out = run_dbt_and_capture(["run-operation", "logstore_resnapshot", "--args",
                                          json.dumps({"model": model}),
                                          "--vars", json.dumps({"step": 3, "keys": 30})])
            assert "started a new generation" in out, out
        check("(2) ids > 30 deleted with the log off, then logstore_resnapshot", gone=list(range(31, 61)))
        # (3) deletes, then a generation on a schedule
        _run("run", step=4, keys=20)
        _, out = _run("run", step=5, keys=20, interval="1 ms")
        assert "starts generation" in out, out
        check("(3) ids > 20 deleted, then an interval generation", gone=list(range(21, 61)))
        for step in (6, 7, 8):  # every row updated: the generations' records are superseded
            time.sleep(0.3)  # the next run's records roll the segment (segment.ms)
            _run("run", step=step, keys=20)
            written()

        deadline = time.monotonic() + 120  # the broker's log cleaner really compacts
        while any(len(read_topic(servers, t)) >= len(seen[t]) for t in topics.values()):
            assert time.monotonic() < deadline, "the log cleaner compacted nothing"
            time.sleep(2)
        assert_readers_reach_the_table(servers, formats, "compacted", dict.fromkeys(formats, True))

        types, _ = table_state(topics["accounts"])
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
            table = table_state(topics[model])[1]
            assert state == table, f"Flink {case.format} of {model}" + differences(state, table)


KEYED_OR_NOT = """{{ config(materialized='table', log_system='kafka', log_on_lost=var('on_lost', 'fail'),
          log_system_partitions=2 %s) }}
select id, concat('v', cast({{ var('step') }} as string)) as version
from range(1, 6) as r(id) {%% if var('empty', false) %%} where false {%% endif %%}
"""


class TestAnEmptyGeneration:
    @pytest.fixture(scope="class")
    def models(self):
        return {"keyed.sql": KEYED_OR_NOT % ", unique_key='id'", "keyless.sql": KEYED_OR_NOT % ""}

    def test_a_table_rebuilt_empty_then_with_rows_again(self, project, kafka_bootstrap_servers):
        servers = kafka_bootstrap_servers
        topics = {m: f"{project.test_schema}.{m}" for m in ("keyed", "keyless")}

        def check(context: str, rows: int) -> None:
            for topic in topics.values():
                assert len(table_state(topic)[1]) == rows
            assert_readers_reach_the_table(servers, dict.fromkeys(topics.values(), "debezium-json"),
                                           context, {t: m == "keyed" for m, t in topics.items()})

        _run("run", step=1)
        check("first run", 5)
        for topic in topics.values():
            spark().sql(f"drop table {topic}")
        _, out = _run("run", step=2, empty=True, on_lost="restart")
        assert "starts generation" in out, out
        check("rebuilt empty under restart", 0)
        _run("run", step=3)
        check("rows again", 5)
