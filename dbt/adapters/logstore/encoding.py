"""The record codec: how a table row becomes the key and value of a log record, and (at the end)
how a reader turns a record back into a change.

Row images are rendered to JSON by Spark itself (`to_json`), so every Spark type has one
documented rule and no row is converted value by value in Python (`JsonImages`):

- null -> JSON null (null fields are kept, never dropped);
- decimal -> JSON number with the exact digits of the value (no float rounding); Java's form,
  which may use an exponent (`1.000E-7`), or always plain with `log.encode.decimal-as-plain-number`;
- date -> "yyyy-MM-dd";
- timestamp -> an instant, always in UTC whatever the Spark session time zone, with microseconds
  and a literal `Z`: "2024-05-01 10:00:00.000000Z" (`log.timestamp-format.standard` SQL, the
  default, as Flink's json formats read by default) or "2024-05-01T10:00:00.000000Z" (ISO-8601);
- timestamp_ntz -> the same wall-clock text without the `Z`;
- binary -> base64 string; arrays, maps, structs -> JSON arrays/objects; strings as UTF-8.

The value is a Debezium change event `{"before", "after", "op", "ts_ms", "source"}` assembled
here from the already-encoded images (`log.format` debezium-json), or the row itself (`json`);
the key is a JSON object of the `unique_key` columns. `RecordEncoder` says, per format and
changelog mode, which records a change becomes.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Dict, Optional, Sequence, Tuple

from dbt.adapters.logstore.__version__ import version
from dbt.adapters.logstore.names import H_TOMBSTONE
from dbt.adapters.logstore.replay import ChangeRecord

OP_INSERT = "c"
OP_UPDATE = "u"
OP_DELETE = "d"
OPS = (OP_INSERT, OP_UPDATE, OP_DELETE)

# log.timestamp-format.standard: how timestamps are written (the names of Flink's option values).
TIMESTAMP_SQL, TIMESTAMP_ISO = "SQL", "ISO-8601"
TIMESTAMP_STANDARDS = (TIMESTAMP_SQL, TIMESTAMP_ISO)
# The date/time separator of each standard, as Spark's pattern writes it.
_SEPARATOR = {TIMESTAMP_SQL: " ", TIMESTAMP_ISO: "'T'"}


def quote_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def named_struct_sql(fields: Sequence[Tuple[str, str]]) -> str:
    """Spark SQL of a struct of (name, SQL expression) pairs, in that order."""
    return "named_struct(" + ", ".join(f"{sql_string(name)}, {expr}" for name, expr in fields) + ")"


def row_struct_sql(columns: Sequence[str], alias: Optional[str] = None) -> str:
    """Spark SQL of a struct of the given columns (field order = column order)."""
    prefix = f"{alias}." if alias else ""
    return named_struct_sql([(c, prefix + quote_identifier(c)) for c in columns])


def _is_decimal(spark_type: str) -> bool:
    return spark_type.strip().lower().startswith("decimal")


def _plain_decimal_sql(ref: str, spark_type: str) -> str:
    """Spark SQL writing a decimal(p,s) value with its exact digits and no exponent. A cast to
    string gives Java's BigDecimal.toString (1.000E-7) when spark.sql.ansi.enabled is false, so
    the digits come from to_char with a pattern of the type's own size."""
    inside = spark_type.partition("(")[2].rstrip(") ")
    precision, _, scale = inside.partition(",")
    p, s = (int(precision), int(scale)) if scale else (10, 0)  # Spark's `decimal` is (10,0)
    pattern = "9" * max(p - s - 1, 0) + "0" + ("." + "0" * s if s else "")
    return (f"case when {ref} is null then 'null' else concat(case when {ref} < 0 then '-' "
            f"else '' end, trim(to_char(abs({ref}), '{pattern}'))) end")


