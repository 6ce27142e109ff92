"""Log generations: a generation starts with a snapshot that writes the table's rows as of a
committed table version (snapshot reads: Debezium's op 'r', upserts for the json format), so a
consumer that starts at a generation's start offsets and applies everything after ends equal to
the table. The first snapshot of a log starts generation 1; a lost log, `logstore_resnapshot` and
`log.generation.interval` start the next. Its confirmation carries `generation` and
`generation_start` (docs/log-format.md), its records the H_GENERATION header.

Here: a generation as the confirmations state it, the generation a run starts (recorded with the
table commit that carries it, so recovery finishes it as one), and the start points that still
reach the table given what the broker has deleted.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Sequence

from dbt.adapters.logstore.log.control_records import Confirmation
from dbt.adapters.logstore.names import (
    GENERATION, GENERATION_OFFSETS, GENERATION_PENDING, GENERATION_SNAPSHOT, COMMITTED, MIRRORED,
)


@dataclass(frozen=True)
class Generation:
    """A generation of one table's log: its number, the snapshot that started it, the offset per
    partition where its complete copy of the table starts, and when it was confirmed."""

    number: int
    snapshot: int
    start_offsets: Dict[int, int] = field(default_factory=dict)
    ts_ms: int = 0

    def held(self, log_start_offsets: Mapping[int, int]) -> bool:
        """Whether every record of it is still in the topic (none deleted by retention)."""
        return all(self.start_offsets.get(p, 0) >= start for p, start in log_start_offsets.items())

    def describe(self) -> str:
        offsets = ", ".join(f"p{p}:{o}" for p, o in sorted(self.start_offsets.items())) or "the start"
        return f"generation {self.number} (snapshot {self.snapshot}, offsets {offsets})"


def generations(confirmations: Sequence[Confirmation]) -> List[Generation]:
    """The generations the confirmations of one table state, oldest first. A log written before
    generations existed is one generation, from its first snapshot and the topic's start."""
    found = [Generation(c.generation or 1, c.snapshot, dict(c.generation_start or {}), c.ts_ms)
             for c in confirmations if c.generation_start is not None]
    if confirmations and (not found or found[0].snapshot > confirmations[0].snapshot):
        first = confirmations[0]
        found.insert(0, Generation(1 if not found else found[0].number - 1, first.snapshot, {},
                                   first.ts_ms))
    return found


def reachable(found: Sequence[Generation], log_start_offsets: Mapping[int, int]) -> Optional[Generation]:
    """The oldest generation whose records are all still held: a consumer starting at it (and
    resetting at each later generation start) reaches the table. None: no complete copy is left."""
    latest_first = list(reversed(found))
    held = None
    for generation in latest_first:
        if not generation.held(log_start_offsets):
            break
        held = generation
    return held


@dataclass(frozen=True)
class GenerationStart:
    """The generation a run starts: its number, the snapshot it follows (its first snapshot is
    `base + 1`), and the topic's end offsets before it (where partitions it writes nothing to
    start). Recorded with the table commit that carries it (GENERATION_PENDING)."""

    number: int
    base: int
    offsets: Dict[int, int] = field(default_factory=dict)
    reason: str = ""

    def pending_properties(self, changeset: str) -> Dict[str, str]:
        return {GENERATION_PENDING: json.dumps({
            "changeset": changeset, "generation": self.number, "base": self.base,
            "offsets": {str(p): o for p, o in sorted(self.offsets.items())}})}

    @classmethod
    def pending(cls, props: Mapping[str, str], changeset: str) -> Optional["GenerationStart"]:
        """The generation the table commit of `changeset` starts, if it starts one."""
        raw = props.get(GENERATION_PENDING)
        if not raw:
            return None
        value = json.loads(raw)
        if value.get("changeset") != changeset:
            return None
        return cls(int(value["generation"]), int(value["base"]),
                   {int(p): int(o) for p, o in (value.get("offsets") or {}).items()})


def finishing_generation(props: Mapping[str, str]) -> bool:
    """The table holds a committed generation start that is not in the log yet: the next run's
    recovery writes it (and the log checks wait for it)."""
    committed = props.get(COMMITTED)
    return bool(committed and committed != props.get(MIRRORED)
                and GenerationStart.pending(props, committed) is not None)


def recorded(props: Mapping[str, str]) -> Generation:
    """The generation the table's snapshot is in, as the table recorded it."""
    offsets = json.loads(props.get(GENERATION_OFFSETS) or "{}")
    return Generation(int(props.get(GENERATION) or 1), int(props.get(GENERATION_SNAPSHOT) or 1),
                      {int(p): int(o) for p, o in offsets.items()})


def numbers(confirmations: Iterable[Confirmation]) -> int:
    """The highest generation number the confirmations state (0: none)."""
    return max((c.generation or 1 for c in confirmations), default=0)
