"""Kafka client settings: the profile's and model's Java-style client properties, as
kafka-python (producer, admin, consumer) and confluent-kafka (librdkafka) take them, over the
defaults a commit written in one burst wants."""
from __future__ import annotations

from typing import Any, Dict, Mapping

from dbt.adapters.logstore.log_config import LogConfig, LogConfigError

# Throughput over latency: a commit is written in one burst, so batch generously.
PRODUCER_DEFAULTS: Dict[str, Any] = {
    "acks": "all",
    "linger_ms": 20,
    "batch_size": 512 * 1024,
    "max_block_ms": 30000,
    "request_timeout_ms": 30000,
    # Fail fast when no broker answers (kafka-python otherwise tries for 30 s).
    "bootstrap_timeout_ms": 10000,
    # Below the broker's transaction.max.timeout.ms (15 min by default), so the producer is
    # never refused (Paimon #754); override with kafka.transaction.timeout.ms.
    "transaction_timeout_ms": 60000,
}
ADMIN_DEFAULTS: Dict[str, Any] = {"request_timeout_ms": 15000, "bootstrap_timeout_ms": 10000}

def client_config(log: LogConfig, defaults: Mapping[str, Any]) -> Dict[str, Any]:
    """kafka-python settings from the profile's Java-style client properties.

    `security.protocol` becomes `security_protocol`, and so on; a property kafka-python does
    not know is an error naming it (instead of being silently ignored).
    """
    from kafka import KafkaProducer

    known = KafkaProducer.DEFAULT_CONFIG
    config: Dict[str, Any] = {k: v for k, v in defaults.items() if k in known}
    for raw_key, raw_value in log.client_properties.items():
        key = str(raw_key).replace(".", "_").replace("-", "_")
        if key not in known and log.client == "confluent":
            continue  # a librdkafka setting for the confluent writer; admin and reader skip it
        if key not in known:
            raise LogConfigError(
                f"Model '{log.model}': Kafka client property '{raw_key}' (profile "
                f"'kafka_properties') is not supported by kafka-python. Allowed: the settings of "
                f"kafka.KafkaProducer, such as security.protocol, sasl.mechanism, "
                f"sasl.plain.username, sasl.plain.password, ssl.cafile."
            )
        config[key] = _coerce(raw_value, known[key])
    config["bootstrap_servers"] = [
        s.strip() for s in str(log.bootstrap_servers).split(",") if s.strip()
    ]
    config["client_id"] = "dbt-logstore"
    return config


def _coerce(value: Any, default: Any) -> Any:
    """Profile values arrive as strings; give kafka-python the type its default has."""
    if isinstance(value, str) and isinstance(default, bool):
        return value.strip().lower() in ("1", "true", "yes")
    if isinstance(value, str) and isinstance(default, (int, float)):  # retries' default is inf
        for number in (int, float):
            try:
                return number(value)
            except ValueError:
                pass
    return value


def consumer_config(log: LogConfig) -> Dict[str, Any]:
    """kafka-python consumer settings (security and timeouts) from the log's client properties;
    the servers are not among them (readers take them separately)."""
    from kafka import KafkaConsumer

    known = KafkaConsumer.DEFAULT_CONFIG
    return {k: v for k, v in client_config(log, ADMIN_DEFAULTS).items()
            if k in known and k != "bootstrap_servers"}


# librdkafka settings for a commit written in one burst; the user's properties win.
CONFLUENT_DEFAULTS: Dict[str, Any] = {
    "acks": "all",
    "linger.ms": 20,
    "batch.size": 1024 * 1024,
    "batch.num.messages": 100000,
    "queue.buffering.max.kbytes": 256 * 1024,
    "request.timeout.ms": 30000,
    "message.timeout.ms": 60000,  # at most transaction.timeout.ms (librdkafka insists)
    "transaction.timeout.ms": 60000,  # below the broker's maximum (Paimon #754)
    "socket.connection.setup.timeout.ms": 10000,
    # Java's partitioner (murmur2 of the key bytes), so both clients place a key alike.
    "partitioner": "murmur2_random",
    "log.connection.close": False,
}
# Client properties in kafka-python's names that librdkafka spells differently.
CONFLUENT_NAMES = {
    "sasl.plain.username": "sasl.username",
    "sasl.plain.password": "sasl.password",
    "ssl.cafile": "ssl.ca.location",
    "ssl.certfile": "ssl.certificate.location",
    "ssl.keyfile": "ssl.key.location",
    "ssl.password": "ssl.key.password",
    "max.request.size": "message.max.bytes",
}


def confluent_config(log: LogConfig) -> Dict[str, Any]:
    """librdkafka settings from the profile's and model's Java-style client properties."""
    config: Dict[str, Any] = dict(CONFLUENT_DEFAULTS)
    for raw_key, value in log.client_properties.items():
        key = str(raw_key).replace("_", ".")
        config[CONFLUENT_NAMES.get(key, key)] = value
    config["bootstrap.servers"] = ",".join(
        s.strip() for s in str(log.bootstrap_servers).split(",") if s.strip())
    config["client.id"] = "dbt-logstore"
    return config
