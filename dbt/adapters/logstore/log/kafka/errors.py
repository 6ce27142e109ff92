"""Errors at the Kafka boundary, said in plain words.

kafka-python reports the real cause of a failed connection (bad credentials, a certificate it
cannot verify, a TLS handshake that fails) only in its log, and then raises a bare
"Unable to bootstrap". So its loggers are bridged into dbt's logger at debug level (never
raw on the console), the recent warnings and errors are kept, and `kafka_failure` names the
cause from the exception and those lines together (lines of the last minute only, each used for
one failure: a later failure of another model must not be named after an earlier one's cause): one error line with the model, the cause
and the setting to check, named as the servers were given (the model's kafka.bootstrap.servers,
the profile's kafka_bootstrap_servers, `dbt-logstore tail --bootstrap-servers`:
log_address.servers_setting). Passwords never reach a message: kafka-python does not log them,
and nothing here prints client properties.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Deque, Iterable, List, Optional, Tuple

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore.config.address import MODEL_SERVERS
from dbt.adapters.logstore.names import CONTROL_TOPIC_SUFFIX, TRANSACTIONAL_ID_PREFIX

_dbt_logger = AdapterLogger("logstore.kafka")


class _Bridge(logging.Handler):
    """kafka-python's log records -> dbt's debug log, the warnings and errors kept a while."""

    # kafka-python gives up on a broker within its timeouts (10-30 s here): older lines are
    # about something else
    FRESH_S = 60.0

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.recent: Deque[Tuple[float, str]] = deque(maxlen=200)
        self._lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record must not break the run
            return
        if record.levelno >= logging.WARNING:
            with self._lock:
                self.recent.append((time.monotonic(), message))
        if record.levelno >= logging.INFO:
            _dbt_logger.debug(f"{record.name}: {message}")

    def take(self, count: int) -> List[str]:
        """The latest `count` warnings of the last FRESH_S seconds; all are then forgotten."""
        with self._lock:
            now = time.monotonic()
            lines = [message for at, message in self.recent if now - at <= self.FRESH_S][-count:]
            self.recent.clear()
            return lines


_BRIDGE = _Bridge()


def bridge_kafka_logs() -> None:
    """Route the `kafka` loggers into dbt's log (idempotent)."""
    kafka_logger = logging.getLogger("kafka")
    if _BRIDGE not in kafka_logger.handlers:
        kafka_logger.addHandler(_BRIDGE)
        kafka_logger.propagate = False  # never raw on the console
        if kafka_logger.level == logging.NOTSET or kafka_logger.level > logging.INFO:
            kafka_logger.setLevel(logging.INFO)


@dataclass(frozen=True)
class Cause:
    words: str  # what went wrong, in plain words
    check: str  # the settings to check


# kafka-python's errors for a CreateTopics the broker answered with a refusal.
_CREATE_REFUSALS = ("policyviolationerror", "invalidpartitionserror",
                    "invalidconfigurationerror", "invalidreplicationassignmenterror")


def _chain(exc: BaseException) -> Iterable[BaseException]:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


_SASL_LOGIN_NOTICE = "in the clear during sasl authentication"

def describe(exc: BaseException) -> str:
    """`Type: message`, once: kafka-python's errors already start their text with their type
    (`KafkaTimeoutError: ...`), others do not."""
    name, text = type(exc).__name__, str(exc).strip()
    if not text:
        return name
    return text if text == name or text.startswith(f"{name}:") else f"{name}: {text}"


def cause_of(exc: BaseException, log_lines: Iterable[str] = (),
             servers: str = MODEL_SERVERS) -> Cause:
    """The cause of a failed Kafka call, from the exception chain and kafka-python's recent
    warnings and errors; `servers` names the setting the servers came from."""
    cause = _cause_of(exc, log_lines)
    return Cause(cause.words, cause.check.replace(MODEL_SERVERS, servers))


