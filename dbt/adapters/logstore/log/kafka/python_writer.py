"""The kafka-python writer (kafka_client: kafka-python, the default): one producer per commit."""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore import faults
from dbt.adapters.logstore.log.kafka.config import KafkaClients, resolve_clients
from dbt.adapters.logstore.log.kafka.errors import kafka_failure, write_cause
from dbt.adapters.logstore.log.kafka.retrying import closing, silence, start_client, with_retries
from dbt.adapters.logstore.log.kafka.writer import TransactionClock, partition_for
from dbt.adapters.logstore.config.log_config import LogConfig, control_topic_for
from dbt.adapters.logstore.log.log_system import LogWriteInterrupted, LogWriter, WriteResult
from dbt.adapters.logstore.names import transactional_id


def bounded(call: Callable[[], Any], timeout_s: float) -> None:
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


class KafkaLogWriter(LogWriter):
    """One producer per commit. Transactional logs use the table's transactional id, so a
    writer of an older, crashed run of the same table is fenced by the broker."""

    def __init__(self, log: LogConfig, writer_id: str, clients: Optional[KafkaClients] = None) -> None:
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        self._log = log
        clients = clients or resolve_clients(log)  # resolved by the log system for the run
        config = dict(clients.producer)
        config["enable_idempotence"] = True
        if log.transactional:
            config["transactional_id"] = transactional_id(writer_id)
        self._producer = None

        def start() -> Any:
            self._producer = start_client(KafkaProducer, config)
            try:
                if log.transactional:
                    self._producer.init_transactions()
                    self._producer.begin_transaction()
                return self._producer.partitions_for(str(log.topic))
            except BaseException:  # refused after it started: its thread and sockets go
                closing(self._producer)
                self._producer = None
                raise

        try:
            partitions = with_retries(start, config, "starting the producer")
        except KafkaError as exc:
            # A writer opens after the table commit: its caller says what that left, not "Nothing
            # was changed".
            raise kafka_failure(log.model, clients.servers, exc, changed="",
                                setting=clients.setting) from exc
        self._partitions = sorted(partitions or [0])
        self._wait_s = (config.get("delivery_timeout_ms") or 120000) / 1000
        self._timeout_ms = config.get("transaction_timeout_ms") or 60000
        self._clock = TransactionClock(self._timeout_ms) if log.transactional else None
        self._result = WriteResult(topic=str(log.topic))
        self._error: Optional[BaseException] = None
        self._confirming = False  # the confirmation is on its way: a failure is not retried here
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

    def send_beside(self, topic: str, key: bytes, value: bytes) -> None:
        if self._error is not None:
            raise self._failure(self._error)
        try:
            future = self._send(topic, value=value, key=key)
        except self._KafkaError as exc:
            raise self._failure(exc, key) from exc
        future.add_errback(self._on_error_cb)  # its offset is not the log's: not acknowledged

    def _next_transaction(self) -> None:
        """Commit what is sent so far and go on in a new transaction (TransactionClock)."""
        from kafka.errors import KafkaError

        try:
            self._producer.flush(timeout=self._wait_s)
            if self._error is not None:
                raise self._failure(self._error)
            bounded(self._producer.commit_transaction, self._wait_s)
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
                self._confirming = True
                self._producer.send(control_topic_for(str(self._log.topic)), key=key, value=value,
                                    partition=0).get(timeout=self._wait_s)
                faults.maybe_crash("before_log_commit")
            if self._log.transactional:
                bounded(self._producer.commit_transaction, self._wait_s)
                self._clock.committed(self._result)
        except KafkaError as exc:
            raise self._failure(exc) from exc
        self._producer.close()
        return self._result

    def abort(self) -> None:
        try:
            if self._log.transactional:
                bounded(self._producer.abort_transaction, min(self._wait_s, 10))
        except Exception:  # the broker may be gone: the transaction times out on its own
            pass
        finally:
            self._producer.close(timeout=5)

    def _failure(self, exc: BaseException, key: Optional[bytes] = None) -> DbtRuntimeError:
        where = f" (record key {key.decode(errors='replace')})" if key is not None else ""
        detail = f"{type(exc).__name__}: {exc}"
        cause = write_cause(exc, self._log.transactional, self._timeout_ms)
        if cause is not None:
            detail = f"{cause.words}. Check {cause.check}. ({detail})"
        # No node answered before anything of this attempt was committed or confirmed (a node
        # killed in a rolling restart, the producer's metadata stale): the mirror aborts it and
        # writes the change set again on a fresh producer, as confluent_writer's interruptions.
        interrupted = (self._log.transactional and not self._confirming
                       and self._result.transactions == 1 and silence(exc))
        return (LogWriteInterrupted if interrupted else DbtRuntimeError)(
            f"Model '{self._log.model}': writing to Kafka topic '{self._log.topic}' failed"
            f"{where}: {detail}"
        )
