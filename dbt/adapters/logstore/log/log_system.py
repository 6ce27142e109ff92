"""The pluggable log-system interface, both sides: writing a commit (LogWriter) and reading a
log (LogReader, LogFeed, records as LogRecord). Kafka is the implementation (the kafka
sub-package); others plug in by name. Everything above this interface (the commit protocol, the
reader, status, logstore_changes) names no client library, so it works on any log system."""
from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore.config.log_config import LogConfig


@dataclass
class WriteResult:
    """What one commit wrote: record count and, per partition, [first offset, next offset)."""

    topic: str
    records: int = 0
    offsets: Dict[int, "tuple[int, int]"] = field(default_factory=dict)
    # Kafka transactions the records took: a long write commits along the way, each
    # transaction well inside transaction.timeout.ms (see kafka.writer.TransactionClock)
    transactions: int = 1
    longest_transaction_s: float = 0.0  # from its begin to its commit, for the longest one

    def acknowledge(self, partition: int, offset: int) -> None:
        first, nxt = self.offsets.get(partition, (offset, offset + 1))
        self.offsets[partition] = (min(first, offset), max(nxt, offset + 1))


class LogWriter(ABC):
    """Writes the records of one table commit; nothing is visible before `commit` in
    transactional mode."""

    @abstractmethod
    def send(self, key: Optional[bytes], value: Optional[bytes], route: bytes,
             headers: Sequence[Tuple[str, bytes]] = ()) -> None:
        """Queue one record (a None value is a tombstone). `route` places keyless records:
        equal rows share a partition."""

    def send_beside(self, topic: str, key: bytes, value: bytes) -> None:
        """Queue a record for another topic of the log (Debezium's transaction topic), in the
        same transaction as the records; it is not part of what the confirmation states."""
        raise NotImplementedError(f"{type(self).__name__} writes no other topic")

    @abstractmethod
    def commit(self, confirmation: Optional[Callable[[WriteResult], Tuple[bytes, bytes]]]) -> WriteResult:
        """Make every queued record durable, then write the confirmation (key, value) that
        `confirmation` builds from what was written to the control topic — in the same
        transaction for transactional logs — and make it all visible. Without a confirmation
        (one task's share of a parallel write) only the records are committed."""

    @abstractmethod
    def abort(self) -> None:
        """Discard the records of this commit where the log supports it; always release."""


class ReaderError(ValueError):
    """A start point or a read that cannot be served (the message says what is allowed, or
    why the log could not be read). Raised by the reader and by a log system's read side alike,
    so readers above catch one type whatever the log system."""


@dataclass(frozen=True)
class LogRecord:
    """One record as a log system's read side hands it out: no client library's type, so the
    readers above (and formats.decode_record, which reads these attribute names) work on any
    log system. `headers` are (name, bytes) pairs, as written."""

    partition: int
    offset: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: Sequence[Tuple[str, bytes]] = ()


class LogFeed(ABC):
    """A live read of one log: its data partitions from chosen offsets and its control topic
    from its start, in one session, so a reader sees the confirmations arrive along with the
    records they confirm (the reader's delivery, which may follow the log forever)."""

    partitions: List[int]

    @abstractmethod
    def poll(self, timeout_ms: int) -> Tuple[List[LogRecord], Dict[int, List[LogRecord]]]:
        """The records that came within `timeout_ms`: (control records, data records per
        partition), each in offset order; both empty when none came."""

    @abstractmethod
    def position(self, partition: int) -> int:
        """The offset of the next data record this feed reads in `partition`."""

    @abstractmethod
    def at_end(self) -> bool:
        """Every data partition and the control topic read to its current end."""

    @abstractmethod
    def close(self) -> None:
        """Release the session."""


