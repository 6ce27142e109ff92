"""The reader: a logged table's changelog, from a start point, each committed change once.

It follows the consumer rules of docs/log-format.md on any Kafka-compatible broker: one consumer
is assigned (never a group join) every data partition and the control topic; a data record is
delivered when a control record confirms its attempt (and its offset lies in the confirmed
range), dropped when another attempt of its snapshot or a later snapshot is confirmed, and held
back until then. Within a partition records are delivered in offset order.

The control records it reads are decoded by control_records.py; what it delivers (ChangeRecord)
and what a consumer does with it (normalize by key, replay into a replica) is replay.py.

Start points (`StartPoint.parse`):
  earliest      every change from the log's start
  latest        only changes committed after the reader starts (with follow)
  snapshot:N    the changes after snapshot N (from N's stored offsets): what a reader holding
                the table as of snapshot N needs
  timestamp:T   the changes of snapshots committed at or after T (epoch ms or ISO-8601)
  latest-full   Paimon's hybrid read: the table's rows as of its current snapshot (op 'r'),
                then the changes after it, with no gap and no overlap (`hybrid_read`)
"""
from __future__ import annotations

import time
from collections import defaultdict, deque
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Deque, Dict, Iterable, Iterator, List, Optional, Tuple

from dbt.adapters.logstore.control_records import Confirmation
from dbt.adapters.logstore.formats import decode_record, is_tombstone_after_delete
from dbt.adapters.logstore.names import H_ATTEMPT, H_SNAPSHOT, H_TABLE, H_WRITER
from dbt.adapters.logstore.replay import ChangeRecord, Normalizer

START_KINDS = ("earliest", "latest", "snapshot:N", "timestamp:T", "latest-full")


class ReaderError(ValueError):
    """A start point or a read that cannot be served (the message says what is allowed)."""


@dataclass(frozen=True)
class StartPoint:
    kind: str
    snapshot: Optional[int] = None
    timestamp_ms: Optional[int] = None

    @classmethod
    def parse(cls, text: str) -> "StartPoint":
        raw = str(text).strip()
        kind, _, arg = raw.replace("=", ":").partition(":")
        kind = kind.strip().lower()
        if kind in ("earliest", "latest", "latest-full") and not arg:
            return cls(kind)
        if kind == "snapshot" and arg.strip().isdigit():
            return cls("snapshot", snapshot=int(arg))
        if kind == "timestamp" and arg.strip():
            return cls("timestamp", timestamp_ms=_timestamp_ms(arg.strip()))
        raise ReaderError(f"Start point '{text}' is not known. Allowed: {', '.join(START_KINDS)} "
                          f"(N a snapshot id, T epoch milliseconds or an ISO-8601 time).")

    def __str__(self) -> str:
        if self.kind == "snapshot":
            return f"snapshot:{self.snapshot}"
        if self.kind == "timestamp":
            return f"timestamp:{self.timestamp_ms}"
        return self.kind


def _timestamp_ms(text: str) -> int:
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ReaderError(f"Timestamp '{text}' is neither epoch milliseconds nor ISO-8601 "
                          f"(e.g. 2026-11-22T10:00:00Z).") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def start_after(confirmations: List[Confirmation], start: StartPoint) -> Tuple[int, Dict[int, int]]:
    """Where a start point begins: (last snapshot not delivered, start offset per partition;
    an empty dict means the beginning of every partition)."""
    if start.kind == "earliest" or (start.kind == "snapshot" and start.snapshot == 0):
        return 0, {}
    if not confirmations:
        if start.kind == "snapshot":
            raise ReaderError(f"Snapshot {start.snapshot} is not in the log: it has no snapshot yet.")
        return 0, {}
    if start.kind in ("latest", "latest-full"):
        last = confirmations[-1]
        return last.snapshot, dict(last.end_offsets)
    if start.kind == "snapshot":
        for c in confirmations:
            if c.snapshot == start.snapshot:
                return c.snapshot, dict(c.end_offsets)
        raise ReaderError(
            f"Snapshot {start.snapshot} is not in the log. Allowed: 0 (the start) or a snapshot "
            f"from {confirmations[0].snapshot} to {confirmations[-1].snapshot}.")
    if start.kind == "timestamp":
        before = [c for c in confirmations if c.ts_ms < int(start.timestamp_ms or 0)]
        return (before[-1].snapshot, dict(before[-1].end_offsets)) if before else (0, {})
    raise ReaderError(f"Start point '{start}' is not known. Allowed: {', '.join(START_KINDS)}.")


