"""The cause of a Kafka failure in plain words, from the exception and kafka-python's log."""
import logging
import pickle
from dataclasses import replace

import pytest
from kafka.errors import (
    ClusterAuthorizationFailedError,
    InvalidReplicationFactorError,
    KafkaTimeoutError,
    PolicyViolationError,
    TopicAuthorizationFailedError,
)

from dbt.adapters.logstore.log.kafka.errors import bridge_kafka_logs, cause_of, describe, kafka_failure
from dbt.adapters.logstore.config.address import (
    CLI_SERVERS, MODEL_SERVERS, PROFILE_SERVERS, servers_setting, servers_setting_of,
    with_servers_setting,
)
from dbt.adapters.logstore.config.log_config import LogConfig

BOOTSTRAP = KafkaTimeoutError("Unable to bootstrap from b:9092")


def test_unreachable():
    assert cause_of(BOOTSTRAP).words.startswith("unreachable")
    assert "kafka.bootstrap.servers" in cause_of(BOOTSTRAP).check


def test_authentication_is_read_from_the_log():
    lines = ["<BrokerConnection ...>: Authentication failed: SaslAuthenticationFailedError: "
             "Authentication failed: Invalid username or password"]
    cause = cause_of(BOOTSTRAP, lines)
    assert cause.words.startswith("authentication failed")
    assert "sasl.plain.password" in cause.check


def test_bad_certificate():
    lines = ["SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
             "self-signed certificate"]
    assert "certificate could not be verified" in cause_of(BOOTSTRAP, lines).words
    assert "ssl.cafile" in cause_of(BOOTSTRAP, lines).check
    hostname = ["certificate verify failed: Hostname mismatch, certificate is not valid for 'x'"]
    assert "does not match" in cause_of(BOOTSTRAP, hostname).words


def test_tls_handshake():
    lines = ["SSLError: [SSL: WRONG_VERSION_NUMBER] wrong version number"]
    assert cause_of(BOOTSTRAP, lines).words.startswith("TLS failed: the TLS handshake")


def test_topic_authorization():
    cause = cause_of(TopicAuthorizationFailedError("t"))
    assert cause.words.startswith("not authorized") and "ACLs" in cause.check


def test_cluster_authorization():
    cause = cause_of(ClusterAuthorizationFailedError("CreateTopicsRequest"))
    assert cause.words.startswith("not authorized") and "on the cluster (create)" in cause.check


def test_topic_creation_refused():
    policy = cause_of(PolicyViolationError("Topic creation is not allowed"))
    assert policy.words.startswith("the topic does not exist and could not be created")
    assert "kafka.topic" in policy.check and "allow their creation" in policy.check
    replication = cause_of(InvalidReplicationFactorError("3 larger than available brokers: 1"))
    assert replication.words.startswith("the topic does not exist and could not be created")
    assert "log.system.replication" in replication.check


def test_missing_topic_is_read_from_the_log():
    timeout = KafkaTimeoutError("Failed to update metadata after 30.0 secs.")
    lines = ["Topic analytics.orders not found in cluster metadata"]
    assert cause_of(timeout, lines).words == "the topic does not exist and could not be created"
    assert cause_of(timeout).words.startswith("unreachable")  # no answer named the topic
    assert cause_of(BOOTSTRAP, lines).words.startswith("unreachable")  # no broker answered


def test_failure_names_model_cause_and_setting():
    message = str(kafka_failure("orders", "b:9092", BOOTSTRAP))
    assert "Model 'orders'" in message and "unreachable" in message
    assert "Check kafka.bootstrap.servers" in message and "Nothing was changed." in message


def test_failure_names_the_exception_once():
    """kafka-python's errors start their text with their type: not 'KafkaTimeoutError:
    KafkaTimeoutError: ...'."""
    message = str(kafka_failure("orders", "b:9092", BOOTSTRAP))
    assert "(KafkaTimeoutError: Unable to bootstrap from b:9092)" in message
    assert message.count("KafkaTimeoutError") == 1
    assert describe(KafkaTimeoutError()) == "KafkaTimeoutError"
    assert describe(ValueError("bad")) == "ValueError: bad"
    assert describe(ValueError()) == "ValueError"


