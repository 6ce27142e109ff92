"""Kafka Connect's schema envelope (`log.format.schema-include: true`): key and value each written
as `{"schema": <Connect schema>, "payload": <what the format writes>}`, as Connect's JsonConverter
writes them with `schemas.enable=true` and sink connectors (JDBC and most others) read them.
Flink reads it with `debezium-json.schema-include = true`. Tombstones stay null.

The schema follows JsonConverter's rules, per Spark type of a column:

| Spark type         | Connect schema                                                     | payload             |
|--------------------|--------------------------------------------------------------------|---------------------|
| boolean            | boolean                                                            | true / false        |
| tinyint ... bigint | int8, int16, int32, int64                                          | number              |
| float, double      | float, double                                                      | number              |
| string, char, varchar | string                                                          | text                |
| binary             | bytes                                                              | base64 text         |
| decimal(p,s)       | bytes, `org.apache.kafka.connect.data.Decimal`, scale and precision | number, exact digits |
| date               | int32, `org.apache.kafka.connect.data.Date`                        | days since 1970-01-01 |
| timestamp          | string, `io.debezium.time.ZonedTimestamp` (Debezium's instant)     | ISO-8601 with `Z`   |
| timestamp_ntz      | int64, `io.debezium.time.MicroTimestamp`                           | microseconds since 1970-01-01T00:00 |
| array, map, struct | array, map, struct of the above (nested dates and timestamps: string) | JSON             |

A Connect Timestamp (int64 milliseconds) would drop Spark's microseconds, hence Debezium's
timestamp types. Key columns are required (optional false), the other columns optional. The
value's schema describes the table's columns after the commit; a before image written before a
schema change may lack a column (JsonConverter reads it as null) or carry one more (ignored).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from dbt.adapters.logstore.formats.base import FormatOption, RecordEncoder, RecordFormat, TableShape
from dbt.adapters.logstore.spark.json_images import sql_string

SCHEMA_INCLUDE = "log.format.schema-include"
OPTIONS = (FormatOption(
    SCHEMA_INCLUDE, ("log_format_schema_include",), "false", ("true", "false"),
    ("debezium-json", "json"),
    "Wrap key and value in Kafka Connect's {\"schema\", \"payload\"} envelope (JsonConverter with "
    "schemas.enable=true), for Kafka Connect sink connectors; Flink: 'debezium-json.schema-include'."),)

_PRIMITIVES = {
    "boolean": "boolean", "tinyint": "int8", "byte": "int8", "smallint": "int16", "short": "int16",
    "int": "int32", "integer": "int32", "bigint": "int64", "long": "int64", "float": "float",
    "real": "float", "double": "double", "string": "string", "binary": "bytes",
}


def included(options: Mapping[str, str]) -> bool:
    return str(options.get(SCHEMA_INCLUDE, "false")).lower() == "true"


def _split_top(text: str) -> List[str]:
    """`a:int,b:map<string,int>` -> ['a:int', 'b:map<string,int>'] (commas inside <> stay)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def field_schema(spark_type: str, top_level: bool = True) -> Dict[str, Any]:
    """The Connect schema of a Spark type (as dbt-spark lists it: `decimal(10,2)`,
    `array<struct<a:int>>`), without `field` and `optional`."""
    t = spark_type.strip()
    low = t.lower()
    if low.startswith("decimal") or low.startswith("numeric"):
        inside = t.partition("(")[2].rstrip(") ")
        precision, _, scale = inside.partition(",")
        p, s = (precision.strip(), scale.strip()) if scale else ("10", "0")
        return {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
                "parameters": {"scale": s, "connect.decimal.precision": p}}
    if low.startswith(("char", "varchar")):
        return {"type": "string"}
    if low == "date":
        return ({"type": "int32", "name": "org.apache.kafka.connect.data.Date", "version": 1}
                if top_level else {"type": "string"})
    if low == "timestamp":
        return ({"type": "string", "name": "io.debezium.time.ZonedTimestamp", "version": 1}
                if top_level else {"type": "string"})
    if low == "timestamp_ntz":
        return ({"type": "int64", "name": "io.debezium.time.MicroTimestamp", "version": 1}
                if top_level else {"type": "string"})
    if low in _PRIMITIVES:
        return {"type": _PRIMITIVES[low]}
    if low.startswith("array<"):
        return {"type": "array", "items": {**field_schema(t[6:-1], False), "optional": True}}
    if low.startswith("map<"):
        key, value = _split_top(t[4:-1])
        return {"type": "map", "keys": {**field_schema(key, False), "optional": False},
                "values": {**field_schema(value, False), "optional": True}}
    if low.startswith("struct<"):
        fields = []
        for part in _split_top(t[7:-1]):
            name, _, inner = part.partition(":")
            fields.append({"field": name.strip().strip("`"), **field_schema(inner, False), "optional": True})
        return {"type": "struct", "fields": fields}
    raise ValueError(f"Spark type {spark_type!r} has no Kafka Connect schema")


