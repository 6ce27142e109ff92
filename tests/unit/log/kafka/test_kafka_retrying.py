"""retrying.with_retries: the one retry of every kafka-python conversation (a node down);
retrying.start_client: a client's start, bounded by the same window."""
from __future__ import annotations

import threading
import time
from typing import List

import pytest
from kafka.errors import (
    KafkaConnectionError, KafkaError, KafkaTimeoutError, NotEnoughReplicasError, TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)

from dbt.adapters.logstore.log.kafka.errors import cause_of
from dbt.adapters.logstore.log.kafka.retrying import no_broker_answered, retriable, start_client, with_retries

SERVERS = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
CONFIG = {"bootstrap_servers": SERVERS, "bootstrap_timeout_ms": 10000, "request_timeout_ms": 5000,
          "retry_backoff_ms": 100, "reconnect_backoff_max_ms": 1000}  # a window of 15 s


class Clock:
    """Time that passes only by the sleeps asked for (and what a try says it took)."""

    def __init__(self) -> None:
        self.now, self.sleeps = 0.0, []  # type: float, List[float]

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def failing(times: int, error: Exception, clock: Clock = None, takes: float = 0.0):
    calls = []

    def attempt() -> str:
        calls.append(1)
        if clock is not None:
            clock.now += takes
        if len(calls) <= times:
            raise error
        return "answer"
    return attempt, calls


def test_a_refused_node_is_tried_past_with_the_clients_backoff():
    clock = Clock()
    attempt, calls = failing(3, KafkaConnectionError("111 ECONNREFUSED"))
    assert with_retries(attempt, CONFIG, clock=clock, sleep=clock.sleep) == "answer"
    assert len(calls) == 4
    assert clock.sleeps == [0.1, 0.2, 0.4]  # retry_backoff_ms, doubled


def test_the_backoff_stops_growing_at_reconnect_backoff_max_ms():
    clock = Clock()
    attempt, _ = failing(7, KafkaConnectionError("refused"))
    with_retries(attempt, CONFIG, clock=clock, sleep=clock.sleep)
    assert max(clock.sleeps) == 1.0


def test_silence_for_the_whole_window_is_no_broker_answered_naming_the_servers():
    clock = Clock()
    attempt, calls = failing(1000, KafkaConnectionError("111 ECONNREFUSED"), clock, takes=0.5)
    with pytest.raises(KafkaError) as raised:
        with_retries(attempt, CONFIG, doing="reading offsets", clock=clock, sleep=clock.sleep)
    assert isinstance(raised.value, no_broker_answered())
    text = str(raised.value)
    assert "within 15 s" in text and "reading offsets" in text and "ECONNREFUSED" in text
    assert ", ".join(SERVERS) in text
    assert f"{len(calls)} tries" in text and 10 < len(calls) < 30
    assert clock.now <= 15  # no try starts once the window is spent
    assert isinstance(raised.value.__cause__, KafkaConnectionError)


def test_one_try_that_took_the_whole_window_keeps_its_own_error():
    clock = Clock()
    error = KafkaConnectionError("bootstrap timed out")
    attempt, calls = failing(5, error, clock, takes=15.0)
    with pytest.raises(KafkaConnectionError) as raised:
        with_retries(attempt, CONFIG, clock=clock, sleep=clock.sleep)
    assert raised.value is error and len(calls) == 1


@pytest.mark.parametrize("error", [TopicAuthorizationFailedError(), UnknownTopicOrPartitionError(),
                                   ValueError("a bug")])
def test_an_answer_is_not_retried(error):
    clock = Clock()
    attempt, calls = failing(5, error)
    with pytest.raises(type(error)):
        with_retries(attempt, CONFIG, clock=clock, sleep=clock.sleep)
    assert len(calls) == 1 and not retriable(error)


