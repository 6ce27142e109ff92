"""The confluent-kafka writer (kafka_client: confluent) with a fake librdkafka producer: the same
semantics as the kafka-python writer."""
import json
import os

import confluent_kafka
import pytest
from dbt_common.exceptions import DbtRuntimeError
from kafka.partitioner.default import murmur2

from dbt.adapters.logstore import faults
from dbt.adapters.logstore.log.kafka.confluent_writer import ConfluentLogWriter
from dbt.adapters.logstore.log.kafka.config import CONFLUENT_DEFAULTS, client_config, confluent_config
from dbt.adapters.logstore.log.kafka.log_system import KafkaLogSystem
from dbt.adapters.logstore.log.kafka.python_writer import KafkaLogWriter
from dbt.adapters.logstore.log.kafka.writer import partition_for
from dbt.adapters.logstore.log.log_system import LogWriteInterrupted
from dbt.adapters.logstore.config.log_config import LogConfig, LogConfigError, ModelRef, resolve_log_config

CONTROL = "analytics.orders__logstore_commits"


def make_log(properties=None, **kw):
    kw.setdefault("consistency", "transactional")
    kw.setdefault("client", "confluent")
    return LogConfig(model="orders_model", system="kafka", topic="analytics.orders",
                     bootstrap_servers="b1:9092, b2:9092",
                     client_properties=dict(properties or {}), **kw)


class FakeMessage:
    def __init__(self, topic, partition, offset):
        self._t, self._p, self._o = topic, partition, offset

    def topic(self):
        return self._t

    def partition(self):
        return self._p

    def offset(self):
        return self._o


class FakeProducer:
    instances = []
    partitions = {0: None, 1: None, 2: None}
    delivery_error = None
    queue_full_times = 0

    def __init__(self, config):
        if "no.such.property" in config:
            raise confluent_kafka.KafkaException(confluent_kafka.KafkaError(
                confluent_kafka.KafkaError._INVALID_ARG, 'No such configuration property: "no.such.property"'))
        self.config = config
        self.calls, self.produced, self.pending = [], [], []
        self.offsets = {}
        self.full = FakeProducer.queue_full_times
        FakeProducer.instances.append(self)

    def init_transactions(self, timeout=None):
        self.calls.append("init_transactions")

    def begin_transaction(self):
        self.calls.append("begin_transaction")

    def commit_transaction(self, timeout=None):
        self.calls.append("commit_transaction")

    def abort_transaction(self, timeout=None):
        self.calls.append("abort_transaction")

    def purge(self):
        self.calls.append("purge")

    def list_topics(self, topic=None, timeout=None):
        meta = type("T", (), {"partitions": dict(self.partitions)})()
        return type("M", (), {"topics": {topic: meta}})()

    def produce(self, topic, value=None, key=None, partition=-1, headers=None, on_delivery=None):
        if self.full:
            self.full -= 1
            raise BufferError("queue full")
        self.calls.append(f"produce {topic}")
        p = 0 if partition == -1 else partition
        offset = self.offsets.get((topic, p), 0)
        self.offsets[(topic, p)] = offset + 1
        self.produced.append((topic, key, value, partition, headers))
        self.pending.append((on_delivery, FakeMessage(topic, p, offset)))

    def poll(self, timeout=None):
        self.calls.append("poll")
        self._deliver()
        return 0

    def flush(self, timeout=None):
        self.calls.append("flush")
        self._deliver()
        return 0

    def _deliver(self):
        for callback, msg in self.pending:
            callback(FakeProducer.delivery_error, msg)
        self.pending = []


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(confluent_kafka, "Producer", FakeProducer)
    monkeypatch.setattr(FakeProducer, "instances", [])
    monkeypatch.setattr(FakeProducer, "delivery_error", None)
    monkeypatch.setattr(FakeProducer, "queue_full_times", 0)
    monkeypatch.delenv(faults.ENV, raising=False)
    return FakeProducer