@dataclass(frozen=True)
class JsonImages:
    """How row images are written and read as JSON: one instance per log, from its options
    (`LogConfig.images`). Writing (`object_sql`, `to_json_sql`) and reading (`from_json_sql`)
    use the same Spark options, so a reader parses exactly what the writer wrote."""

    timestamps: str = TIMESTAMP_SQL
    plain_decimals: bool = False

    def options(self) -> Dict[str, str]:
        """Spark's JSON options. The zone is fixed to UTC, so an instant's text never depends
        on the writer's session time zone; `XXX` writes `Z` there and also reads the offsets
        that logs written before the zone was fixed hold (`+02:00`)."""
        sep = _SEPARATOR[self.timestamps]
        return {
            "ignoreNullFields": "false",
            "dateFormat": "yyyy-MM-dd",
            "timestampFormat": f"yyyy-MM-dd{sep}HH:mm:ss.SSSSSSXXX",
            "timestampNTZFormat": f"yyyy-MM-dd{sep}HH:mm:ss.SSSSSS",
            "timeZone": "UTC",
        }

    def _options_sql(self) -> str:
        return "map(" + ", ".join(f"{sql_string(k)}, {sql_string(v)}"
                                  for k, v in self.options().items()) + ")"

    def to_json_sql(self, struct_expr: str) -> str:
        """Spark SQL rendering a struct expression as one JSON object."""
        return f"to_json({struct_expr}, {self._options_sql()})"

    def from_json_sql(self, text_expr: str, schema: str) -> str:
        """Spark SQL parsing a JSON text this log wrote into a struct of `schema` (DDL)."""
        return f"from_json({text_expr}, {sql_string(schema)}, {self._options_sql()})"

    def object_sql(self, columns: Sequence[str], alias: Optional[str] = None,
                   types: Sequence[str] = ()) -> str:
        """Spark SQL rendering the given columns as one JSON object (field order = column
        order). `types` (same order) are needed for plain decimals only."""
        decimals = ({c: t for c, t in zip(columns, types) if _is_decimal(t)}
                    if self.plain_decimals else {})
        if not decimals:
            return self.to_json_sql(row_struct_sql(columns, alias))
        # Spark's to_json writes Java's BigDecimal.toString (1.000E-7). So the object is built
        # field by field: decimals by _plain_decimal_sql, each other field rendered by to_json
        # as {"v":...} with its wrapper cut off.
        prefix = f"{alias}." if alias else ""
        parts = []
        for i, column in enumerate(columns):
            ref = prefix + quote_identifier(column)
            if column in decimals:
                value = _plain_decimal_sql(ref, decimals[column])
            else:
                wrapped = self.to_json_sql(named_struct_sql([("v", ref)]))
                value = f"substr({wrapped}, 6, length({wrapped}) - 6)"
            name = json.dumps(column, ensure_ascii=False)
            parts.append(sql_string(("{" if i == 0 else ",") + name + ":"))
            parts.append(value)
        return f"concat({', '.join(parts)}, '}}')"


DEFAULT_IMAGES = JsonImages()


def json_object_sql(columns: Sequence[str], alias: Optional[str] = None,
                    images: JsonImages = DEFAULT_IMAGES, types: Sequence[str] = ()) -> str:
    """Spark SQL rendering the given columns as one JSON object (field order = column order)."""
    return images.object_sql(columns, alias, types)


def to_json_sql(struct_expr: str, images: JsonImages = DEFAULT_IMAGES) -> str:
    """Spark SQL rendering a struct expression as one JSON object."""
    return images.to_json_sql(struct_expr)


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

    def value_sql(self, op: str, before: str, after: str) -> str:
        """Spark SQL of `value` (a string) from SQL expressions of the op and JSON images."""
        tail = self._tail.decode()  # type: ignore[attr-defined]
        return (f"""concat('{{"before":', coalesce({before}, 'null'), ',"after":', """
                f"""coalesce({after}, 'null'), ',"op":"', {op}, '"', {sql_string(tail)})""")


def key_bytes(key_json: Optional[str]) -> Optional[bytes]:
    return None if key_json is None else key_json.encode()


