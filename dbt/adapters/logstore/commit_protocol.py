"""The commit protocol: the order in which a logged model changes its table and its log.

1. `prepare`: the log is reachable and the topic exists, else fail before anything changes;
   a log that starts now (`log_is_new`) first receives the table's current rows as inserts.
2. The new rows are staged and the commit's change set is written to a change table
   `<model>__logstore_changes`, tagged with a change-set id (the dbt invocation id).
3. The table commit; the table is tagged `logstore.changeset.committed = <id>` in the same step
   (a rename of the staged table carries it) or right after it (incremental inserts).
4. The change set is streamed to the log: one Kafka transaction for `transactional`, an
   idempotent producer for `eventual`.
5. The table is tagged `logstore.changeset.mirrored = <id>` and the change table dropped.

A change table left behind by a failed run is settled first by the next run (`recovery_action`):
re-sent when the table commit happened and the log write did not finish, dropped otherwise, so a
committed change is never lost.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Tuple

from dbt.adapters.logstore.encoding import EnvelopeWriter, RecordEncoder, key_bytes
from dbt.adapters.logstore.log_config import LogConfig, LogConfigError
from dbt.adapters.logstore.log_system import WriteResult, get_log_system

CHANGESET_ID = "logstore.changeset.id"
COMMITTED = "logstore.changeset.committed"
MIRRORED = "logstore.changeset.mirrored"
TOPIC_PARTITIONS = "logstore.topic.partitions"

PROGRESS_EVERY = 100_000

ChangeRow = Tuple[str, Optional[str], Optional[str], Optional[str]]  # op, key, before, after


@dataclass(frozen=True)
class TableRef:
    schema: str
    identifier: str

    @property
    def writer_id(self) -> str:
        return f"{self.schema}.{self.identifier}"


def recovery_action(changes_props: Mapping[str, str], table_props: Mapping[str, str]) -> str:
    """What to do with a change table a previous run left behind: 'mirror' or 'drop'."""
    changeset = changes_props.get(CHANGESET_ID)
    if not changeset:
        return "drop"
    committed = table_props.get(COMMITTED) == changeset
    mirrored = table_props.get(MIRRORED) == changeset
    return "mirror" if committed and not mirrored else "drop"


def _servers(value: Optional[str]) -> frozenset:
    """One cluster, however its servers are listed."""
    return frozenset(s.strip() for s in (value or "").split(",") if s.strip())


def log_is_new(log: LogConfig, table_props: Mapping[str, str], topic_partitions: int) -> bool:
    """Whether this table's log starts now (log just enabled, or a new topic or cluster): then
    the table's current rows are written first, so a consumer of the new log sees the whole table.

    A log that continues must keep its meaning: the same record key and format, and the same
    topic partition count, or a key's records would land in two partitions (Paimon #815, #4763).
    """
    if (table_props.get("log.system") != log.system
            or table_props.get("kafka.topic") != log.topic
            or _servers(table_props.get("kafka.bootstrap.servers")) != _servers(log.bootstrap_servers)):
        return True
    advice = f"Allowed: keep it, or log to a new 'kafka.topic' (a new topic starts with the table's rows)."
    stored_key = table_props.get("log.key")
    if stored_key is not None and stored_key != ",".join(log.unique_key):
        raise LogConfigError(
            f"Model '{log.model}': 'unique_key' changed from [{stored_key}] to "
            f"[{','.join(log.unique_key)}], but topic '{log.topic}' already holds records keyed by "
            f"[{stored_key}]; consumers could not match them. {advice}")
    stored_format = table_props.get("log.format", "debezium-json")
    if stored_format != log.format:
        raise LogConfigError(
            f"Model '{log.model}': 'log.format' changed from '{stored_format}' to '{log.format}' "
            f"on topic '{log.topic}'; one topic must hold one format. {advice}")
    stored_partitions = table_props.get(TOPIC_PARTITIONS)
    if stored_partitions and int(stored_partitions) != topic_partitions:
        raise LogConfigError(
            f"Model '{log.model}': topic '{log.topic}' now has {topic_partitions} partitions, but "
            f"its records were written with {stored_partitions}; keys would move between "
            f"partitions and lose their order. {advice}")
    return False


def write_change_set(
    log: LogConfig,
    table: TableRef,
    rows: Iterable[ChangeRow],
    progress: Callable[[int], None] = lambda n: None,
) -> WriteResult:
    """Stream one commit's change rows into the log; all or nothing for transactional logs."""
    writer = get_log_system(log.system).open_writer(log, table.writer_id)
    encoder = RecordEncoder(
        EnvelopeWriter(schema=table.schema, table=table.identifier, ts_ms=int(time.time() * 1000)),
        format=log.format, upsert=log.upsert,
    )
    try:
        for count, (op, key, before, after) in enumerate(rows, start=1):
            writer.send(key_bytes(key), encoder.value(op, before, after),
                        route=(after if after is not None else before or "").encode())
            if count % PROGRESS_EVERY == 0:
                progress(count)
        return writer.commit()
    except BaseException:
        writer.abort()
        raise


def prepare_log(log: LogConfig) -> int:
    """The log is reachable and its topic exists; returns the topic's partition count."""
    return get_log_system(log.system).prepare(log)


def parse_properties(rows: Iterable[Any]) -> dict:
    """`SHOW TBLPROPERTIES` rows -> dict."""
    return {str(r[0]): str(r[1]) for r in rows}
