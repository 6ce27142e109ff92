"""A logged table's snapshots in its log: what one is (its id and the log offsets after it), how
one attempt writes a committed change set as the next snapshot (records with the protocol's
headers, then a confirmation record in the control topic: control_records.py), and which
snapshot a reader may start from. commit/protocol.py says when this happens in a commit.

Each attempt is all or nothing for `transactional` logs: its records and its confirmation are
one Kafka transaction; an idempotent producer writes them for `eventual`. A parallel attempt's
Spark tasks commit their shares with producers of their own, and the driver confirms them all.
"""
from __future__ import annotations

import itertools
import json
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, Iterable, Iterator, Mapping, Optional, Tuple

from dbt.adapters.logstore import faults
from dbt.adapters.logstore.log.control_records import ModelInput, confirmation_record, parse_control_record
from dbt.adapters.logstore.formats import (
    RecordEncoder, TableShape, connect_schema, debezium_transactions, get_format,
)
from dbt.adapters.logstore.spark.json_images import quote_identifier
from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.log.log_system import LogWriter, ModelLog, WriteResult, open_model_log
from dbt.adapters.logstore.names import (
    CHANGE_COLUMNS, COMMITTED, COMMITTED_MS, GENERATION, GENERATION_OFFSETS, GENERATION_PENDING,
    GENERATION_SNAPSHOT, H_ATTEMPT, H_CHANGESET, H_GENERATION, H_SNAPSHOT, H_TABLE, H_TOMBSTONE,
    H_WRITER, LOG_CLUSTER_ID, LOG_CONTROL_TOPIC_ID, LOG_TOPIC, LOG_TOPIC_ID, MIRRORED, SNAPSHOT_ATTEMPT,
    SNAPSHOT_ID, SNAPSHOT_OFFSETS, SNAPSHOT_TABLE_VERSION, SOURCES, TOMBSTONE_AFTER_DELETE,
    TOPIC_PARTITIONS, task_writer_id, task_writer_name,
)

# What a rebuilt table takes over from the table it replaces.
# How far a downstream table has read its upstream logs (see source_changes.py) is carried too.
# The log's identity and generation go with it (lifecycle/identity.py checks them on every run).
CARRIED = (SNAPSHOT_ID, SNAPSHOT_OFFSETS, SNAPSHOT_ATTEMPT, SNAPSHOT_TABLE_VERSION, MIRRORED,
           TOPIC_PARTITIONS, SOURCES, LOG_CLUSTER_ID, LOG_TOPIC_ID, LOG_CONTROL_TOPIC_ID, LOG_TOPIC,
           GENERATION, GENERATION_SNAPSHOT, GENERATION_OFFSETS)

PROGRESS_EVERY = 100_000

# A batch of records as columns (Attempt.records_sql): keys, values, routes (bytes or None) and
# the changes' ops, one list each.
RecordBatch = Tuple[list, list, list, list]
ChangeRow = Tuple[str, Optional[str], Optional[str], Optional[str]]  # op, key, before, after



@dataclass(frozen=True)
class TableRef:
    schema: str
    identifier: str
    # the commit of the change set being written, when the table recorded it (committed_ms)
    committed_ms: Optional[int] = None

    @property
    def writer_id(self) -> str:
        return f"{self.schema}.{self.identifier}"


