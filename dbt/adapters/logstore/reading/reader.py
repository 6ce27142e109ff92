"""The reader: a logged table's changelog, from a start point, each committed change once.

It follows the consumer rules of docs/log-format.md on any log system, through its read side
(log_system.LogReader, opened by `open_log`): the confirmations are read from the control topic,
then one live read (LogFeed) of every data partition and the control topic delivers a data
record when a control record confirms its attempt (control_records.ConfirmedAttempts: the
rule, shared with logstore_changes), drops it when another attempt of its snapshot or a later
snapshot is confirmed, and holds it back until then. Within a partition records are delivered
in offset order.

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
  latest-generation, generation:N
                from the start of the log's latest (or N-th) generation: the table's complete
                rows as of a table version, then every change after (lifecycle/generations.py)

Where a generation after the first starts (its confirmation read, before any of its rows), the
reader delivers a record of op 'g' (replay.GENERATION_STARTS, no row), and every record of that
snapshot carries the generation's number (ChangeRecord.generation): a replica drops the rows
whose last change is older (replay.ResetRule), also for a generation of no rows. A start point
whose records the broker has deleted (retention) is refused, naming the generation that still
reaches the table.
"""
from __future__ import annotations

import time
from collections import defaultdict, deque
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Deque, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from dbt.adapters.logstore.log.control_records import (
    DELIVER, HOLD, Confirmation, ConfirmedAttempts, RecordTags,
)
from dbt.adapters.logstore.formats import decode_record, is_tombstone_after_delete
from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.log.log_system import (
    DEFAULT_SYSTEM, LogFeed, LogReader, LogRecord, ModelLog, ReaderError, open_model_log,
)
from dbt.adapters.logstore.log.lifecycle.generations import generations, reachable
from dbt.adapters.logstore.reading.replay import ChangeRecord, Normalizer, generation_starts

START_KINDS = ("earliest", "latest", "snapshot:N", "timestamp:T", "latest-full",
               "latest-generation", "generation:N")


class UsageError(ReaderError):
    """What was asked cannot be served as asked (a start point not known or not in the log, a
    name that is not a logged model): the asker has to change the request. The other
    ReaderErrors are the log's (unreachable, refused, missing), and asking again may work."""


@dataclass(frozen=True)
class StartPoint:
    kind: str
    snapshot: Optional[int] = None
    timestamp_ms: Optional[int] = None
    generation: Optional[int] = None

    @classmethod
    def parse(cls, text: str) -> "StartPoint":
        raw = str(text).strip()
        kind, _, arg = raw.replace("=", ":").partition(":")
        kind = kind.strip().lower()
        if kind in ("earliest", "latest", "latest-full", "latest-generation") and not arg:
            return cls(kind)
        if kind == "snapshot" and arg.strip().isdigit():
            return cls("snapshot", snapshot=int(arg))
        if kind == "generation" and arg.strip().isdigit():
            return cls("generation", generation=int(arg))
        if kind == "timestamp" and arg.strip():
            return cls("timestamp", timestamp_ms=_timestamp_ms(arg.strip()))
        raise UsageError(f"Start point '{text}' is not known. Allowed: {', '.join(START_KINDS)} "
                         f"(N a snapshot id, T epoch milliseconds or an ISO-8601 time).")

    def __str__(self) -> str:
        if self.kind == "snapshot":
            return f"snapshot:{self.snapshot}"
        if self.kind == "timestamp":
            return f"timestamp:{self.timestamp_ms}"
        if self.kind == "generation":
            return f"generation:{self.generation}"
        return self.kind


def _timestamp_ms(text: str) -> int:
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"Timestamp '{text}' is neither epoch milliseconds nor ISO-8601 "
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
            raise UsageError(f"Snapshot {start.snapshot} is not in the log: it has no snapshot yet.")
        return 0, {}
    if start.kind in ("latest-generation", "generation"):
        found = generations(confirmations)
        chosen = found[-1] if start.kind == "latest-generation" else next(
            (g for g in found if g.number == start.generation), None)
        if chosen is None:
            numbers = ", ".join(str(g.number) for g in found)
            raise UsageError(f"Generation {start.generation} is not in the log. Allowed: {numbers}.")
        return chosen.snapshot - 1, dict(chosen.start_offsets)
    if start.kind in ("latest", "latest-full"):
        last = confirmations[-1]
        return last.snapshot, dict(last.end_offsets)
    if start.kind == "snapshot":
        for c in confirmations:
            if c.snapshot == start.snapshot:
                return c.snapshot, dict(c.end_offsets)
        raise UsageError(
            f"Snapshot {start.snapshot} is not in the log. Allowed: 0 (the start) or a snapshot "
            f"from {confirmations[0].snapshot} to {confirmations[-1].snapshot}.")
    if start.kind == "timestamp":
        before = [c for c in confirmations if c.ts_ms < int(start.timestamp_ms or 0)]
        return (before[-1].snapshot, dict(before[-1].end_offsets)) if before else (0, {})
    raise UsageError(f"Start point '{start}' is not known. Allowed: {', '.join(START_KINDS)}.")


