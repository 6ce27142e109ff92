"""The Kafka writer: topic management and one producer (transaction) per table commit."""
from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore import faults
from dbt.adapters.logstore.kafka_errors import bridge_kafka_logs, kafka_failure
from dbt.adapters.logstore.log_config import LogConfig, LogConfigError, control_topic_for
from dbt.adapters.logstore.log_system import LogSystem, LogWriter, WriteResult
from dbt.adapters.logstore.names import TRANSACTIONAL_ID_PREFIX

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


bridge_kafka_logs()  # kafka-python's log lines go to dbt's debug log, not the console


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


def partition_for(data: bytes, partitions: "list[int]") -> int:
    """Kafka's default partitioner: murmur2 of the bytes, as the Java client computes it."""
    from kafka.partitioner.default import murmur2

    return partitions[(murmur2(data) & 0x7FFFFFFF) % len(partitions)]


class TransactionClock:
    """When a long transactional write commits along the way. A broker aborts a transaction
    open longer than its transaction.timeout.ms (Apache Kafka enforces it; Paimon's users hit
    it), so a change set of any size is written in transactions of at most a third of it. The
    attempt still has one confirmation, in its last transaction: consumers that follow the
    confirmations get it exactly once; a plain read_committed consumer sees the committed part
    of an attempt that later fails, and its retry (docs/log-format.md, section 5)."""

    CHECK_EVERY = 1000  # records between looks at the clock
    SHARE = 3  # of transaction.timeout.ms

    def __init__(self, timeout_ms: float) -> None:
        self.budget_s = float(timeout_ms) / 1000 / self.SHARE
        self.started = time.monotonic()

    def due(self) -> bool:
        return time.monotonic() - self.started >= self.budget_s

    def first_record(self) -> None:
        """The broker opens a transaction at its first record, not at begin_transaction (a step
        of the client alone): a writer that has sent nothing yet (the coordinator of a parallel
        attempt, open while its tasks write) starts the transaction's time now."""
        self.started = time.monotonic()

    def committed(self, result: WriteResult) -> None:
        """A transaction committed: note how long it was open, and start the next one's time."""
        now = time.monotonic()
        result.longest_transaction_s = max(result.longest_transaction_s, now - self.started)
        self.started = now


def _unreachable(log: LogConfig, exc: Exception) -> DbtRuntimeError:
    """The log cannot be used: the cause in plain words (kafka_errors.py)."""
    return kafka_failure(log.model, log.bootstrap_servers, exc)


def _bounded(call: Callable[[], Any], timeout_s: float) -> None:
    """Run a kafka-python call that has no timeout of its own (commit_transaction waits for
    the broker forever) with one: in a helper thread, given up on after `timeout_s`."""
    from kafka.errors import KafkaTimeoutError

    outcome: Dict[str, BaseException] = {}

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="logstore-kafka-commit", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise KafkaTimeoutError(f"no answer from the broker within {timeout_s:.0f} s")
    if "error" in outcome:
        raise outcome["error"]


