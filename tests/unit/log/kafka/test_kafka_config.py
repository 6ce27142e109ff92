"""config.with_metadata_backoff: kafka-python 3.0's clients ask for a topic's first metadata
after their own retry_backoff_ms, not the 100 ms default their metadata was built with."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from kafka import KafkaConsumer, KafkaProducer

from dbt.adapters.logstore.log.kafka.config import (
    CONSUMER_DEFAULTS, PRODUCER_DEFAULTS, resolve_clients, with_metadata_backoff,
)
from tests.unit.log.kafka.test_kafka_log import make_log

# Nothing listens here: with api_version given, the clients start without a bootstrap, and close.
NOWHERE = {"bootstrap_servers": ["127.0.0.1:9"], "bootstrap_timeout_ms": 200, "api_version": (3, 9)}


@pytest.mark.parametrize("client_class, config", [
    (KafkaProducer, {**NOWHERE, "retry_backoff_ms": PRODUCER_DEFAULTS["retry_backoff_ms"]}),
    (KafkaConsumer, {**NOWHERE, "retry_backoff_ms": CONSUMER_DEFAULTS["retry_backoff_ms"]}),
])
def test_the_installed_kafka_python_clients_metadata_takes_the_clients_backoff(client_class, config):
    client = client_class(**config)
    try:
        metadata = getattr(client, "_metadata", None) or getattr(client, "_cluster")
        with_metadata_backoff(client, config)
        assert metadata.config["retry_backoff_ms"] == 20  # kafka-python 3.0.12 alone: 100
    finally:
        client.close()


def test_a_client_without_that_metadata_is_left_as_it_is():
    client = SimpleNamespace(_metadata=SimpleNamespace(config=None))
    assert with_metadata_backoff(client, {"retry_backoff_ms": 20}) is client
    assert with_metadata_backoff(object(), {"retry_backoff_ms": 20}) is not None


def test_the_users_retry_backoff_is_the_one_handed_over():
    metadata = SimpleNamespace(config={"retry_backoff_ms": 100})
    with_metadata_backoff(SimpleNamespace(_cluster=metadata), {"retry_backoff_ms": 7})
    assert metadata.config["retry_backoff_ms"] == 7


def test_readers_consumers_take_the_producers_backoff_unless_the_user_sets_one():
    assert resolve_clients(make_log()).consumer["retry_backoff_ms"] == 20
    assert resolve_clients(make_log({"retry.backoff.ms": "250"})).consumer["retry_backoff_ms"] == 250