def test_a_retriable_answer_left_at_the_end_is_raised_as_the_broker_said_it():
    clock = Clock()
    attempt, calls = failing(1000, NotEnoughReplicasError(), clock, takes=1.0)
    with pytest.raises(NotEnoughReplicasError):
        with_retries(attempt, CONFIG, clock=clock, sleep=clock.sleep)
    assert len(calls) > 1


def test_a_request_that_timed_out_on_a_dead_leader_is_asked_once_more():
    clock = Clock()  # the partition's leader moves after broker.session.timeout.ms
    attempt, calls = failing(1, KafkaTimeoutError("Failed to get offsets by timestamps in 5000 ms"),
                             clock, takes=5.0)
    assert with_retries(attempt, CONFIG, clock=clock, sleep=clock.sleep) == "answer"
    assert len(calls) == 2


def test_a_try_that_timed_out_past_the_window_is_asked_once_more():
    clock = Clock()  # two offset requests of one try, each timed out on a dead leader (5 s each)
    attempt, calls = failing(1, KafkaTimeoutError("Failed to get offsets by timestamps in 5000 ms"),
                             clock, takes=16.0)
    assert with_retries(attempt, CONFIG, clock=clock, sleep=clock.sleep) == "answer"
    attempt, calls = failing(5, KafkaTimeoutError("Failed to get offsets by timestamps"), clock, takes=16.0)
    with pytest.raises(KafkaError) as raised:  # once only: then no broker answered
        with_retries(attempt, CONFIG, clock=clock, sleep=clock.sleep)
    assert isinstance(raised.value, no_broker_answered()) and len(calls) == 2


def test_a_failed_bootstrap_is_final():
    clock = Clock()  # kafka-python tried every listed server for bootstrap_timeout_ms
    error = KafkaTimeoutError("Unable to bootstrap from 127.0.0.1:1,127.0.0.1:2")
    attempt, calls = failing(5, error, clock, takes=10.0)
    with pytest.raises(KafkaTimeoutError):
        with_retries(attempt, CONFIG, clock=clock, sleep=clock.sleep)
    assert len(calls) == 1 and not retriable(error)


# --- start_client: a client's start, bounded by the window ---------------------------------

QUICK = {"bootstrap_timeout_ms": 100, "request_timeout_ms": 100}  # a window of 0.2 s


class Client:
    def __init__(self, release: threading.Event = None, **config) -> None:
        self.config, self.closed = config, threading.Event()
        if release is not None:
            release.wait(10)  # a bootstrap that waits for an answer

    def close(self) -> None:
        self.closed.set()


def test_a_client_that_starts_is_handed_back_with_its_settings():
    client = start_client(Client, QUICK, group_id=None)
    assert client.config == {**QUICK, "group_id": None}


def test_a_client_that_fails_to_start_raises_its_own_error():
    def refused(**config):
        raise KafkaConnectionError("111 ECONNREFUSED")

    with pytest.raises(KafkaConnectionError):
        start_client(refused, QUICK)


@pytest.mark.parametrize("protocol, said", [
    ("SSL", "never completed the TLS handshake within 0.2 s"),
    ("PLAINTEXT", "never answered within 0.2 s"),
])
def test_a_start_that_outlasts_the_window_is_a_timeout_and_the_late_client_is_closed(protocol, said):
    release, started = threading.Event(), []

    def silent(**config):
        started.append(Client(release, **config))
        return started[-1]

    with pytest.raises(KafkaTimeoutError, match=said):
        start_client(silent, {**QUICK, "security_protocol": protocol})
    release.set()  # the server answers after all: nobody holds that client any more
    for _ in range(100):  # up to 5 s for the starting thread to close it
        if started and started[-1].closed.is_set():
            break
        time.sleep(0.05)
    assert started and started[-1].closed.is_set()


def test_a_tls_handshake_that_never_completed_is_said_as_such():
    error = KafkaTimeoutError("a server accepted the connection and never completed the TLS "
                              "handshake within 25 s")
    assert cause_of(no_broker_answered()(f"no broker answered: {error}")).words.startswith(
        "TLS failed: the TLS handshake with the broker did not complete")
