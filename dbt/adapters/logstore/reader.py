"""The reader: read a logged table's changelog back and replay it into rows.

Partitions are read with `assign()` (no consumer-group join) and `read_committed` isolation, and
only records of write attempts that the control topic confirms are delivered (the consumer rules
of docs/log-format.md), so each committed change is delivered once on any Kafka-compatible broker.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Dict, Iterator, List, Optional, Tuple


@dataclass(frozen=True)
class ChangeRecord:
    partition: int
    offset: int
    key: Optional[Dict[str, Any]]
    op: str
    before: Optional[Dict[str, Any]]
    after: Optional[Dict[str, Any]]
    ts_ms: int


def decode_json(data: Optional[bytes]) -> Any:
    # Decimals are written with their exact digits: keep them exact.
    return None if data is None else json.loads(data, parse_float=Decimal)


def _records(bootstrap_servers: str, topic: str, idle_seconds: float, timeout_seconds: float,
             client_config: Dict[str, Any]) -> Iterator[Any]:
    """Every record of `topic` from the beginning to its current end, in partition order."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap_servers.split(","), group_id=None, enable_auto_commit=False,
        isolation_level="read_committed", auto_offset_reset="earliest", **client_config,
    )
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        if not partitions:
            return
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)  # a floor: some brokers report it short
        deadline = time.monotonic() + timeout_seconds
        idle_since = time.monotonic()
        while time.monotonic() < deadline:
            batches = consumer.poll(timeout_ms=200)
            if batches:
                idle_since = time.monotonic()
            for tp in sorted(batches, key=lambda t: t.partition):
                yield from batches[tp]
            # The end is reached when every partition is past its end offset and nothing new
            # arrives for a moment (some brokers report end offsets short of the real end).
            at_end = all(
                consumer.highwater(tp) is not None  # None until the first fetch answers
                and consumer.position(tp) >= max(ends[tp], consumer.highwater(tp))
                for tp in partitions
            )
            if at_end and time.monotonic() - idle_since >= idle_seconds:
                return
    finally:
        consumer.close()


Writer = Tuple[str, Optional[str]]  # (attempt, writer) as named by a record's headers


def confirmed_ranges(confirmation: Dict[str, Any]) -> Dict[Writer, Dict[int, Tuple[int, int]]]:
    """What one control record confirms: per writer of the attempt, {partition: (first, last)}.
    A parallel attempt lists its writers (Spark task attempts); a record of it is delivered only
    within its own writer's range, so the records of a retried task are not delivered twice."""
    attempt = confirmation["attempt"]
    if "writers" in confirmation:
        return {(attempt, name): {int(p): (a, b) for p, (a, b) in ranges.items()}
                for name, ranges in confirmation["writers"].items()}
    return {(attempt, None): {int(p): (a, b) for p, (a, b) in confirmation["offsets"].items()}}


def confirmed_attempts(bootstrap_servers: str, topic: str, idle_seconds: float = 1.0,
                       **client_config: Any) -> Dict[Writer, Dict[int, Tuple[int, int]]]:
    """(attempt id, writer) -> {partition: (first, last)} from the topic's control records."""
    from dbt.adapters.logstore.log_config import control_topic_for

    attempts: Dict[Writer, Dict[int, Tuple[int, int]]] = {}
    for msg in _records(bootstrap_servers, control_topic_for(topic), idle_seconds, 60.0, client_config):
        attempts.update(confirmed_ranges(json.loads(msg.value)))
    return attempts


def read_changelog(
    bootstrap_servers: str, topic: str, idle_seconds: float = 1.5, timeout_seconds: float = 60.0,
    **client_config: Any,
) -> Iterator[ChangeRecord]:
    """Yield every confirmed change of `topic` from the beginning up to its current end,
    partition order kept (records of one key are in one partition)."""
    attempts = confirmed_attempts(bootstrap_servers, topic, **client_config)
    for msg in _records(bootstrap_servers, topic, idle_seconds, timeout_seconds, client_config):
        headers = {k: v.decode() for k, v in (msg.headers or [])}
        writer = (headers.get("logstore.attempt", ""), headers.get("logstore.writer"))
        first, last = attempts.get(writer, {}).get(msg.partition, (1, 0))
        if not first <= msg.offset <= last:
            continue  # an attempt that was never confirmed (failed, aborted or retried)
        value = decode_json(msg.value)
        if value is None:  # tombstone: delete by key
            yield ChangeRecord(msg.partition, msg.offset, decode_json(msg.key), "d", None, None, 0)
            continue
        if not (isinstance(value, dict) and set(value) == ENVELOPE_FIELDS):
            # log.format json: the value is the row itself, an upsert
            yield ChangeRecord(msg.partition, msg.offset, decode_json(msg.key), "c", None, value, 0)
            continue
        yield ChangeRecord(msg.partition, msg.offset, decode_json(msg.key), value["op"],
                           value.get("before"), value.get("after"), value.get("ts_ms", 0))


ENVELOPE_FIELDS = {"before", "after", "op", "ts_ms", "source"}


class Replica:
    """Applies change records in order: insert/update upsert by key (or add a row when the log
    is keyless), delete removes the key (or one equal row)."""

    def __init__(self) -> None:
        self._keyed: Dict[str, Dict[str, Any]] = {}
        self._keyless: List[Dict[str, Any]] = []

    @staticmethod
    def _key(key: Any) -> str:
        return json.dumps(key, sort_keys=True, default=str)

    def apply(self, record: ChangeRecord) -> None:
        if record.key is not None:
            if record.op == "d":
                self._keyed.pop(self._key(record.key), None)
            else:
                self._keyed[self._key(record.key)] = record.after or {}
        elif record.op == "d":
            self._keyless.remove(record.before)  # ValueError: the log deletes a row it never had
        else:
            self._keyless.append(record.after or {})

    def rows(self) -> List[Dict[str, Any]]:
        return list(self._keyed.values()) + list(self._keyless)
