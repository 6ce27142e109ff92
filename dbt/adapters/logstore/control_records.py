"""Control records: the confirmation of one committed write attempt, one record per attempt in
the control topic (`<topic>` + names.CONTROL_TOPIC_SUFFIX, partition 0; docs/log-format.md,
section 3). Encoded here (`confirmation_record`, for the commit protocol's writers) and decoded
here (`parse_control_record`, and `Confirmation` for the readers), so both sides keep one format.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Protocol, Tuple

from dbt.adapters.logstore.log_config import LogConfig
from dbt.adapters.logstore.log_system import WriteResult

Writer = Tuple[str, Optional[str]]  # (attempt, writer) as named by a record's headers


# What confirmation_record needs of commit_protocol's TableRef and Snapshot: named by shape,
# since commit_protocol imports this module (and the package has no import circle).
class _Table(Protocol):
    @property
    def writer_id(self) -> str: ...


class _Snapshot(Protocol):
    @property
    def end_offsets(self) -> Dict[int, int]: ...


def confirmation_record(log: LogConfig, table: _Table, snapshot_id: int, changeset: str,
                        attempt: str, previous: _Snapshot, result: WriteResult,
                        writers: Optional[Mapping[str, WriteResult]] = None,
                        table_version: Optional[str] = None) -> Tuple[bytes, bytes]:
    """The control-topic record confirming one committed write attempt (see docs/log-format.md).
    `writers`: for a parallel attempt, what each writer (Spark task attempt) wrote.
    `table_version`: the table format's version (Iceberg snapshot id, Delta version) the
    table commit of the snapshot made, for a table format that has one."""
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

    @classmethod
    def from_json(cls, value: Dict[str, Any]) -> "Confirmation":
        writers = value.get("writers")
        return cls(table=value["table"], snapshot=int(value["snapshot"]), attempt=value["attempt"],
                   offsets={int(p): (a, b) for p, (a, b) in value["offsets"].items()},
                   end_offsets={int(p): int(o) for p, o in value.get("end_offsets", {}).items()},
                   ts_ms=int(value.get("ts_ms", 0)), records=int(value.get("records", 0)),
                   writers=None if writers is None else {
                       w: {int(p): (a, b) for p, (a, b) in r.items()} for w, r in writers.items()},
                   table_version=value.get("table_version"))

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