def confirm(result):
    return b"analytics.orders", json.dumps({"records": result.records,
                                            "offsets": {str(p): list(o) for p, o in result.offsets.items()}}).encode()


def test_the_system_opens_the_writer_of_the_configured_client(fake):
    assert isinstance(KafkaLogSystem().open_writer(make_log(), "analytics.orders"), ConfluentLogWriter)


def test_transactional_writer_commits_records_and_confirmation_in_one_transaction(fake):
    writer = ConfluentLogWriter(make_log(), "analytics.orders")
    headers = (("logstore.attempt", b"a1"),)
    writer.send(b'{"id":1}', b"v1", route=b"", headers=headers)
    writer.send(None, b"v2", route=b'{"k":1}', headers=headers)
    result = writer.commit(confirm)
    (producer,) = fake.instances
    assert producer.config["transactional.id"] == "dbt-logstore.analytics.orders"
    assert producer.config["enable.idempotence"] is True
    assert producer.config["bootstrap.servers"] == "b1:9092,b2:9092"
    assert producer.config["partitioner"] == "murmur2_random"  # Java's, like kafka-python's
    assert producer.calls[:2] == ["init_transactions", "begin_transaction"]
    assert producer.calls[-1] == "commit_transaction"
    assert producer.calls.index(f"produce {CONTROL}") > producer.calls.index("flush")
    topics = [p[0] for p in producer.produced]
    assert topics == ["analytics.orders", "analytics.orders", CONTROL]
    # keyless records are placed by the row image's hash, keyed ones by the client (murmur2)
    assert producer.produced[0][3] == -1  # librdkafka's partitioner
    assert producer.produced[1][3] == partition_for(b'{"k":1}', [0, 1, 2])
    assert producer.produced[0][4] == [("logstore.attempt", b"a1")]
    assert producer.produced[2][3] == 0  # the control record: partition 0
    assert result.records == 2
    assert json.loads(producer.produced[2][2])["records"] == 2


def test_share_of_a_parallel_write_commits_without_confirmation(fake):
    writer = ConfluentLogWriter(make_log(), "analytics.orders.task-1")
    writer.send(b'{"id":1}', b"v", route=b"")
    writer.commit(None)
    (producer,) = fake.instances
    assert [p[0] for p in producer.produced] == ["analytics.orders"]
    assert producer.calls[-1] == "commit_transaction"


def test_eventual_writer_has_no_transaction(fake):
    writer = ConfluentLogWriter(make_log(consistency="eventual"), "analytics.orders")
    writer.send(b'{"id":1}', b"v", route=b"")
    writer.commit(confirm)
    (producer,) = fake.instances
    assert "transactional.id" not in producer.config
    assert not any("transaction" in c for c in producer.calls)


def test_offsets_come_from_delivery_reports(fake):
    writer = ConfluentLogWriter(make_log(), "analytics.orders")
    for i in range(3):
        writer.send(None, b"v", route=b"same row")
    result = writer.commit(confirm)
    p = partition_for(b"same row", [0, 1, 2])
    assert result.offsets == {p: (0, 3)}  # [first, next); the control record is not counted


def test_a_full_local_queue_waits_and_retries(fake):
    fake.queue_full_times = 2
    writer = ConfluentLogWriter(make_log(), "analytics.orders")
    writer.send(b'{"id":1}', b"v", route=b"")
    (producer,) = fake.instances
    assert producer.calls.count("poll") == 2 and len(producer.produced) == 1


def test_a_failed_delivery_fails_the_commit_and_abort_aborts(fake):
    fake.delivery_error = confluent_kafka.KafkaError(confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE)
    writer = ConfluentLogWriter(make_log(), "analytics.orders")
    writer.send(b'{"id":1}', b"v", route=b"")
    with pytest.raises(DbtRuntimeError, match="Model 'orders_model': writing to Kafka topic 'analytics.orders' failed"):
        writer.commit(confirm)
    writer.abort()
    (producer,) = fake.instances
    assert CONTROL not in [p[0] for p in producer.produced]
    assert producer.calls[-1] == "abort_transaction"