@dataclass(frozen=True)
class Snapshot:
    """A committed snapshot of a logged table: its id (monotonic per table) and, per partition,
    the log offset a reader continues from after it (Paimon's `logOffsets`)."""

    id: int = 0
    end_offsets: Dict[int, int] = field(default_factory=dict)
    attempt: Optional[str] = None
    records: int = 0
    written: Dict[int, Tuple[int, int]] = field(default_factory=dict)  # [first, next) this commit
    transactions: int = 1  # Kafka transactions the attempt's records took
    longest_transaction_s: float = 0.0  # of this attempt's, as its writers timed them
    # the table format's version holding the snapshot's rows (table_formats.committed_version)
    table_version: Optional[str] = None
    generation: int = 1  # the log's generation it is in (lifecycle/generations.py)
    # when it starts its generation: per partition, where the generation's copy starts (None:
    # it does not start one; {} for an empty topic, where every partition's copy starts at 0)
    generation_start: Optional[Dict[int, int]] = None

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "Snapshot":
        offsets = json.loads(props.get(SNAPSHOT_OFFSETS) or "{}")
        return cls(id=int(props.get(SNAPSHOT_ID) or 0),
                   end_offsets={int(p): int(o) for p, o in offsets.items()},
                   attempt=props.get(SNAPSHOT_ATTEMPT) or None,
                   table_version=props.get(SNAPSHOT_TABLE_VERSION) or None,
                   generation=int(props.get(GENERATION) or 1))

    @classmethod
    def from_confirmation(cls, confirmation: Mapping[str, Any]) -> "Snapshot":
        return cls(id=int(confirmation["snapshot"]),
                   end_offsets={int(p): int(o) for p, o in confirmation["end_offsets"].items()},
                   attempt=confirmation["attempt"], records=int(confirmation["records"]),
                   written={int(p): (a, b + 1) for p, (a, b) in confirmation["offsets"].items()},
                   transactions=int(confirmation.get("transactions", 1)),
                   table_version=confirmation.get("table_version"),
                   generation=int(confirmation.get("generation") or 1),
                   generation_start=_offsets(confirmation.get("generation_start")))

    @property
    def starts_generation(self) -> bool:
        return self.generation_start is not None

    def properties(self, changeset: str) -> Dict[str, str]:
        props = {MIRRORED: changeset, SNAPSHOT_ID: str(self.id),
                 SNAPSHOT_OFFSETS: json.dumps({str(p): o for p, o in sorted(self.end_offsets.items())}),
                 SNAPSHOT_ATTEMPT: self.attempt or "", SNAPSHOT_TABLE_VERSION: self.table_version or "",
                 GENERATION: str(self.generation), GENERATION_PENDING: ""}
        if self.generation_start is not None:
            props[GENERATION_SNAPSHOT] = str(self.id)
            props[GENERATION_OFFSETS] = json.dumps(
                {str(p): o for p, o in sorted(self.generation_start.items())})
        return props


def _offsets(raw: Optional[Mapping[str, Any]]) -> Optional[Dict[int, int]]:
    """Per-partition offsets as a confirmation states them (None where it states none)."""
    return None if raw is None else {int(p): int(o) for p, o in raw.items()}


def committed_ms(props: Dict[str, str], changeset: str) -> Optional[int]:
    """When the table committed `changeset` (names.COMMITTED_MS); None for a commit that did
    not record it (made by an earlier version)."""
    recorded = props.get(COMMITTED_MS) if props.get(COMMITTED) == changeset else None
    return int(recorded) if recorded and recorded.isdigit() else None


