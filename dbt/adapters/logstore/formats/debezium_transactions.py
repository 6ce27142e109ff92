"""Debezium's transaction metadata (`log.transaction-metadata: true`, debezium-json logs): every
committed write attempt is one transaction, its id the attempt's id.

- Each change event carries Debezium's `transaction` block: `id`, `total_order` (the event's
  position in the attempt, from 1) and `data_collection_order` (the same: one table per attempt).
- A BEGIN and an END event per attempt go to the transaction topic (`<topic>.transaction`, or
  `log.transaction-metadata.topic`), keyed by `{"id"}`; END's `event_count` is the attempt's
  change events (the tombstone that follows a `d` event is not one) and `data_collections` names
  the table as `<schema>.<table>`. In a transactional log they commit with the records, so a
  read_committed consumer sees BEGIN and END of confirmed attempts only; an eventual log may
  show a BEGIN of an attempt that failed, whose retry has a new id.
- A log's first records (the table's rows when the log starts) are Debezium's snapshot reads:
  op `r`, `source.snapshot: "true"` (debezium_json.py).

The block is added to a rendered value in Python as the records are sent (`ordered`): its
position needs a count along the attempt, which Spark's parallel rendering does not have; so the
option is refused with `log.mirror.parallelism` above 1.
"""
from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional, Tuple

from dbt.adapters.logstore.formats.base import FormatOption

METADATA = "log.transaction-metadata"
METADATA_TOPIC = "log.transaction-metadata.topic"
TOPIC_SUFFIX = ".transaction"
OPTIONS = (
    FormatOption(METADATA, ("log_transaction_metadata",), "false", ("true", "false"), ("debezium-json",),
                 "Debezium's transaction metadata: a 'transaction' block in each event and BEGIN/END "
                 "events per committed attempt on the transaction topic (Debezium's "
                 "provide.transaction.metadata); the log's first records become snapshot reads (op r)."),
    FormatOption(METADATA_TOPIC, ("log_transaction_metadata_topic",), "", (), ("debezium-json",),
                 "The topic of the BEGIN/END events (default: '<kafka.topic>.transaction')."),
)

# The schema of the block in a Connect envelope (Debezium's `event.block`).
BLOCK_SCHEMA: Dict[str, Any] = {
    "field": "transaction", "type": "struct", "name": "event.block", "optional": True, "version": 1,
    "fields": [{"field": "id", "type": "string", "optional": False},
               {"field": "total_order", "type": "int64", "optional": False},
               {"field": "data_collection_order", "type": "int64", "optional": False}]}
_KEY_SCHEMA = {"type": "struct", "name": "io.debezium.connector.common.TransactionMetadataKey",
               "optional": False, "fields": [{"field": "id", "type": "string", "optional": False}]}
_VALUE_SCHEMA = {"type": "struct", "name": "io.debezium.connector.common.TransactionMetadataValue",
                 "optional": False, "fields": [
                     {"field": "status", "type": "string", "optional": False},
                     {"field": "id", "type": "string", "optional": False},
                     {"field": "event_count", "type": "int64", "optional": True},
                     {"field": "data_collections", "type": "array", "optional": True, "items": {
                         "type": "struct", "optional": False, "fields": [
                             {"field": "data_collection", "type": "string", "optional": False},
                             {"field": "event_count", "type": "int64", "optional": False}]}},
                     {"field": "ts_ms", "type": "int64", "optional": False}]}
BEGIN, END = "BEGIN", "END"


def enabled(options: Mapping[str, str]) -> bool:
    return str(options.get(METADATA, "false")).lower() == "true"


def topic_for(log_topic: str, options: Mapping[str, str]) -> str:
    return options.get(METADATA_TOPIC) or log_topic + TOPIC_SUFFIX


def ordered(value: Optional[bytes], transaction_id: str, order: int, payload_end: int) -> Optional[bytes]:
    """A rendered change event with its `transaction` block, `payload_end` characters before its
    end (after the event's last field); a tombstone as it is."""
    if value is None:
        return None
    block = (f',"transaction":{{"id":{json.dumps(transaction_id)},"total_order":{order},'
             f'"data_collection_order":{order}}}').encode()
    return value[:-payload_end] + block + value[-payload_end:]


def _dumps(value: Any, schema: Optional[Dict[str, Any]]) -> bytes:
    body = value if schema is None else {"schema": schema, "payload": value}
    return json.dumps(body, separators=(",", ":")).encode()


def begin_record(transaction_id: str, ts_ms: int, schema_include: bool) -> Tuple[bytes, bytes]:
    """(key, value) of a transaction's BEGIN event."""
    value = {"status": BEGIN, "id": transaction_id, "event_count": None, "data_collections": None,
             "ts_ms": ts_ms}
    return (_dumps({"id": transaction_id}, _KEY_SCHEMA if schema_include else None),
            _dumps(value, _VALUE_SCHEMA if schema_include else None))


def end_record(transaction_id: str, ts_ms: int, data_collection: str, events: int,
               schema_include: bool) -> Tuple[bytes, bytes]:
    """(key, value) of a transaction's END event: how many events it holds, per table."""
    value = {"status": END, "id": transaction_id, "event_count": events,
             "data_collections": [{"data_collection": data_collection, "event_count": events}],
             "ts_ms": ts_ms}
    return (_dumps({"id": transaction_id}, _KEY_SCHEMA if schema_include else None),
            _dumps(value, _VALUE_SCHEMA if schema_include else None))


def parse_event(value: Optional[bytes]) -> Optional[Dict[str, Any]]:
    """A BEGIN or END event, unwrapped from its Connect envelope if it has one."""
    if value is None:
        return None
    event = json.loads(value)
    if isinstance(event, dict) and set(event) == {"schema", "payload"}:
        event = event["payload"]
    return event