def test_a_fenced_producer_whose_flush_lost_the_error_fails_saying_it_was_fenced(fake, monkeypatch):
    # confluent-kafka at times ends a flush after a fatal error in a bare SystemError ("returned
    # NULL without setting an exception"); its error callback has reported the fatal error
    writer = ConfluentLogWriter(make_log(), "analytics.orders")
    (producer,) = fake.instances
    writer.send(b'{"id":1}', b"v", route=b"")

    def flush(timeout=None):
        producer.config["error_cb"](confluent_kafka.KafkaError(
            confluent_kafka.KafkaError._FENCED, "fenced by newer producer instance", fatal=True))
        raise SystemError("<built-in method flush> returned NULL without setting an exception")

    monkeypatch.setattr(producer, "flush", flush)
    with pytest.raises(DbtRuntimeError, match="writing to Kafka topic 'analytics.orders' failed.*newer writer"):
        writer.commit(confirm)


def test_a_bare_system_error_without_a_fatal_error_is_not_hidden(fake, monkeypatch):
    writer = ConfluentLogWriter(make_log(), "analytics.orders")
    (producer,) = fake.instances
    # a non-fatal error (librdkafka retries it) is only logged, not taken for the cause
    producer.config["error_cb"](confluent_kafka.KafkaError(confluent_kafka.KafkaError._TRANSPORT, "broker down"))
    monkeypatch.setattr(producer, "flush", lambda timeout=None: (_ for _ in ()).throw(SystemError("bug")))
    with pytest.raises(SystemError, match="bug"):
        writer.commit(confirm)


def test_crash_before_log_commit_leaves_the_transaction_open(fake, monkeypatch):
    class Exited(BaseException):
        pass

    def fake_exit(code):
        raise Exited(code)

    monkeypatch.setattr(os, "_exit", fake_exit)
    monkeypatch.setenv(faults.ENV, "before_log_commit")
    writer = ConfluentLogWriter(make_log(), "analytics.orders")
    writer.send(b"k", b"v", route=b"r")
    with pytest.raises(Exited):
        writer.commit(confirm)
    (producer,) = fake.instances
    assert f"produce {CONTROL}" in producer.calls and "commit_transaction" not in producer.calls


def test_properties_are_translated_to_librdkafka_names():
    config = confluent_config(make_log({"sasl.plain.username": "u", "sasl.plain.password": "p",
                                        "ssl.cafile": "/ca.pem", "security.protocol": "SASL_SSL",
                                        "linger.ms": "5", "max.request.size": "2000000",
                                        "queue.buffering.max.ms": "7"}))
    assert config["sasl.username"] == "u" and config["sasl.password"] == "p"
    assert config["ssl.ca.location"] == "/ca.pem" and config["security.protocol"] == "SASL_SSL"
    assert config["linger.ms"] == "5"  # the user's setting wins over the default
    assert config["message.max.bytes"] == "2000000"
    assert config["queue.buffering.max.ms"] == "7"
    assert confluent_config(make_log())["linger.ms"] == CONFLUENT_DEFAULTS["linger.ms"]


def test_librdkafka_settings_do_not_trouble_the_kafka_python_admin():
    # the admin and the reader stay on kafka-python; a librdkafka-only setting is skipped there
    config = client_config(make_log({"queue.buffering.max.ms": "7", "linger.ms": "5"}), {})
    assert "queue_buffering_max_ms" not in config and config["linger_ms"] == 5
    with pytest.raises(LogConfigError, match="not supported by kafka-python"):
        client_config(make_log({"queue.buffering.max.ms": "7"}, client="kafka-python"), {})


