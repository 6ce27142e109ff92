"""Conversations with Kafka that survive one node down: the one retry every kafka-python client
of this package goes through (log_system's admin and fencing, reading's consumers, python_writer's
producer start).

Why: kafka-python (3.0.12, the version constraints resolve to) sends a metadata request to one node
it picks at random among those the cluster named, and when that node refuses the connection
(a node killed and not yet dropped from the cluster's metadata, ~9 s in KRaft) the caller's call
fails at once (`KafkaConnectionError: 111 ECONNREFUSED`) instead of asking another node: about
one fresh client in three with one node of three down. A new try (a fresh client) asks another
node; so a failed try is retried, after the client's own backoff, while the window has time:
bootstrap_timeout_ms plus request_timeout_ms, so that a request that timed out on a partition
whose leader died (the cluster moves it after broker.session.timeout.ms, 9 s) is asked once more.
Only then is the error "no broker answered", naming the servers tried. A bootstrap that failed
is final: kafka-python tried every listed server for bootstrap_timeout_ms.

Every client also starts here (`start_client`), within the same window: kafka-python 3.0.12's
own bootstrap can wait without end.
"""
from __future__ import annotations

import threading
import time
from functools import lru_cache
from typing import Any, Callable, List, Mapping, Optional, TypeVar

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.logstore.log.kafka.config import with_metadata_backoff

T = TypeVar("T")
_logger = AdapterLogger("logstore.kafka")

# Errors kafka-python marks retriable that are answers, not silence: a missing topic is one.
_NOT_RETRIED = ("UnknownTopicOrPartitionError",)
# Errors that mean no node answered (the others are answers a node gave, kept as they are).
_SILENCE = ("KafkaConnectionError", "NodeNotReadyError", "KafkaTimeoutError",
            "RequestTimedOutError", "NoBrokersAvailable")


def _kafka_error() -> type:
    from kafka.errors import KafkaError

    return KafkaError


@lru_cache(maxsize=None)
def no_broker_answered() -> type:
    """The error of a window of tries that all met silence: a KafkaError (callers' handlers take
    it as any client error), made once kafka-python is imported (it is imported lazily)."""
    return type("NoBrokerAnswered", (_kafka_error(),), {"retriable": False})


def retriable(exc: BaseException) -> bool:
    """Whether another try (a fresh client, which asks another node) may succeed."""
    if "unable to bootstrap" in str(exc).lower() or type(exc).__name__ == "NoBrokersAvailable":
        return False  # every listed server was tried for bootstrap_timeout_ms
    return (isinstance(exc, _kafka_error()) and bool(getattr(exc, "retriable", False))
            and type(exc).__name__ not in _NOT_RETRIED)


def silence(exc: BaseException) -> bool:
    """Whether `exc` means no node answered (a node down, a leader moving), not an answer."""
    return isinstance(exc, _kafka_error()) and type(exc).__name__ in _SILENCE


def servers_of(config: Mapping[str, Any]) -> List[str]:
    servers = config.get("bootstrap_servers") or []
    return [servers] if isinstance(servers, str) else [str(s) for s in servers]


def with_retries(attempt: Callable[[], T], config: Mapping[str, Any], doing: str = "",
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> T:
    """`attempt()` (which opens its own client, talks, and closes it), tried again while it
    fails with a retriable error and the window (the client's bootstrap_timeout_ms plus its
    request_timeout_ms) has time left, after the client's backoff (retry_backoff_ms, doubled each try up to
    reconnect_backoff_max_ms). A last failure that was silence becomes "no broker answered"
    naming the servers tried (the error it followed is its cause); an answer is raised as is."""
    window_s = window_seconds(config)
    backoff_s = float(config.get("retry_backoff_ms") or 100) / 1000
    backoff_max_s = float(config.get("reconnect_backoff_max_ms") or 1000) / 1000
    started = clock()
    tries = 0
    while True:
        tries += 1
        try:
            return attempt()
        except Exception as exc:
            spent = clock() - started
            if not retriable(exc):
                raise
            # A conversation of two requests (first and end offsets) can time out on a dead
            # leader twice in one try, past the window: a fresh client is asked once more.
            timed_out_once = tries == 1 and type(exc).__name__ == "KafkaTimeoutError"
            if spent + backoff_s >= window_s and not timed_out_once:
                if tries == 1 or not silence(exc):
                    raise  # one try took the whole window, or a node answered: its own words
                servers = ", ".join(servers_of(config))
                raise no_broker_answered()(
                    f"no broker answered{' while ' + doing if doing else ''} within {window_s:g} s: "
                    f"{tries} tries, each from the servers {servers} and the nodes they named; "
                    f"the last: {type(exc).__name__}: {exc}") from exc
            _logger.debug(f"Kafka{', while ' + doing if doing else ''}: try {tries} failed "
                          f"({type(exc).__name__}: {exc}); trying again in {backoff_s:.2f} s")
            sleep(backoff_s)
            backoff_s = min(backoff_s * 2, backoff_max_s)


def window_seconds(config: Mapping[str, Any]) -> float:
    """How long a conversation may wait for an answer: bootstrap_timeout_ms + request_timeout_ms."""
    return (float(config.get("bootstrap_timeout_ms") or 30000)
            + float(config.get("request_timeout_ms") or 30000)) / 1000


def start_client(client_class: Any, config: Mapping[str, Any], **extra: Any) -> Any:
    """A kafka-python client (`client_class(**config, **extra)`) started within the window, its
    metadata's backoff the client's own (config.with_metadata_backoff). Why the bound: kafka-python
    3.0.12 waits without end for a bootstrap whose connection never completes its TLS handshake
    (a server that accepts connections and stays silent: a proxy or load balancer with nothing
    behind it); its fix (upstream #3124, net.run's timeouts) is not released. The start runs in
    a thread of its own; past the window the caller gets a KafkaTimeoutError (said as the TLS
    handshake that did not complete, or as no broker answering), and a client that starts after
    all is closed."""
    from kafka.errors import KafkaTimeoutError

    window_s = window_seconds(config)
    outcome: dict = {}
    lock = threading.Lock()

    def start() -> None:
        try:
            client = client_class(**config, **extra)
        except BaseException as exc:  # handed to the caller
            outcome["error"] = exc
            return
        with lock:
            if outcome.get("abandoned"):
                closing(client)
            else:
                outcome["client"] = client

    thread = threading.Thread(target=start, name="dbt-logstore-kafka-start", daemon=True)
    thread.start()
    thread.join(window_s)
    with lock:
        if "client" in outcome:
            return with_metadata_backoff(outcome["client"], config)
        if "error" in outcome:
            raise outcome["error"]
        outcome["abandoned"] = True
    tls = "SSL" in str(config.get("security_protocol") or "").upper()
    raise KafkaTimeoutError(
        f"a server accepted the connection and never completed the TLS handshake within {window_s:g} s"
        if tls else f"a server accepted the connection and never answered within {window_s:g} s")


def closing(client: Optional[Any]) -> None:
    """Close a client a failed try leaves (its threads and sockets), whatever it says."""
    if client is None:
        return
    try:
        client.close(timeout=1) if _takes_timeout(client) else client.close()
    except Exception:  # a try that failed may leave a client that cannot close cleanly
        pass


def _takes_timeout(client: Any) -> bool:
    return type(client).__name__ == "KafkaProducer"