@pytest.mark.parametrize("setting", [PROFILE_SERVERS, CLI_SERVERS, "the model's log-store.address"])
def test_failure_names_the_setting_the_servers_came_from(setting):
    message = str(kafka_failure("orders", "b:9092", BOOTSTRAP, setting=setting))
    assert f"Check {setting} (host and port), the network" in message
    assert MODEL_SERVERS not in message
    tls = ["SSLCertVerificationError: certificate verify failed"]
    assert cause_of(BOOTSTRAP, tls, servers=setting).check.endswith(f"the host names in {setting}")


def test_servers_setting_of_a_model():
    assert servers_setting_of({}) == PROFILE_SERVERS
    assert servers_setting_of({"kafka.bootstrap.servers": "h:1"}) == MODEL_SERVERS
    assert servers_setting_of({"kafka_bootstrap_servers": "h:1"}) == "the model's kafka_bootstrap_servers"
    assert servers_setting_of({"log-store.address": "h:1"}) == "the model's log-store.address"
    assert servers_setting_of({"kafka.bootstrap.servers": None}) == PROFILE_SERVERS


def test_a_log_carries_where_its_servers_came_from():
    log = LogConfig(model="m", system="kafka", topic="t", bootstrap_servers="h:1",
                    client_properties={"security.protocol": "SSL"})
    assert servers_setting(log) == MODEL_SERVERS
    sourced = with_servers_setting(log, PROFILE_SERVERS)
    assert servers_setting(sourced) == PROFILE_SERVERS
    assert sourced.table_properties() == log.table_properties()
    assert dict(sourced.client_properties) == {"security.protocol": "SSL"}
    assert with_servers_setting(sourced, PROFILE_SERVERS) is sourced
    assert servers_setting(replace(sourced, topic="u")) == PROFILE_SERVERS  # kept by replace
    assert servers_setting(pickle.loads(pickle.dumps(sourced))) == PROFILE_SERVERS  # Spark tasks
    # the same options: equal and hashed alike, whichever side
    assert sourced == log and log == sourced and hash(sourced) == hash(log)
    assert sourced != replace(log, topic="u") and replace(log, topic="u") != sourced


def test_kafka_logs_go_to_dbt_not_the_console(capsys):
    bridge_kafka_logs()
    bridge_kafka_logs()  # idempotent
    logging.getLogger("kafka.net.manager").error("Bootstrap failed: secret-free line")
    captured = capsys.readouterr()
    assert "Bootstrap failed" not in captured.err and "Bootstrap failed" not in captured.out
    assert logging.getLogger("kafka").propagate is False


def test_an_earlier_failures_warnings_do_not_name_a_later_failure(monkeypatch):
    import logging

    from dbt.adapters.logstore.log.kafka import errors as kafka_errors

    bridge_kafka_logs()
    now = [1000.0]
    monkeypatch.setattr(kafka_errors.time, "monotonic", lambda: now[0])
    logging.getLogger("kafka.conn").error("SSLCertVerificationError: certificate verify failed")
    first = kafka_failure("a", "b1:9092", BOOTSTRAP)
    assert "certificate could not be verified" in str(first)
    second = kafka_failure("b", "b1:9092", BOOTSTRAP)  # the lines went with the first failure
    assert "unreachable" in str(second)
    logging.getLogger("kafka.conn").error("SSLCertVerificationError: certificate verify failed")
    now[0] += kafka_errors._Bridge.FRESH_S + 1  # a minute later: about something else
    assert "unreachable" in str(kafka_failure("c", "b1:9092", BOOTSTRAP))


