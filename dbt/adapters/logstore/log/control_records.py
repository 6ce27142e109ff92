"""Control records: the confirmation of one committed write attempt, one record per attempt in
the control topic (`<topic>` + names.CONTROL_TOPIC_SUFFIX, partition 0; docs/log-format.md,
section 3). Encoded here (`confirmation_record`, for the commit protocol's writers) and decoded
here (`parse_control_record`, and `Confirmation` for the readers), so both sides keep one format.
Which data records the confirmations confirm (section 5) is decided here too, once
(`ConfirmedAttempts`), for every reader and whatever the log system.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Mapping, Optional, Protocol, Sequence, Tuple

from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.log.log_system import WriteResult
from dbt.adapters.logstore.names import H_ATTEMPT, H_GENERATION, H_SNAPSHOT, H_TABLE, H_WRITER

Writer = Tuple[str, Optional[str]]  # (attempt, writer) as named by a record's headers


# What confirmation_record needs of log_snapshots' TableRef and Snapshot: named by shape,
# since log_snapshots imports this module (and the package has no import circle).
class _Table(Protocol):
    @property
    def writer_id(self) -> str: ...


class _Snapshot(Protocol):
    @property
    def end_offsets(self) -> Dict[int, int]: ...


@dataclass(frozen=True)
class ModelInput:
    """A logged model a snapshot's build read (its `ref()`), in the snapshot's confirmation
    (`inputs`, section 3): the input's snapshot as the build read it. `snapshot` None: which one
    is not known (`read_between`: the snapshots read before and after the build, None where a
    commit of the input was under way or not logged yet)."""

    name: str
    topic: Optional[str]  # None: a source logged before its table named its topic
    snapshot: Optional[int]
    read_between: Optional[Tuple[Optional[int], Optional[int]]] = None

    def to_json(self) -> Dict[str, Any]:
        value: Dict[str, Any] = {"name": self.name, "topic": self.topic or None, "snapshot": self.snapshot}
        if self.read_between is not None:
            value["read_between"] = list(self.read_between)
        return value

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> "ModelInput":
        between = value.get("read_between")
        return cls(name=str(value["name"]), topic=value.get("topic") or None,
                   snapshot=None if value.get("snapshot") is None else int(value["snapshot"]),
                   read_between=None if between is None else (between[0], between[1]))


def confirmation_record(log: LogConfig, table: _Table, snapshot_id: int, changeset: str,
                        attempt: str, previous: _Snapshot, result: WriteResult,
                        writers: Optional[Mapping[str, WriteResult]] = None,
                        table_version: Optional[str] = None, generation: int = 1,
                        starts_generation: bool = False,
                        inputs: Optional[Sequence[ModelInput]] = None) -> Tuple[bytes, bytes]:
    """The control-topic record confirming one committed write attempt (see docs/log-format.md).
    `writers`: for a parallel attempt, what each writer (Spark task attempt) wrote.
    `table_version`: the table format's version (Iceberg snapshot id, Delta version) the
    table commit of the snapshot made, for a table format that has one. `generation`: the
    log's generation (lifecycle/generations.py); `starts_generation`: this snapshot is its
    complete copy of the table, starting per partition at its first record (or, where it wrote
    none, at the partition's end). `inputs`: the logged models its build read (None: not known,
    a change set written by recovery, whose build was another run's)."""
    end_offsets = dict(previous.end_offsets)
    end_offsets.update({p: nxt for p, (_, nxt) in result.offsets.items()})
    value: Dict[str, Any] = {
        "table": table.writer_id, "topic": log.topic, "snapshot": snapshot_id,
        "changeset": changeset, "attempt": attempt, "records": result.records,
        "offsets": _ranges(result),
        "end_offsets": {str(p): o for p, o in sorted(end_offsets.items())},
        "ts_ms": int(time.time() * 1000),
        "transactions": result.transactions,
    }
    if writers is not None:
        value["writers"] = {name: _ranges(w) for name, w in sorted(writers.items())}
    if table_version is not None:
        value["table_version"] = table_version
    value["generation"] = generation
    if inputs is not None:
        value["inputs"] = [i.to_json() for i in sorted(inputs, key=lambda i: i.name)]
    if starts_generation:
        starts = {**end_offsets, **{p: first for p, (first, _) in result.offsets.items()}}
        value["generation_start"] = {str(p): o for p, o in sorted(starts.items())}
    return table.writer_id.encode(), json.dumps(value, separators=(",", ":")).encode()


def _ranges(result: WriteResult) -> Dict[str, list]:
    """Per partition, the inclusive [first, last] offsets a write acknowledged."""
    return {str(p): [a, b - 1] for p, (a, b) in sorted(result.offsets.items())}


def parse_control_record(value: bytes) -> Dict[str, Any]:
    """A control record's value as the JSON object confirmation_record wrote."""
    return json.loads(value)


@dataclass(frozen=True)
class Confirmation:
    """One control record: a committed write attempt of one snapshot."""

    table: str
    snapshot: int
    attempt: str
    offsets: Dict[int, Tuple[int, int]]  # partition -> (first, last), inclusive
    end_offsets: Dict[int, int]
    ts_ms: int
    records: int = 0
    # a parallel attempt: per writer (its H_WRITER header), its own ranges
    writers: Optional[Dict[str, Dict[int, Tuple[int, int]]]] = None
    table_version: Optional[str] = None  # the table format's version of the snapshot's rows
    generation: Optional[int] = None  # None: written before generations existed (generation 1)
    # a snapshot that starts a generation: per partition, where its complete copy starts
    generation_start: Optional[Dict[int, int]] = None
    inputs: Optional[Tuple[ModelInput, ...]] = None  # None: not recorded (see confirmation_record)

    @classmethod
    def from_json(cls, value: Dict[str, Any]) -> "Confirmation":
        writers, inputs = value.get("writers"), value.get("inputs")
        starts = value.get("generation_start")
        return cls(table=value["table"], snapshot=int(value["snapshot"]), attempt=value["attempt"],
                   offsets={int(p): (a, b) for p, (a, b) in value["offsets"].items()},
                   end_offsets={int(p): int(o) for p, o in value.get("end_offsets", {}).items()},
                   ts_ms=int(value.get("ts_ms", 0)), records=int(value.get("records", 0)),
                   writers=None if writers is None else {
                       w: {int(p): (a, b) for p, (a, b) in r.items()} for w, r in writers.items()},
                   table_version=value.get("table_version"),
                   generation=None if value.get("generation") is None else int(value["generation"]),
                   generation_start=None if starts is None else {
                       int(p): int(o) for p, o in starts.items()},
                   inputs=None if inputs is None else tuple(ModelInput.from_json(i) for i in inputs))

    @classmethod
    def from_record(cls, value: bytes) -> "Confirmation":
        """A control record's value, read."""
        return cls.from_json(parse_control_record(value))

    def ranges(self) -> Dict[Writer, Dict[int, Tuple[int, int]]]:
        """What it confirms, per (attempt, writer): a record of a parallel attempt is delivered
        only within its own writer's range, so a retried Spark task's records are not
        delivered twice."""
        if self.writers is not None:
            return {(self.attempt, w): dict(r) for w, r in self.writers.items()}
        return {(self.attempt, None): dict(self.offsets)}

    def confirms(self, partition: int, offset: int, writer: Optional[str]) -> bool:
        """Called per record: looks up the one range it needs, builds nothing."""
        if self.writers is not None:
            ranges = self.writers.get(writer or "", {})
        else:
            ranges = self.offsets if writer is None else {}
        first, last = ranges.get(partition, (1, 0))
        return first <= offset <= last


@dataclass(frozen=True)
class RecordTags:
    """What a data record's headers say of it (docs/log-format.md, section 2), read once."""

    table: Optional[str]
    snapshot: int
    attempt: str
    writer: Optional[str]  # only the records of a parallel attempt carry one
    generation: Optional[int] = None  # only the records of a snapshot that starts a generation

    @classmethod
    def of(cls, headers: Optional[Sequence[Tuple[str, bytes]]]) -> "RecordTags":
        named = {k: v.decode() for k, v in (headers or ())}
        generation = named.get(H_GENERATION)
        return cls(named.get(H_TABLE), int(named.get(H_SNAPSHOT) or 0), named.get(H_ATTEMPT, ""),
                   named.get(H_WRITER), int(generation) if generation else None)


# What a reader does with a data record (ConfirmedAttempts.verdict).
DELIVER, DROP, HOLD = "deliver", "drop", "hold"


class ConfirmedAttempts:
    """The confirmed attempts of one table's log so far, and the one rule for its data records
    (docs/log-format.md, section 5): a record is delivered when its attempt is confirmed and its
    offset lies in that attempt's range for its partition (its own writer's range, for a
    parallel attempt); dropped when it is another table's, or another attempt of its snapshot
    or a later snapshot is confirmed; held back otherwise. The reader (records as they come) and
    logstore_changes (confirmed ranges, in Spark tasks) both ask it, so they deliver the same
    records. Plain data: it pickles into Spark tasks."""

    def __init__(self, table: Optional[str], confirmations: Iterable[Confirmation] = ()) -> None:
        self.table = table  # None: every table's records (a topic read without its model)
        self.attempts: Dict[str, Confirmation] = {}
        self.newest = 0  # the latest confirmed snapshot of the table
        for confirmation in confirmations:
            self.add(confirmation)

    def add(self, confirmation: Confirmation) -> None:
        """A control record read: the first confirmation of an attempt counts."""
        if self.table in (None, confirmation.table):
            self.attempts.setdefault(confirmation.attempt, confirmation)
            self.newest = max(self.newest, confirmation.snapshot)

    def verdict(self, tags: RecordTags, partition: int, offset: int) -> str:
        """DELIVER, DROP or HOLD (see the class) for the data record at `partition`, `offset`."""
        if self.table not in (None, tags.table):
            return DROP
        confirmation = self.attempts.get(tags.attempt)
        if confirmation is not None and confirmation.confirms(partition, offset, tags.writer):
            return DELIVER
        if tags.snapshot <= self.newest or confirmation is not None:
            return DROP  # an attempt that lost: another one of its snapshot won
        return HOLD  # not confirmed yet