@dataclass(frozen=True)
class RecordEncoder:
    """The records one change becomes, by `log.format` and `log.changelog-mode`:

    | format / mode          | insert      | update                    | delete                      |
    |------------------------|-------------|---------------------------|-----------------------------|
    | debezium-json / all    | `c`, after  | `u`, before and after     | `d`, before; keyed: + tombstone |
    | json / upsert          | the row     | the row                   | tombstone                   |
    | json / all             | the row     | (refused before commit)   | (refused before commit)     |
    | debezium-json / upsert | `c`, after  | `u`, after, before null   | tombstone                   |

    The last line is the shape keyed logs had by default in 0.1; it is only written to
    topics that already hold it (see log_continuation.continue_stored_shape).
    """

    envelope: EnvelopeWriter
    format: str = "debezium-json"
    upsert: bool = False
    keyed: bool = False

    @property
    def tombstone_after_delete(self) -> bool:
        """Whether a keyed `d` event is followed by a tombstone of its key (Debezium's
        tombstones.on.delete), only so that a compacted topic can forget the key. The tombstone
        carries the header H_TOMBSTONE; readers that apply `d` events skip it (Flink's
        debezium-json skips every tombstone), while in upsert mode a tombstone (without it) is
        the delete itself."""
        return self.keyed and not self.upsert and self.format == "debezium-json"

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

    def record_sql(self, op: str, key: str, before: str, after: str) -> "Tuple[str, str, str]":
        """Spark SQL of one change's record as bytes, from SQL expressions of a change row:
        (key, value, route). The same records as `value` (the Python form, kept as the
        reference), so Spark renders them and only bytes reach the writer. `route` places a
        keyless record (the row image), NULL for keyed logs, whose key places them."""
        if self.format == "json":
            value = f"coalesce({after}, 'null')"
            if not self.upsert:  # as in value; the run refuses such a change set before commit
                refusal = sql_string("log.format 'json' cannot express an update or delete "
                                     "without upsert mode")
                value = f"case when {op} = '{OP_INSERT}' then {value} else raise_error({refusal}) end"
        else:
            value = self.envelope.value_sql(op, "null" if self.upsert else before, after)
        if self.upsert:
            value = f"case when {op} = '{OP_DELETE}' then null else {value} end"
        known = ", ".join(f"'{o}'" for o in OPS)
        value = (f"case when {op} in ({known}) then {value} else "
                 f"raise_error(concat('unknown change op ', {op})) end")
        route = "cast(null as binary)" if self.keyed else f"cast(coalesce({after}, {before}, '') as binary)"
        return f"cast({key} as binary)", f"cast({value} as binary)", route


def is_tombstone_after_delete(headers: Any) -> bool:
    """Whether a record (its headers as (name, bytes) pairs) is the tombstone that follows a
    keyed `d` event: it repeats that delete for log compaction and is skipped when applying."""
    return any(k == H_TOMBSTONE for k, _ in (headers or ()))


# --- the decoding side: what readers make of the records above ------------------------------

# The fields of the Debezium envelope EnvelopeWriter writes: a value with exactly these is a
# change event; any other value is a bare row (log.format json).
ENVELOPE_FIELDS = {"before", "after", "op", "ts_ms", "source"}


def decode_json(data: Optional[bytes]) -> Any:
    # Decimals are written with their exact digits: keep them exact.
    return None if data is None else json.loads(data, parse_float=Decimal)


# What a record's value is, by its decoded value: source_changes lands these letters with the
# record and its SQL reads the row image from where they say.
TOMBSTONE, ENVELOPE, BARE_ROW = "k", "e", "b"


def value_shape(value: Any) -> Tuple[str, str]:
    """(shape, op) of a decoded record value: a tombstone (None) deletes by key; a Debezium
    envelope carries its op; any other value is a bare row (log.format json), an upsert."""
    if value is None:
        return TOMBSTONE, "d"
    if isinstance(value, dict) and set(value) == ENVELOPE_FIELDS:
        return ENVELOPE, value["op"]
    return BARE_ROW, "c"


def decode_record(msg: Any, snapshot: int) -> ChangeRecord:
    """A data record as a change: Debezium envelope, tombstone (delete by key), or a bare row
    (log.format json: an upsert). A tombstone that repeats the `d` event before it
    (is_tombstone_after_delete) is not a change of its own: callers skip it."""
    key, value = decode_json(msg.key), decode_json(msg.value)
    shape, op = value_shape(value)
    if shape == TOMBSTONE:
        return ChangeRecord(msg.partition, msg.offset, key, op, None, None, 0, snapshot)
    if shape == BARE_ROW:
        return ChangeRecord(msg.partition, msg.offset, key, op, None, value, 0, snapshot)
    return ChangeRecord(msg.partition, msg.offset, key, op, value.get("before"),
                        value.get("after"), value.get("ts_ms", 0), snapshot)