class KafkaLogSystem(LogSystem):
    name = "kafka"

    @staticmethod
    def _admin(log: LogConfig) -> Any:
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        admin_keys = KafkaAdminClient.DEFAULT_CONFIG
        config = {k: v for k, v in client_config(log, ADMIN_DEFAULTS).items() if k in admin_keys}
        try:
            return KafkaAdminClient(**config)
        except KafkaError as exc:
            raise _unreachable(log, exc) from exc

    def prepare(self, log: LogConfig) -> int:
        from kafka.admin import NewTopic
        from kafka.errors import KafkaError, TopicAlreadyExistsError

        admin = self._admin(log)
        try:
            existing = self._partition_count(admin, str(log.topic))
            if existing is None:
                try:
                    admin.create_topics([NewTopic(str(log.topic), log.partitions, log.replication,
                                                  topic_configs=dict(log.topic_config))])
                    existing = log.partitions
                except TopicAlreadyExistsError:  # created concurrently: fine
                    existing = self._partition_count(admin, str(log.topic))
            if self._partition_count(admin, control_topic_for(str(log.topic))) is None:
                try:
                    # kept forever: a confirmation must outlive the records it confirms
                    admin.create_topics([NewTopic(control_topic_for(str(log.topic)), 1,
                                                  log.replication,
                                                  topic_configs={"retention.ms": "-1"})])
                except TopicAlreadyExistsError:
                    pass
            if existing is not None and existing < log.partitions:
                raise LogConfigError(
                    f"Model '{log.model}': topic '{log.topic}' has {existing} partitions but "
                    f"'log.system.partitions' is {log.partitions}. Allowed: at most the topic's "
                    f"partition count (growing a topic would move keys between partitions)."
                )
        except KafkaError as exc:
            raise _unreachable(log, exc) from exc
        finally:
            admin.close()
        return int(existing or log.partitions)

    def check(self, log: LogConfig) -> "list[str]":
        from kafka.admin import NewTopic
        from kafka.errors import KafkaError, TopicAlreadyExistsError

        admin = self._admin(log)
        try:
            topics = admin.list_topics()
            lines = [f"Kafka at {log.bootstrap_servers}: reachable ({len(topics)} topics)"]
            probe = "dbt-logstore-debug-probe"
            try:  # validate_only: a broker that honours it creates nothing
                admin.create_topics([NewTopic(probe, 1, 1)], validate_only=True)
                lines.append("Kafka topics: creatable")
            except TopicAlreadyExistsError:
                lines.append("Kafka topics: creatable")
            if probe in admin.list_topics():  # a broker that ignored validate_only
                admin.delete_topics([probe])
            return lines
        except KafkaError as exc:
            raise DbtRuntimeError(
                f"Kafka at '{log.bootstrap_servers}' is reachable but refused a check: "
                f"{type(exc).__name__}: {exc}") from exc
        finally:
            admin.close()

    @staticmethod
    def _partition_count(admin: Any, topic: str) -> Optional[int]:
        if topic not in admin.list_topics():
            return None
        (description,) = admin.describe_topics([topic])
        return len(description["partitions"])

    def find_confirmation(self, log: LogConfig, table_id: str, changeset: str) -> Optional[Dict[str, Any]]:
        import time

        from kafka import KafkaConsumer, KafkaProducer, TopicPartition
        from kafka.errors import KafkaError

        config = consumer_config(log)
        try:
            if log.transactional:
                # Fence the crashed writer first: its open transaction is aborted, so it can
                # neither commit later nor hold back read_committed readers of the control topic.
                # The writers of a parallel mirror (Spark tasks) are fenced too.
                for writer_id in [table_id] + [f"{table_id}.task-{i}" for i in range(log.parallelism)
                                               if log.parallelism > 1]:
                    fence = KafkaProducer(transactional_id=f"{TRANSACTIONAL_ID_PREFIX}{writer_id}",
                                          **client_config(log, PRODUCER_DEFAULTS))
                    try:
                        fence.init_transactions()
                    finally:
                        fence.close()
            consumer = KafkaConsumer(group_id=None, enable_auto_commit=False,
                                     isolation_level="read_committed",
                                     bootstrap_servers=client_config(log, ADMIN_DEFAULTS)["bootstrap_servers"],
                                     **config)
        except KafkaError as exc:
            raise _unreachable(log, exc) from exc
        found = None
        try:
            partition = TopicPartition(control_topic_for(str(log.topic)), 0)
            consumer.assign([partition])
            consumer.seek_to_beginning(partition)
            idle, deadline = 0, time.monotonic() + 60
            while idle < 3:  # read to the end: three empty polls past the high watermark
                if time.monotonic() > deadline:
                    raise DbtRuntimeError(
                        f"Model '{log.model}': could not read the control topic "
                        f"'{control_topic_for(str(log.topic))}' to its end within 60 s")
                try:
                    batches = consumer.poll(timeout_ms=300)
                except KafkaError as exc:
                    raise _unreachable(log, exc) from exc
                for record in batches.get(partition, []):
                    value = json.loads(record.value)
                    if value.get("table") == table_id and value.get("changeset") == changeset:
                        found = value
                highwater = consumer.highwater(partition)  # None until the first fetch answers
                caught_up = highwater is not None and consumer.position(partition) >= highwater
                idle = idle + 1 if (not batches and caught_up) else 0
        finally:
            consumer.close()
        return found

    def open_writer(self, log: LogConfig, writer_id: str) -> LogWriter:
        if log.client == "confluent":
            return ConfluentLogWriter(log, writer_id)
        return KafkaLogWriter(log, writer_id)


