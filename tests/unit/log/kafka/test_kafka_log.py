"""The Kafka writer without a broker: client config, partitioner, writer/admin/consumer with
fakes."""
import itertools
import json
import os
from collections import namedtuple

import kafka
import pytest
from dbt_common.exceptions import DbtRuntimeError
from kafka.errors import (
    KafkaError,
    KafkaTimeoutError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
)
from kafka.partitioner.default import murmur2

from dbt.adapters.logstore import faults
from dbt.adapters.logstore.log.kafka import log_system as kafka_log, writer as kafka_writer
from dbt.adapters.logstore.log.kafka.config import ADMIN_DEFAULTS, PRODUCER_DEFAULTS, client_config
from dbt.adapters.logstore.log.kafka.log_system import KafkaLogSystem
from dbt.adapters.logstore.log.kafka.python_writer import KafkaLogWriter
from dbt.adapters.logstore.log.kafka.writer import partition_for
from dbt.adapters.logstore.config.log_config import LogConfig, LogConfigError, ModelRef, resolve_log_config

REAL_PRODUCER = kafka.KafkaProducer
REAL_CONSUMER = kafka.KafkaConsumer
CONTROL = "analytics.orders__logstore_commits"


def make_log(properties=None, servers="b1:9092", **kw):
    kw.setdefault("model", "orders_model")
    kw.setdefault("system", "kafka")
    kw.setdefault("topic", "analytics.orders")
    return LogConfig(bootstrap_servers=servers, client_properties=dict(properties or {}), **kw)


# --- client_config -----------------------------------------------------------------------


def test_client_config_translates_java_style_properties():
    config = client_config(make_log({
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.plain.username": "user",
        "sasl.plain.password": "secret",
        "ssl.cafile": "/etc/ca.pem",
    }), {})
    assert config["security_protocol"] == "SASL_SSL"
    assert config["sasl_mechanism"] == "PLAIN"
    assert config["sasl_plain_username"] == "user"
    assert config["sasl_plain_password"] == "secret"
    assert config["ssl_cafile"] == "/etc/ca.pem"
    assert "security.protocol" not in config


def test_client_config_translates_dashes():
    assert client_config(make_log({"linger-ms": "5"}), {})["linger_ms"] == 5


@pytest.mark.parametrize("key,raw,expected", [
    ("linger.ms", "50", 50),
    ("batch.size", "1048576", 1048576),
    ("request.timeout.ms", " 12000 ", 12000),
    ("max.block.ms", "100", 100),
    ("acks", "1", 1),
    ("acks", "all", "all"),  # not an int: left as is
])
def test_client_config_coerces_int_strings(key, raw, expected):
    value = client_config(make_log({key: raw}), {})[key.replace(".", "_")]
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize("raw,expected", [("true", True), ("True", True), ("1", True),
                                          ("yes", True), ("false", False), ("0", False),
                                          ("no", False)])
def test_client_config_coerces_bool_strings(raw, expected):
    assert client_config(make_log({"ssl.check.hostname": raw}), {})["ssl_check_hostname"] is expected


def test_client_config_keeps_non_string_values():
    assert client_config(make_log({"linger.ms": 7}), {})["linger_ms"] == 7


def test_client_config_coerces_retries():
    # `retries` is numeric in kafka-python (default float('inf')), and the producer compares
    # it with ints (`batch.attempts >= retries`, `retries == 0`): a profile's "5" must become 5.
    value = client_config(make_log({"retries": "5"}), {})["retries"]
    assert value == 5 and isinstance(value, int)


def test_client_config_unknown_property_fails_naming_it():
    with pytest.raises(LogConfigError) as info:
        client_config(make_log({"sasl.jaas.config": "org.apache...PlainLoginModule secret"}), {})
    message = str(info.value)
    assert "orders_model" in message
    assert "'sasl.jaas.config'" in message
    assert "kafka_properties" in message
    assert "secret" not in message  # the value is not echoed


def test_client_config_bootstrap_servers_split_on_commas():
    config = client_config(make_log(servers="a:1, b:2 ,c:3"), {})
    assert config["bootstrap_servers"] == ["a:1", "b:2", "c:3"]
    assert client_config(make_log(servers="solo:9092"), {})["bootstrap_servers"] == ["solo:9092"]


def test_client_config_client_id():
    assert client_config(make_log(), {})["client_id"] == "dbt-logstore"


def test_client_config_applies_known_defaults_only():
    config = client_config(make_log(), {"linger_ms": 20, "not_a_kafka_setting": 1})
    assert config["linger_ms"] == 20
    assert "not_a_kafka_setting" not in config


def test_client_config_properties_override_defaults():
    config = client_config(make_log({"linger.ms": "1"}), PRODUCER_DEFAULTS)
    assert config["linger_ms"] == 1
    assert config["batch_size"] == PRODUCER_DEFAULTS["batch_size"]
    assert config["acks"] == "all"


def test_producer_defaults_are_known_to_kafka_python():
    config = client_config(make_log(), PRODUCER_DEFAULTS)
    for key in PRODUCER_DEFAULTS:
        assert key in config, key


def test_admin_defaults_are_known():
    config = client_config(make_log(), ADMIN_DEFAULTS)
    assert config["request_timeout_ms"] == ADMIN_DEFAULTS["request_timeout_ms"]


# --- partition_for ------------------------------------------------------------------------

# Apache Kafka's clients UtilsTest.testMurmur2 (signed 32-bit results of Utils.murmur2).
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}

# kafka-python's test/test_partitioner.py test_murmur2_java_compatibility (1000 partitions),
# "compare with output from Kafka's org.apache.kafka.clients.producer.Partitioner".
JAVA_PARTITIONS_OF_1000 = {
    b"": 681, b"a": 524, b"ab": 434, b"abc": 107, b"123456789": 566, b"\x00 ": 742,
}


@pytest.mark.parametrize("data,expected", sorted(JAVA_PARTITIONS_OF_1000.items()))
def test_partition_for_matches_java_partitioner(data, expected):
    assert partition_for(data, list(range(1000))) == expected


@pytest.mark.parametrize("data,signed", sorted(JAVA_MURMUR2.items()))
def test_partition_for_uses_java_murmur2(data, signed):
    positive = signed & 0x7FFFFFFF  # Utils.toPositive
    for n in (1, 2, 3, 7, 12, 1000):
        assert partition_for(data, list(range(n))) == positive % n


@pytest.mark.parametrize("data", [b"", b"x", b'{"id":1}', "é".encode(), bytes(range(256))])
def test_partition_for_equals_kafka_python_choice(data):
    for n in (1, 3, 8, 64):
        partitions = list(range(n))
        expected = partitions[(murmur2(data) & 0x7FFFFFFF) % n]
        assert partition_for(data, partitions) == expected


