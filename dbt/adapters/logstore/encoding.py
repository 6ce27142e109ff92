"""Record encoding: how a table row becomes the key and value of a log record.

Row images are rendered to JSON by Spark itself (`to_json`), so every Spark type has one
documented rule and no row is converted value by value in Python:

- null -> JSON null (null fields are kept, never dropped);
- decimal -> JSON number with the exact digits of the value (no float rounding);
- date -> "yyyy-MM-dd"; timestamp -> ISO-8601 with microseconds and the session zone offset
  ("2024-05-01T10:00:00.000000Z" when the session zone is UTC); timestamp_ntz -> without offset;
- binary -> base64 string; arrays, maps, structs -> JSON arrays/objects; strings as UTF-8.

The value is a Debezium-style envelope `{"before", "after", "op", "ts_ms", "source"}` assembled
here from the already-encoded images; the key is a JSON object of the `unique_key` columns.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from dbt.adapters.logstore.__version__ import version

OP_INSERT = "c"
OP_UPDATE = "u"
OP_DELETE = "d"
OPS = (OP_INSERT, OP_UPDATE, OP_DELETE)

# Options of Spark's to_json; the rules in the module docstring follow from these.
JSON_OPTIONS = {
    "ignoreNullFields": "false",
    "dateFormat": "yyyy-MM-dd",
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
}


def quote_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def to_json_sql(struct_expr: str) -> str:
    """Spark SQL rendering a struct expression as one JSON object, by the rules above."""
    options = ", ".join(f"{sql_string(k)}, {sql_string(v)}" for k, v in JSON_OPTIONS.items())
    return f"to_json({struct_expr}, map({options}))"


def named_struct_sql(fields: Sequence[Tuple[str, str]]) -> str:
    """Spark SQL of a struct of (name, SQL expression) pairs, in that order."""
    return "named_struct(" + ", ".join(f"{sql_string(name)}, {expr}" for name, expr in fields) + ")"


def row_struct_sql(columns: Sequence[str], alias: Optional[str] = None) -> str:
    """Spark SQL of a struct of the given columns (field order = column order)."""
    prefix = f"{alias}." if alias else ""
    return named_struct_sql([(c, prefix + quote_identifier(c)) for c in columns])


def json_struct_sql(fields: Sequence[Tuple[str, str]]) -> str:
    """Spark SQL rendering (name, SQL expression) pairs as one JSON object, in that order."""
    return to_json_sql(named_struct_sql(fields))


def json_object_sql(columns: Sequence[str], alias: Optional[str] = None) -> str:
    """Spark SQL rendering the given columns as one JSON object (field order = column order)."""
    return to_json_sql(row_struct_sql(columns, alias))


@dataclass(frozen=True)
class EnvelopeWriter:
    """Builds record values for one commit; the shared parts are encoded once per commit."""

    schema: str
    table: str
    ts_ms: int

    def __post_init__(self) -> None:
        source = json.dumps(
            {"connector": "dbt-logstore", "version": version, "db": self.schema,
             "table": self.table, "ts_ms": self.ts_ms},
            separators=(",", ":"),
        )
        object.__setattr__(self, "_tail", f',"ts_ms":{self.ts_ms},"source":{source}}}'.encode())

    def value(self, op: str, before: Optional[str], after: Optional[str]) -> bytes:
        """The envelope for one change; `before`/`after` are JSON images or None."""
        if op not in OPS:
            raise ValueError(f"unknown change op {op!r}")
        return b"".join((
            b'{"before":', (before or "null").encode(),
            b',"after":', (after or "null").encode(),
            b',"op":"', op.encode(), b'"', self._tail,  # type: ignore[attr-defined]
        ))


def key_bytes(key_json: Optional[str]) -> Optional[bytes]:
    return None if key_json is None else key_json.encode()


@dataclass(frozen=True)
class RecordEncoder:
    """The record value for one change, by `log.format` and `log.changelog-mode`.

    - `all` + `debezium-json`: the full envelope, updates with before and after images;
    - `upsert` + `debezium-json`: the envelope without before images; deletes are tombstones
      (null value) so a compacted topic keeps each key's latest row;
    - `upsert` + `json`: the row itself; deletes are tombstones;
    - `all` + `json`: the row itself, for insert-only change sets (checked before the commit).
    """

    envelope: EnvelopeWriter
    format: str = "debezium-json"
    upsert: bool = False

    def value(self, op: str, before: Optional[str], after: Optional[str]) -> Optional[bytes]:
        if op not in OPS:
            raise ValueError(f"unknown change op {op!r}")
        if self.upsert and op == OP_DELETE:
            return None
        if self.format == "json":
            if op != OP_INSERT and not self.upsert:
                raise ValueError(f"log.format 'json' cannot express op {op!r} without upsert mode")
            return (after or "null").encode()
        return self.envelope.value(op, None if self.upsert else before, after)