def _cause_of(exc: BaseException, log_lines: Iterable[str] = ()) -> Cause:
    names = " ".join(f"{type(e).__name__}: {e}" for e in _chain(exc))
    log_lines = list(log_lines)
    # kafka-python warns at the start of every SASL_PLAINTEXT login ("Exchanging credentials in
    # the clear during Sasl Authentication"), successful or not: not a cause by itself, else any
    # later failure (an authorization refusal) would read as an authentication failure.
    sasl_login = any(_SASL_LOGIN_NOTICE in line.lower() for line in log_lines)
    text = names + " " + " ".join(l for l in log_lines if _SASL_LOGIN_NOTICE not in l.lower())
    lowered = text.lower()
    if "certificate_verify_failed" in lowered or "certificate verify failed" in lowered \
            or "hostname mismatch" in lowered or "sslcertverificationerror" in lowered:
        return Cause("TLS failed: the broker's certificate could not be verified (an unknown "
                     "certificate authority, or a name that does not match the server)",
                     "ssl.cafile (the CA that signed the broker's certificate), "
                     "ssl.check.hostname, and the host names in kafka.bootstrap.servers")
    if "sasl" in lowered and ("authentication" in lowered or "authenticat" in lowered) \
            or "authenticationfailed" in lowered or "authentication failed" in lowered:
        return Cause("authentication failed: the broker rejected the credentials",
                     "sasl.mechanism, sasl.plain.username and sasl.plain.password in the "
                     "profile's kafka_properties")
    if ("ssl" in lowered or "tls handshake" in lowered) and (
            "handshake" in lowered or "wrong_version_number" in lowered
            or "sslerror" in lowered or "eof occurred" in lowered):
        return Cause("TLS failed: the TLS handshake with the broker did not complete (is the "
                     "listener TLS, and does it speak the protocol configured?)",
                     "security.protocol and the port in kafka.bootstrap.servers")
    if "topicauthorizationfailed" in lowered:
        return Cause("not authorized: the broker refused this principal access to the topic",
                     "the ACLs of the principal in kafka_properties on the topic and its "
                     f"{CONTROL_TOPIC_SUFFIX} topic (describe, create, read, write)")
    if "transactionalidauthorizationfailed" in lowered:
        return Cause("not authorized: the broker refused this principal its transactional id",
                     f"the ACLs on transactional ids '{TRANSACTIONAL_ID_PREFIX}*' (write, describe)")
    if "clusterauthorizationfailed" in lowered:  # CreateTopics, when topics are the operators'
        return Cause("not authorized: the broker refused this principal an operation on the "
                     "cluster (creating topics needs it)",
                     "the ACLs of the principal in kafka_properties on the cluster (create), or "
                     f"create the topic and its {CONTROL_TOPIC_SUFFIX} topic beforehand")
    if "authorizationfailed" in lowered:
        return Cause("not authorized: the broker refused the request", "the principal's ACLs")
    # A broker may refuse CreateTopics on its own grounds (a create.topic.policy, creation kept
    # to operators, more replicas than brokers): the topic stays missing, and only creating it,
    # or a request the broker accepts, lets the run go on. The detail in brackets has its reason.
    if "invalidreplicationfactor" in lowered:
        return Cause("the topic does not exist and could not be created: the cluster has fewer "
                     "brokers than the replication asked for",
                     f"log.system.replication, or create kafka.topic and its {CONTROL_TOPIC_SUFFIX} "
                     "topic yourself")
    if any(refusal in lowered for refusal in _CREATE_REFUSALS):
        return Cause("the topic does not exist and could not be created: the broker refused to "
                     "create it",
                     f"kafka.topic: create it and its {CONTROL_TOPIC_SUFFIX} topic, or allow their "
                     "creation on the broker")
    # A producer that never finds its topic (deleted, or never created, with auto-creation off)
    # only times out; kafka-python's log says the topic was missing from every answer.
    if "unknowntopicorpartition" in lowered or (
            "failed to update metadata" in lowered and "not found in cluster metadata" in lowered):
        return Cause("the topic does not exist and could not be created",
                     "kafka.topic, or create it (auto-creation is off on this broker)")
    # The broker answered, a SASL login began, and the broker dropped the connection: how a
    # rejected login sometimes reaches kafka-python (the refusal's answer lost with the close).
    if sasl_login and ("disconnected" in lowered or "connection lost" in lowered):
        return Cause("authentication failed: the broker closed the connection during the SASL "
                     "login (it rejected the credentials or the mechanism)",
                     "sasl.mechanism, sasl.plain.username and sasl.plain.password in the "
                     "profile's kafka_properties")
    return Cause("unreachable: no broker answered", "kafka.bootstrap.servers (host and port), "
                 "the network between dbt and Kafka, and security.protocol")