def test_partition_for_is_stable_and_in_range():
    partitions = [0, 1, 2, 3, 4]
    seen = set()
    for i in range(200):
        data = f'{{"row":{i}}}'.encode()
        p = partition_for(data, partitions)
        assert p == partition_for(data, partitions)
        assert p in partitions
        seen.add(p)
    assert seen == set(partitions)  # spreads over every partition


def test_partition_for_indexes_the_given_partition_list():
    data = b"abc"
    index = (murmur2(data) & 0x7FFFFFFF) % 3
    assert partition_for(data, [10, 20, 30]) == [10, 20, 30][index]


# --- writer with a fake producer ----------------------------------------------------------


class FakeFuture:
    def __init__(self, partition, offset, error=None):
        self.partition, self.offset, self.error = partition, offset, error
        self.callbacks, self.errbacks = [], []
        self.timeouts = []  # of each get()

    def add_callback(self, fn):
        self.callbacks.append(fn)

    def add_errback(self, fn):
        self.errbacks.append(fn)

    def _meta(self):
        return type("Meta", (), {"partition": self.partition, "offset": self.offset})()

    def resolve(self):
        if self.error is None:
            for fn in self.callbacks:
                fn(self._meta())
        else:
            for fn in self.errbacks:
                fn(self.error)

    def get(self, timeout=None):
        self.timeouts.append(timeout)
        if self.error is not None:
            raise self.error
        return self._meta()


Sent = namedtuple("Sent", "topic key value partition headers")


class FakeProducer:
    DEFAULT_CONFIG = REAL_PRODUCER.DEFAULT_CONFIG
    instances = []
    partitions = {0, 1, 2}
    fail_on_send = None
    fail_future = None
    fail_topics = {}  # topic -> error raised by send() for that topic
    fail_future_topics = {}  # topic -> error of the futures of that topic

    def __init__(self, **config):
        self.config = config
        self.calls = []  # lifecycle calls and "send <topic>", in order
        self.sent = []
        self.futures = []
        self.offsets = {}
        FakeProducer.instances.append(self)

    def init_transactions(self):
        self.calls.append("init_transactions")

    def begin_transaction(self):
        self.calls.append("begin_transaction")

    def commit_transaction(self):
        self.calls.append("commit_transaction")

    def abort_transaction(self):
        self.calls.append("abort_transaction")

    def partitions_for(self, topic):
        return self.partitions

    def send(self, topic, value=None, key=None, headers=None, partition=None, timestamp_ms=None):
        if self.fail_on_send is not None:
            raise self.fail_on_send
        if topic in self.fail_topics:
            raise self.fail_topics[topic]
        self.calls.append(f"send {topic}")
        self.sent.append(Sent(topic, key, value, partition, headers))
        p = partition if partition is not None else 0
        offset = self.offsets.get((topic, p), 0)
        self.offsets[(topic, p)] = offset + 1
        future = FakeFuture(p, offset, self.fail_future_topics.get(topic, self.fail_future))
        self.futures.append(future)
        return future

    def flush(self, timeout=None):
        self.calls.append("flush")
        for future in self.futures:
            future.resolve()

    def close(self, timeout=None):
        self.calls.append("close")


class Confirm:
    """A confirmation callable: records the results it was given and what the producer had
    done by then."""

    def __init__(self, producer=None, key=b"analytics.orders", value=b'{"confirmed":true}'):
        self.key, self.value, self.producer = key, value, producer
        self.results, self.calls_then = [], []

    def __call__(self, result):
        self.results.append((result.records, dict(result.offsets)))
        if self.producer is not None:
            self.calls_then.append(list(self.producer.calls))
        return self.key, self.value


@pytest.fixture
def fake_producer(monkeypatch):
    FakeProducer.instances = []
    monkeypatch.setattr(kafka, "KafkaProducer", FakeProducer)
    monkeypatch.setattr(FakeProducer, "fail_on_send", None)
    monkeypatch.setattr(FakeProducer, "fail_future", None)
    monkeypatch.setattr(FakeProducer, "fail_topics", {})
    monkeypatch.setattr(FakeProducer, "fail_future_topics", {})
    return FakeProducer


def test_transactional_writer(fake_producer):
    log = make_log(consistency="transactional")
    writer = KafkaLogWriter(log, "analytics.orders")
    (producer,) = fake_producer.instances
    assert producer.config["transactional_id"] == "dbt-logstore.analytics.orders"
    assert producer.config["enable_idempotence"] is True
    assert producer.config["bootstrap_servers"] == ["b1:9092"]
    assert producer.calls == ["init_transactions", "begin_transaction"]

    writer.send(b'{"id":1}', b"v1", route=b"r1")
    writer.send(None, b"v2", route=b"row-image")
    result = writer.commit(Confirm())

    # keyed: default partitioner
    assert producer.sent[0] == ("analytics.orders", b'{"id":1}', b"v1", None, [])
    expected = partition_for(b"row-image", [0, 1, 2])
    assert producer.sent[1] == ("analytics.orders", None, b"v2", expected, [])  # keyless: by route
    assert producer.calls[-4:] == ["flush", f"send {CONTROL}", "commit_transaction", "close"]
    assert result.records == 2
    assert result.topic == "analytics.orders"
    assert sum(b - a for a, b in result.offsets.values()) == 2


def test_eventual_writer_has_no_transaction(fake_producer):
    writer = KafkaLogWriter(make_log(consistency="eventual"), "s.t")
    (producer,) = fake_producer.instances
    assert "transactional_id" not in producer.config
    assert producer.config["enable_idempotence"] is True
    writer.send(None, b"v", route=b"r")
    writer.commit(Confirm())
    assert "init_transactions" not in producer.calls
    assert "commit_transaction" not in producer.calls
    assert producer.calls[-3:] == ["flush", f"send {CONTROL}", "close"]


def test_writer_send_error_names_key(fake_producer):
    fake_producer.fail_on_send = KafkaTimeoutError("boom")
    writer = KafkaLogWriter(make_log(), "s.t")
    with pytest.raises(DbtRuntimeError) as info:
        writer.send(b'{"id":7}', b"v", route=b"r")
    assert '{"id":7}' in str(info.value)
    assert "analytics.orders" in str(info.value)
    writer.abort()
    assert fake_producer.instances[0].calls[-2:] == ["abort_transaction", "close"]


def test_a_flush_no_node_answered_is_an_interruption_the_mirror_writes_again(fake_producer, monkeypatch):
    # a rolling restart: the producer's batches found no leader until the flush gave up, before
    # anything of the attempt was committed or confirmed, so a new attempt on a fresh producer
    # is safe (mirror.written_once_more_if_interrupted); not once the confirmation was sent
    from dbt.adapters.logstore.log.log_system import LogWriteInterrupted

    def silent_flush(self, timeout=None):
        raise KafkaTimeoutError("Timeout waiting for future")

    monkeypatch.setattr(FakeProducer, "flush", silent_flush)
    writer = KafkaLogWriter(make_log(consistency="transactional"), "s.t")
    writer.send(b'{"id":1}', b"v", route=b"r")
    with pytest.raises(LogWriteInterrupted, match="Timeout waiting for future"):
        writer.commit(Confirm())
    # an answer (not silence), or an eventual log (its records may have reached the topic): the run's
    writer = KafkaLogWriter(make_log(consistency="eventual"), "s.t")
    with pytest.raises(DbtRuntimeError) as info:
        writer.commit(Confirm())
    assert not isinstance(info.value, LogWriteInterrupted)


