"""Kafka client settings: the profile's and model's Java-style client properties, as
kafka-python (producer, admin, consumer) and confluent-kafka (librdkafka) take them, over the
defaults a commit written in one burst wants."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Dict, FrozenSet, Mapping, Optional, Tuple

from dbt.adapters.logstore.config.address import servers_setting
from dbt.adapters.logstore.config.log_config import LogConfig, LogConfigError

# Throughput over latency: a commit is written in one burst, so batch generously.
PRODUCER_DEFAULTS: Dict[str, Any] = {
    "acks": "all",
    "linger_ms": 20,
    # kafka-python's producer thread waits this long between its turns while a transactional
    # request (the coordinator's lookup, init_transactions) is under way, even when the answer
    # came sooner: at its default (100 ms) a transactional producer took 210 ms to start, at
    # 20 ms 30 ms. Produce retries still end at delivery_timeout_ms.
    "retry_backoff_ms": 20,
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
# The readers' consumers: the admin's settings, and the producer's metadata backoff
# (with_metadata_backoff: a topic's first metadata waits it).
CONSUMER_DEFAULTS: Dict[str, Any] = {**ADMIN_DEFAULTS, "retry_backoff_ms": 20}

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
                f"'kafka_properties', or the model's 'kafka.*' / 'properties.*' config) is not "
                f"supported by kafka-python. Allowed: the settings of kafka.KafkaProducer, such as "
                f"security.protocol, sasl.mechanism, sasl.plain.username, sasl.plain.password, "
                f"ssl.cafile."
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


# --- which properties each client takes (checked at parse time, log_options) ---------------

# What property_refusal answers for a name the client has no property of.
NO_SUCH_PROPERTY = "no such property"
# kafka-python settings that take a Python object (a class, a callable, a context): a client
# property, text from YAML, cannot give one.
_OBJECT_SETTINGS = frozenset({
    "key_serializer", "value_serializer", "partitioner", "selector", "metric_reporters",
    "sasl_oauth_token_provider", "ssl_context", "socket_options", "kafka_client",
})
# librdkafka does not list its properties: these common ones (those this version knows) are
# what a misspelt name is compared with.
_LIBRDKAFKA_COMMON = (
    "acks", "allow.auto.create.topics", "api.version.request", "batch.num.messages",
    "batch.size", "bootstrap.servers", "broker.address.family", "client.dns.lookup", "client.id",
    "client.rack", "compression.codec", "compression.level", "compression.type",
    "connections.max.idle.ms", "debug", "delivery.timeout.ms", "enable.gapless.guarantee",
    "enable.idempotence", "enable.sasl.oauthbearer.unsecure.jwt",
    "enable.ssl.certificate.verification", "linger.ms", "log.connection.close",
    "max.in.flight.requests.per.connection", "message.max.bytes", "message.send.max.retries",
    "message.timeout.ms", "metadata.max.age.ms", "partitioner", "queue.buffering.max.kbytes",
    "queue.buffering.max.messages", "queue.buffering.max.ms", "receive.message.max.bytes",
    "reconnect.backoff.max.ms", "reconnect.backoff.ms", "request.required.acks",
    "request.timeout.ms", "retries", "retry.backoff.max.ms", "retry.backoff.ms",
    "sasl.kerberos.keytab", "sasl.kerberos.principal", "sasl.kerberos.service.name",
    "sasl.mechanism", "sasl.mechanisms", "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret", "sasl.oauthbearer.config", "sasl.oauthbearer.extensions",
    "sasl.oauthbearer.method", "sasl.oauthbearer.scope", "sasl.oauthbearer.token.endpoint.url",
    "sasl.password", "sasl.username", "security.protocol", "socket.connection.setup.timeout.ms",
    "socket.keepalive.enable", "socket.receive.buffer.bytes", "socket.send.buffer.bytes",
    "socket.timeout.ms", "ssl.ca.location", "ssl.ca.pem", "ssl.certificate.location",
    "ssl.certificate.pem", "ssl.cipher.suites", "ssl.crl.location",
    "ssl.endpoint.identification.algorithm", "ssl.key.location", "ssl.key.password",
    "ssl.key.pem", "ssl.keystore.location", "ssl.keystore.password", "statistics.interval.ms",
    "sticky.partitioning.linger.ms", "topic.metadata.refresh.interval.ms", "transaction.timeout.ms",
)
_PROBE = "logstore.no.such.property"  # set after the property tried: its error means "taken"
_SECRET_WORDS = ("password", "secret", "jaas", "token", ".pem", "credential")


def property_refusal(client: str, name: str, value: Any = None) -> Optional[str]:
    """Whether `client` ('kafka-python' or 'confluent') takes the Java-style client property
    `name` (given as `value`; None: the name alone is checked): None when it does,
    NO_SUCH_PROPERTY when it has no such property, else why it refuses it (librdkafka's own
    words, without a secret's value). Named by log_options.CLIENT_PROPERTIES, which checks every
    model's and profile's client property at parse time with it; `client_config` and
    `confluent_config` take the same names at run time."""
    if client == "confluent":
        return _librdkafka_refusal(librdkafka_name(name), None if value is None else str(value))
    return None if python_name(name) in _kafka_python_settings() else NO_SUCH_PROPERTY


def property_names(client: str) -> Tuple[str, ...]:
    """Java-style names `client` takes, sorted, to compare a misspelt name with: kafka-python's
    producer settings; for confluent, librdkafka's common properties and kafka-python's names
    that confluent_config translates (librdkafka has more: CONFIGURATION.md lists them)."""
    if client == "confluent":
        return _librdkafka_names()
    return tuple(sorted(n.replace("_", ".") for n in _kafka_python_settings()))


def python_name(name: str) -> str:
    """kafka-python's name of a Java-style property (client_config's translation)."""
    return str(name).replace(".", "_").replace("-", "_")


def librdkafka_name(name: str) -> str:
    """librdkafka's name of a Java-style property (confluent_config's translation)."""
    key = str(name).replace("_", ".")
    return CONFLUENT_NAMES.get(key, key)


@lru_cache(maxsize=None)
def _kafka_python_settings() -> FrozenSet[str]:
    # from its own module: the answer is cached, so it is the library's, whatever stands in
    # for `kafka.KafkaProducer` (tests put fakes there)
    from kafka.producer.kafka import KafkaProducer

    return frozenset(KafkaProducer.DEFAULT_CONFIG) - _OBJECT_SETTINGS


@lru_cache(maxsize=1024)
def _librdkafka_refusal(name: str, value: Optional[str]) -> Optional[str]:
    """Set `name` (then a property that does not exist) on a librdkafka configuration: the
    error names the first it refuses, and no client is started either way."""
    try:  # the C extension's own class, not what stands in for `confluent_kafka.Producer`
        from confluent_kafka.cimpl import Producer
    except ImportError:  # the run says how to install it; nothing to check against here
        return None
    try:
        Producer({name: "" if value is None else value, _PROBE: ""})
    except Exception as exc:  # KafkaException, or confluent-kafka's TypeError for a callback
        error = exc.args[0] if exc.args else exc
        text = str(error.str() if hasattr(error, "str") else error)
        if _PROBE in text:
            return None
        if "No such configuration property" in text:
            return NO_SUCH_PROPERTY
        if value is None:
            return None  # the name alone was asked about: it is a property (refused empty)
        if value and any(word in name.lower() for word in _SECRET_WORDS):
            text = text.replace(value, "***")
        return text.strip().rstrip(".")
    return None  # not reached: the probe property does not exist


@lru_cache(maxsize=None)
def _librdkafka_names() -> Tuple[str, ...]:
    candidates = set(_LIBRDKAFKA_COMMON) | set(CONFLUENT_DEFAULTS) | set(CONFLUENT_NAMES)
    candidates |= {n.replace("_", ".") for n in _kafka_python_settings()}
    return tuple(sorted(n for n in candidates if _librdkafka_refusal(librdkafka_name(n), None) is None))


@dataclass(frozen=True)
class KafkaClients:
    """A log's address and its kafka-python settings, resolved once for a model's run (the log
    system does it when the adapter binds the log: log_system.ModelLog) and handed to each
    client it starts: admin conversations, producers, readers and fencing use the same."""

    servers: str  # as the setting gives them, for messages
    setting: str  # the setting they came from (config/address.py), for errors
    admin: Dict[str, Any]  # KafkaAdminClient's settings
    producer: Dict[str, Any]  # KafkaProducer's (PRODUCER_DEFAULTS under the user's)
    consumer: Dict[str, Any]  # KafkaConsumer's, servers included
    librdkafka: Dict[str, Any]  # confluent-kafka's (kafka_client: confluent)


def resolve_clients(log: LogConfig) -> KafkaClients:
    from kafka import KafkaAdminClient, KafkaConsumer

    admin = client_config(log, ADMIN_DEFAULTS)
    consumer = client_config(log, CONSUMER_DEFAULTS)
    return KafkaClients(
        servers=str(log.bootstrap_servers), setting=servers_setting(log),
        admin={k: v for k, v in admin.items() if k in KafkaAdminClient.DEFAULT_CONFIG},
        producer=client_config(log, PRODUCER_DEFAULTS),
        consumer={k: v for k, v in consumer.items() if k in KafkaConsumer.DEFAULT_CONFIG},
        librdkafka=confluent_config(log))


def with_metadata_backoff(client: Any, config: Mapping[str, Any]) -> Any:
    """`client` (a kafka-python producer or consumer just started), its topics' metadata asked
    for after the client's own `retry_backoff_ms`. Why: kafka-python 3.0 (kafka/net/manager.py,
    up to its main branch of 2026-11) builds a client's metadata without that setting, so the
    first metadata of a topic, asked for right after the bootstrap's, waits the default 100 ms:
    on Apache Kafka three such waits a logged model (the control records' consumer, the
    producer's data topic and its control topic), about 0.2 s (benchmarks/NOTES-cost-breakdown.md).
    kafka-python 2.x hands the setting over itself; a client without the attribute is left
    as it is."""
    metadata = getattr(client, "_metadata", None) or getattr(client, "_cluster", None)
    settings = getattr(metadata, "config", None)
    if isinstance(settings, dict) and "retry_backoff_ms" in settings and "retry_backoff_ms" in config:
        settings["retry_backoff_ms"] = config["retry_backoff_ms"]
    return client