class ChangelogReader:
    """Reads one logged table's changelog (its topic and control topic) with one consumer."""

    def __init__(self, bootstrap_servers: str, topic: str, table: Optional[str] = None,
                 **client_config: Any) -> None:
        from dbt.adapters.logstore.log_config import control_topic_for

        self.bootstrap_servers, self.topic, self.table = bootstrap_servers, topic, table
        self.control_topic = control_topic_for(topic)
        self.client_config = client_config

    def _consumer(self) -> Any:
        from kafka import KafkaConsumer

        return KafkaConsumer(
            bootstrap_servers=self.bootstrap_servers.split(","), group_id=None,
            enable_auto_commit=False, isolation_level="read_committed",
            auto_offset_reset="earliest", **self.client_config)

    def confirmations(self, idle_seconds: float = 0.5, timeout_seconds: float = 60.0) -> List[Confirmation]:
        """The committed snapshots so far, in snapshot order (the first confirmation of a snapshot
        counts; the protocol writes one)."""
        from kafka import TopicPartition

        consumer = self._consumer()
        try:
            control = TopicPartition(self.control_topic, 0)
            if not consumer.partitions_for_topic(self.control_topic):
                return []
            consumer.assign([control])
            consumer.seek_to_beginning(control)
            found: Dict[int, Confirmation] = {}
            for msg in _until_end(consumer, [control], idle_seconds, timeout_seconds):
                c = Confirmation.from_record(msg.value)
                if self.table in (None, c.table):
                    found.setdefault(c.snapshot, c)
            return [found[s] for s in sorted(found)]
        finally:
            consumer.close()

    def changes(self, start: StartPoint = StartPoint("earliest"), follow: bool = False,
                idle_seconds: float = 1.0, timeout_seconds: Optional[float] = 60.0,
                after_snapshot: Optional[int] = None, up_to_snapshot: Optional[int] = None,
                from_offsets: Optional[Dict[int, int]] = None) -> Iterator[ChangeRecord]:
        """Each committed change from `start` (or from `after_snapshot` at `from_offsets`), in
        partition offset order, up to the log's current end, or forever with `follow`, or up to
        `up_to_snapshot` inclusive."""
        from kafka import TopicPartition

        if after_snapshot is None:
            after_snapshot, from_offsets = start_after(self.confirmations(), start)
        consumer = self._consumer()
        try:
            partitions = sorted(consumer.partitions_for_topic(self.topic) or [])
            if not partitions:
                raise ReaderError(f"Topic '{self.topic}' does not exist on {self.bootstrap_servers}.")
            data = [TopicPartition(self.topic, p) for p in partitions]
            control = TopicPartition(self.control_topic, 0)
            consumer.assign(data + [control])
            consumer.seek_to_beginning(control)
            for tp in data:
                if (from_offsets or {}).get(tp.partition) is not None:
                    consumer.seek(tp, from_offsets[tp.partition])
                else:
                    consumer.seek_to_beginning(tp)
            yield from self._deliver(consumer, data, control, after_snapshot, up_to_snapshot,
                                     follow, idle_seconds, timeout_seconds)
        finally:
            consumer.close()

    def _deliver(self, consumer: Any, data: List[Any], control: Any, after_snapshot: int,
                 up_to: Optional[int], follow: bool, idle_seconds: float,
                 timeout_seconds: Optional[float]) -> Iterator[ChangeRecord]:
        attempts: Dict[str, Confirmation] = {}
        newest = 0  # the latest confirmed snapshot of this table
        queues: Dict[int, Deque[Any]] = defaultdict(deque)
        deadline = None if (follow or timeout_seconds is None) else time.monotonic() + timeout_seconds
        idle_since = time.monotonic()
        while True:
            batches = consumer.poll(timeout_ms=200)
            if batches:
                idle_since = time.monotonic()
            for msg in batches.get(control, []):
                c = Confirmation.from_record(msg.value)
                if self.table in (None, c.table):
                    attempts.setdefault(c.attempt, c)
                    newest = max(newest, c.snapshot)
            for tp in data:
                queues[tp.partition].extend(batches.get(tp, []))
            for tp in data:
                queue = queues[tp.partition]
                while queue:
                    msg = queue[0]
                    headers = {k: v.decode() for k, v in (msg.headers or [])}
                    if self.table not in (None, headers.get(H_TABLE)):
                        queue.popleft()
                        continue
                    snapshot = int(headers.get(H_SNAPSHOT) or 0)
                    confirmation = attempts.get(headers.get(H_ATTEMPT, ""))
                    if confirmation is not None and confirmation.confirms(
                            tp.partition, msg.offset, headers.get(H_WRITER)):
                        queue.popleft()
                        if after_snapshot < snapshot and (up_to is None or snapshot <= up_to) \
                                and not is_tombstone_after_delete(msg.headers):
                            yield decode_record(msg, snapshot)
                    elif snapshot <= newest or confirmation is not None:
                        queue.popleft()  # an attempt that lost: another one of its snapshot won
                    else:
                        break  # not confirmed yet: hold the partition back
            if up_to is not None and newest >= up_to and self._past(consumer, data, up_to, attempts):
                return
            if not follow and self._at_end(consumer, data + [control]) \
                    and time.monotonic() - idle_since >= idle_seconds:
                return  # held records belong to attempts no one confirmed (yet)
            if deadline is not None and time.monotonic() > deadline:
                raise ReaderError(f"Reading '{self.topic}' did not reach its end within "
                                  f"{timeout_seconds:.0f} s.")

    @staticmethod
    def _past(consumer: Any, data: List[Any], up_to: int, attempts: Dict[str, Confirmation]) -> bool:
        """Every record of snapshots up to `up_to` has been read."""
        ends: Dict[int, int] = {}
        for c in attempts.values():
            if c.snapshot <= up_to:
                for p, (_, last) in c.offsets.items():
                    ends[p] = max(ends.get(p, 0), last + 1)
        return all(consumer.position(tp) >= ends.get(tp.partition, 0) for tp in data)

    @staticmethod
    def _at_end(consumer: Any, partitions: List[Any]) -> bool:
        return all(consumer.highwater(tp) is not None  # None until the first fetch answers
                   and consumer.position(tp) >= consumer.highwater(tp) for tp in partitions)


