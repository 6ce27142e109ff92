"""`log.format: debezium-json` (the default): each change a Debezium change event
`{"before", "after", "op", "ts_ms", "source"}`, the key a JSON object of the `unique_key` columns.

| mode   | insert      | update                    | delete                          |
|--------|-------------|---------------------------|---------------------------------|
| all    | `c`, after  | `u`, before and after     | `d`, before; keyed: + tombstone |
| upsert | `c`, after  | `u`, after, before null   | tombstone                       |

`upsert` is the shape keyed logs had by default in 0.1; it is only written to topics that
already hold it (log_continuation.continue_stored_shape), as Flink's debezium-json cannot read
an update without its before image. With Debezium's transaction metadata on, a log's first
records (the table's rows when the log starts) are snapshot reads: op `r`, `source.snapshot`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence

from dbt.adapters.logstore.__version__ import version
from dbt.adapters.logstore.formats.debezium_transactions import BLOCK_SCHEMA as TRANSACTION_BLOCK_SCHEMA, enabled as transactions_enabled
from dbt.adapters.logstore.formats.base import (
    OP_DELETE, OP_INSERT, OP_READ, OPS, Decoded, FormatRefusal, RecordEncoder, RecordFormat,
    TableShape, check_op,
)
from dbt.adapters.logstore.spark.json_images import sql_string

NAME = "debezium-json"
# The fields of the envelope written here: a value with exactly these (and optionally Debezium's
# `transaction` block) is a change event.
ENVELOPE_FIELDS = frozenset({"before", "after", "op", "ts_ms", "source"})
OPTIONAL_FIELDS = frozenset({"transaction"})


def is_envelope(fields: Any) -> bool:
    """Whether a value with these top-level fields is a change event written here."""
    names = set(fields)
    return ENVELOPE_FIELDS <= names and names <= ENVELOPE_FIELDS | OPTIONAL_FIELDS


@dataclass(frozen=True)
class EnvelopeWriter:
    """Builds record values for one commit; the shared parts are encoded once per commit."""

    schema: str
    table: str
    ts_ms: int
    snapshot_read: bool = False  # Debezium's snapshot: op `r`, source.snapshot "true"

    def __post_init__(self) -> None:
        source: Dict[str, Any] = {"connector": "dbt-logstore", "version": version, "db": self.schema,
                                  "table": self.table, "ts_ms": self.ts_ms}
        if self.snapshot_read:
            source["snapshot"] = "true"
        text = json.dumps(source, separators=(",", ":"))
        object.__setattr__(self, "_tail", f',"ts_ms":{self.ts_ms},"source":{text}}}'.encode())

    def op_letter(self, op: str) -> str:
        return OP_READ if self.snapshot_read and op == OP_INSERT else op

    def value(self, op: str, before: Optional[str], after: Optional[str]) -> bytes:
        """The envelope for one change; `before`/`after` are JSON images or None."""
        check_op(op)
        return b"".join((
            b'{"before":', (before or "null").encode(),
            b',"after":', (after or "null").encode(),
            b',"op":"', self.op_letter(op).encode(), b'"', self._tail,  # type: ignore[attr-defined]
        ))

    def value_sql(self, op: str, before: str, after: str) -> str:
        """Spark SQL of `value` (a string) from SQL expressions of the op and JSON images."""
        tail = self._tail.decode()  # type: ignore[attr-defined]
        if self.snapshot_read:
            op = f"case when {op} = '{OP_INSERT}' then '{OP_READ}' else {op} end"
        return (f"""concat('{{"before":', coalesce({before}, 'null'), ',"after":', """
                f"""coalesce({after}, 'null'), ',"op":"', {op}, '"', {sql_string(tail)})""")


@dataclass(frozen=True)
class DebeziumEncoder(RecordEncoder):
    envelope: EnvelopeWriter
    upsert: bool = False
    keyed: bool = False

    @property
    def tombstone_after_delete(self) -> bool:
        """A keyed `d` event is followed by a tombstone of its key (Debezium's
        tombstones.on.delete), only so that a compacted topic can forget the key. It carries
        the header H_TOMBSTONE; readers that apply `d` events skip it (Flink's debezium-json
        skips every tombstone), while in upsert mode a tombstone (without it) is the delete."""
        return self.keyed and not self.upsert

    def value(self, op: str, before: Optional[str], after: Optional[str]) -> Optional[bytes]:
        check_op(op)
        if self.upsert and op == OP_DELETE:
            return None
        return self.envelope.value(op, None if self.upsert else before, after)

    def value_sql(self, op: str, before: str, after: str) -> str:
        return self.tombstone_on_delete_sql(op, self.envelope.value_sql(op, "null" if self.upsert else before, after))


class DebeziumJson(RecordFormat):
    name = NAME

    def changelog_mode(self, requested: str, unique_key: Sequence[str], append_only: bool,
                       materialization: str) -> str:
        if requested == "upsert":
            raise FormatRefusal(
                "config 'log.changelog-mode' = 'upsert' with 'log.format' = 'debezium-json' would "
                "write updates without their before image, which Flink's debezium-json cannot read. "
                "Allowed: 'log.changelog-mode' all or auto with debezium-json (a Debezium change "
                "stream), or 'log.format' = 'json' with upsert (Flink's upsert-kafka). A topic that "
                "already holds that shape keeps it under 'auto' (see docs/operations.md, 'Moving an existing log').")
        return "all"

    def encoder(self, shape: TableShape, ts_ms: int, upsert: bool, options: Mapping[str, str],
                snapshot_read: bool = False) -> RecordEncoder:
        return DebeziumEncoder(EnvelopeWriter(shape.schema, shape.table, ts_ms, snapshot_read),
                               upsert=upsert, keyed=bool(shape.unique_key))

    def decode_value(self, key: Any, value: Any) -> Optional[Decoded]:
        if not (isinstance(value, dict) and is_envelope(value)):
            return None
        op = value["op"]  # a snapshot read ('r') stays one: readers apply it as an insert
        if op not in (*OPS, OP_READ):
            raise ValueError(f"unknown change op {op!r}")
        return Decoded(key, op, value.get("before"), value.get("after"), value.get("ts_ms") or 0)

    def connect_value_schema(self, row: Dict[str, Any], names: str, options: Mapping[str, str]) -> Dict[str, Any]:
        """Debezium's Envelope: before and after of the row's struct, op, ts_ms, the source block
        (and the transaction block when transaction metadata is on)."""
        image = {**row, "optional": True, "name": f"{names}.Value"}
        source_fields = [{"field": f, "type": "string", "optional": False}
                         for f in ("connector", "version", "db", "table")]
        source_fields += [{"field": "ts_ms", "type": "int64", "optional": False},
                          {"field": "snapshot", "type": "string", "optional": True}]
        fields = [{**image, "field": "before"}, {**image, "field": "after"},
                  {"field": "op", "type": "string", "optional": False},
                  {"field": "ts_ms", "type": "int64", "optional": True},
                  {"field": "source", "type": "struct", "name": "dbt_logstore.Source",
                   "optional": False, "fields": source_fields}]
        if transactions_enabled(options):
            fields.append(TRANSACTION_BLOCK_SCHEMA)
        return {"type": "struct", "name": f"{names}.Envelope", "optional": False, "fields": fields}


FORMAT = DebeziumJson()
