"""`log.format: json`: each change the row itself (Flink's `json`, and `upsert-kafka` with a key).

| mode   | insert  | update                  | delete                  |
|--------|---------|-------------------------|-------------------------|
| upsert | the row | the row                 | tombstone               |
| all    | the row | (refused before commit) | (refused before commit) |

`all` is for append-only logs: an incremental append model (of which the run refuses any
update or delete before its commit).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence

from dbt.adapters.logstore.formats.base import (
    OP_DELETE, OP_INSERT, Decoded, FormatRefusal, RecordEncoder, RecordFormat, TableShape, check_op,
)
from dbt.adapters.logstore.spark.json_images import sql_string

NAME = "json"


@dataclass(frozen=True)
class BareRowEncoder(RecordEncoder):
    upsert: bool = False
    keyed: bool = False

    def value(self, op: str, before: Optional[str], after: Optional[str]) -> Optional[bytes]:
        check_op(op)
        if self.upsert and op == OP_DELETE:
            return None
        if op != OP_INSERT and not self.upsert:
            raise ValueError(f"log.format 'json' cannot express op {op!r} without upsert mode")
        return (after or "null").encode()

    def value_sql(self, op: str, before: str, after: str) -> str:
        value = f"coalesce({after}, 'null')"
        if not self.upsert:  # as in value; the run refuses such a change set before commit
            refusal = sql_string("log.format 'json' cannot express an update or delete "
                                 "without upsert mode")
            value = f"case when {op} = '{OP_INSERT}' then {value} else raise_error({refusal}) end"
        return self.tombstone_on_delete_sql(op, value)


class JsonRows(RecordFormat):
    name = NAME

    def changelog_mode(self, requested: str, unique_key: Sequence[str], append_only: bool,
                       materialization: str) -> str:
        mode = requested if requested != "auto" else ("upsert" if unique_key else "all")
        if mode == "all" and not append_only:
            raise FormatRefusal(
                f"config 'log.format' = 'json' writes bare rows, which cannot express the updates "
                f"and deletes of a {materialization} model{'' if unique_key else ' without a unique_key'}. "
                f"Allowed: 'log.format' = 'debezium-json', or 'json' with a 'unique_key' (upsert "
                f"mode: deletes as tombstones), or 'json' on an incremental append model.")
        return mode

    def refuse_changes(self, upsert: bool, non_inserts: int) -> Optional[str]:
        if upsert or not non_inserts:
            return None
        return (f"config 'log.format' = 'json' writes bare rows, which cannot express the "
                f"{non_inserts} updates/deletes of this run. Allowed: log.format 'debezium-json', "
                f"or 'log.changelog-mode' = 'upsert' (deletes as tombstones), or "
                f"'log.ignore-delete' for insert-and-delete-only logs.")

    def encoder(self, shape: TableShape, ts_ms: int, upsert: bool, options: Mapping[str, str],
                snapshot_read: bool = False) -> RecordEncoder:
        return BareRowEncoder(upsert=upsert, keyed=bool(shape.unique_key))

    def decode_value(self, key: Any, value: Any) -> Optional[Decoded]:
        """Any value is a bare row: an upsert of its key (a tombstone is decoded before this)."""
        return Decoded(key, OP_INSERT, None, value)

    def connect_value_schema(self, row: Dict[str, Any], names: str, options: Mapping[str, str]) -> Dict[str, Any]:
        return {**row, "optional": False, "name": f"{names}.Value"}


FORMAT = JsonRows()
