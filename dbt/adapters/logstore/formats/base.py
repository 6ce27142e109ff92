"""The formats' common parts: the op letters, the encoder and format interfaces, the JSON decoding
every reader shares. (The registry and the readers' dispatch are in formats/__init__.py.)"""
from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from dbt.adapters.logstore.names import H_TOMBSTONE


# The change a reader delivers (decode_record makes one; reading/replay.py applies them).
@dataclass(frozen=True)
class ChangeRecord:
    partition: int
    offset: int
    key: Optional[Dict[str, Any]]
    # c insert, u update, d delete, r a row of a table snapshot (a generation's copy of the
    # table, or the hybrid read's rows), g a generation starts (GENERATION_STARTS: no row)
    op: str
    before: Optional[Dict[str, Any]]
    after: Optional[Dict[str, Any]]
    ts_ms: int
    snapshot: int = 0
    # set on the records of a snapshot that starts a log generation (its number): from here
    # the log holds the table's complete rows, and what came before is superseded
    generation: Optional[int] = None

OP_INSERT, OP_UPDATE, OP_DELETE = "c", "u", "d"
OP_READ = "r"  # Debezium's snapshot read: an insert of a row that was there before the log
OPS = (OP_INSERT, OP_UPDATE, OP_DELETE)


class FormatRefusal(ValueError):
    """A format cannot write what it is asked to (the message says why and what is allowed)."""


@dataclass(frozen=True)
class FormatOption:
    """An option a format module adds to the log options' vocabulary (config/options.py)."""

    key: str  # Paimon-style dotted spelling
    spellings: Tuple[str, ...]  # dbt's (underscored) and any other
    default: str
    allowed: Tuple[str, ...]
    formats: Tuple[str, ...]  # the log formats it applies to
    meaning: str


@dataclass(frozen=True)
class TableShape:
    """What an encoder may need to know of the table beyond the change rows: its schema and
    name (the Debezium `source` block), its columns with their Spark types, its key."""

    schema: str
    table: str
    columns: Tuple[Tuple[str, str], ...] = ()
    unique_key: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Decoded:
    """A record's change as a reader applies it: op (c, u, d), key, row images, time."""

    key: Any
    op: str
    before: Any
    after: Any
    ts_ms: int = 0


class RecordEncoder(ABC):
    """The records of one attempt's changes, in Python (`key`, `value`: the reference) and as
    Spark SQL (`record_sql`, which the mirror runs: only bytes cross into Python)."""

    keyed: bool = False
    upsert: bool = False

    @property
    def tombstone_after_delete(self) -> bool:
        """Whether a keyed `d` event is followed by a tombstone of its key (H_TOMBSTONE)."""
        return False

    def key(self, key_json: Optional[str]) -> Optional[bytes]:
        return None if key_json is None else key_json.encode()

    @abstractmethod
    def value(self, op: str, before: Optional[str], after: Optional[str]) -> Optional[bytes]:
        """The value of one change; `before`/`after` are JSON images or None; None: a tombstone."""

    def key_sql(self, key: str) -> str:
        return key

    @abstractmethod
    def value_sql(self, op: str, before: str, after: str) -> str:
        """Spark SQL (a string, or null for a tombstone) of `value`, from SQL expressions."""

    def tombstone_on_delete_sql(self, op: str, value: str) -> str:
        """`value` (SQL), or null (a tombstone) for a delete in upsert mode."""
        return f"case when {op} = '{OP_DELETE}' then null else {value} end" if self.upsert else value

    def payload_end(self) -> int:
        """How many closing characters follow the change event's last field in a value (where
        Debezium's transaction block goes: debezium_transactions.py)."""
        return 1

    def record_sql(self, op: str, key: str, before: str, after: str) -> Tuple[str, str, str]:
        """Spark SQL of one change's record as bytes: (key, value, route). An unknown op fails
        the query. `route` places a keyless record (the row image; NULL for keyed logs)."""
        known = ", ".join(f"'{o}'" for o in OPS)
        value = (f"case when {op} in ({known}) then {self.value_sql(op, before, after)} else "
                 f"raise_error(concat('unknown change op ', {op})) end")
        route = "cast(null as binary)" if self.keyed else f"cast(coalesce({after}, {before}, '') as binary)"
        return f"cast({self.key_sql(key)} as binary)", f"cast({value} as binary)", route


def check_op(op: str) -> None:
    if op not in OPS:
        raise ValueError(f"unknown change op {op!r}")


class RecordFormat(ABC):
    """One `log.format`."""

    name: str

    @abstractmethod
    def changelog_mode(self, requested: str, unique_key: Sequence[str], append_only: bool,
                       materialization: str) -> str:
        """The changelog mode (`all` or `upsert`) `requested` stands for with this format, or
        FormatRefusal for a combination no standard consumer reads."""

    def refuse_changes(self, upsert: bool, non_inserts: int) -> Optional[str]:
        """Why a change set with `non_inserts` updates and deletes cannot be written, or None."""
        return None

    @abstractmethod
    def encoder(self, shape: TableShape, ts_ms: int, upsert: bool, options: Mapping[str, str],
                snapshot_read: bool = False) -> RecordEncoder:
        """The encoder of one attempt."""

    @abstractmethod
    def decode_value(self, key: Any, value: Any) -> Optional[Decoded]:
        """The change a decoded (JSON) value is, if it is this format's; else None."""

    def connect_value_schema(self, row: Dict[str, Any], names: str, options: Mapping[str, str]) -> Dict[str, Any]:
        """The Kafka Connect schema of this format's values, given the row's struct schema and
        the schema names' prefix (connect_schema.py)."""
        raise FormatRefusal(f"log.format '{self.name}' has no Kafka Connect schema")


def decode_json(data: Optional[bytes]) -> Any:
    # Decimals are written with their exact digits: keep them exact.
    return None if data is None else json.loads(data, parse_float=Decimal)


_DECODER = json.JSONDecoder()
_SPACE = " \t\n\r"


def field_texts(text: str) -> Optional[Dict[str, str]]:
    """The top-level fields of the JSON object `text`, each as its JSON text exactly as written
    (digits and escapes untouched), in one pass; None when `text` is no JSON object."""
    def skip(i: int) -> int:
        while i < len(text) and text[i] in _SPACE:
            i += 1
        return i

    i = skip(0)
    if text[i:i + 1] != "{":
        return None
    fields: Dict[str, str] = {}
    i = skip(i + 1)
    while i < len(text) and text[i] != "}":
        name, i = _DECODER.raw_decode(text, i)
        i = skip(skip(i) + 1)  # past the colon
        _, end = _DECODER.raw_decode(text, i)
        fields[name] = text[i:end]
        i = skip(end)
        i = skip(i + 1) if text[i:i + 1] == "," else i
    return fields


def field_text(text: str, name: str) -> Optional[str]:
    """The JSON text of the top-level field `name` of the JSON object `text`, as written."""
    return (field_texts(text) or {}).get(name)


def is_tombstone_after_delete(headers: Any) -> bool:
    """Whether a record (its headers as (name, bytes) pairs) is the tombstone that follows a
    keyed `d` event: it repeats that delete for log compaction and is skipped when applying."""
    return any(k == H_TOMBSTONE for k, _ in (headers or ()))


