"""The Kafka log system's read side (log_system.LogReader): the one place that builds consumers
(read_committed, with the profile's client properties), scans a control topic to its end, reads
a partition's offset range and feeds a live read. Records leave here as log_system.LogRecord,
kafka-python's errors as ReaderError in plain words (errors.kafka_failure), so nothing above
needs kafka-python's types."""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from dbt.adapters.logstore.log.kafka.config import KafkaClients, resolve_clients
from dbt.adapters.logstore.log.kafka.errors import kafka_failure
from dbt.adapters.logstore.log.kafka.retrying import start_client, with_retries
from dbt.adapters.logstore.config.log_config import LogConfig, control_topic_for
from dbt.adapters.logstore.log.log_system import LogFeed, LogReader, LogRecord, ReaderError

POLL_MS = 200
# Read to the end: this many empty polls in a row once every partition is at its high
# watermark (which is unknown until the first fetch answers: not being at the end yet).
END_POLLS = 3
# At a stable offset below the high watermark: this many empty polls (3 s) end the read there.
HELD_BACK_POLLS = 15
# One try at a partition's offsets. kafka-python's offsets lookup keeps asking the leader its
# metadata named when the consumer started, and that metadata is not refreshed while the try
# lasts: a consumer started just after the leader was killed waits out its whole timeout even
# once the cluster has moved the leadership (about 9 s, broker.session.timeout.ms), so a read
# took 15 s a try and failed a run in a rolling restart. Short tries, each a fresh consumer
# with fresh metadata (retrying.with_retries), read the offsets as soon as the leader moved.
OFFSETS_TRY_MS = 4000


def _record(msg: Any) -> LogRecord:
    return LogRecord(msg.partition, msg.offset, msg.key, msg.value, tuple(msg.headers or ()))


def _caught_up(consumer: Any, partitions: Sequence[Any]) -> bool:
    return all(consumer.highwater(tp) is not None  # None until the first fetch answers
               and consumer.position(tp) >= consumer.highwater(tp) for tp in partitions)


