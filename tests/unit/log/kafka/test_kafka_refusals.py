"""A locked-down cluster's refusals, as the user reads them: the adapter's own code paths and
real kafka-python clients against a broker that refuses as scripted (scripted_broker.py)."""
import logging
import threading
import time

import kafka
import pytest
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore.log.kafka.errors import _BRIDGE
from dbt.adapters.logstore.log.kafka.log_system import KafkaLogSystem
from dbt.adapters.logstore.log.kafka.python_writer import KafkaLogWriter
from dbt.adapters.logstore.config.log_config import LogConfig

from .scripted_broker import (
    CLUSTER_AUTHORIZATION_FAILED, INVALID_REPLICATION_FACTOR, POLICY_VIOLATION,
    SASL_AUTHENTICATION_FAILED, TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Script, ScriptedBroker)

TOPIC = "analytics.orders"
CONTROL = "analytics.orders__logstore_commits"
PASSWORD = "s3cret-Pa55"
# A refusal is answered at once; these bound the paths that wait instead (a topic that never
# appears, a login kafka-python retries) well under a second.
FAST = {"bootstrap.timeout.ms": "800", "request.timeout.ms": "1000", "max.block.ms": "600"}


def log_for(broker, **properties):
    return LogConfig(model="orders_model", system="kafka", topic=TOPIC,
                     bootstrap_servers=broker.bootstrap_servers,
                     client_properties={**FAST, **properties})


def refusal(call) -> str:
    with pytest.raises(DbtRuntimeError) as info:
        call()
    return str(info.value)


