"""The confluent-kafka writer (kafka_client: confluent; librdkafka, in C): one producer per
commit, with the kafka-python writer's semantics."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore import faults
from dbt.adapters.logstore.spark.catalog import logger
from dbt.adapters.logstore.log.kafka.config import CONFLUENT_DEFAULTS, KafkaClients, resolve_clients
from dbt.adapters.logstore.log.kafka.errors import kafka_failure, write_cause, write_interrupted
from dbt.adapters.logstore.log.kafka.writer import TransactionClock, partition_for
from dbt.adapters.logstore.config.log_config import LogConfig, LogConfigError, control_topic_for
from dbt.adapters.logstore.log.log_system import LogWriteInterrupted, LogWriter, WriteResult
from dbt.adapters.logstore.names import transactional_id


class ConfluentLogWriter(LogWriter):
    """The same writer on confluent-kafka (librdkafka, in C): one producer per commit, the
    table's transactional id for transactional logs, Java's partitioner for keyed records and
    the row-image hash for keyless ones, offsets from the delivery reports."""

    POLL_EVERY = 1000  # serve delivery reports while sending

    def __init__(self, log: LogConfig, writer_id: str, clients: Optional[KafkaClients] = None) -> None:
        try:
            from confluent_kafka import KafkaException, Producer
        except ImportError as exc:
            raise LogConfigError(
                f"Model '{log.model}': profile field 'kafka_client' = 'confluent' needs the "
                f"confluent-kafka package: pip install 'dbt-logstore[confluent]'.") from exc
        self._log = log
        clients = clients or resolve_clients(log)  # resolved by the log system for the run
        config = dict(clients.librdkafka)
        config["enable.idempotence"] = True
        # A fatal error (a fenced producer) as librdkafka reports it, kept for _serve: serving
        # callbacks can end in a SystemError that has lost it.
        self._fatal: Optional[BaseException] = None
        self._KafkaException = KafkaException
        config["error_cb"] = self._on_client_error
        if log.transactional:
            config["transactional.id"] = transactional_id(writer_id)
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
            raise kafka_failure(log.model, clients.servers, exc, setting=clients.setting) from exc
        topic = metadata.topics.get(str(log.topic))
        self._partitions = sorted(topic.partitions) if topic and topic.partitions else [0]
        self._timeout_ms = config.get("transaction.timeout.ms") or 60000
        self._clock = TransactionClock(self._timeout_ms) if log.transactional else None
        self._result = WriteResult(topic=str(log.topic))
        self._error: Optional[BaseException] = None
        self._unsent = 0
        self._topic = str(log.topic)
        # The per-record path is the mirror's hot loop: everything it needs is looked up once.
        self._produce, self._poll = self._producer.produce, self._producer.poll
        self._on_delivery = self._delivered
        self._ranges: Dict[int, List[int]] = {}  # partition -> [first, last] acknowledged offset
        self._headers_of: Any = None  # the headers tuple last sent (one per attempt) ...
        self._headers: List[Tuple[str, bytes]] = []  # ... as the list librdkafka takes

    def _on_client_error(self, err: Any) -> None:
        if err.fatal():
            self._fatal = self._fatal or self._KafkaException(err)
        else:  # librdkafka retries these itself; it logs them only without an error_cb
            logger.debug(f"Kafka client (confluent): {err.str()}")

    def _delivered_beside(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._error = self._error or self._KafkaException(err)

    def send_beside(self, topic: str, key: bytes, value: bytes) -> None:
        if self._error is not None:
            raise self._failure(self._error)
        while True:
            try:
                self._produce(topic, value, key, on_delivery=self._delivered_beside)
                return
            except BufferError:  # the local queue is full: let it drain
                self._serve(self._poll, 0.05)
            except self._KafkaException as exc:
                raise self._failure(exc, key) from exc

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
                self._serve(self._poll, 0.05)
            except self._KafkaException as exc:
                raise self._failure(exc, key) from exc
        self._result.records += 1
        self._unsent += 1
        if self._unsent >= self.POLL_EVERY:
            self._unsent = 0
            self._serve(self._poll, 0)
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

    def _serve(self, call: Callable[..., Any], *args: Any) -> Any:
        """A call that serves delivery reports (flush, poll), its failures as the writer's. On a
        fatal error (a fenced producer) confluent-kafka raises it and still runs the pending
        delivery callbacks, whose first call then fails with a SystemError chained to the real
        error: that error is what the run reports. At times the SystemError has lost it
        ("returned NULL without setting an exception"): then the error callback's record of it."""
        try:
            return call(*args)
        except SystemError as exc:
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, self._KafkaException):
                raise self._failure(cause) from cause
            recorded = self._fatal or self._error  # the SystemError lost it
            if recorded is not None:
                raise self._failure(recorded) from exc
            raise
        except self._KafkaException as exc:
            raise self._failure(exc) from exc

    def _flush(self) -> None:
        left = self._serve(self._producer.flush,
                           float(CONFLUENT_DEFAULTS["message.timeout.ms"]) / 1000)
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
        detail = f"{type(exc).__name__}: {detail}"
        cause = write_cause(exc, self._log.transactional, self._timeout_ms)
        if cause is not None:
            detail = f"{cause.words}. Check {cause.check}. ({detail})"
        # a node lost mid-transaction: the mirror writes the change set again (a fatal error
        # the error callback recorded, a fenced producer, is not that)
        interrupted = self._fatal is None and write_interrupted(exc)
        return (LogWriteInterrupted if interrupted else DbtRuntimeError)(
            f"Model '{self._log.model}': writing to Kafka topic '{self._log.topic}' failed"
            f"{where}: {detail}"
        )