class KafkaLogReader(LogReader):
    """A log's topic and control topic on Kafka. Keeps only settings (no consumer) between
    calls, so it pickles into Spark tasks."""

    def __init__(self, log: LogConfig, clients: Optional[KafkaClients] = None) -> None:
        # `clients`: resolved by the log system for the run (resolved here for a reader alone)
        clients = clients or resolve_clients(log)
        self.model, self.address = log.model, clients.servers
        self.servers_setting = clients.setting  # where the servers came from, for errors
        self.topic = str(log.topic)
        self.control_topic = control_topic_for(self.topic)
        self.config: Dict[str, Any] = dict(clients.consumer)

    def failure(self, exc: BaseException) -> ReaderError:
        """A client error, in plain words (kafka-python's recent warnings name the cause)."""
        return ReaderError(kafka_failure(self.model, self.address, exc, changed="",  # a read changes nothing
                                         setting=self.servers_setting).msg)

    def consumer(self) -> Any:
        """The one consumer this log system reads with: assigned partitions (no group join: no
        rebalance, no offsets committed), committed records only (an aborted attempt's records
        never arrive), from the earliest record kept when a position is out of range."""
        return self._talk(self._consumer, "starting a consumer")

    def _consumer(self, isolation_level: str = "read_committed") -> Any:
        from kafka import KafkaConsumer

        return start_client(KafkaConsumer, self.config, group_id=None, enable_auto_commit=False,
                            isolation_level=isolation_level, auto_offset_reset="earliest")

    def _talk(self, conversation: Callable[[], Any], doing: str) -> Any:
        """One conversation (its own consumer), tried again while a node is down
        (retrying.with_retries); kafka-python's errors in plain words."""
        from kafka.errors import KafkaError

        try:
            return with_retries(conversation, self.config, doing)
        except KafkaError as exc:
            raise self.failure(exc) from exc

    def control_records(self, timeout_seconds: float = 60.0) -> List[LogRecord]:
        return self.records_to_end(self.control_topic, timeout_seconds)

    def records_to_end(self, topic: str, timeout_seconds: float = 60.0) -> List[LogRecord]:
        """The committed records of one-partition topic `topic` (a control topic, a run topic),
        read to its end; [] when it does not exist."""
        return self._talk(lambda: self._records_to_end(topic, timeout_seconds),
                          f"reading {'the control topic' if topic == self.control_topic else topic}")

    def _records_to_end(self, topic: str, timeout_seconds: float) -> List[LogRecord]:
        from kafka import TopicPartition

        consumer = self._consumer()
        try:
            if not consumer.partitions_for_topic(topic):
                return []
            control = TopicPartition(topic, 0)
            consumer.assign([control])
            # Read to its end: past the last stable offset (what a read_committed reader may
            # read) and the high watermark, in one or two polls. A transaction left open (a
            # writer killed mid-commit, not fenced yet) holds the stable offset back on Apache
            # Kafka: the records before it are all there is, and a few empty polls end the
            # read. (The embedded broker reports a stable offset that lags: the high watermark
            # and the empty polls decide there.)
            stable = consumer.end_offsets([control], OFFSETS_TRY_MS).get(control)
            consumer.seek_to_beginning(control)
            self.held_back = None
            found: List[LogRecord] = []
            idle, stalled, deadline = 0, 0, time.monotonic() + timeout_seconds
            while idle < END_POLLS:
                if time.monotonic() > deadline:
                    raise ReaderError(
                        f"Model '{self.model}': could not read the topic "
                        f"'{topic}' to its end within {timeout_seconds:.0f} s")
                batches = consumer.poll(timeout_ms=POLL_MS)
                found.extend(_record(msg) for msg in batches.get(control, []))
                caught_up = _caught_up(consumer, [control])
                if stable is None:  # no stable offset reported: empty polls at the high watermark
                    idle = idle + 1 if (not batches and caught_up) else 0
                    continue
                at_stable = consumer.position(control) >= stable
                if at_stable and caught_up:
                    break  # at the high watermark: everything is read
                # below the high watermark at the stable offset: a transaction left open holds
                # the rest back (Apache Kafka), or the stable offset lags (the embedded broker):
                # empty polls for longer before the records up to it are taken as all there is
                fetched = consumer.highwater(control) is not None
                held_back = at_stable and fetched and not batches
                stalled = stalled + 1 if held_back else 0
                if stalled >= HELD_BACK_POLLS:
                    # the records from here to the high watermark exist but are not readable
                    # yet: callers must not take a confirmation missing from `found` as lost
                    self.held_back = (consumer.position(control), consumer.highwater(control))
                    break
            return found
        finally:
            consumer.close()

    def tails(self, topics: Sequence[str], tail: int = 16,
              timeout_seconds: float = 60.0) -> Dict[str, List[LogRecord]]:
        """The committed records among the last `tail` offsets of each one-partition topic
        ([]: the topic is empty or missing), read by one consumer. A topic whose tail holds no
        committed record though it is not empty (aborted transactions, or a transaction still
        open) is left out: its caller reads it whole."""
        return self._talk(lambda: self._tails(topics, tail, timeout_seconds),
                          f"reading the last records of {', '.join(topics[:3])}"
                          + (f" and {len(topics) - 3} more topics" if len(topics) > 3 else ""))

    def _tails(self, topics: Sequence[str], tail: int,
               timeout_seconds: float) -> Dict[str, List[LogRecord]]:
        from kafka import TopicPartition

        consumer = self._consumer()
        try:
            existing = {t for t in topics if consumer.partitions_for_topic(t)}
            found: Dict[str, List[LogRecord]] = {t: [] for t in topics if t not in existing}
            parts = [TopicPartition(t, 0) for t in topics if t in existing]
            if not parts:
                return found
            ends = consumer.end_offsets(parts, OFFSETS_TRY_MS)  # read_committed: the stable ends
            consumer.assign(parts)
            for tp in parts:
                consumer.seek(tp, max(0, int(ends[tp]) - tail))
            read: Dict[str, List[LogRecord]] = {}
            waiting = {tp for tp in parts if ends[tp] > 0}
            idle, deadline = 0, time.monotonic() + timeout_seconds
            while waiting and idle < END_POLLS and time.monotonic() < deadline:
                batches = consumer.poll(timeout_ms=POLL_MS)
                for tp, msgs in batches.items():
                    read.setdefault(tp.topic, []).extend(_record(m) for m in msgs)
                waiting = {tp for tp in waiting if consumer.position(tp) < ends[tp]}
                idle = idle + 1 if not batches else 0
            for tp in parts:
                if ends[tp] == 0:
                    found[tp.topic] = []
                elif read.get(tp.topic) and tp not in waiting:
                    found[tp.topic] = read[tp.topic]
            return found
        finally:
            consumer.close()

    def end_offsets(self) -> Dict[int, int]:
        return self._talk(self._end_offsets, "reading the topic's end offsets")

    def _end_offsets(self) -> Dict[int, int]:
        from kafka import TopicPartition

        consumer = self._consumer()
        try:
            partitions = sorted(consumer.partitions_for_topic(self.topic) or [])
            ends = consumer.end_offsets([TopicPartition(self.topic, p) for p in partitions],
                                       OFFSETS_TRY_MS) \
                if partitions else {}
            return {tp.partition: int(offset) for tp, offset in ends.items()}
        finally:
            consumer.close()

    def offsets(self) -> Tuple[Dict[int, int], Dict[int, int]]:
        """Per data partition, the first offset still held and its high watermark (LogState's
        start and end offsets: what the broker holds, committed or not, so a transaction left
        open does not make a topic look emptied)."""
        return self._talk(self._offsets, "reading the topic's offsets")

    def _offsets(self) -> Tuple[Dict[int, int], Dict[int, int]]:
        from kafka import TopicPartition

        consumer = self._consumer("read_uncommitted")
        try:
            partitions = [TopicPartition(self.topic, p)
                          for p in sorted(consumer.partitions_for_topic(self.topic) or [])]
            if not partitions:
                return {}, {}
            starts = consumer.beginning_offsets(partitions, OFFSETS_TRY_MS)
            ends = consumer.end_offsets(partitions, OFFSETS_TRY_MS)
            return ({tp.partition: int(o) for tp, o in starts.items()},
                    {tp.partition: int(o) for tp, o in ends.items()})
        finally:
            consumer.close()

    def start_offsets(self) -> Dict[int, int]:
        return self.offsets()[0]

    def read_range(self, partition: int, start: int, end: int) -> Iterator[LogRecord]:
        from kafka import TopicPartition
        from kafka.errors import KafkaError

        consumer = self.consumer()
        try:
            tp = TopicPartition(self.topic, partition)
            consumer.assign([tp])
            consumer.seek(tp, start)
            while consumer.position(tp) < end:
                for msg in consumer.poll(timeout_ms=500).get(tp, []):
                    if msg.offset >= end:
                        break
                    yield _record(msg)
        except KafkaError as exc:
            raise self.failure(exc) from exc
        finally:
            consumer.close()

    def feed(self, partitions: Sequence[int], from_offsets: Dict[int, int]) -> LogFeed:
        from kafka import TopicPartition

        consumer = self.consumer()
        try:
            data = [TopicPartition(self.topic, p) for p in partitions]
            control = TopicPartition(self.control_topic, 0)
            consumer.assign(data + [control])
            consumer.seek_to_beginning(control)
            for tp in data:
                if from_offsets.get(tp.partition) is not None:
                    consumer.seek(tp, from_offsets[tp.partition])
                else:
                    consumer.seek_to_beginning(tp)
        except BaseException:
            consumer.close()
            raise
        return KafkaFeed(consumer, data, control, self.failure)


