"""The record formats: how one change of a table becomes the key and value of a log record, and how
a reader turns a record back into a change. One module per format, registered by name in FORMATS
(`log.format`); a format's module holds its options, its rules (which changelog modes it can
write), its encoder (the Spark SQL that renders key and value, and the Python twin the tests
compare byte for byte) and its decoder, side by side.

- debezium_json.py: Debezium change events (`log.format: debezium-json`, the default);
- json_rows.py: bare rows (`log.format: json`), upserts by key with tombstones as deletes;
- connect_schema.py: Kafka Connect's `{"schema", "payload"}` envelope around either
  (`log.format.schema-include`);
- debezium_transactions.py: Debezium's transaction metadata (`log.transaction-metadata`).

This package knows no log system and no dbt: it raises FormatRefusal (a sentence without the
model's name) where a combination cannot be written, and log_config names the model.
"""
from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional, Tuple

from dbt.adapters.logstore.formats import connect_schema, debezium_json, debezium_transactions, json_rows
from dbt.adapters.logstore.formats.base import (  # the interface, for the package's users
    OP_DELETE, OP_INSERT, OP_READ, OP_UPDATE, OPS, ChangeRecord, Decoded, FormatOption, FormatRefusal,
    RecordEncoder, RecordFormat, TableShape, decode_json, field_text, field_texts,
    is_tombstone_after_delete,
)
from dbt.adapters.logstore.spark.json_images import JsonImages

# --- the registry --------------------------------------------------------------------------


# In the order a reader tries them (decode_value): json_rows reads any value, so it stays last.
FORMATS: Dict[str, RecordFormat] = {f.name: f for f in (debezium_json.FORMAT, json_rows.FORMAT)}
# Options the format modules add (config/options.py reads their spellings with the core options').
FORMAT_OPTIONS: Tuple[FormatOption, ...] = (*connect_schema.OPTIONS, *debezium_transactions.OPTIONS)


def option_default(key: str) -> str:
    """What a log that recorded no value of a format option was written with."""
    return next(o.default for o in FORMAT_OPTIONS if o.key == key)


def get_format(name: str) -> RecordFormat:
    if name not in FORMATS:
        raise ValueError(f"unknown log format {name!r}; known: {', '.join(FORMATS)}")
    return FORMATS[name]


def images_for(options: Mapping[str, str], timestamps: str, plain_decimals: bool) -> JsonImages:
    """How a log's row images are written, from its options (the Connect envelope carries Connect's
    temporal types)."""
    return JsonImages(timestamps, plain_decimals, epoch_temporals=connect_schema.included(options))


# What a record's value is, by its decoded value: source_changes lands these letters with the
# record and its SQL reads the row image from where they say.
TOMBSTONE, ENVELOPE, BARE_ROW = "k", "e", "b"


def decode_value(key: Any, value: Any) -> Decoded:
    """The change a record is, whatever format wrote it: a tombstone deletes by key; a Connect
    envelope is unwrapped; then each format is asked in turn (a Debezium event before a bare
    row, which any other JSON value is)."""
    key = connect_schema.unwrap(key)
    if value is None:
        return Decoded(key, OP_DELETE, None, None)
    value = connect_schema.unwrap(value)
    for candidate in FORMATS.values():  # bare rows (json_rows), which any value is, come last
        decoded = candidate.decode_value(key, value)
        if decoded is not None:
            return decoded
    raise ValueError(f"a record value no format reads: {str(value)[:80]}")


def value_shape(value: Any) -> Tuple[str, str]:
    """(shape, op) of a decoded record value: a tombstone (None), a Debezium envelope, or any
    other value, a bare row (an upsert)."""
    if value is None:
        return TOMBSTONE, OP_DELETE
    decoded = debezium_json.FORMAT.decode_value(None, connect_schema.unwrap(value))
    if decoded is not None:
        return ENVELOPE, decoded.op
    return BARE_ROW, OP_INSERT


def held_after(key: Optional[bytes], value: Optional[bytes]) -> Tuple[Optional[str], Optional[str]]:
    """What a plain upsert reader (latest record per key) holds for a record's key once it has
    read the record: (the key's JSON text, the row's JSON text, or None where the record deletes
    the key), both as written, out of Kafka Connect's envelope. (None, None) for a keyless record.
    A re-base retracts the keys that hold a row the table no longer has (retraction.py). One pass
    over each text, no value decoded but the op: it runs once per record of a topic."""
    if key is None:
        return None, None
    key_text = _payload_text(key.decode())
    if value is None:
        return key_text, None
    text = _payload_text(value.decode())
    fields = field_texts(text)
    if fields is None or not debezium_json.is_envelope(fields):
        return key_text, text  # a bare row (json): the row itself
    return key_text, (None if json.loads(fields["op"]) == OP_DELETE else fields["after"])


def _payload_text(text: str) -> str:
    """A key's or value's JSON text, out of Kafka Connect's envelope where it has one."""
    if not text.lstrip().startswith('{"schema"'):
        return text
    fields = field_texts(text)
    if fields is None or set(fields) != {"schema", "payload"}:
        return text
    return fields["payload"] if connect_schema.unwrap(decode_json(text.encode())) is not None else text


def decode_record(msg: Any, snapshot: int) -> ChangeRecord:
    """A data record (its .key, .value, .partition, .offset) as a change of snapshot `snapshot`.
    A tombstone that repeats the `d` event before it (is_tombstone_after_delete) is not a change
    of its own: callers skip it."""
    change = decode_value(decode_json(msg.key), decode_json(msg.value))
    return ChangeRecord(msg.partition, msg.offset, change.key, change.op, change.before,
                        change.after, change.ts_ms, snapshot)