def open_log(log: Union[LogConfig, ModelLog, str], topic: Optional[str] = None,
             **client_properties: Any) -> LogReader:
    """The read side of a model's log: of the log a command or run resolved (a ModelLog), or on
    the log system its config names; or, with `log` the address (bootstrap servers) of a
    `topic`, of that topic on the default log system (`client_properties` as a profile's
    `kafka_properties`)."""
    if isinstance(log, str):
        log = topic_log(log, str(topic), **client_properties)
    return (log if isinstance(log, ModelLog) else open_model_log(log)).open_reader()


def topic_log(address: str, topic: str, **client_properties: Any) -> LogConfig:
    """The log of `topic` at `address` (bootstrap servers) on the default log system, as
    open_log reads it (`client_properties` as a profile's `kafka_properties`)."""
    return LogConfig(model=topic, system=DEFAULT_SYSTEM, topic=topic, bootstrap_servers=address,
                     client_properties=dict(client_properties))


class ChangelogReader:
    """Reads one logged table's changelog (its topic and control topic) through its log
    system's read side; `table` None reads every table's records of the topic."""

    def __init__(self, log: LogReader, table: Optional[str] = None) -> None:
        self.log, self.topic, self.table = log, log.topic, table

    def confirmations(self, timeout_seconds: float = 60.0) -> List[Confirmation]:
        """The committed snapshots so far, in snapshot order (the first confirmation of a snapshot
        counts; the protocol writes one)."""
        found: Dict[int, Confirmation] = {}
        for record in self.log.control_records(timeout_seconds):
            c = Confirmation.from_record(record.value)
            if self.table in (None, c.table):
                found.setdefault(c.snapshot, c)
        return [found[s] for s in sorted(found)]

    def changes(self, start: StartPoint = StartPoint("earliest"), follow: bool = False,
                idle_seconds: float = 1.0, timeout_seconds: Optional[float] = 60.0,
                after_snapshot: Optional[int] = None, up_to_snapshot: Optional[int] = None,
                from_offsets: Optional[Dict[int, int]] = None) -> Iterator[ChangeRecord]:
        """Each committed change from `start` (or from `after_snapshot` at `from_offsets`), in
        partition offset order, up to the log's current end, or forever with `follow`, or up to
        `up_to_snapshot` inclusive."""
        if after_snapshot is None:
            confirmations = self.confirmations()
            after_snapshot, from_offsets = start_after(confirmations, start)
            self._check_held(confirmations, start, from_offsets)
        partitions = sorted(self.log.end_offsets())
        if not partitions:
            raise ReaderError(f"Topic '{self.topic}' does not exist on {self.log.address}: check "
                              f"the topic name and the servers (a logged model's first run "
                              f"creates its topic).")
        feed = self.log.feed(partitions, from_offsets or {})
        try:
            yield from self._deliver(feed, after_snapshot, up_to_snapshot, follow, idle_seconds,
                                     timeout_seconds)
        finally:
            feed.close()

    def _check_held(self, confirmations: List[Confirmation], start: StartPoint,
                    from_offsets: Dict[int, int]) -> None:
        """Refuse a start point whose records the broker has deleted (retention), naming the
        generation that still reaches the table."""
        if not confirmations or start.kind in ("latest", "latest-full", "timestamp"):
            return
        log_starts = self.log.start_offsets()
        deleted = {p: o for p, o in log_starts.items() if from_offsets.get(p, 0) < o}
        if not deleted:
            return
        held = reachable(generations(confirmations), log_starts)
        where = ", ".join(f"partition {p} now starts at offset {o}" for p, o in sorted(deleted.items()))
        offer = (f"Start at 'generation:{held.number}' ({held.describe()}, the oldest still "
                 f"whole) or 'latest-generation', where the table's complete rows start."
                 if held is not None else
                 "No complete copy of the table is left in the log: its next run re-bases it on "
                 "the table (with 'log.on-lost: restart'), or run dbt run-operation "
                 "logstore_resnapshot.")
        raise UsageError(f"The records of '{self.topic}' from '{start}' on are no longer all in "
                         f"the topic (deleted by retention: {where}). {offer}")

    def _deliver(self, feed: LogFeed, after_snapshot: int, up_to: Optional[int], follow: bool,
                 idle_seconds: float, timeout_seconds: Optional[float]) -> Iterator[ChangeRecord]:
        confirmed = ConfirmedAttempts(self.table)
        queues: Dict[int, Deque[LogRecord]] = defaultdict(deque)
        deadline = None if (follow or timeout_seconds is None) else time.monotonic() + timeout_seconds
        idle_since = time.monotonic()
        while True:
            control, data = feed.poll(timeout_ms=200)
            if control or data:
                idle_since = time.monotonic()
            for record in control:
                confirmation = Confirmation.from_record(record.value)
                confirmed.add(confirmation)
                if self._starts_generation(confirmation, after_snapshot, up_to):
                    # before any of its rows (they wait for it): even an empty one resets
                    yield generation_starts(confirmation.snapshot, confirmation.generation or 1,
                                            confirmation.ts_ms)
            for partition, records in data.items():
                queues[partition].extend(records)
            for partition in feed.partitions:
                queue = queues[partition]
                while queue:
                    record = queue[0]
                    tags = RecordTags.of(record.headers)
                    verdict = confirmed.verdict(tags, partition, record.offset)
                    if verdict == HOLD:
                        break  # not confirmed yet: hold the partition back
                    queue.popleft()
                    if verdict == DELIVER and after_snapshot < tags.snapshot \
                            and (up_to is None or tags.snapshot <= up_to) \
                            and not is_tombstone_after_delete(record.headers):
                        change = decode_record(record, tags.snapshot)
                        yield change if tags.generation is None else replace(
                            change, generation=tags.generation)
            if up_to is not None and confirmed.newest >= up_to \
                    and self._past(feed, up_to, confirmed):
                return
            if not follow and feed.at_end() and time.monotonic() - idle_since >= idle_seconds:
                return  # held records belong to attempts no one confirmed (yet)
            if deadline is not None and time.monotonic() > deadline:
                raise ReaderError(f"Reading '{self.topic}' did not reach its end within "
                                  f"{timeout_seconds:.0f} s.")

    def _starts_generation(self, confirmation: Confirmation, after_snapshot: int,
                           up_to: Optional[int]) -> bool:
        """A re-base of this table's log starts at `confirmation`, within what is delivered (the
        first generation is the log's start: nothing before it to supersede)."""
        return (confirmation.generation_start is not None and (confirmation.generation or 1) > 1
                and self.table in (None, confirmation.table)
                and after_snapshot < confirmation.snapshot
                and (up_to is None or confirmation.snapshot <= up_to))

    @staticmethod
    def _past(feed: LogFeed, up_to: int, confirmed: ConfirmedAttempts) -> bool:
        """Every record of snapshots up to `up_to` has been read."""
        ends: Dict[int, int] = {}
        for c in confirmed.attempts.values():
            if c.snapshot <= up_to:
                for p, (_, last) in c.offsets.items():
                    ends[p] = max(ends.get(p, 0), last + 1)
        return all(feed.position(p) >= ends.get(p, 0) for p in feed.partitions)


