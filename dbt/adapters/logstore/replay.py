"""Replaying a changelog on the consumer's side: the change a reader delivers (ChangeRecord),
proper changes per key for upsert and eventual logs (Normalizer), and a copy of the table built
by applying them in order (Replica). No Kafka here: reader.py reads and decodes the records.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence


@dataclass(frozen=True)
class ChangeRecord:
    partition: int
    offset: int
    key: Optional[Dict[str, Any]]
    op: str  # c insert, u update, d delete, r a row of the table snapshot (hybrid read)
    before: Optional[Dict[str, Any]]
    after: Optional[Dict[str, Any]]
    ts_ms: int
    snapshot: int = 0
    # set on the records of a snapshot that starts a log generation (its number): from here
    # the log holds the table's complete rows, and what came before is superseded
    generation: Optional[int] = None


class Normalizer:
    """Proper changes for upsert and eventual logs: by key, the first image is an insert, a
    changed image an update with its real before image, an unchanged one (a retry's repeat)
    nothing, a delete of a known key a delete with its before image. Holds one row per key,
    as any changelog normalization must."""

    def __init__(self) -> None:
        self._rows: Dict[str, Dict[str, Any]] = {}
        self._floor = 0  # the snapshot that started the latest generation seen

    @staticmethod
    def _key(record: ChangeRecord) -> str:
        return json.dumps(record.key, sort_keys=True, default=str)

    def apply(self, records: Iterable[ChangeRecord]) -> Iterator[ChangeRecord]:
        from dataclasses import replace

        for record in records:
            if record.generation is not None and record.snapshot > self._floor:
                self._rows.clear()  # a generation: the table's rows again, from scratch
                self._floor = record.snapshot
            if record.snapshot < self._floor:
                continue  # superseded by the generation
            if record.key is None:  # keyless: nothing to normalize by
                yield record
                continue
            key = self._key(record)
            old = self._rows.get(key)
            if record.op == "d":
                if old is not None:
                    del self._rows[key]
                    yield replace(record, before=old)
            elif old is None:
                self._rows[key] = record.after or {}
                yield replace(record, op="r" if record.op == "r" else "c", before=None)
            elif old != record.after:
                self._rows[key] = record.after or {}
                yield replace(record, op="u", before=old)


class Replica:
    """Applies change records in order: insert/update upsert by key (or add a row when the log
    is keyless), delete removes the key (or one equal row). With `columns` (the consumer's
    column list, e.g. the table's current one), every image is read against it, as
    docs/log-format.md ("Row images across schema changes") says: a column the image lacks is
    null, a field not in `columns` is ignored."""

    def __init__(self, columns: Optional[Sequence[str]] = None) -> None:
        self._keyed: Dict[str, Dict[str, Any]] = {}
        self._keyless: List[Dict[str, Any]] = []
        self._columns = None if columns is None else list(columns)
        self._floor = 0  # the snapshot that started the generation applied last

    @staticmethod
    def _key(key: Any) -> str:
        return json.dumps(key, sort_keys=True, default=str)

    def _shape(self, image: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        if self._columns is None:
            return image or {}
        return {column: (image or {}).get(column) for column in self._columns}

    def apply(self, record: ChangeRecord) -> None:
        if record.generation is not None and record.snapshot > self._floor:
            # a new generation: the table's complete rows follow; earlier ones are superseded
            self._keyed.clear()
            self._keyless.clear()
            self._floor = record.snapshot
        if record.snapshot < self._floor:
            return  # an older snapshot's record, read after the generation began elsewhere
        if record.key is not None:
            if record.op == "d":
                self._keyed.pop(self._key(record.key), None)
            else:
                self._keyed[self._key(record.key)] = self._shape(record.after)
        elif record.op == "d":
            self._keyless.remove(self._shape(record.before))  # ValueError: a row it never had
        else:
            self._keyless.append(self._shape(record.after))

    def rows(self) -> List[Dict[str, Any]]:
        return list(self._keyed.values()) + list(self._keyless)