def test_a_confirmation_met_by_silence_is_not_written_again_here(fake_producer):
    from dbt.adapters.logstore.log.log_system import LogWriteInterrupted

    fake_producer.fail_topics = {CONTROL: KafkaTimeoutError("no answer")}
    writer = KafkaLogWriter(make_log(consistency="transactional"), "s.t")
    writer.send(b'{"id":1}', b"v", route=b"r")
    with pytest.raises(DbtRuntimeError) as info:
        writer.commit(Confirm())
    assert not isinstance(info.value, LogWriteInterrupted)


def test_writer_async_error_fails_commit(fake_producer):
    fake_producer.fail_future = KafkaError("record too large")
    writer = KafkaLogWriter(make_log(), "s.t")
    writer.send(None, b"v", route=b"r")
    confirm = Confirm()
    with pytest.raises(DbtRuntimeError, match="record too large"):
        writer.commit(confirm)
    assert "commit_transaction" not in fake_producer.instances[0].calls
    assert confirm.results == []  # a failed write is never confirmed
    assert [s.topic for s in fake_producer.instances[0].sent] == ["analytics.orders"]


def test_writer_async_error_fails_next_send(fake_producer):
    fake_producer.fail_future = KafkaError("broken")
    writer = KafkaLogWriter(make_log(), "s.t")
    writer.send(None, b"v", route=b"r")
    fake_producer.instances[0].futures[0].resolve()
    with pytest.raises(DbtRuntimeError, match="broken"):
        writer.send(None, b"v2", route=b"r2")


def test_writer_unreachable(monkeypatch):
    class Unreachable(FakeProducer):
        def __init__(self, **config):
            raise KafkaTimeoutError("Unable to bootstrap from b1:9092: no brokers")  # final

    monkeypatch.setattr(kafka, "KafkaProducer", Unreachable)
    with pytest.raises(DbtRuntimeError) as info:
        KafkaLogWriter(make_log(), "s.t")
    assert "b1:9092" in str(info.value) and "unreachable" in str(info.value)
    # A writer opens after the table commit: its caller says what that left.
    assert "Nothing was changed" not in str(info.value)


def test_abort_swallows_broker_errors(fake_producer):
    writer = KafkaLogWriter(make_log(), "s.t")
    producer = fake_producer.instances[0]

    def fail():
        raise KafkaError("gone")

    producer.abort_transaction = fail
    writer.abort()  # no exception
    assert producer.calls[-1] == "close"


# --- prepare with a fake admin ------------------------------------------------------------


class FakeAdmin:
    DEFAULT_CONFIG = kafka.KafkaAdminClient.DEFAULT_CONFIG
    topics = {}
    created = []
    topic_configs = {}
    validated = []
    deleted = []
    configs = []
    closed = 0
    create_error = None
    honours_validate_only = True

    def __init__(self, **config):
        # like kafka-python: an unknown setting is an error
        unknown = set(config) - set(self.DEFAULT_CONFIG)
        if unknown:
            raise kafka.errors.KafkaConfigurationError(f"Unrecognized configs: {unknown}")
        self.config = config
        FakeAdmin.configs.append(config)

    def list_topics(self):
        return list(self.topics)

    def describe_topics(self, names):
        return [{"topic": n, "partitions": [{"partition": p} for p in range(self.topics[n])]}
                for n in names]

    def create_topics(self, new_topics, validate_only=False):
        if FakeAdmin.create_error is not None:
            error, FakeAdmin.create_error = FakeAdmin.create_error, None
            raise error
        for t in new_topics:
            if validate_only:
                FakeAdmin.validated.append(t.name)
                if FakeAdmin.honours_validate_only:
                    continue
            FakeAdmin.created.append((t.name, t.num_partitions, t.replication_factor))
            FakeAdmin.topic_configs[t.name] = dict(t.topic_configs)
            self.topics[t.name] = t.num_partitions

    def delete_topics(self, names):
        for name in names:
            FakeAdmin.deleted.append(name)
            del self.topics[name]

    def close(self):
        FakeAdmin.closed += 1


@pytest.fixture
def fake_admin(monkeypatch):
    monkeypatch.setattr(FakeAdmin, "topics", {})
    monkeypatch.setattr(FakeAdmin, "created", [])
    monkeypatch.setattr(FakeAdmin, "closed", 0)
    monkeypatch.setattr(FakeAdmin, "create_error", None)
    monkeypatch.setattr(FakeAdmin, "topic_configs", {})
    monkeypatch.setattr(FakeAdmin, "validated", [])
    monkeypatch.setattr(FakeAdmin, "deleted", [])
    monkeypatch.setattr(FakeAdmin, "configs", [])
    monkeypatch.setattr(FakeAdmin, "honours_validate_only", True)
    monkeypatch.setattr(kafka, "KafkaAdminClient", FakeAdmin)
    return FakeAdmin


def test_prepare_creates_missing_topic(fake_admin):
    KafkaLogSystem().prepare(make_log(partitions=3, replication=2))
    # the topic, and its control topic: one partition, the topic's replication
    assert fake_admin.created == [("analytics.orders", 3, 2), (CONTROL, 1, 2)]
    assert fake_admin.closed == 1


def test_prepare_keeps_existing_topic(fake_admin):
    fake_admin.topics["analytics.orders"] = 6
    KafkaLogSystem().prepare(make_log(partitions=3))
    assert fake_admin.created == [(CONTROL, 1, 1)]  # only the missing control topic


def test_prepare_rejects_topic_with_fewer_partitions(fake_admin):
    fake_admin.topics["analytics.orders"] = 2
    with pytest.raises(LogConfigError) as info:
        KafkaLogSystem().prepare(make_log(partitions=4))
    assert "has 2 partitions" in str(info.value)
    assert "log.system.partitions" in str(info.value)
    assert fake_admin.closed == 1


def test_prepare_concurrent_creation(fake_admin, monkeypatch):
    class Racing(FakeAdmin):
        def create_topics(self, new_topics):
            self.topics["analytics.orders"] = 1
            raise TopicAlreadyExistsError("exists")

    monkeypatch.setattr(kafka, "KafkaAdminClient", Racing)
    with pytest.raises(LogConfigError, match="has 1 partitions"):
        KafkaLogSystem().prepare(make_log(partitions=2))


def test_prepare_unreachable(monkeypatch):
    class Unreachable(FakeAdmin):
        def __init__(self, **config):
            raise KafkaTimeoutError("Unable to bootstrap from b1:9092: no brokers")  # final

    monkeypatch.setattr(kafka, "KafkaAdminClient", Unreachable)
    with pytest.raises(DbtRuntimeError, match="unreachable: no broker answered"):
        KafkaLogSystem().prepare(make_log())