class LogReader(ABC):
    """The read side of one log (its topic and control topic): committed records only, so an
    aborted attempt's records never reach a reader where the log system can tell. Holds no open
    session (each call opens and closes its own), so it can be shipped to Spark tasks."""

    topic: str
    address: str  # where the log is, for messages (Kafka: its bootstrap servers)
    # after control_records: the offsets (first not read, end) of control records that exist
    # but were held back from committed reads (an open transaction); None: read to the end
    held_back: Optional[Tuple[int, int]] = None

    @abstractmethod
    def control_records(self, timeout_seconds: float = 60.0) -> List[LogRecord]:
        """The control topic from its start to its end, in order: the one scan that recovery,
        the reader, `status` and logstore_changes() all take their confirmations from. [] when
        it does not exist; ReaderError when its end is not reached within `timeout_seconds`."""

    @abstractmethod
    def end_offsets(self) -> Dict[int, int]:
        """The data partitions, each with the offset after its last committed record; {} when
        the topic does not exist."""

    def start_offsets(self) -> Dict[int, int]:
        """The data partitions, each with the first offset it still holds (retention deletes
        from the start); {} where the log system cannot tell."""
        return {}

    @abstractmethod
    def read_range(self, partition: int, start: int, end: int) -> Iterator[LogRecord]:
        """The committed data records of one partition with offsets in [start, end), in order
        (logstore_changes reads a confirmed range so, in a Spark task or in dbt)."""

    @abstractmethod
    def feed(self, partitions: Sequence[int], from_offsets: Dict[int, int]) -> LogFeed:
        """A live read of `partitions` (from `from_offsets`; a partition absent from it from
        its start) and of the control topic from its start."""


class LogWriteInterrupted(DbtRuntimeError):
    """A write the log's brokers broke off in a way a new attempt heals: a node went down with
    a partition's leader or the transaction coordinator, and the client had to abort the
    transaction (nothing of it is confirmed). The mirror writes the change set again, once."""


class SqlWriteUnconfirmed(DbtRuntimeError):
    """A write through SQL (LogSystem.sql_tasks) whose records could not be confirmed: none of
    them is, and the change set is written another way."""


@dataclass(frozen=True)
class LogState:
    """What a log is right now, as its log system sees it, read without changing anything
    (LogSystem.observe): whose cluster, which incarnation of each topic, which records it still
    holds, and what it is set to keep. lifecycle/identity.py compares it with what the table
    recorded. An id the log system cannot tell is None (then it is not compared)."""

    known: bool = True  # False: the log system cannot observe its logs (nothing is compared)
    cluster_id: Optional[str] = None
    topic_exists: bool = False
    topic_id: Optional[str] = None
    control_topic_exists: bool = False
    control_topic_id: Optional[str] = None
    # per partition: the first offset still held (retention moves it) and the offset after the last
    start_offsets: Dict[int, int] = field(default_factory=dict)
    end_offsets: Dict[int, int] = field(default_factory=dict)
    # the data topic's settings that decide what it keeps (cleanup.policy, retention.ms,
    # retention.bytes), where the log system reports them
    settings: Dict[str, str] = field(default_factory=dict)
    # the control records, from the control topic's start (what every check reads them from)
    control_records: Tuple[LogRecord, ...] = ()
    # control records that exist but were held back (LogReader.held_back): what was read of
    # the control topic is not all of it, so a missing confirmation proves nothing
    control_held_back: Optional[Tuple[int, int]] = None


class LogSystem(ABC):
    name: str

    def observe(self, log: LogConfig, control_created: bool = False) -> LogState:
        """The log's state (LogState), creating nothing: what every run checks before its
        table changes, and `status`. A log system that cannot tell says so (nothing is checked).
        `control_created`: this run created the control topic just now (under the model's
        lock), so it holds no record and is not read."""
        return LogState(known=False)

    @abstractmethod
    def prepare(self, log: LogConfig) -> int:
        """Check the log is reachable and its topic exists (creating it), before the table
        changes; returns the topic's partition count."""

    @abstractmethod
    def check(self, log: LogConfig) -> "list[str]":
        """`dbt debug`: one line per check passed (reachable, topics creatable); raises on failure."""

    @abstractmethod
    def find_confirmation(self, log: LogConfig, table_id: str, changeset: str) -> Optional[Dict[str, Any]]:
        """The committed confirmation of a change set, if the control topic holds one."""

    @abstractmethod
    def open_writer(self, log: LogConfig, writer_id: str) -> LogWriter:
        """A writer for one commit; `writer_id` identifies the table (fences older writers)."""

    def sql_tasks(self, log: LogConfig, query: Callable[[str], List[Tuple[Any, ...]]],
                  changes_relation: str, sink_relation: str) -> Optional[Any]:
        """A parallel mirror's `run_tasks` (log_snapshots.write_change_set_parallel) that
        writes through SQL alone (`query`: a Thrift Server's session), with a `close()` to call
        after it; None when this log system or this log cannot (the cursor then carries the
        rows). It raises SqlWriteUnconfirmed when what it wrote cannot be confirmed. The Kafka
        log system: Spark's own Kafka writer (kafka/spark_writer.py)."""
        return None

    @abstractmethod
    def open_reader(self, log: LogConfig) -> LogReader:
        """The read side of the log (the profile's client properties applied): what recovery,
        the reader, `status` and logstore_changes() read it through."""

    def write_run_record(self, log: LogConfig, topic: str, writer_id: str, key: bytes,
                         value: bytes) -> None:
        """Write one run record (log/run_records.py) to the project's run topic `topic` on
        `log`'s cluster, creating the topic, committed on its own (`writer_id`)."""
        raise NotImplementedError(f"the {self.name!r} log system keeps no run records")

    def run_records(self, log: LogConfig, topic: str, last_only: bool = False) -> List[LogRecord]:
        """Every committed record of run topic `topic` on `log`'s cluster, in order (with
        `last_only`, the last one alone: [] when there is none)."""
        raise NotImplementedError(f"the {self.name!r} log system keeps no run records")

    def control_tails(self, logs: Sequence[LogConfig]) -> Dict[str, List[LogRecord]]:
        """Per log's topic, the last records of its control topic (at least the last one; []:
        none yet), for the run record's models a run did not build. A log system that can read
        many at once overrides this (Kafka: one consumer for all, from near each end)."""
        return {str(log.topic): self.open_reader(log).control_records() for log in logs}