def _until_end(consumer: Any, partitions: List[Any], idle_seconds: float,
               timeout_seconds: float) -> Iterator[Any]:
    deadline = time.monotonic() + timeout_seconds
    idle_since = time.monotonic()
    while time.monotonic() < deadline:
        batches = consumer.poll(timeout_ms=200)
        if batches:
            idle_since = time.monotonic()
        for tp in partitions:
            yield from batches.get(tp, [])
        if ChangelogReader._at_end(consumer, partitions) and time.monotonic() - idle_since >= idle_seconds:
            return
    raise ReaderError(f"Reading {partitions} did not reach the end within {timeout_seconds:.0f} s.")


def read_changelog(bootstrap_servers: str, topic: str, start: Any = "earliest",
                   follow: bool = False, normalize: bool = False, idle_seconds: float = 1.0,
                   timeout_seconds: float = 60.0, table: Optional[str] = None,
                   **client_config: Any) -> Iterator[ChangeRecord]:
    """Yield the confirmed changes of `topic` from `start` (a StartPoint or its text)."""
    start = start if isinstance(start, StartPoint) else StartPoint.parse(start)
    if start.kind == "latest-full":
        raise ReaderError("'latest-full' needs the table's rows: use hybrid_read (or the "
                          "`dbt-logstore tail MODEL` command, which reads them through dbt).")
    records = ChangelogReader(bootstrap_servers, topic, table, **client_config).changes(
        start, follow=follow, idle_seconds=idle_seconds, timeout_seconds=timeout_seconds)
    return Normalizer().apply(records) if normalize else records


def hybrid_read(table_rows: Iterable[Tuple[Optional[Dict[str, Any]], Dict[str, Any]]],
                table_snapshot: int, bootstrap_servers: str, topic: str, follow: bool = False,
                normalize: bool = False, idle_seconds: float = 1.0, table: Optional[str] = None,
                **client_config: Any) -> Iterator[ChangeRecord]:
    """Paimon's hybrid read ('latest-full'): the table's rows as of snapshot `table_snapshot`
    (op 'r', as (key, row) pairs), then the log's changes after that snapshot, from its stored
    offsets: no gap, no overlap."""
    reader = ChangelogReader(bootstrap_servers, topic, table, **client_config)
    after, offsets = start_after(reader.confirmations(), StartPoint("snapshot", snapshot=table_snapshot))

    def records() -> Iterator[ChangeRecord]:
        for key, row in table_rows:
            yield ChangeRecord(-1, -1, key, "r", None, row, 0, table_snapshot)
        yield from reader.changes(follow=follow, idle_seconds=idle_seconds,
                                  after_snapshot=after, from_offsets=offsets)

    return Normalizer().apply(records()) if normalize else records()