def without_schema(columns: Sequence[Tuple[str, str]]) -> List[str]:
    """The columns (as `name type`) that have no Connect schema: a log in the envelope refuses
    them before the table commit (change_checks.check_columns)."""
    unsupported = []
    for name, spark_type in columns:
        try:
            field_schema(spark_type)
        except ValueError:
            unsupported.append(f"{name} {spark_type}")
    return unsupported


def struct_schema(columns: Tuple[Tuple[str, str], ...], required: Tuple[str, ...]) -> Dict[str, Any]:
    required_lower = {c.lower() for c in required}
    return {"type": "struct", "fields": [
        {"field": name, **field_schema(spark_type), "optional": name.lower() not in required_lower}
        for name, spark_type in columns]}


def schema_names(shape: TableShape) -> str:
    """The prefix of the schemas' names, `<schema>.<table>` as Debezium's `<prefix>.<db>.<table>`."""
    return f"{shape.schema}.{shape.table}"


def key_schema(shape: TableShape) -> Dict[str, Any]:
    types = {name.lower(): (name, t) for name, t in shape.columns}
    columns = tuple(types.get(k.lower(), (k, "string")) for k in shape.unique_key)
    return {**struct_schema(columns, shape.unique_key), "optional": False, "name": f"{schema_names(shape)}.Key"}


def value_schema(fmt: RecordFormat, shape: TableShape, options: Mapping[str, str]) -> Dict[str, Any]:
    return fmt.connect_value_schema(struct_schema(shape.columns, shape.unique_key), schema_names(shape), options)


def _compact(schema: Dict[str, Any]) -> str:
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class EnvelopedEncoder(RecordEncoder):
    """Another format's encoder, its non-null keys and values wrapped with their schema."""

    inner: RecordEncoder
    key_schema_json: str
    value_schema_json: str

    @property
    def keyed(self) -> bool:  # type: ignore[override]
        return self.inner.keyed

    @property
    def upsert(self) -> bool:  # type: ignore[override]
        return self.inner.upsert

    @property
    def tombstone_after_delete(self) -> bool:
        return self.inner.tombstone_after_delete

    def _head(self, schema: str) -> str:
        return '{"schema":' + schema + ',"payload":'

    def key(self, key_json: Optional[str]) -> Optional[bytes]:
        return None if key_json is None else (self._head(self.key_schema_json) + key_json + "}").encode()

    def value(self, op: str, before: Optional[str], after: Optional[str]) -> Optional[bytes]:
        inner = self.inner.value(op, before, after)
        return None if inner is None else self._head(self.value_schema_json).encode() + inner + b"}"

    def key_sql(self, key: str) -> str:
        inner = self.inner.key_sql(key)
        return f"concat({sql_string(self._head(self.key_schema_json))}, {inner}, '}}')"

    def value_sql(self, op: str, before: str, after: str) -> str:
        # concat of a null is null: a tombstone stays one
        inner = self.inner.value_sql(op, before, after)
        return f"concat({sql_string(self._head(self.value_schema_json))}, {inner}, '}}')"

    def payload_end(self) -> int:
        return self.inner.payload_end() + 1


def wrap(encoder: RecordEncoder, fmt: RecordFormat, shape: TableShape, options: Mapping[str, str]) -> RecordEncoder:
    """The encoder with the envelope when the log asks for it."""
    if not included(options):
        return encoder
    return EnvelopedEncoder(encoder, _compact(key_schema(shape)), _compact(value_schema(fmt, shape, options)))


def unwrap(value: Any) -> Any:
    """The payload of a decoded enveloped key or value; anything else as it is."""
    if (isinstance(value, dict) and set(value) == {"schema", "payload"}
            and isinstance(value["schema"], dict) and "type" in value["schema"]):
        return value["payload"]
    return value