def test_kafka_log_system_is_built_in():
    from dbt.adapters.logstore.log.log_system import get_log_system

    assert type(get_log_system("kafka")) is KafkaLogSystem
    assert KafkaLogSystem.name == "kafka"
    assert kafka_log.KafkaLogSystem is KafkaLogSystem


# --- producer defaults ----------------------------------------------------------------------

BROKER_MAX_TRANSACTION_TIMEOUT_MS = 15 * 60 * 1000  # transaction.max.timeout.ms default


def test_transaction_timeout_default_is_below_the_broker_maximum():
    config = client_config(make_log(), PRODUCER_DEFAULTS)
    assert config["transaction_timeout_ms"] == 60000
    assert config["transaction_timeout_ms"] < BROKER_MAX_TRANSACTION_TIMEOUT_MS


def test_transaction_timeout_can_be_overridden():
    config = client_config(make_log({"transaction.timeout.ms": "120000"}), PRODUCER_DEFAULTS)
    assert config["transaction_timeout_ms"] == 120000


def test_transactional_producer_gets_the_transaction_timeout(fake_producer):
    KafkaLogWriter(make_log(consistency="transactional"), "s.t")
    assert fake_producer.instances[0].config["transaction_timeout_ms"] == 60000


# --- model pass-through properties reach the clients ---------------------------------------


def resolved(raw, properties=None):
    model = ModelRef(name="orders_model", schema="analytics", alias="orders", materialized="table")
    return resolve_log_config(model, {"log.system": "kafka", **raw},
                              profile_bootstrap_servers="b1:9092", profile_properties=properties)


def test_model_kafka_and_amoro_properties_reach_the_producer(fake_producer):
    log = resolved({"kafka.linger.ms": 5, "properties.batch.size": "1024",
                    "kafka.transaction.timeout.ms": "90000",
                    "kafka.topic-config.cleanup.policy": "compact"},
                   properties={"security.protocol": "SSL", "linger.ms": "100"})
    KafkaLogWriter(log, "analytics.orders")
    config = fake_producer.instances[0].config
    assert config["linger_ms"] == 5  # the model wins over the profile
    assert config["batch_size"] == 1024
    assert config["transaction_timeout_ms"] == 90000
    assert config["security_protocol"] == "SSL"
    assert not any("cleanup" in key for key in config)  # topic settings are not client settings


def test_unknown_model_property_fails_naming_it(fake_producer):
    # refused where the config is resolved (at parse time), long before a producer is made
    with pytest.raises(LogConfigError, match=r"unknown config key 'kafka.no.such.setting' \(model "
                                             r"config, and kafka-python has no property "
                                             r"'no.such.setting'\)"):
        resolved({"kafka.no.such.setting": "1"})
    assert fake_producer.instances == []


# --- writer: tombstones ---------------------------------------------------------------------


def test_writer_sends_tombstones_as_null_values(fake_producer):
    writer = KafkaLogWriter(make_log(unique_key=("id",), changelog_mode="upsert"), "s.t")
    writer.send(b'{"id":3}', None, route=b'{"id":3,"v":"c"}')
    result = writer.commit(Confirm())
    (producer,) = fake_producer.instances
    assert producer.sent[0] == ("analytics.orders", b'{"id":3}', None, None, [])
    assert [s.topic for s in producer.sent] == ["analytics.orders", CONTROL]
    assert result.records == 1


# --- prepare: topic settings and the partition count ---------------------------------------


def test_prepare_creates_topic_with_topic_configs(fake_admin):
    log = make_log(partitions=2, topic_config={"cleanup.policy": "compact",
                                               "retention.ms": "1000"})
    assert KafkaLogSystem().prepare(log) == 2
    assert fake_admin.created == [("analytics.orders", 2, 1), (CONTROL, 1, 1)]
    assert fake_admin.topic_configs["analytics.orders"] == {"cleanup.policy": "compact",
                                                           "retention.ms": "1000"}
    # the log's topic settings are its own; confirmations are kept forever
    assert fake_admin.topic_configs[CONTROL] == {"retention.ms": "-1"}


def test_prepare_creates_a_topic_that_keeps_the_contract(fake_admin):
    # a keyless log cannot be compacted: kept forever; a keyed one is compacted by its key
    KafkaLogSystem().prepare(make_log())
    assert fake_admin.topic_configs["analytics.orders"] == {"retention.ms": "-1"}
    KafkaLogSystem().prepare(make_log(topic="analytics.keyed", unique_key=("id",)))
    assert fake_admin.topic_configs["analytics.keyed"] == {"cleanup.policy": "compact"}


def test_the_models_topic_config_wins_over_the_contract_defaults(fake_admin):
    KafkaLogSystem().prepare(make_log(topic_config={"retention.ms": "3600000"}))
    assert fake_admin.topic_configs["analytics.orders"] == {"retention.ms": "3600000"}
    KafkaLogSystem().prepare(make_log(topic="analytics.keyed", unique_key=("id",),
                                      topic_config={"cleanup.policy": "delete"}))
    assert fake_admin.topic_configs["analytics.keyed"] == {"cleanup.policy": "delete"}


def test_prepare_returns_the_existing_topics_partition_count(fake_admin):
    fake_admin.topics["analytics.orders"] = 6
    fake_admin.topics[CONTROL] = 1
    assert KafkaLogSystem().prepare(make_log(partitions=3)) == 6
    assert fake_admin.created == []
    assert fake_admin.topic_configs == {}  # an existing topic's settings are left alone


def test_prepare_returns_the_configured_count_for_a_new_topic(fake_admin):
    assert KafkaLogSystem().prepare(make_log(partitions=4)) == 4


def test_prepare_concurrent_creation_returns_the_winners_count(fake_admin, monkeypatch):
    class Racing(FakeAdmin):
        def create_topics(self, new_topics, validate_only=False):
            self.topics["analytics.orders"] = 5
            raise TopicAlreadyExistsError("exists")

    monkeypatch.setattr(kafka, "KafkaAdminClient", Racing)
    assert KafkaLogSystem().prepare(make_log(partitions=2)) == 5


def test_prepare_admin_gets_admin_settings_only(fake_admin):
    # producer-only settings (linger.ms) would make KafkaAdminClient refuse to start
    log = make_log({"linger.ms": "5", "security.protocol": "SSL"})
    KafkaLogSystem().prepare(log)
    (config,) = fake_admin.configs
    assert "linger_ms" not in config
    assert config["security_protocol"] == "SSL"
    assert config["request_timeout_ms"] == ADMIN_DEFAULTS["request_timeout_ms"]
    assert config["bootstrap_servers"] == ["b1:9092"]