@dataclass(frozen=True)
class Attempt:
    """One attempt to write a change set: everything a writer of it needs (the driver, or each
    Spark task of a parallel attempt, which receives it pickled)."""

    log: LogConfig
    table: TableRef
    snapshot_id: int
    changeset: str
    attempt: str
    ts_ms: int
    table_version: Optional[str] = None  # the format's version the table commit made
    # the table's (name, Spark type) columns after the commit: the Connect schema's
    columns: Tuple[Tuple[str, str], ...] = ()
    snapshot_read: bool = False  # the change set is the table's rows as the log starts
    generation: int = 1  # the log's generation (lifecycle/generations.py)
    starts_generation: bool = False  # the change set is the generation's copy of the table
    # the logged models the build read, at the snapshots it read (commit/model_inputs.py)
    inputs: Optional[Tuple[ModelInput, ...]] = None

    @classmethod
    def new(cls, log: LogConfig, table: TableRef, previous: Snapshot, changeset: str,
            table_version: Optional[str] = None, columns: Tuple[Tuple[str, str], ...] = (),
            snapshot_read: bool = False, generation: int = 1,
            starts_generation: bool = False,
            inputs: Optional[Tuple[ModelInput, ...]] = None) -> "Attempt":
        # ts_ms is the table commit's time (a re-sent change set's too), as docs/log-format.md says
        ts_ms = table.committed_ms or int(time.time() * 1000)
        return cls(log, table, previous.id + 1, changeset, uuid.uuid4().hex, ts_ms,
                   table_version, tuple(columns), snapshot_read, generation, starts_generation,
                   inputs)

    def encoder(self) -> RecordEncoder:
        """The log format's encoder for this attempt (formats/), with Kafka Connect's envelope
        when the log includes the schema."""
        fmt, options = get_format(self.log.format), self.log.format_options
        shape = TableShape(self.table.schema, self.table.identifier, self.columns, self.log.unique_key)
        # Debezium's snapshot events (op 'r', source.snapshot) for a re-based log's copy of the
        # table, and with transaction metadata; a log's first rows stay inserts, as 0.1 wrote them
        snapshot_read = self.snapshot_read and (debezium_transactions.enabled(options)
                                                or (self.starts_generation and self.generation > 1))
        encoder = fmt.encoder(shape, self.ts_ms, self.log.upsert, options, snapshot_read)
        return connect_schema.wrap(encoder, fmt, shape, options)

    def headers(self, writer: Optional[str] = None) -> Tuple[Tuple[str, bytes], ...]:
        headers = ((H_TABLE, self.table.writer_id.encode()), (H_SNAPSHOT, str(self.snapshot_id).encode()),
                   (H_CHANGESET, self.changeset.encode()), (H_ATTEMPT, self.attempt.encode()))
        if writer is not None:
            headers += ((H_WRITER, writer.encode()),)
        if self.starts_generation:
            headers += ((H_GENERATION, str(self.generation).encode()),)
        return headers

    def encode_rows(self, rows: Iterable[ChangeRow]) -> RecordBatch:
        """The records of change rows (op, key, before, after) encoded in Python: the reference
        form of records_sql, which the tests hold it to."""
        encoder = self.encoder()
        batch: RecordBatch = ([], [], [], [])
        for op, key, before, after in rows:
            batch[0].append(encoder.key(key))
            batch[1].append(encoder.value(op, before, after))
            batch[2].append(None if encoder.keyed else (after or before or "").encode())
            batch[3].append(op)
        return batch

    def records_sql(self, changes_relation: str) -> str:
        """Spark SQL of this attempt's records, rendered from a change table: the columns of
        RecordBatch, so only bytes cross into Python (formats.RecordEncoder.record_sql)."""
        op, key, before, after = (quote_identifier(name) for name in CHANGE_COLUMNS)
        key, value, route = self.encoder().record_sql(op, key, before, after)
        return (f"select {key} as key, {value} as value, {route} as route, {op} as op "
                f"from {changes_relation}")

    def send_batches(self, writer: LogWriter, batches: Iterable[RecordBatch],
                     writer_name: Optional[str] = None,
                     progress: Callable[[int], None] = lambda n: None) -> int:
        """Queue the records of `batches` (from records_sql) on `writer`; returns how many
        changes. The per-record work is the writer's send. With Debezium's transaction metadata,
        the attempt's BEGIN event comes first and its END last, and each event gets its block."""
        encoder = self.encoder()
        send, tombstones = writer.send, encoder.tombstone_after_delete
        headers = self.headers(writer_name)
        tombstone_headers = headers + ((H_TOMBSTONE, TOMBSTONE_AFTER_DELETE),)
        transactions = self.log.transaction_topic
        events = itertools.count(1)  # Debezium's total_order of the next event
        if transactions:
            send = self._numbered(send, encoder.payload_end(), events)
            writer.send_beside(transactions, *debezium_transactions.begin_record(
                self.attempt, self.ts_ms, self._enveloped))

        def send_all(records: Iterable[Tuple[Any, Any, Any, Any]]) -> None:
            for key, value, route, op in records:
                send(key, value, route=route, headers=headers)
                if tombstones and op == "d" and key is not None:  # right behind its delete
                    writer.send(key, None, route=route, headers=tombstone_headers)

        count = 0
        for keys, values, routes, ops in batches:
            start, records = count, zip(keys, values, routes, ops)
            if start < 2:  # the fault point sits after the attempt's second record
                send_all(itertools.islice(records, 2 - start))
                if start + len(keys) >= 2:
                    faults.maybe_crash("mid_log_write")
            send_all(records)
            count = start + len(keys)
            if count // PROGRESS_EVERY > start // PROGRESS_EVERY:
                progress(count)
        if transactions:
            writer.send_beside(transactions, *debezium_transactions.end_record(
                self.attempt, self.ts_ms, self.table.writer_id, next(events) - 1, self._enveloped))
        return count

    @property
    def _enveloped(self) -> bool:
        return connect_schema.included(self.log.format_options)

    def _numbered(self, send: Callable[..., None], payload_end: int,
                  order: Iterator[int]) -> Callable[..., None]:
        """`send` that gives each change event (not a tombstone) its Debezium transaction block."""
        def numbered(key: Any, value: Any, route: Any, headers: Any) -> None:
            if value is not None:
                value = debezium_transactions.ordered(value, self.attempt, next(order), payload_end)
            send(key, value, route=route, headers=headers)
        return numbered


