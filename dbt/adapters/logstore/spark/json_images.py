"""Row images as JSON: how a table row is written as one JSON object by Spark itself (`to_json`),
so every Spark type has one documented rule and no row is converted value by value in Python.
The formats (formats/) put these images into records; change sets (changes/diff.py) hold them.

- null -> JSON null (null fields are kept, never dropped);
- decimal -> JSON number with the exact digits of the value (no float rounding); Java's form,
  which may use an exponent (`1.000E-7`), or always plain with `log.encode.decimal-as-plain-number`;
- date -> "yyyy-MM-dd";
- timestamp -> an instant, always in UTC whatever the Spark session time zone, with microseconds
  and a literal `Z`: "2024-05-01 10:00:00.000000Z" (`log.timestamp-format.standard` SQL, the
  default, as Flink's json formats read by default) or "2024-05-01T10:00:00.000000Z" (ISO-8601);
- timestamp_ntz -> the same wall-clock text without the `Z`;
- binary -> base64 string; arrays, maps, structs -> JSON arrays/objects; strings as UTF-8.

With `epoch_temporals` (Kafka Connect's schema envelope, formats/connect_schema.py) a top-level
date is its day count since 1970-01-01 and a timestamp_ntz its microseconds since
1970-01-01T00:00:00, as Connect's Date and Debezium's MicroTimestamp carry them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

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


def _is_date(spark_type: str) -> bool:
    return spark_type.strip().lower() == "date"


def _is_timestamp_ntz(spark_type: str) -> bool:
    return spark_type.strip().lower() == "timestamp_ntz"


def epoch_micros_sql(ref: str) -> str:
    """Spark SQL of a timestamp_ntz's microseconds since 1970-01-01T00:00:00, computed from its
    wall-clock fields (a cast to an instant would go through the session time zone)."""
    return (f"(unix_date(cast({ref} as date)) * 86400000000 + hour({ref}) * 3600000000 + "
            f"minute({ref}) * 60000000 + cast(extract(SECOND FROM {ref}) * 1000000 as bigint))")


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
    epoch_temporals: bool = False  # Connect's int dates and timestamp_ntz (module docstring)

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

    def by_field(self, spark_type: str) -> Optional[str]:
        """Why a column of this type is rendered on its own rather than by to_json, or None."""
        if self.plain_decimals and _is_decimal(spark_type):
            return "plain-decimal"
        if self.epoch_temporals and _is_date(spark_type):
            return "epoch-day"
        if self.epoch_temporals and _is_timestamp_ntz(spark_type):
            return "epoch-micros"
        return None

    def renders_by_field(self, types: Sequence[str]) -> bool:
        return any(self.by_field(t) for t in types)

    def object_sql(self, columns: Sequence[str], alias: Optional[str] = None,
                   types: Sequence[str] = ()) -> str:
        """Spark SQL rendering the given columns as one JSON object (field order = column
        order). `types` (same order) are needed for plain decimals and epoch temporals only."""
        special = {c: (self.by_field(t), t) for c, t in zip(columns, types) if self.by_field(t)}
        if not special:
            return self.to_json_sql(row_struct_sql(columns, alias))
        # Spark's to_json writes Java's BigDecimal.toString (1.000E-7) and dates as text. So the
        # object is built field by field: those columns by their own SQL, each other field
        # rendered by to_json as {"v":...} with its wrapper cut off.
        prefix = f"{alias}." if alias else ""
        parts = []
        for i, column in enumerate(columns):
            ref = prefix + quote_identifier(column)
            how, spark_type = special.get(column, (None, ""))
            if how == "plain-decimal":
                value = _plain_decimal_sql(ref, spark_type)
            elif how == "epoch-day":
                value = f"coalesce(cast(unix_date({ref}) as string), 'null')"
            elif how == "epoch-micros":
                value = f"coalesce(cast({epoch_micros_sql(ref)} as string), 'null')"
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