def test_the_sasl_plaintext_login_warning_is_not_a_cause():
    """kafka-python warns on every SASL_PLAINTEXT login that credentials go in the clear; a
    later authorization failure must not read as an authentication failure (found on Apache
    Kafka with ACLs, tests/functional/test_kafka_security.py)."""
    bridge_kafka_logs()
    logging.getLogger("kafka.net.sasl.scram").warning(
        "Exchanging credentials in the clear during Sasl Authentication")
    refused = TopicAuthorizationFailedError("Authorization failed.")
    assert "not authorized" in str(kafka_failure("a", "b1:9092", refused))


def test_a_login_the_broker_dropped_is_an_authentication_failure():
    """Apache Kafka sometimes closes the connection on a rejected SCRAM login before
    kafka-python reads the refusal: the login began, then the socket closed."""
    lines = ["Exchanging credentials in the clear during Sasl Authentication",
             "<KafkaConnection node_id=bootstrap-0>: Connection lost: KafkaConnectionError: "
             "socket disconnected"] * 3
    assert cause_of(BOOTSTRAP, lines).words.startswith("authentication failed")
    # without a login begun, a dropped connection is still a broker that did not answer
    assert cause_of(BOOTSTRAP, lines[1:2]).words.startswith("unreachable")


def test_a_transaction_kafka_aborted_is_said_in_plain_words_on_both_clients():
    from kafka.errors import InvalidProducerEpochError

    from dbt.adapters.logstore.log.kafka.errors import transaction_lost

    for exc in (InvalidProducerEpochError(), RuntimeError("KafkaError{code=_FENCED,val=-144,"
                                                          "str=\"Fatal error: fenced by newer producer instance\"}")):
        cause = transaction_lost(exc, 3000)
        assert cause is not None and "transaction.timeout.ms (3000 ms)" in cause.words
        assert "fenced" in cause.words and "kafka.transaction.timeout.ms" in cause.check
    assert transaction_lost(RuntimeError("Unable to bootstrap"), 3000) is None


def test_records_no_broker_acknowledged_are_said_in_plain_words():
    from kafka.errors import KafkaTimeoutError

    from dbt.adapters.logstore.log.kafka.errors import write_cause

    expired = KafkaTimeoutError("Expiring 1355 record(s) for TopicPartition(topic='t', partition=2): "
                                "25094 ms has passed since batch creation")
    for transactional in (True, False):
        cause = write_cause(expired, transactional, 60000)
        assert cause is not None and "did not acknowledge the records in time" in cause.words
    assert write_cause(RuntimeError("something else"), True, 60000) is None


def test_an_interrupted_write_is_librdkafkas_abortable_transaction_or_its_purge():
    import confluent_kafka
    from kafka.errors import NotLeaderForPartitionError

    from dbt.adapters.logstore.log.kafka.errors import write_interrupted

    def failed(*args, **kw):
        return confluent_kafka.KafkaException(confluent_kafka.KafkaError(*args, **kw))

    error = confluent_kafka.KafkaError
    assert write_interrupted(failed(error._PURGE_QUEUE))
    assert write_interrupted(failed(error._PURGE_INFLIGHT))
    assert write_interrupted(failed(error.OUT_OF_ORDER_SEQUENCE_NUMBER, "skipped", txn_requires_abort=True))
    wrapped = RuntimeError("writing failed")
    wrapped.__cause__ = failed(error._PURGE_QUEUE)
    assert write_interrupted(wrapped)  # found along the chain
    assert not write_interrupted(failed(error._FENCED, "fenced by newer producer instance", fatal=True))
    assert not write_interrupted(failed(error._PURGE_QUEUE, fatal=True))
    assert not write_interrupted(failed(error.INVALID_PRODUCER_EPOCH, "epoch", txn_requires_abort=True))
    assert not write_interrupted(failed(error._MSG_TIMED_OUT))
    assert not write_interrupted(NotLeaderForPartitionError())  # kafka-python retries these itself