def test_an_unknown_librdkafka_property_is_a_clear_error(fake):
    with pytest.raises(LogConfigError, match="Model 'orders_model'.*not accepted by confluent-kafka.*no.such.property"):
        ConfluentLogWriter(make_log({"no.such.property": "1"}), "analytics.orders")


def test_keyed_placement_agrees_with_kafka_python():
    # librdkafka's murmur2_random is Java's murmur2: the same partition as kafka-python picks
    key = b'{"id":42}'
    assert partition_for(key, [0, 1, 2]) == (murmur2(key) & 0x7FFFFFFF) % 3


REF = ModelRef(name="orders", schema="analytics", alias="orders", materialized="table")


@pytest.mark.parametrize("value,expected", [(None, "kafka-python"), ("confluent", "confluent"),
                                            ("Kafka-Python", "kafka-python")])
def test_profile_kafka_client(value, expected):
    log = resolve_log_config(REF, {"log.system": "kafka"}, profile_bootstrap_servers="k:1",
                             profile_client=value)
    assert log.client == expected


def test_profile_kafka_client_error():
    with pytest.raises(LogConfigError, match="'kafka_client'. Allowed: kafka-python, confluent"):
        resolve_log_config(REF, {"log.system": "kafka"}, profile_bootstrap_servers="k:1",
                           profile_client="librdkafka")


def test_the_kafka_python_writer_stays_the_default():
    assert LogConfig(model="m").client == "kafka-python"
    assert KafkaLogWriter is not ConfluentLogWriter


def failed_commit(fake, error, fatal=None):
    """The error a one-record commit fails with when librdkafka reports `error` for the record
    (and `fatal` to the error callback first)."""
    fake.delivery_error = error
    writer = ConfluentLogWriter(make_log(), "analytics.orders")
    if fatal is not None:
        fake.instances[0].config["error_cb"](fatal)
    writer.send(b'{"id":1}', b"v", route=b"")
    with pytest.raises(DbtRuntimeError) as raised:
        writer.commit(confirm)
    return raised.value


FENCED = confluent_kafka.KafkaError(confluent_kafka.KafkaError._FENCED,
                                    "fenced by newer producer instance", fatal=True)
PURGED = confluent_kafka.KafkaError(confluent_kafka.KafkaError._PURGE_QUEUE)


def test_a_transaction_a_lost_node_broke_off_is_an_interrupted_write(fake):
    # librdkafka aborts the transaction (OUT_OF_ORDER_SEQUENCE_NUMBER after a leader moved) and
    # purges the records it held: the mirror writes the change set again (commit/mirror.py)
    error = failed_commit(fake, PURGED)
    assert isinstance(error, LogWriteInterrupted)
    assert "writing to Kafka topic 'analytics.orders' failed" in error.msg


def test_a_commit_that_requires_the_transactions_abort_is_an_interrupted_write(fake, monkeypatch):
    writer = ConfluentLogWriter(make_log(), "analytics.orders")
    (producer,) = fake.instances

    def commit_transaction(timeout=None):
        raise confluent_kafka.KafkaException(confluent_kafka.KafkaError(
            confluent_kafka.KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, "skipped sequence numbers",
            txn_requires_abort=True))

    monkeypatch.setattr(producer, "commit_transaction", commit_transaction)
    with pytest.raises(LogWriteInterrupted):
        writer.commit(confirm)


@pytest.mark.parametrize("error", [
    confluent_kafka.KafkaError(confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE),
    FENCED,
    confluent_kafka.KafkaError(confluent_kafka.KafkaError.INVALID_PRODUCER_EPOCH, "epoch",
                               txn_requires_abort=True),  # Kafka aborted it: a timeout or a fence
])
def test_other_failures_are_not_interrupted_writes(fake, error):
    assert not isinstance(failed_commit(fake, error), LogWriteInterrupted)


def test_a_purge_after_a_fatal_error_is_not_an_interrupted_write(fake):
    assert not isinstance(failed_commit(fake, PURGED, fatal=FENCED), LogWriteInterrupted)