class KafkaLogWriter(LogWriter):
    """One producer per commit. Transactional logs use the table's transactional id, so a
    writer of an older, crashed run of the same table is fenced by the broker."""

    def __init__(self, log: LogConfig, writer_id: str) -> None:
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        self._log = log
        config = client_config(log, PRODUCER_DEFAULTS)
        config["enable_idempotence"] = True
        if log.transactional:
            config["transactional_id"] = f"{TRANSACTIONAL_ID_PREFIX}{writer_id}"
        self._producer = None
        try:
            self._producer = KafkaProducer(**config)
            if log.transactional:
                self._producer.init_transactions()
                self._producer.begin_transaction()
            partitions = self._producer.partitions_for(str(log.topic))
        except KafkaError as exc:
            if self._producer is not None:  # refused after it started: its thread and sockets go
                self._producer.close(timeout=1)
            # A writer opens after the table commit: its caller says what that left, not "Nothing
            # was changed".
            raise kafka_failure(log.model, log.bootstrap_servers, exc, changed="") from exc
        self._partitions = sorted(partitions or [0])
        self._wait_s = (config.get("delivery_timeout_ms") or 120000) / 1000
        self._clock = TransactionClock(config.get("transaction_timeout_ms") or 60000) \
            if log.transactional else None
        self._result = WriteResult(topic=str(log.topic))
        self._error: Optional[BaseException] = None
        # The per-record path is the mirror's hot loop: everything it needs is looked up once.
        self._topic = str(log.topic)
        self._KafkaError = KafkaError
        self._send, self._on_success_cb, self._on_error_cb = (
            self._producer.send, self._on_success, self._on_error)
        self._headers_of: Any = None  # the headers tuple last sent (one per attempt) ...
        self._headers: "list[Tuple[str, bytes]]" = []  # ... as the list kafka-python takes

    def _on_success(self, metadata: Any) -> None:
        self._result.acknowledge(metadata.partition, metadata.offset)

    def _on_error(self, exc: BaseException) -> None:
        self._error = self._error or exc

    def send(self, key: Optional[bytes], value: Optional[bytes], route: bytes,
             headers: Sequence[Tuple[str, bytes]] = ()) -> None:
        if self._error is not None:
            raise self._failure(self._error)
        if headers is not self._headers_of:
            self._headers_of, self._headers = headers, list(headers)
        # Keyed records use Kafka's default partitioner on the key bytes (murmur2, as every
        # other producer); keyless records are placed by the same hash of the row image, so
        # the insert and a later delete of equal rows stay in order.
        partition = None
        if key is None:
            partition = partition_for(route, self._partitions)
        try:
            future = self._send(self._topic, value=value, key=key, partition=partition,
                                headers=self._headers)
        except self._KafkaError as exc:
            raise self._failure(exc, key) from exc
        future.add_callback(self._on_success_cb)
        future.add_errback(self._on_error_cb)
        self._result.records += 1
        if self._clock is not None and self._result.records % TransactionClock.CHECK_EVERY == 0 \
                and self._clock.due():
            self._next_transaction()

    def _next_transaction(self) -> None:
        """Commit what is sent so far and go on in a new transaction (TransactionClock)."""
        from kafka.errors import KafkaError

        try:
            self._producer.flush(timeout=self._wait_s)
            if self._error is not None:
                raise self._failure(self._error)
            _bounded(self._producer.commit_transaction, self._wait_s)
            self._producer.begin_transaction()
        except KafkaError as exc:
            raise self._failure(exc) from exc
        self._result.transactions += 1
        self._clock.committed(self._result)

    def commit(self, confirmation: Optional[Callable[[WriteResult], Tuple[bytes, bytes]]]) -> WriteResult:
        from kafka.errors import KafkaError

        # On failure the caller calls abort(), which also releases the producer. Every wait is
        # bounded: a broker that stops answering mid-write fails the run instead of hanging it.
        try:
            self._producer.flush(timeout=self._wait_s)
            if self._error is not None:
                raise self._failure(self._error)
            if confirmation is not None:  # offsets are known once all are acked
                if self._clock is not None and not self._result.records:
                    self._clock.first_record()
                key, value = confirmation(self._result)
                self._producer.send(control_topic_for(str(self._log.topic)), key=key, value=value,
                                    partition=0).get(timeout=self._wait_s)
                faults.maybe_crash("before_log_commit")
            if self._log.transactional:
                _bounded(self._producer.commit_transaction, self._wait_s)
                self._clock.committed(self._result)
        except KafkaError as exc:
            raise self._failure(exc) from exc
        self._producer.close()
        return self._result

    def abort(self) -> None:
        try:
            if self._log.transactional:
                _bounded(self._producer.abort_transaction, min(self._wait_s, 10))
        except Exception:  # the broker may be gone: the transaction times out on its own
            pass
        finally:
            self._producer.close(timeout=5)

    def _failure(self, exc: BaseException, key: Optional[bytes] = None) -> DbtRuntimeError:
        where = f" (record key {key.decode(errors='replace')})" if key is not None else ""
        return DbtRuntimeError(
            f"Model '{self._log.model}': writing to Kafka topic '{self._log.topic}' failed"
            f"{where}: {type(exc).__name__}: {exc}"
        )