# How the clients report a transaction that Kafka aborted under the writer: kafka-python's
# InvalidProducerEpochError / ProducerFencedError (or a send refused while the producer bumps its
# epoch), librdkafka's _FENCED ("fenced by newer producer instance") and INVALID_PRODUCER_EPOCH.
_TRANSACTION_LOST = ("invalidproducerepoch", "producerfenced", "_fenced", "fenced by newer",
                     "bumping_producer_epoch", "invalid_producer_epoch")


def transaction_lost(exc: BaseException, timeout_ms: Optional[object] = None) -> Optional[Cause]:
    """The cause of a transactional write that Kafka refused because it had aborted the
    transaction: it outlived transaction.timeout.ms, or a newer producer of the same
    transactional id (the next run, fencing) took over. The clients cannot tell these apart:
    both leave the writer with an old producer epoch. None for any other failure."""
    lowered = " ".join(f"{type(e).__name__}: {e}" for e in _chain(exc)).lower()
    if not any(mark in lowered for mark in _TRANSACTION_LOST):
        return None
    limit = f" ({int(float(str(timeout_ms)))} ms)" if timeout_ms else ""
    return Cause(f"Kafka aborted this run's transaction, and the records in it: it stayed open "
                 f"longer than transaction.timeout.ms{limit}, or a newer writer of the table "
                 f"(another run of the model, or its recovery) fenced this one",
                 "kafka.transaction.timeout.ms (at most the broker's transaction.max.timeout.ms), "
                 "and that no other run of the model was writing meanwhile")


# What librdkafka reports for the records it purged from its queues as it aborted a transaction.
_PURGED = ("_PURGE_QUEUE", "_PURGE_INFLIGHT")


def write_interrupted(exc: BaseException) -> bool:
    """Whether a failed write is one a new attempt heals: librdkafka (confluent-kafka) had to
    abort the transaction because a node went down under it (OUT_OF_ORDER_SEQUENCE_NUMBER once a
    partition's leader moved: "requires epoch bump"), or purged the records it still held as it
    did. Not a transaction Kafka aborted (transaction_lost) nor any fatal error."""
    if transaction_lost(exc) is not None:
        return False
    for link in _chain(exc):
        error = link.args[0] if link.args else None
        if not callable(getattr(error, "txn_requires_abort", None)):
            continue  # not librdkafka's KafkaError
        if error.fatal():
            return False
        if error.txn_requires_abort() or error.name() in _PURGED:
            return True
    return False


# How the clients report records no broker acknowledged within the delivery timeout: kafka-python's
# "Expiring N record(s) ... since batch creation", librdkafka's _MSG_TIMED_OUT.
_DELIVERY_EXPIRED = ("since batch creation", "_msg_timed_out", "message timed out")


def write_cause(exc: BaseException, transactional: bool,
                timeout_ms: Optional[object] = None) -> Optional[Cause]:
    """The cause of a failed write in plain words, where the clients' own words are not: a
    transaction Kafka aborted (transaction_lost), or records no broker acknowledged in time
    (a partition's leader or the transaction coordinator lost, and no other took over)."""
    lost = transaction_lost(exc, timeout_ms) if transactional else None
    if lost is not None:
        return lost
    lowered = " ".join(f"{type(e).__name__}: {e}" for e in _chain(exc)).lower()
    if any(mark in lowered for mark in _DELIVERY_EXPIRED):
        return Cause("Kafka did not acknowledge the records in time: a broker stopped answering "
                     "(the leader of a partition, or the transaction coordinator) and the write "
                     "did not move to another within the delivery timeout",
                     "that the brokers are up (a restarted one is taken over in seconds) and "
                     "kafka.delivery.timeout.ms")
    return None


def kafka_failure(model: str, servers: Optional[str], exc: BaseException, doing: str = "",
                  changed: str = "Nothing was changed.",
                  setting: str = MODEL_SERVERS) -> DbtRuntimeError:
    """One error line: the model, what was being done, the cause in plain words (from the
    exception and kafka-python's latest warnings) and the settings to check, the servers by
    the `setting` they came from (servers_setting)."""
    cause = cause_of(exc, _BRIDGE.take(30), servers=setting)
    what = f" while {doing}" if doing else ""
    return DbtRuntimeError(
        f"Model '{model}': Kafka at '{servers}'{what}: {cause.words}. Check {cause.check}. "
        f"({describe(exc)}) {changed}".rstrip())
