"""Run records: one record per dbt invocation that could change logged tables, in the project's
run topic (names.run_topic_for: per dbt project and target schema; docs/log-format.md, section
9). It names every logged model of the project with its latest confirmed snapshot as the
invocation ended (the confirmation's end offsets: where a reader of that model stops to hold
the model as of the run) and what the invocation did to it. Encoded here (`RunRecord.encode`)
and decoded here (`RunRecord.decode`), so both sides keep one format.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

FORMAT_VERSION = 1

# What an invocation did to a model (ModelAtRun.did)
CHANGED = "changed"  # confirmed a snapshot with records in it
UNCHANGED = "unchanged"  # built, nothing to log (or a snapshot of no records)
FAILED = "failed"
SKIPPED = "skipped"  # an upstream failed
NOT_SELECTED = "not selected"
NOT_LOGGED = "not logged"  # a model of the project without a log: named, never given a snapshot
DID = (CHANGED, UNCHANGED, FAILED, SKIPPED, NOT_SELECTED, NOT_LOGGED)


@dataclass(frozen=True)
class ModelAtRun:
    """One model of the project as a run ended. For a logged model, `snapshot` is its latest
    confirmed snapshot then (None: none yet) and `end_offsets` that confirmation's: a reader
    that stops each data partition there and applies the confirmed records holds the model as
    of the run."""

    model: str  # dbt's unique id
    name: str
    did: str
    topic: Optional[str] = None
    snapshot: Optional[int] = None
    end_offsets: Dict[int, int] = field(default_factory=dict)
    generation: Optional[int] = None
    table_version: Optional[str] = None
    changeset: Optional[str] = None  # the change set (invocation) that made the snapshot

    @property
    def logged(self) -> bool:
        return self.did != NOT_LOGGED

    def to_json(self) -> Dict[str, Any]:
        value: Dict[str, Any] = {"name": self.name, "did": self.did}
        if self.logged:
            value.update(topic=self.topic, snapshot=self.snapshot,
                         end_offsets={str(p): o for p, o in sorted(self.end_offsets.items())},
                         generation=self.generation, table_version=self.table_version,
                         changeset=self.changeset)
        return value

    @classmethod
    def from_json(cls, model: str, value: Mapping[str, Any]) -> "ModelAtRun":
        return cls(model=model, name=str(value["name"]), did=str(value["did"]),
                   topic=value.get("topic"),
                   snapshot=None if value.get("snapshot") is None else int(value["snapshot"]),
                   end_offsets={int(p): int(o) for p, o in (value.get("end_offsets") or {}).items()},
                   generation=None if value.get("generation") is None else int(value["generation"]),
                   table_version=value.get("table_version"), changeset=value.get("changeset"))


@dataclass(frozen=True)
class RunRecord:
    """One invocation's record: the key is its invocation id (one record per invocation, so a
    compacted run topic keeps every one)."""

    invocation_id: str
    project: str
    schema: str  # the target's (the run topic's name has it)
    command: str
    selection: Dict[str, Any]
    started_at: str
    ended_at: str
    models: Tuple[ModelAtRun, ...]
    ts_ms: int = 0

    def encode(self) -> Tuple[bytes, bytes]:
        value = {"format": FORMAT_VERSION, "invocation_id": self.invocation_id,
                 "project": self.project, "schema": self.schema, "command": self.command,
                 "selection": self.selection, "started_at": self.started_at,
                 "ended_at": self.ended_at, "ts_ms": self.ts_ms,
                 "models": {m.model: m.to_json() for m in sorted(self.models, key=lambda m: m.model)}}
        return self.invocation_id.encode(), json.dumps(value, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, value: bytes) -> "RunRecord":
        data = json.loads(value)
        if int(data.get("format", 0)) > FORMAT_VERSION:
            raise ValueError(f"a run record of format {data.get('format')}, newer than this "
                             f"reader's {FORMAT_VERSION}: upgrade dbt-logstore to read it")
        return cls(invocation_id=str(data["invocation_id"]), project=str(data["project"]),
                   schema=str(data.get("schema", "")), command=str(data["command"]),
                   selection=dict(data.get("selection") or {}),
                   started_at=str(data["started_at"]), ended_at=str(data["ended_at"]),
                   models=tuple(ModelAtRun.from_json(uid, m) for uid, m in data["models"].items()),
                   ts_ms=int(data.get("ts_ms", 0)))

    def model(self, name: str) -> ModelAtRun:
        """A model by its name or unique id."""
        for m in self.models:
            if name in (m.name, m.model):
                return m
        raise KeyError(f"run {self.invocation_id} names no model '{name}' "
                       f"(it names: {', '.join(sorted(m.name for m in self.models))})")

    @property
    def logged(self) -> List[ModelAtRun]:
        return [m for m in self.models if m.logged]