_REGISTRY: Dict[str, Callable[[], LogSystem]] = {}
# The built-in log systems, by the module and class that implement them: imported when first
# asked for (kafka-python stays off the import path of models without a log), by name, so
# that this interface never imports its implementations back.
BUILT_IN = {"kafka": "dbt.adapters.logstore.log.kafka.log_system:KafkaLogSystem"}
# The log system of a log named by its address and topic alone, without a model's config
# (`dbt-logstore tail TOPIC --bootstrap-servers`, reader.read_changelog).
DEFAULT_SYSTEM = "kafka"


def register(name: str, factory: Callable[[], LogSystem]) -> None:
    """Plug in a log system of another name (or replace one, in tests)."""
    _REGISTRY[name] = factory


def get_log_system(name: str) -> LogSystem:
    if name not in _REGISTRY and name in BUILT_IN:
        module, attribute = BUILT_IN[name].split(":")
        register(name, getattr(importlib.import_module(module), attribute))
    if name not in _REGISTRY:
        known = sorted({*_REGISTRY, *BUILT_IN})
        raise ValueError(f"unknown log system {name!r}; known: {', '.join(known)}")
    return _REGISTRY[name]()


@dataclass(frozen=True)
class ModelLog:
    """One model's log for one run: its options and its log system, resolved once
    (`open_model_log`, by the adapter or a command) and handed down to the stages that talk to
    the log, none of which looks up the system, the clients' settings or the address again (the
    system keeps what it resolved for this log: the Kafka system, its clients' settings)."""

    config: LogConfig
    system: LogSystem

    def with_config(self, config: LogConfig) -> "ModelLog":
        """The same log system for other options of the same log (a continuing log's stored
        shape, a log re-based as a new generation)."""
        return self if config is self.config else ModelLog(config, self.system)

    def observe(self, control_created: bool = False) -> LogState:
        return self.system.observe(self.config, control_created)

    def prepare(self) -> int:
        return self.system.prepare(self.config)

    def check(self) -> "list[str]":
        return self.system.check(self.config)

    def find_confirmation(self, table_id: str, changeset: str) -> Optional[Dict[str, Any]]:
        return self.system.find_confirmation(self.config, table_id, changeset)

    def open_writer(self, writer_id: str) -> LogWriter:
        return self.system.open_writer(self.config, writer_id)

    def sql_tasks(self, query: Callable[[str], List[Tuple[Any, ...]]], changes_relation: str,
                  sink_relation: str) -> Optional[Any]:
        return self.system.sql_tasks(self.config, query, changes_relation, sink_relation)

    def open_reader(self) -> LogReader:
        return self.system.open_reader(self.config)

    def write_run_record(self, topic: str, writer_id: str, key: bytes, value: bytes) -> None:
        self.system.write_run_record(self.config, topic, writer_id, key, value)

    def run_records(self, topic: str, last_only: bool = False) -> List[LogRecord]:
        return self.system.run_records(self.config, topic, last_only)


def open_model_log(config: LogConfig) -> ModelLog:
    """`config`'s log on its log system (log.system): the one lookup of a model's run."""
    return ModelLog(config, get_log_system(config.system))