def test_prepare_broker_error_is_unreachable_and_closes(fake_admin, monkeypatch):
    def silent(self, new_topics, validate_only=False):
        raise KafkaTimeoutError("timed out")
    monkeypatch.setattr(fake_admin, "create_topics", silent)
    with pytest.raises(DbtRuntimeError) as info:  # tried again for the whole 500 ms window
        KafkaLogSystem().prepare(make_log({"bootstrap.timeout.ms": "300", "request.timeout.ms": "200"}))
    assert "unreachable" in str(info.value) and "timed out" in str(info.value)
    assert "no broker answered while creating the topics within 0.5 s" in str(info.value)
    assert fake_admin.closed == len(fake_admin.configs) > 1  # every try's admin closed


def test_prepare_retries_a_timeout_with_a_fresh_admin(fake_admin):
    fake_admin.create_error = KafkaTimeoutError("timed out")  # once: a node down, then answers
    assert KafkaLogSystem().prepare(make_log()) == 1
    assert fake_admin.closed == len(fake_admin.configs) == 2


# --- check (dbt debug) ----------------------------------------------------------------------

PROBE = "dbt-logstore-debug-probe"


def debug_log(**kw):
    return LogConfig(model="dbt debug", system="kafka", bootstrap_servers="b1:9092", **kw)


def test_check_reports_reachable_and_creatable(fake_admin):
    fake_admin.topics.update({"a": 1, "b": 1})
    lines = KafkaLogSystem().check(debug_log())
    assert lines == ["Kafka at b1:9092: reachable (2 topics)", "Kafka topics: creatable"]
    assert fake_admin.validated == [PROBE]
    assert fake_admin.created == []  # validate_only: nothing was created
    assert fake_admin.deleted == []
    assert fake_admin.closed == 1


def test_check_deletes_probe_when_broker_ignores_validate_only(fake_admin):
    fake_admin.honours_validate_only = False
    lines = KafkaLogSystem().check(debug_log())
    assert lines[-1] == "Kafka topics: creatable"
    assert fake_admin.created == [(PROBE, 1, 1)]
    assert fake_admin.deleted == [PROBE]
    assert PROBE not in fake_admin.topics


def test_check_probe_left_by_an_earlier_run(fake_admin):
    fake_admin.topics[PROBE] = 1
    fake_admin.create_error = TopicAlreadyExistsError("exists")
    lines = KafkaLogSystem().check(debug_log())
    assert lines == ["Kafka at b1:9092: reachable (1 topics)", "Kafka topics: creatable"]
    assert fake_admin.deleted == [PROBE]  # cleaned up


def test_check_refused_topic_creation(fake_admin):
    fake_admin.create_error = TopicAuthorizationFailedError("not allowed")
    with pytest.raises(DbtRuntimeError) as info:
        KafkaLogSystem().check(debug_log())
    message = str(info.value)
    assert "b1:9092" in message
    assert "refused a check" in message
    assert "TopicAuthorizationFailedError" in message
    assert fake_admin.closed == 1


def test_check_unreachable(monkeypatch):
    class Unreachable(FakeAdmin):
        def __init__(self, **config):
            raise KafkaTimeoutError("Unable to bootstrap from b1:9092: no brokers")  # final

    monkeypatch.setattr(kafka, "KafkaAdminClient", Unreachable)
    with pytest.raises(DbtRuntimeError) as info:
        KafkaLogSystem().check(debug_log())
    assert "b1:9092" in str(info.value) and "no brokers" in str(info.value)


def test_check_uses_client_properties_for_admin_only(fake_admin):
    KafkaLogSystem().check(debug_log(client_properties={"security.protocol": "SASL_SSL",
                                                        "linger.ms": "5"}))
    (config,) = fake_admin.configs
    assert config["security_protocol"] == "SASL_SSL"
    assert "linger_ms" not in config


def test_check_unknown_client_property_fails(fake_admin):
    with pytest.raises(LogConfigError, match="'no.such'"):
        KafkaLogSystem().check(debug_log(client_properties={"no.such": "1"}))
    assert fake_admin.configs == []


# --- writer: headers, and the confirmation in the control topic ----------------------------

HEADERS = (("logstore.table", b"analytics.orders"), ("logstore.snapshot", b"4"),
           ("logstore.changeset", b"run-4"), ("logstore.attempt", b"a" * 32))


def test_writer_sends_headers_with_every_record(fake_producer):
    writer = KafkaLogWriter(make_log(), "analytics.orders")
    writer.send(b'{"id":1}', b"v1", route=b"r1", headers=HEADERS)
    writer.send(None, None, route=b"r2", headers=HEADERS)
    (producer,) = fake_producer.instances
    # kafka-python wants a list of (str, bytes)
    assert [s.headers for s in producer.sent] == [list(HEADERS), list(HEADERS)]


def test_writer_sends_no_headers_by_default(fake_producer):
    writer = KafkaLogWriter(make_log(), "s.t")
    writer.send(b"k", b"v", route=b"r")
    assert fake_producer.instances[0].sent[0].headers == []


def test_commit_sends_the_confirmation_to_the_control_topic_before_commit_transaction(fake_producer):
    writer = KafkaLogWriter(make_log(consistency="transactional"), "analytics.orders")
    (producer,) = fake_producer.instances
    writer.send(b'{"id":1}', b"v1", route=b"r1", headers=HEADERS)
    writer.send(b'{"id":2}', b"v2", route=b"r2", headers=HEADERS)
    confirm = Confirm(producer, key=b"analytics.orders", value=b'{"snapshot":4}')
    result = writer.commit(confirm)

    assert producer.calls == [
        "init_transactions", "begin_transaction",
        "send analytics.orders", "send analytics.orders",
        "flush",  # every record acknowledged ...
        f"send {CONTROL}",  # ... then the confirmation, inside the same transaction ...
        "commit_transaction",  # ... which commits both
        "close",
    ]
    control = producer.sent[-1]
    assert control.topic == CONTROL
    assert control.partition == 0
    assert (control.key, control.value) == (b"analytics.orders", b'{"snapshot":4}')
    assert producer.futures[-1].timeouts == [120.0]  # waited for (delivery.timeout.ms), before the commit
    # the confirmation was built after the flush, from every acknowledged record
    assert confirm.calls_then == [producer.calls[:5]]
    assert confirm.results == [(2, {0: (0, 2)})]
    # the control record is not one of the commit's records
    assert result.records == 2 and result.offsets == {0: (0, 2)}


def test_eventual_commit_also_confirms(fake_producer):
    writer = KafkaLogWriter(make_log(consistency="eventual"), "analytics.orders")
    (producer,) = fake_producer.instances
    writer.send(None, b"v", route=b"r")
    writer.commit(Confirm(producer))
    assert producer.calls == ["send analytics.orders", "flush", f"send {CONTROL}", "close"]
    assert producer.sent[-1].partition == 0
    assert producer.futures[-1].timeouts == [120.0]