def settles(condition, seconds=2.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


@pytest.fixture
def scripted():
    """Starts scripted brokers; after the test, every client the adapter opened is closed (no
    connection, no kafka-python thread left) and the brokers are gone."""
    before = set(threading.enumerate())
    brokers = []
    _BRIDGE.recent.clear()  # an earlier test's kafka-python warnings must not name this cause

    def start(**script) -> ScriptedBroker:
        brokers.append(ScriptedBroker(Script(**script)).__enter__())
        return brokers[-1]

    yield start
    try:
        # (a left client keeps reconnecting, so it never settles; a closed one settles within
        # 2 s on an idle machine, longer under the full suite's load)
        assert all(settles(lambda: broker.connections == 0, seconds=10) for broker in brokers), \
            "a Kafka client was left connected"
    finally:
        for broker in brokers:
            broker.__exit__(None, None, None)
    assert settles(lambda: not set(threading.enumerate()) - before, seconds=10), \
        f"threads left running: {set(threading.enumerate()) - before}"


# --- the topic: not authorized -------------------------------------------------------------


@pytest.mark.parametrize("refused", [TOPIC, CONTROL])
def test_topic_not_authorized_when_created(scripted, refused):
    # Kafka leaves a topic the principal may not describe out of its listings, so the adapter
    # tries to create it, and CreateTopics is refused.
    not_authorized = TOPIC_AUTHORIZATION_FAILED
    broker = scripted(topics={TOPIC: 1, CONTROL: 1}, topic_errors={refused: not_authorized},
                      create_errors={refused: (not_authorized, "Authorization failed.")})
    message = refusal(lambda: KafkaLogSystem().prepare(log_for(broker)))
    assert broker.requests[-1] == "CreateTopicsRequest"
    assert "Model 'orders_model': Kafka at '127.0.0.1:" in message
    assert "not authorized: the broker refused this principal access to the topic" in message
    assert "Check the ACLs of the principal in kafka_properties on the topic and its " \
           "__logstore_commits topic (describe, create, read, write)" in message
    assert f"name='{refused}'" in message  # kafka-python's detail names the refused topic
    assert message.endswith("Nothing was changed.")


def test_topic_not_authorized_when_described_by_the_writer(scripted):
    broker = scripted(topics={TOPIC: 1}, topic_errors={TOPIC: TOPIC_AUTHORIZATION_FAILED})
    message = refusal(lambda: KafkaLogWriter(log_for(broker), "analytics.orders"))
    assert broker.requests[-1] == "MetadataRequest"
    assert "Model 'orders_model'" in message
    assert "not authorized: the broker refused this principal access to the topic" in message
    assert "Check the ACLs of the principal" in message
    # A writer opens after the table commit: the caller says what that left.
    assert "Nothing was changed" not in message


def test_cluster_not_authorized_to_create_topics(scripted):
    broker = scripted(create_errors={TOPIC: (CLUSTER_AUTHORIZATION_FAILED, None)})
    message = refusal(lambda: KafkaLogSystem().prepare(log_for(broker)))
    assert broker.requests[-1] == "CreateTopicsRequest"
    assert "Model 'orders_model'" in message
    assert "not authorized: the broker refused this principal an operation on the cluster" \
           in message
    assert "Check the ACLs of the principal in kafka_properties on the cluster (create), or " \
           "create the topic and its __logstore_commits topic beforehand" in message
    assert message.endswith("Nothing was changed.")


# --- the topic: missing, and not created -------------------------------------------------------


@pytest.mark.parametrize("error, reason, check", [
    (POLICY_VIOLATION, "Topic creation is not allowed by policy",
     "Check kafka.topic: create it and its __logstore_commits topic, or allow their creation "
     "on the broker"),
    (INVALID_REPLICATION_FACTOR, "Replication factor: 1 larger than available brokers: 0.",
     "Check log.system.replication, or create kafka.topic and its __logstore_commits topic "
     "yourself"),
])
def test_missing_topic_creation_refused(scripted, error, reason, check):
    broker = scripted(create_errors={TOPIC: (error, reason)})
    message = refusal(lambda: KafkaLogSystem().prepare(log_for(broker)))
    assert broker.requests[-1] == "CreateTopicsRequest"
    assert "Model 'orders_model'" in message
    assert "the topic does not exist and could not be created" in message
    assert check in message
    assert reason in message  # the broker's own words
    assert message.endswith("Nothing was changed.")


def test_missing_topic_the_writer_waits_for(scripted):
    # kafka-python asks for the topic until max.block.ms, then raises a bare KafkaTimeoutError;
    # its log says the topic was missing from every answer.
    broker = scripted(topics={})
    message = refusal(lambda: KafkaLogWriter(log_for(broker), "analytics.orders"))
    assert "Model 'orders_model'" in message and "KafkaTimeoutError" in message
    assert "the topic does not exist and could not be created. Check kafka.topic, or create " \
           "it (auto-creation is off on this broker)" in message
    assert "unreachable" not in message


# --- the transactional id ----------------------------------------------------------------


@pytest.mark.parametrize("refusing, script", [
    ("FindCoordinatorRequest", {"coordinator_error": TRANSACTIONAL_ID_AUTHORIZATION_FAILED}),
    ("InitProducerIdRequest", {"init_producer_id_error": TRANSACTIONAL_ID_AUTHORIZATION_FAILED}),
])
def test_transactional_id_not_authorized(scripted, refusing, script):
    broker = scripted(topics={TOPIC: 1}, **script)
    message = refusal(lambda: KafkaLogWriter(log_for(broker), "analytics.orders"))
    assert broker.requests[-1] == refusing
    assert "Model 'orders_model'" in message
    assert "not authorized: the broker refused this principal its transactional id" in message
    assert "Check the ACLs on transactional ids 'dbt-logstore.*' (write, describe)" in message
    assert "Nothing was changed" not in message


# --- passwords -------------------------------------------------------------------------


class AdminClosedOnFailure(kafka.KafkaAdminClient):
    """kafka-python 3.0.12 leaves the admin client's IO thread running when bootstrapping
    fails in its constructor; this closes it so that it does not outlive the test."""

    def __init__(self, **configs):
        try:
            super().__init__(**configs)
        except kafka.errors.KafkaError:
            self._closed = False  # set only after a bootstrap that succeeded
            self.close()
            raise


class LogLines(logging.Handler):
    """kafka-python's log lines, at the levels that reach dbt's log (bridge_kafka_logs)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def kafka_log_lines():
    handler = LogLines()
    logging.getLogger("kafka").addHandler(handler)
    yield handler.lines
    logging.getLogger("kafka").removeHandler(handler)


SASL = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.plain.username": "alice", "sasl.plain.password": PASSWORD}


@pytest.mark.parametrize("login_refused", [True, False])
def test_no_password_in_the_message(scripted, monkeypatch, kafka_log_lines, login_refused):
    monkeypatch.setattr(kafka, "KafkaAdminClient", AdminClosedOnFailure)
    if login_refused:
        broker = scripted(sasl_error=(SASL_AUTHENTICATION_FAILED,
                                      "Authentication failed: Invalid username or password"))
    else:  # logged in, then refused the topic
        broker = scripted(create_errors={TOPIC: (TOPIC_AUTHORIZATION_FAILED, None)})
    message = refusal(lambda: KafkaLogSystem().prepare(log_for(broker, **SASL)))
    assert any(PASSWORD.encode() in token for token in broker.sasl_tokens)  # it was sent ...
    assert PASSWORD not in message  # ... and is in no message, nor in dbt's log
    assert kafka_log_lines and not [line for line in kafka_log_lines if PASSWORD in line]
    if login_refused:
        assert "authentication failed: the broker rejected the credentials" in message
        assert "sasl.plain.password in the profile's kafka_properties" in message
    else:
        assert "not authorized: the broker refused this principal access to the topic" in message