class KafkaFeed(LogFeed):
    """One consumer assigned the data partitions and the control topic: the reader's live
    read (reader.ChangelogReader)."""

    def __init__(self, consumer: Any, data: List[Any], control: Any,
                 failure: Callable[[BaseException], ReaderError]) -> None:
        self._consumer, self._data, self._control, self._failure = consumer, data, control, failure
        self._by_partition = {tp.partition: tp for tp in data}
        self.partitions = [tp.partition for tp in data]

    def poll(self, timeout_ms: int) -> Tuple[List[LogRecord], Dict[int, List[LogRecord]]]:
        from kafka.errors import KafkaError

        try:
            batches = self._consumer.poll(timeout_ms=timeout_ms)
        except KafkaError as exc:
            raise self._failure(exc) from exc
        control = [_record(msg) for msg in batches.get(self._control, [])]
        data = {tp.partition: [_record(msg) for msg in batches[tp]]
                for tp in self._data if batches.get(tp)}
        return control, data

    def position(self, partition: int) -> int:
        return self._consumer.position(self._by_partition[partition])

    def at_end(self) -> bool:
        return _caught_up(self._consumer, self._data + [self._control])

    def close(self) -> None:
        self._consumer.close()


Offsets = Tuple[Dict[int, int], Dict[int, int]]


def partition_offsets(admin: Any, topic: str, partitions: Iterable[int]) -> Offsets:
    """KafkaLogReader.offsets, asked in an admin conversation that has described the topic
    (`partitions`: its partitions), as the log system's observe does on every logged model's
    run: a consumer of its own costs its first metadata, about 0.1 s on Apache Kafka."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    tps = [TopicPartition(topic, p) for p in sorted(partitions)]
    if not tps:
        return {}, {}
    starts, ends = (admin.list_partition_offsets({tp: spec for tp in tps}, timeout_ms=OFFSETS_TRY_MS)
                    for spec in (OffsetSpec.EARLIEST, OffsetSpec.LATEST))
    return ({tp.partition: int(o.offset) for tp, o in starts.items()},
            {tp.partition: int(o.offset) for tp, o in ends.items()})