def test_commit_of_an_empty_change_set_confirms(fake_producer):
    writer = KafkaLogWriter(make_log(), "analytics.orders")
    confirm = Confirm()
    result = writer.commit(confirm)
    assert confirm.results == [(0, {})]
    assert [s.topic for s in fake_producer.instances[0].sent] == [CONTROL]
    assert result.records == 0


def test_failed_confirmation_fails_the_commit(fake_producer):
    fake_producer.fail_future_topics = {CONTROL: KafkaTimeoutError("control topic timed out")}
    writer = KafkaLogWriter(make_log(consistency="transactional"), "analytics.orders")
    (producer,) = fake_producer.instances
    writer.send(b"k", b"v", route=b"r")
    with pytest.raises(DbtRuntimeError) as info:
        writer.commit(Confirm())
    assert "control topic timed out" in str(info.value)
    assert "analytics.orders" in str(info.value)
    assert "commit_transaction" not in producer.calls  # nothing becomes visible
    writer.abort()
    assert producer.calls[-2:] == ["abort_transaction", "close"]


def test_confirmation_refused_by_send_fails_the_commit(fake_producer):
    fake_producer.fail_topics = {CONTROL: TopicAuthorizationFailedError("no write on control")}
    writer = KafkaLogWriter(make_log(consistency="transactional"), "analytics.orders")
    writer.send(b"k", b"v", route=b"r")
    with pytest.raises(DbtRuntimeError, match="no write on control"):
        writer.commit(Confirm())
    assert "commit_transaction" not in fake_producer.instances[0].calls


def test_crash_before_log_commit_leaves_the_transaction_open(fake_producer, monkeypatch):
    class Exited(BaseException):
        pass

    def fake_exit(code):
        raise Exited(code)

    monkeypatch.setattr(os, "_exit", fake_exit)
    monkeypatch.setenv(faults.ENV, "before_log_commit")
    writer = KafkaLogWriter(make_log(consistency="transactional"), "analytics.orders")
    (producer,) = fake_producer.instances
    writer.send(b"k", b"v", route=b"r")
    with pytest.raises(Exited):
        writer.commit(Confirm())
    assert producer.calls[-2:] == ["flush", f"send {CONTROL}"]  # confirmed, not committed


# --- prepare: the control topic ------------------------------------------------------------


def test_prepare_creates_the_control_topic_of_an_existing_topic_once(fake_admin):
    fake_admin.topics["analytics.orders"] = 3
    KafkaLogSystem().prepare(make_log(partitions=3, replication=3))
    assert fake_admin.created == [(CONTROL, 1, 3)]
    KafkaLogSystem().prepare(make_log(partitions=3, replication=3))
    assert fake_admin.created == [(CONTROL, 1, 3)]  # not again


def test_prepare_keeps_an_existing_control_topic(fake_admin):
    fake_admin.topics.update({"analytics.orders": 3, CONTROL: 1})
    assert KafkaLogSystem().prepare(make_log(partitions=3)) == 3
    assert fake_admin.created == []


def test_prepare_control_topic_created_concurrently(fake_admin, monkeypatch):
    class RacingControl(FakeAdmin):
        def create_topics(self, new_topics, validate_only=False):
            if new_topics[0].name == CONTROL:
                self.topics[CONTROL] = 1
                raise TopicAlreadyExistsError("exists")
            super().create_topics(new_topics, validate_only)

    monkeypatch.setattr(kafka, "KafkaAdminClient", RacingControl)
    assert KafkaLogSystem().prepare(make_log(partitions=2)) == 2
    assert fake_admin.created == [("analytics.orders", 2, 1)]


def test_prepare_control_topic_refused_is_unreachable(fake_admin, monkeypatch):
    class Refusing(FakeAdmin):
        def create_topics(self, new_topics, validate_only=False):
            if new_topics[0].name == CONTROL:
                raise TopicAuthorizationFailedError("no create")
            super().create_topics(new_topics, validate_only)

    monkeypatch.setattr(kafka, "KafkaAdminClient", Refusing)
    with pytest.raises(DbtRuntimeError, match="no create"):
        KafkaLogSystem().prepare(make_log())
    assert fake_admin.closed == 1


# --- find_confirmation with a fake consumer ------------------------------------------------


class FakeRecord:
    def __init__(self, offset, value):
        self.offset, self.value = offset, value
        self.partition, self.key, self.headers = 0, b"analytics.orders", []


class FakeConsumer:
    """The control topic as a list of record values; poll returns up to `batch` records.
    highwater is None until the first fetch response, as in kafka-python; `silent_polls` polls
    come back empty before that response arrives."""

    DEFAULT_CONFIG = REAL_CONSUMER.DEFAULT_CONFIG
    instances = []
    records = []
    batch = 2
    silent_polls = 0
    fail_on_poll = None

    def __init__(self, **config):
        unknown = set(config) - set(self.DEFAULT_CONFIG)
        if unknown:
            raise kafka.errors.KafkaConfigurationError(f"Unrecognized configs: {unknown}")
        self.config = config
        # what the producers (the fence) had done when the consumer was created
        self.producer_calls_at_start = [list(p.calls) for p in FakeProducer.instances]
        self.calls = []
        self.assigned = None
        self.next_offset = None
        self.polls = 0
        self.fetched = False
        FakeConsumer.instances.append(self)

    def end_offsets(self, partitions, timeout_ms=None):
        return {}  # not known: the reader reads until empty polls at the high watermark

    def beginning_offsets(self, partitions, timeout_ms=None):
        return {}

    def partitions_for_topic(self, topic):
        return {0}

    def assign(self, partitions):
        self.calls.append("assign")
        self.assigned = list(partitions)

    def seek_to_beginning(self, *partitions):
        self.calls.append("seek_to_beginning")
        self.seeked = list(partitions)
        self.next_offset = 0

    def poll(self, timeout_ms=0, max_records=None, update_offsets=True):
        self.calls.append("poll")
        self.polls += 1
        if self.fail_on_poll is not None:
            raise self.fail_on_poll
        if self.polls <= self.silent_polls:
            return {}
        self.fetched = True
        values = self.records[self.next_offset:self.next_offset + self.batch]
        if not values:
            return {}
        (partition,) = self.assigned
        batch = [FakeRecord(self.next_offset + i, v) for i, v in enumerate(values)]
        self.next_offset += len(values)
        return {partition: batch}

    def position(self, partition):
        assert partition in self.assigned
        return self.next_offset

    def highwater(self, partition):
        assert partition in self.assigned
        return len(self.records) if self.fetched else None

    def close(self, autocommit=True):
        self.calls.append("close")


def confirmation(table="analytics.orders", changeset="run-4", attempt="a" * 32, snapshot=4):
    return {"table": table, "topic": "analytics.orders", "snapshot": snapshot,
            "changeset": changeset, "attempt": attempt, "records": 1, "offsets": {"0": [0, 0]},
            "end_offsets": {"0": 1}, "ts_ms": 1}


def encoded(*confirmations):
    return [json.dumps(c, separators=(",", ":")).encode() for c in confirmations]