def read_changelog(log: Union[LogConfig, str], topic: Optional[str] = None, start: Any = "earliest",
                   follow: bool = False, normalize: bool = False, idle_seconds: float = 1.0,
                   timeout_seconds: float = 60.0, table: Optional[str] = None,
                   **client_properties: Any) -> Iterator[ChangeRecord]:
    """Yield the confirmed changes from `start` (a StartPoint or its text) of a model's log
    (its LogConfig), or of `topic` on the bootstrap servers `log` names (see open_log)."""
    start = start if isinstance(start, StartPoint) else StartPoint.parse(start)
    if start.kind == "latest-full":
        raise UsageError("'latest-full' needs the table's rows: use hybrid_read (or the "
                         "`dbt-logstore tail MODEL` command, which reads them through dbt).")
    records = ChangelogReader(open_log(log, topic, **client_properties), table).changes(
        start, follow=follow, idle_seconds=idle_seconds, timeout_seconds=timeout_seconds)
    return Normalizer().apply(records) if normalize else records


def hybrid_read(table_rows: Iterable[Tuple[Optional[Dict[str, Any]], Dict[str, Any]]],
                table_snapshot: int, log: Union[LogConfig, str], topic: Optional[str] = None,
                follow: bool = False, normalize: bool = False, idle_seconds: float = 1.0,
                table: Optional[str] = None, **client_properties: Any) -> Iterator[ChangeRecord]:
    """Paimon's hybrid read ('latest-full'): the table's rows as of snapshot `table_snapshot`
    (op 'r', as (key, row) pairs), then the log's changes after that snapshot, from its stored
    offsets: no gap, no overlap. `log` and `topic` as for read_changelog."""
    reader = ChangelogReader(open_log(log, topic, **client_properties), table)
    after, offsets = start_after(reader.confirmations(), StartPoint("snapshot", snapshot=table_snapshot))

    def records() -> Iterator[ChangeRecord]:
        for key, row in table_rows:
            yield ChangeRecord(-1, -1, key, "r", None, row, 0, table_snapshot)
        yield from reader.changes(follow=follow, idle_seconds=idle_seconds,
                                  after_snapshot=after, from_offsets=offsets)

    return Normalizer().apply(records()) if normalize else records()