def _written(writer: LogWriter, send: Callable[[], Any],
             confirm: Optional[Callable[[WriteResult], Tuple[bytes, bytes]]] = None) -> WriteResult:
    """Run `send` (the records onto `writer`) and commit the writer, with the confirmation
    `confirm` renders; on any failure the writer aborts (nothing of it commits, in
    transactional mode) and the failure goes on."""
    try:
        send()
        return writer.commit(confirm)
    except BaseException:
        writer.abort()
        raise


def _confirmation(attempt: Attempt, previous: Snapshot, into: Dict[str, Any],
                  writers: Optional[Mapping[str, WriteResult]] = None
                  ) -> Callable[[WriteResult], Tuple[bytes, bytes]]:
    """What a writer's commit calls for the attempt's confirmation record, once every record is
    acknowledged: the record, also kept decoded in `into`. `writers` (a parallel attempt): what
    each task wrote, confirmed in place of what the confirming writer itself wrote (nothing)."""
    def confirm(result: WriteResult) -> Tuple[bytes, bytes]:
        if writers is not None:
            result = _all_of(str(attempt.log.topic), writers.values())
        key, value = confirmation_record(attempt.log, attempt.table, attempt.snapshot_id,
                                         attempt.changeset, attempt.attempt, previous, result, writers,
                                         attempt.table_version, attempt.generation,
                                         attempt.starts_generation, attempt.inputs)
        into.update(parse_control_record(value))
        return key, value
    return confirm


def _all_of(topic: str, results: Iterable[WriteResult]) -> WriteResult:
    total = WriteResult(topic=topic, transactions=0)
    for result in results:
        total.records += result.records
        total.transactions += result.transactions
        for p, (first, nxt) in result.offsets.items():
            total.acknowledge(p, first)
            total.acknowledge(p, nxt - 1)
    return total