@pytest.fixture
def fake_consumer(monkeypatch, fake_producer):
    monkeypatch.setattr(FakeConsumer, "instances", [])
    monkeypatch.setattr(FakeConsumer, "records", [])
    monkeypatch.setattr(FakeConsumer, "batch", 2)
    monkeypatch.setattr(FakeConsumer, "silent_polls", 0)
    monkeypatch.setattr(FakeConsumer, "fail_on_poll", None)
    monkeypatch.setattr(kafka, "KafkaConsumer", FakeConsumer)
    return FakeConsumer


def find(log=None, table_id="analytics.orders", changeset="run-4"):
    return KafkaLogSystem().find_confirmation(log or make_log(), table_id, changeset)


def test_find_confirmation_fences_the_writer_before_reading(fake_consumer, fake_producer):
    fake_consumer.records = encoded(confirmation())
    find(make_log(consistency="transactional"))
    (fence,) = fake_producer.instances
    # the same transactional id as the table's writer, so its open transaction is aborted
    assert fence.config["transactional_id"] == "dbt-logstore.analytics.orders"
    assert fence.config["bootstrap_servers"] == ["b1:9092"]
    (consumer,) = fake_consumer.instances
    assert consumer.producer_calls_at_start == [["init_transactions", "close"]]


def test_find_confirmation_fences_with_the_writers_transactional_id(fake_consumer, fake_producer):
    log = make_log(consistency="transactional")
    KafkaLogWriter(log, "analytics.orders")
    find(log)
    writer, fence = fake_producer.instances
    assert fence.config["transactional_id"] == writer.config["transactional_id"]


def test_find_confirmation_of_an_eventual_log_does_not_fence(fake_consumer, fake_producer):
    fake_consumer.records = encoded(confirmation())
    assert find(make_log(consistency="eventual")) == confirmation()
    assert fake_producer.instances == []


def test_find_confirmation_reads_the_control_topic_from_the_beginning(fake_consumer):
    find(make_log({"linger.ms": "5", "security.protocol": "SSL"}))
    (consumer,) = fake_consumer.instances
    partition = kafka.TopicPartition(CONTROL, 0)
    assert consumer.assigned == [partition]  # assign(), no consumer group
    assert consumer.seeked == [partition]
    assert consumer.calls[:2] == ["assign", "seek_to_beginning"]
    assert consumer.calls[-1] == "close"
    config = consumer.config
    assert config["group_id"] is None
    assert config["enable_auto_commit"] is False
    assert config["isolation_level"] == "read_committed"  # aborted attempts are invisible
    assert config["bootstrap_servers"] == ["b1:9092"]
    assert config["security_protocol"] == "SSL"
    assert "linger_ms" not in config  # producer-only settings stay with the producer


def test_find_confirmation_returns_the_matching_confirmation(fake_consumer):
    match = confirmation()
    fake_consumer.records = encoded(
        confirmation(table="analytics.other"),  # another table logging to this topic
        confirmation(changeset="run-3", snapshot=3),  # an earlier change set
        match,
        confirmation(changeset="run-5", snapshot=5),
    )
    assert find() == match


def test_find_confirmation_matches_table_and_changeset(fake_consumer):
    fake_consumer.records = encoded(confirmation(table="analytics.other"),
                                    confirmation(changeset="run-3"))
    assert find() is None


def test_find_confirmation_returns_the_last_matching_attempt(fake_consumer):
    fake_consumer.records = encoded(confirmation(attempt="1" * 32), confirmation(table="x"),
                                    confirmation(attempt="2" * 32))
    assert find()["attempt"] == "2" * 32


def test_find_confirmation_reads_to_the_end(fake_consumer):
    fake_consumer.batch = 1
    fake_consumer.records = encoded(*[confirmation(changeset=f"run-{i}") for i in range(9)])
    assert find(changeset="run-8")["changeset"] == "run-8"
    assert fake_consumer.instances[0].next_offset == 9


def test_find_confirmation_none_when_absent(fake_consumer):
    fake_consumer.records = encoded(confirmation(changeset="run-1"), confirmation(changeset="run-2"))
    assert find() is None
    assert fake_consumer.instances[0].calls[-1] == "close"


def test_find_confirmation_none_for_an_empty_control_topic(fake_consumer):
    assert find() is None
    (consumer,) = fake_consumer.instances
    assert consumer.calls.count("poll") == 3  # three empty polls at the end: done
    assert consumer.calls[-1] == "close"


def test_find_confirmation_waits_for_the_first_fetch_response(fake_consumer):
    # Before kafka-python's first fetch response, poll() returns nothing and highwater() is
    # None; that is not "caught up". A confirmation that is there must still be found, or
    # recovery writes the change set a second time.
    fake_consumer.silent_polls = 3
    fake_consumer.records = encoded(confirmation())
    assert find() == confirmation()


def test_find_confirmation_closes_the_consumer_on_errors(fake_consumer):
    fake_consumer.fail_on_poll = KafkaTimeoutError("poll failed")
    quick = make_log({"bootstrap.timeout.ms": "100", "request.timeout.ms": "100"})  # retries' window
    with pytest.raises(DbtRuntimeError, match="orders_model.*poll failed"):
        find(quick)
    assert all(c.calls[-1] == "close" for c in fake_consumer.instances)  # each try's consumer


def test_find_confirmation_gives_up_after_60_seconds(fake_consumer, monkeypatch):
    class NeverCaughtUp(FakeConsumer):
        def highwater(self, partition):
            return 10  # the end moves away: never reached

    monkeypatch.setattr(kafka, "KafkaConsumer", NeverCaughtUp)
    import time

    clock = itertools.count(0, 7.0)
    monkeypatch.setattr(time, "monotonic", lambda: next(clock))
    with pytest.raises(DbtRuntimeError) as info:
        find()
    assert CONTROL in str(info.value) and "60 s" in str(info.value)
    assert "orders_model" in str(info.value)
    assert NeverCaughtUp.instances[0].calls[-1] == "close"


def test_find_confirmation_unreachable(fake_consumer, monkeypatch):
    class Unreachable(FakeConsumer):
        def __init__(self, **config):
            raise KafkaTimeoutError("Unable to bootstrap from b1:9092: no brokers")  # final

    monkeypatch.setattr(kafka, "KafkaConsumer", Unreachable)
    with pytest.raises(DbtRuntimeError) as info:
        find(make_log(consistency="eventual"))
    assert "b1:9092" in str(info.value) and "no brokers" in str(info.value)


def test_a_commit_the_broker_never_answers_fails_within_the_delivery_timeout(monkeypatch):
    """A frozen broker: commit_transaction waits forever in kafka-python, the writer does not."""
    import threading
    import time

    from kafka.errors import KafkaTimeoutError

    from dbt.adapters.logstore.log.kafka.python_writer import bounded as _bounded

    never = threading.Event()
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match="within 0 s"):
        _bounded(never.wait, 0.2)
    assert time.monotonic() - started < 2
    with pytest.raises(ValueError, match="boom"):
        _bounded(lambda: (_ for _ in ()).throw(ValueError("boom")), 2)
    _bounded(lambda: None, 2)


