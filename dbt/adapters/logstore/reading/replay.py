"""Replaying a changelog on the consumer's side: the change a reader delivers (ChangeRecord),
proper changes per key for upsert and eventual logs (Normalizer), and a copy of the table built
by applying them in order (Replica). No Kafka here: reader.py reads and decodes the records.
"""
from __future__ import annotations

import json
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from dbt.adapters.logstore.formats.base import ChangeRecord  # noqa: F401 (replay.ChangeRecord, public)


# The op of the record the reader delivers where a generation starts (its confirmation was
# read, before any of its rows): rows whose last change is older than its snapshot are gone.
GENERATION_STARTS = "g"


def generation_starts(snapshot: int, generation: int, ts_ms: int = 0) -> ChangeRecord:
    """The record that says generation `generation` starts at `snapshot`."""
    return ChangeRecord(-1, -1, None, GENERATION_STARTS, None, None, ts_ms, snapshot, generation)


class ResetRule:
    """docs/log-format.md, section 6: at the start of a generation (snapshot S), a consumer
    drops the rows whose last change came from a snapshot before S, and any record of such a
    snapshot read later. Rows changed by a later snapshot stay, so the rule gives the same rows
    whatever order the partitions are read in. Triggered by the generation's marker (the
    reader's GENERATION_STARTS record, from its confirmation) or by the first record carrying
    the generation header, whichever comes first."""

    def __init__(self) -> None:
        self.floor = 0  # the snapshot that started the latest generation seen

    def resets(self, record: ChangeRecord) -> bool:
        """Whether `record` starts a generation not seen yet (then `floor` is its snapshot)."""
        starts = record.op == GENERATION_STARTS or record.generation is not None
        if starts and record.snapshot > self.floor:
            self.floor = record.snapshot
            return True
        return False

    def superseded(self, snapshot: int) -> bool:
        """A change of `snapshot` no longer counts: a later generation holds the table again."""
        return snapshot < self.floor


class Normalizer:
    """Proper changes for upsert and eventual logs: by key, the first image is an insert, a
    changed image an update with its real before image, an unchanged one (a retry's repeat)
    nothing, a delete of a known key a delete with its before image. Holds one row per key,
    as any changelog normalization must."""

    def __init__(self) -> None:
        self._rows: Dict[str, Dict[str, Any]] = {}
        self._snapshots: Dict[str, int] = {}  # per key, the snapshot of its last change
        self._reset = ResetRule()

    @staticmethod
    def _key(record: ChangeRecord) -> str:
        return json.dumps(record.key, sort_keys=True, default=str)

    def apply(self, records: Iterable[ChangeRecord]) -> Iterator[ChangeRecord]:
        from dataclasses import replace

        for record in records:
            if self._reset.resets(record):  # the table's rows again: older ones are gone
                for key in [k for k, s in self._snapshots.items() if self._reset.superseded(s)]:
                    del self._rows[key], self._snapshots[key]
            if record.op == GENERATION_STARTS:
                yield record
                continue
            if self._reset.superseded(record.snapshot):
                continue
            if record.key is None:  # keyless: nothing to normalize by
                yield record
                continue
            key = self._key(record)
            old = self._rows.get(key)
            if record.op == "d":
                if old is not None:
                    del self._rows[key], self._snapshots[key]
                    yield replace(record, before=old)
            elif old is None:
                self._rows[key], self._snapshots[key] = record.after or {}, record.snapshot
                yield replace(record, op="r" if record.op == "r" else "c", before=None)
            else:
                self._snapshots[key] = record.snapshot
                if old != record.after:
                    self._rows[key] = record.after or {}
                    yield replace(record, op="u", before=old)


class Replica:
    """Applies change records in order: insert/update upsert by key (or add a row when the log
    is keyless), delete removes the key (or one equal row). With `columns` (the consumer's
    column list, e.g. the table's current one), every image is read against it, as
    docs/log-format.md ("Row images across schema changes") says: a column the image lacks is
    null, a field not in `columns` is ignored."""

    def __init__(self, columns: Optional[Sequence[str]] = None) -> None:
        # rows with the snapshot of their last change (ResetRule)
        self._keyed: Dict[str, Tuple[Dict[str, Any], int]] = {}
        self._keyless: List[Tuple[Dict[str, Any], int]] = []
        self._columns = None if columns is None else list(columns)
        self._reset = ResetRule()

    @staticmethod
    def _key(key: Any) -> str:
        return json.dumps(key, sort_keys=True, default=str)

    def _shape(self, image: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        if self._columns is None:
            return image or {}
        return {column: (image or {}).get(column) for column in self._columns}

    def apply(self, record: ChangeRecord) -> None:
        if self._reset.resets(record):
            # a new generation: the table's complete rows follow; older rows are superseded
            superseded = self._reset.superseded
            self._keyed = {k: v for k, v in self._keyed.items() if not superseded(v[1])}
            self._keyless = [v for v in self._keyless if not superseded(v[1])]
        if record.op == GENERATION_STARTS or self._reset.superseded(record.snapshot):
            return  # a marker, or an older snapshot's record read after the generation began
        if record.key is not None:
            if record.op == "d":
                self._keyed.pop(self._key(record.key), None)
            else:
                self._keyed[self._key(record.key)] = (self._shape(record.after), record.snapshot)
        elif record.op == "d":
            before = self._shape(record.before)
            held = next((i for i, (row, _) in enumerate(self._keyless) if row == before), None)
            if held is None:
                raise ValueError(f"a delete of a row the replica does not hold: {before}")
            del self._keyless[held]
        else:
            self._keyless.append((self._shape(record.after), record.snapshot))

    def rows(self) -> List[Dict[str, Any]]:
        return [row for row, _ in self._keyed.values()] + [row for row, _ in self._keyless]