def write_change_set(
    log: LogConfig,
    table: TableRef,
    records: Callable[[Attempt], Iterable[RecordBatch]],
    previous: Snapshot,
    changeset: str,
    progress: Callable[[int], None] = lambda n: None,
    table_version: Optional[str] = None,
    columns: Tuple[Tuple[str, str], ...] = (),
    snapshot_read: bool = False,
    generation: int = 1,
    starts_generation: bool = False,
    model_log: Optional[ModelLog] = None,
    inputs: Optional[Tuple[ModelInput, ...]] = None,
) -> Snapshot:
    """Stream one commit's records (`records` of the attempt: its records_sql, read) into the
    log as snapshot `previous.id + 1`, confirmed by a control record; all or nothing for
    transactional logs. Each call is a new attempt. `columns`, `snapshot_read`, `generation`,
    `starts_generation` and `inputs`: see Attempt; `model_log`: see opened."""
    attempt = Attempt.new(log, table, previous, changeset, table_version, columns, snapshot_read,
                          generation, starts_generation, inputs)
    writer = opened(log, model_log).open_writer(table.writer_id)
    confirmation: Dict[str, Any] = {}
    result = _written(writer, lambda: attempt.send_batches(writer, records(attempt), progress=progress),
                      _confirmation(attempt, previous, confirmation))
    faults.maybe_crash("after_log_commit")
    return replace(Snapshot.from_confirmation(confirmation),
                   longest_transaction_s=result.longest_transaction_s)


def write_task_share(attempt: Attempt, task: int, task_attempt: int,
                     batches: Iterable[RecordBatch],
                     model_log: Optional[ModelLog] = None) -> Tuple[str, WriteResult]:
    """One Spark task's share of a parallel attempt: its records, written and committed with the
    task's own producer (its own transaction in transactional mode), without a confirmation.
    Returns the writer name (recorded in the H_WRITER header) and what it wrote. `model_log`
    comes from the driver, pickled with the attempt."""
    name = task_writer_name(task, task_attempt)
    writer = opened(attempt.log, model_log).open_writer(task_writer_id(attempt.table.writer_id, task))
    return name, _written(writer, lambda: attempt.send_batches(writer, batches, writer_name=name))


def write_change_set_parallel(
    log: LogConfig,
    table: TableRef,
    run_tasks: Callable[[Attempt], Iterable[Tuple[str, WriteResult]]],
    previous: Snapshot,
    changeset: str,
    table_version: Optional[str] = None,
    columns: Tuple[Tuple[str, str], ...] = (),
    snapshot_read: bool = False,
    generation: int = 1,
    starts_generation: bool = False,
    model_log: Optional[ModelLog] = None,
    inputs: Optional[Tuple[ModelInput, ...]] = None,
) -> Snapshot:
    """A change set written by parallel writers (Spark tasks, `run_tasks`), each committing its
    share with its own producer; the driver then writes the one confirmation, listing every
    writer's offsets, in the table's own transaction. Consumers that deliver confirmed records
    only (docs/log-format.md) get each change once; the tasks' transactions commit separately,
    so a plain read_committed consumer may see the records of a task that was retried."""
    attempt = Attempt.new(log, table, previous, changeset, table_version, columns, snapshot_read,
                          generation, starts_generation, inputs)
    # The table's writer first: it fences a dead driver of an earlier run of this table.
    coordinator = opened(log, model_log).open_writer(table.writer_id)
    confirmation: Dict[str, Any] = {}
    writers: Dict[str, WriteResult] = {}
    coordinator_result = _written(coordinator, lambda: writers.update(run_tasks(attempt)),
                                  _confirmation(attempt, previous, confirmation, writers))
    faults.maybe_crash("after_log_commit")
    longest = max([coordinator_result.longest_transaction_s]
                  + [w.longest_transaction_s for w in writers.values()])
    return replace(Snapshot.from_confirmation(confirmation), longest_transaction_s=longest)


def prepare_log(log: LogConfig, model_log: Optional[ModelLog] = None) -> int:
    """The log is reachable and its topic exists; returns the topic's partition count."""
    return opened(log, model_log).prepare()


def opened(log: LogConfig, model_log: Optional[ModelLog]) -> ModelLog:
    """The run's log, as the adapter resolved it (`model_log`, for the options `log`); opened
    here only for a change set written outside a model's run (tests, tools)."""
    return model_log.with_config(log) if model_log is not None else open_model_log(log)