def test_transaction_clock_is_due_after_a_third_of_the_timeout(monkeypatch):

    now = [100.0]
    monkeypatch.setattr(kafka_writer.time, "monotonic", lambda: now[0])
    clock = kafka_writer.TransactionClock(60000)
    assert clock.budget_s == 20.0 and not clock.due()
    now[0] += 19.9
    assert not clock.due()
    now[0] += 0.1
    assert clock.due()
    result = kafka_writer.WriteResult(topic="t")
    clock.committed(result)
    assert not clock.due() and result.longest_transaction_s == 20.0


def test_a_transaction_is_timed_from_its_first_record(monkeypatch):
    # the coordinator of a parallel attempt opens its producer, waits for the tasks, then sends
    # the confirmation alone: the broker's transaction (and timeout) starts with that record

    now = [100.0]
    monkeypatch.setattr(kafka_writer.time, "monotonic", lambda: now[0])
    clock = kafka_writer.TransactionClock(60000)
    now[0] += 120.0  # the tasks write for two minutes
    clock.first_record()
    now[0] += 0.5
    result = kafka_writer.WriteResult(topic="t")
    clock.committed(result)
    assert result.longest_transaction_s == 0.5


def test_long_write_commits_along_the_way_and_confirms_once(fake_producer, monkeypatch):

    now = [0.0]
    monkeypatch.setattr(kafka_writer.time, "monotonic", lambda: now[0])
    log = make_log(consistency="transactional", properties={"transaction.timeout.ms": "3000"})
    writer = KafkaLogWriter(log, "analytics.orders")
    (producer,) = fake_producer.instances
    for i in range(2500):
        now[0] += 0.0011  # 1.1 ms per record; a transaction may stay open 1 s
        writer.send(b'{"id":%d}' % i, b"v", route=b"")
    confirm = Confirm(producer)
    result = writer.commit(confirm)
    # due at records 1000 and 2000 (the clock is looked at every 1000 records)
    assert producer.calls.count("commit_transaction") == 3
    assert producer.calls.count("begin_transaction") == 3
    assert result.transactions == 3 and result.records == 2500
    # the confirmation goes in the last transaction, with every record's offsets
    assert producer.calls[-3:] == ["send analytics.orders__logstore_commits", "commit_transaction", "close"]
    assert confirm.results == [(2500, {0: (0, 2500)})]


def test_eventual_writer_has_no_transactions_to_split(fake_producer, monkeypatch):

    monkeypatch.setattr(kafka_writer.time, "monotonic", lambda: 1e9)
    writer = KafkaLogWriter(make_log(consistency="eventual"), "analytics.orders")
    for i in range(2000):
        writer.send(b"k", b"v", route=b"")
    assert "commit_transaction" not in fake_producer.instances[0].calls


def test_a_long_write_commits_along_the_way_and_times_its_longest_transaction(fake_producer, monkeypatch):
    now = [100.0]
    monkeypatch.setattr(kafka_writer.time, "monotonic", lambda: now[0])
    log = make_log(consistency="transactional")
    writer = KafkaLogWriter(log, "analytics.orders")  # transaction.timeout.ms: 60 s by default
    (producer,) = fake_producer.instances
    for i in range(3 * kafka_writer.TransactionClock.CHECK_EVERY):
        now[0] += 0.01  # 1000 records take 10 s: a third of the timeout after 2000 of them
        writer.send(None, b"v", route=str(i).encode())
    now[0] += 1.0
    result = writer.commit(Confirm(producer))
    assert producer.calls.count("commit_transaction") == 2 == result.transactions
    assert result.longest_transaction_s == pytest.approx(20.0)  # never the whole 31 s


# --- observe ------------------------------------------------------------------------------


def test_observe_does_not_read_a_control_topic_this_run_created(monkeypatch):
    """A control topic created a moment ago under the model's lock is empty: reading it would
    only wait out the empty polls (most of a first build's Kafka time)."""
    read = []

    class Reader:
        held_back = None

        def offsets(self):
            return {0: 0}, {0: 0}

        def control_records(self):
            read.append("control")
            return []

    system = KafkaLogSystem()
    monkeypatch.setattr(kafka_log, "_with_admin", lambda log, clients, talk, doing: (
        "cluster", {"analytics.orders", CONTROL}, {}, {}, ({0: 0}, {0: 0})))
    monkeypatch.setattr(system, "open_reader", lambda log: Reader())
    monkeypatch.setattr(system, "clients", lambda log: None)
    state = system.observe(make_log(), control_created=True)
    assert (state.control_topic_exists, state.control_records, read) == (True, (), [])
    system.observe(make_log())
    assert read == ["control"]


def test_observe_reads_the_offsets_in_its_admin_conversation(monkeypatch):
    """The data topic's first and end offsets (read_uncommitted: the high watermark) come from
    the admin conversation that described the topic, not from a consumer of their own (its
    first metadata is about 0.1 s on Apache Kafka, on every logged model's run)."""
    from types import SimpleNamespace

    from kafka.admin import OffsetSpec

    asked = []

    class Admin:
        def list_topics(self):
            return ["analytics.orders", CONTROL]

        def describe_topics(self, topics):
            return [{"name": t, "topic_id": None, "partitions": [{"partition_index": p} for p in (1, 0)]}
                    for t in topics]

        def describe_cluster(self):
            return {"cluster_id": "c1"}

        def describe_configs(self, resources, config_filter=None):
            return {"topic": {"analytics.orders": {"cleanup.policy": {"value": "compact"}}}}

        def list_partition_offsets(self, specs, timeout_ms=None):
            (spec,) = set(specs.values())
            asked.append((sorted((tp.topic, tp.partition) for tp in specs), spec))
            first = spec == OffsetSpec.EARLIEST
            return {tp: SimpleNamespace(offset=(tp.partition if first else 10 + tp.partition)) for tp in specs}

    class Reader:
        held_back = None

        def offsets(self):
            raise AssertionError("a consumer of its own for the offsets")

        def control_records(self):
            return []

    system = KafkaLogSystem()
    monkeypatch.setattr(kafka_log, "_with_admin", lambda log, clients, talk, doing: talk(Admin()))
    monkeypatch.setattr(system, "open_reader", lambda log: Reader())
    monkeypatch.setattr(system, "clients", lambda log: None)
    state = system.observe(make_log())
    assert (state.start_offsets, state.end_offsets) == ({0: 0, 1: 1}, {0: 10, 1: 11})
    assert asked == [([("analytics.orders", 0), ("analytics.orders", 1)], OffsetSpec.EARLIEST),
                     ([("analytics.orders", 0), ("analytics.orders", 1)], OffsetSpec.LATEST)]
    assert state.settings == {"cleanup.policy": "compact"} and state.cluster_id == "c1"