# --- the confluent-kafka writer (kafka_client: confluent) --------------------------------------

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


class ConfluentLogWriter(LogWriter):
    """The same writer on confluent-kafka (librdkafka, in C): one producer per commit, the
    table's transactional id for transactional logs, Java's partitioner for keyed records and
    the row-image hash for keyless ones, offsets from the delivery reports."""

    POLL_EVERY = 1000  # serve delivery reports while sending

    def __init__(self, log: LogConfig, writer_id: str) -> None:
        try:
            from confluent_kafka import KafkaException, Producer
        except ImportError as exc:
            raise LogConfigError(
                f"Model '{log.model}': profile field 'kafka_client' = 'confluent' needs the "
                f"confluent-kafka package: pip install 'dbt-logstore[confluent]'.") from exc
        self._log = log
        config = confluent_config(log)
        config["enable.idempotence"] = True
        if log.transactional:
            config["transactional.id"] = f"{TRANSACTIONAL_ID_PREFIX}{writer_id}"
        try:
            self._producer = Producer(config)
        except KafkaException as exc:
            raise LogConfigError(
                f"Model '{log.model}': the Kafka client properties are not accepted by "
                f"confluent-kafka (kafka_client: confluent): {exc.args[0].str()}. Allowed: "
                f"librdkafka's configuration properties.") from exc
        try:
            if log.transactional:
                self._producer.init_transactions(30)
                self._producer.begin_transaction()
            metadata = self._producer.list_topics(str(log.topic), timeout=10)
        except KafkaException as exc:
            raise _unreachable(log, exc) from exc
        topic = metadata.topics.get(str(log.topic))
        self._partitions = sorted(topic.partitions) if topic and topic.partitions else [0]
        self._clock = TransactionClock(config.get("transaction.timeout.ms") or 60000) \
            if log.transactional else None
        self._result = WriteResult(topic=str(log.topic))
        self._error: Optional[BaseException] = None
        self._unsent = 0
        self._topic = str(log.topic)
        # The per-record path is the mirror's hot loop: everything it needs is looked up once.
        self._KafkaException = KafkaException
        self._produce, self._poll = self._producer.produce, self._producer.poll
        self._on_delivery = self._delivered
        self._ranges: Dict[int, List[int]] = {}  # partition -> [first, last] acknowledged offset
        self._headers_of: Any = None  # the headers tuple last sent (one per attempt) ...
        self._headers: List[Tuple[str, bytes]] = []  # ... as the list librdkafka takes

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._error = self._error or self._KafkaException(err)
            return
        partition, offset = msg.partition(), msg.offset()
        bounds = self._ranges.get(partition)
        if bounds is None:
            self._ranges[partition] = [offset, offset]
        elif offset > bounds[1]:
            bounds[1] = offset
        elif offset < bounds[0]:
            bounds[0] = offset

    def _control_delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._error = self._error or self._KafkaException(err)

    def send(self, key: Optional[bytes], value: Optional[bytes], route: bytes,
             headers: Sequence[Tuple[str, bytes]] = ()) -> None:
        if self._error is not None:
            raise self._failure(self._error)
        if headers is not self._headers_of:
            self._headers_of, self._headers = headers, list(headers)
        # -1: librdkafka's partitioner (murmur2 of the key); keyless records by the row image
        partition = -1 if key is not None else partition_for(route, self._partitions)
        while True:
            try:
                self._produce(self._topic, value, key, partition=partition,
                              on_delivery=self._on_delivery, headers=self._headers)
                break
            except BufferError:  # the local queue is full: let it drain
                self._poll(0.05)
            except self._KafkaException as exc:
                raise self._failure(exc, key) from exc
        self._result.records += 1
        self._unsent += 1
        if self._unsent >= self.POLL_EVERY:
            self._unsent = 0
            self._poll(0)
            if self._clock is not None and self._clock.due():
                self._next_transaction()

    def _next_transaction(self) -> None:
        """Commit what is sent so far and go on in a new transaction (TransactionClock)."""
        from confluent_kafka import KafkaException

        try:
            self._flush()
            self._producer.commit_transaction(30)
            self._producer.begin_transaction()
        except KafkaException as exc:
            raise self._failure(exc) from exc
        self._result.transactions += 1
        self._clock.committed(self._result)

    def commit(self, confirmation: Optional[Callable[[WriteResult], Tuple[bytes, bytes]]]) -> WriteResult:
        from confluent_kafka import KafkaException

        try:
            self._flush()
            self._result.offsets = {p: (first, last + 1) for p, (first, last) in self._ranges.items()}
            if confirmation is not None:
                if self._clock is not None and not self._result.records:
                    self._clock.first_record()
                key, value = confirmation(self._result)
                self._producer.produce(control_topic_for(self._topic), key=key, value=value,
                                       partition=0, on_delivery=self._control_delivered)
                self._flush()
                faults.maybe_crash("before_log_commit")
            if self._log.transactional:
                self._producer.commit_transaction(30)
                self._clock.committed(self._result)
        except KafkaException as exc:
            raise self._failure(exc) from exc
        return self._result

    def _flush(self) -> None:
        left = self._producer.flush(float(CONFLUENT_DEFAULTS["message.timeout.ms"]) / 1000)
        if self._error is not None:
            raise self._failure(self._error)
        if left:
            raise self._failure(TimeoutError(f"{left} records were not acknowledged in time"))

    def abort(self) -> None:
        try:
            if self._log.transactional:
                self._producer.abort_transaction(5)
            else:
                self._producer.purge()
        except Exception:  # the broker may be gone: the transaction times out on its own
            pass

    def _failure(self, exc: BaseException, key: Optional[bytes] = None) -> DbtRuntimeError:
        where = f" (record key {key.decode(errors='replace')})" if key is not None else ""
        detail = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
        return DbtRuntimeError(
            f"Model '{self._log.model}': writing to Kafka topic '{self._log.topic}' failed"
            f"{where}: {type(exc).__name__}: {detail}"
        )

