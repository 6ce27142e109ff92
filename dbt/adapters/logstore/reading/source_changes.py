"""Downstream models read an upstream logged model's changes (`logstore_changes(ref(...))`).

The range read is (the upstream snapshot the downstream table recorded, the upstream's latest
confirmed snapshot]: with the downstream table the adapter keeps, per upstream table, the
snapshot and log offsets it has consumed (names.SOURCES), written in the same step as the
downstream commit. So a chain of models processes each upstream change once, and a failed
downstream run (which records nothing) reads the same range again. A downstream table without
a recorded position starts from the upstream table itself, as of its current snapshot (the
hybrid read: rows as op 'r', then the log from that snapshot's offsets).

The changes land in a table `<model>` + names.SOURCE_RAW_INFIX + `<upstream>` as JSON images
(with the Spark session: written by Spark tasks, one per log partition, each reading its
offset range through the log system's read side, log_system.LogReader; with thrift: read by
dbt and inserted in batches), and a
temporary view parses them into the upstream's columns plus names.VIEW_OP_COLUMN ('r', 'c', 'u',
'd') and names.VIEW_SNAPSHOT_COLUMN. Deletes carry the old row, everything else the new row.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from dbt.adapters.logstore.log.control_records import DELIVER, ConfirmedAttempts, RecordTags
from dbt.adapters.logstore.formats import BARE_ROW, ENVELOPE, is_tombstone_after_delete, value_shape
from dbt.adapters.logstore.spark.json_images import DEFAULT_IMAGES, JsonImages, quote_identifier
from dbt.adapters.logstore.spark.tasks import rows_by_task
from dbt.adapters.logstore.log.log_system import LogReader, LogRecord
from dbt.adapters.logstore.names import (
    SCRATCH_RANK, VIEW_COLUMN_PREFIX, VIEW_OP_COLUMN, VIEW_SNAPSHOT_COLUMN,
)


@dataclass(frozen=True)
class SourcePosition:
    """How far a downstream table has consumed one upstream log."""

    topic: str
    snapshot: int
    offsets: Dict[str, int]

    @classmethod
    def from_json(cls, value: Dict[str, Any]) -> "SourcePosition":
        return cls(topic=value["topic"], snapshot=int(value["snapshot"]),
                   offsets={str(p): int(o) for p, o in value.get("offsets", {}).items()})


def parse_sources(text: Optional[str]) -> Dict[str, SourcePosition]:
    return {k: SourcePosition.from_json(v) for k, v in json.loads(text or "{}").items()}


def dump_sources(sources: Dict[str, SourcePosition]) -> str:
    return json.dumps({k: asdict(v) for k, v in sorted(sources.items())}, separators=(",", ":"),
                      sort_keys=True)


@dataclass(frozen=True)
class ReadPlan:
    """What one downstream run reads of one upstream: from_snapshot (exclusive) up to
    to_snapshot (inclusive), per partition [start, end) offsets; hybrid when the downstream has
    no position yet (the upstream table's rows are read instead of the log)."""

    upstream: str
    topic: str
    from_snapshot: int
    to_snapshot: int
    ranges: Tuple[Tuple[int, int, int], ...]  # (partition, start, end)
    attempts: ConfirmedAttempts  # the confirmed attempts of the range's snapshots
    hybrid: bool

    def position(self, end_offsets: Dict[int, int]) -> SourcePosition:
        return SourcePosition(self.topic, self.to_snapshot,
                              {str(p): int(o) for p, o in sorted(end_offsets.items())})


def plan_read(upstream: str, topic: str, confirmations: Sequence[Any],
              position: Optional[SourcePosition], upstream_snapshot: int,
              log_start: Optional[Dict[int, int]] = None) -> Tuple[ReadPlan, Dict[int, int]]:
    """The range to read and the offsets to record after it. `confirmations` are the upstream
    log's (control_records.Confirmation, snapshot order); `upstream_snapshot` its table's current one;
    `log_start` the first offset each partition still holds. A range that crosses a new
    generation of the upstream's log (lifecycle/generations.py: its rows again, not a change),
    or whose records retention deleted, cannot be read as changes: refused, naming the way out."""
    from dbt.adapters.logstore.reading.reader import ReaderError

    rebuild = ("Rebuild this model from the upstream's table: dbt run --full-refresh --select "
               "<this model>.")
    if position is not None and position.topic == topic:
        restarted = [c for c in confirmations  # a log's first generation is its start
                     if c.snapshot > position.snapshot and c.generation_start is not None
                     and (c.generation or 1) > 1]
        if restarted:
            raise ReaderError(
                f"Upstream {upstream}'s log in '{topic}' started generation "
                f"{restarted[-1].generation} (snapshot {restarted[-1].snapshot}: its table's rows "
                f"again, after the log was lost or re-based) since snapshot {position.snapshot}, "
                f"which this model read up to; the changes in between are not in the log. {rebuild}")
        deleted = {p: o for p, o in (log_start or {}).items()
                   if position.offsets.get(str(p), 0) < o}
        if deleted:
            where = ", ".join(f"partition {p} now starts at offset {o}" for p, o in sorted(deleted.items()))
            raise ReaderError(
                f"Upstream {upstream}'s records after snapshot {position.snapshot}, which this "
                f"model read up to, are no longer all in '{topic}' (deleted by retention: "
                f"{where}). {rebuild}")

    if position is not None and position.topic != topic:
        position = None  # the upstream logs to a new topic: start again from its table
    if position is None:
        end = next((c.end_offsets for c in confirmations if c.snapshot == upstream_snapshot), {})
        if upstream_snapshot and not end:
            raise ReaderError(f"Upstream {upstream} is at snapshot {upstream_snapshot}, which its "
                              f"log '{topic}' does not confirm; run it (or logstore_recover) first.")
        return ReadPlan(upstream, topic, 0, upstream_snapshot, (), ConfirmedAttempts(upstream),
                        hybrid=True), dict(end)
    newer = [c for c in confirmations if c.snapshot > position.snapshot]
    if not newer:
        return ReadPlan(upstream, topic, position.snapshot, position.snapshot, (),
                        ConfirmedAttempts(upstream), False), \
            {int(p): o for p, o in position.offsets.items()}
    last = newer[-1]
    start = {int(p): o for p, o in position.offsets.items()}
    ranges = tuple((p, start.get(p, 0), end) for p, end in sorted(last.end_offsets.items())
                   if end > start.get(p, 0))
    attempts = ConfirmedAttempts(upstream, newer)
    return ReadPlan(upstream, topic, position.snapshot, last.snapshot, ranges, attempts, False), \
        dict(last.end_offsets)


def bound_by_run(upstream: str, topic: str, confirmations: Sequence[Any], at: Any, invocation: str,
                 table_snapshot: int, table_version: Optional[str]) -> Tuple[List[Any], int, Optional[str]]:
    """`logstore_changes(..., at_run=...)`: the upstream as run record `invocation` names it (`at`:
    log/run_records.ModelAtRun), so the range ends at its snapshot then, not its latest:
    (the confirmations up to it, its snapshot then, the table version holding that snapshot's
    rows: None for a table read as it is). Refused when the record names the upstream unlogged
    or logging to another topic."""
    from dbt.adapters.logstore.reading.reader import ReaderError

    if not at.logged:
        raise ReaderError(f"run {invocation} names upstream {upstream} as not logged then.")
    if at.topic != topic:
        raise ReaderError(f"run {invocation} names upstream {upstream}'s log in '{at.topic}'; "
                          f"it logs to '{topic}' now. Read it at a later run, or without at_run.")
    snapshot = int(at.snapshot or 0)
    version = table_version if snapshot == table_snapshot else at.table_version
    return [c for c in confirmations if c.snapshot <= snapshot], snapshot, version


def read_range(log: LogReader, partition: int, start: int, end: int, attempts: ConfirmedAttempts
               ) -> Iterator[Tuple[Any, ...]]:
    """The confirmed changes of one partition in [start, end), as raw rows
    (op, kind, key, value, snapshot, partition, offset). Runs in a Spark task or in dbt."""
    for record in log.read_range(partition, start, end):
        tags = RecordTags.of(record.headers)
        # a tombstone after a delete repeats the delete before it: not a change of its own
        if attempts.verdict(tags, partition, record.offset) == DELIVER \
                and not is_tombstone_after_delete(record.headers):
            yield _raw_row(record, tags.snapshot)


def _raw_row(msg: LogRecord, snapshot: int) -> Tuple[Any, ...]:
    """The record's own JSON text is kept (Spark parses it with the upstream's types, so
    decimals keep their digits); `kind` (formats.value_shape) says where the row image is:
    ENVELOPE in the envelope (before for deletes, after otherwise), BARE_ROW the value is the
    row (an upsert), TOMBSTONE only the key's columns are known. The value is parsed once, for
    its op."""
    kind, op = value_shape(None if msg.value is None else json.loads(msg.value))
    key = None if msg.key is None else msg.key.decode()
    value = None if msg.value is None else msg.value.decode()
    return (op, kind, key, value, snapshot, msg.partition, msg.offset)


def raw_rows_in_spark(spark: Any, plan: ReadPlan, log: LogReader) -> Any:
    """A DataFrame of the plan's raw rows, read by Spark tasks: one per partition range (the
    log's read side, which holds no session, is shipped to them)."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    attempts = plan.attempts

    def read(ranges: Iterator[Tuple[int, int, int]]) -> Iterator[Tuple[Any, ...]]:
        for partition, start, end in ranges:
            yield from read_range(log, partition, start, end, attempts)

    schema = StructType([StructField("op", StringType()), StructField("kind", StringType()),
                         StructField("key", StringType()), StructField("value", StringType()),
                         StructField("snapshot", LongType()), StructField("part", LongType()),
                         StructField("off", LongType())])
    return rows_by_task(spark, list(plan.ranges), "part bigint, lo bigint, hi bigint", read, schema)


def raw_table_ddl(relation: str) -> str:
    return (f"create table {relation} (op string, kind string, key string, value string, "
            f"snapshot bigint, part bigint, off bigint) using parquet")


def changes_view_sql(view: str, raw_relation: str, columns: Sequence[Tuple[str, str]],
                     unique_key: Sequence[str], normalize: bool,
                     images: JsonImages = DEFAULT_IMAGES) -> str:
    """The temporary view over the raw rows: upstream columns, op and snapshot. Normalized:
    the last change per key in the range (a delete if the key's last change deleted it)."""
    row = "struct<" + ", ".join(f"{quote_identifier(n)}: {t}" for n, t in columns) + ">"
    envelope = f"struct<before: {row}, after: {row}>"
    parse = images.from_json_sql

    image = (f"case kind when '{ENVELOPE}' then (case when op = 'd' then {parse('value', envelope)}.before "
             f"else {parse('value', envelope)}.after end) "
             f"when '{BARE_ROW}' then {parse('value', row)} else {parse('key', row)} end")
    cols = ", ".join(f"img.{quote_identifier(name)}" for name, _ in columns)
    body = (f"select {cols}, op as {VIEW_OP_COLUMN}, snapshot as {VIEW_SNAPSHOT_COLUMN}, part, off "
            f"from (select op, snapshot, part, off, {image} as img from {raw_relation})")
    if normalize and unique_key:
        keys = ", ".join(quote_identifier(k) for k in unique_key)
        body = (f"select * from (select *, row_number() over (partition by {keys} order by "
                f"{VIEW_SNAPSHOT_COLUMN} desc, part desc, off desc) as {SCRATCH_RANK} "
                f"from ({body})) where {SCRATCH_RANK} = 1")
    names = ", ".join(quote_identifier(n) for n, _ in columns)
    return (f"create or replace temporary view {view} as "
            f"select {names}, {VIEW_OP_COLUMN}, {VIEW_SNAPSHOT_COLUMN} from ({body})")


def hybrid_rows_sql(raw_relation: str, upstream_relation: str, columns: Sequence[str],
                    unique_key: Sequence[str], snapshot: int,
                    images: JsonImages = DEFAULT_IMAGES) -> str:
    """The upstream table's rows as 'r' changes of its snapshot, encoded as the log encodes them."""
    key = images.object_sql(unique_key) if unique_key else "cast(null as string)"
    return (f"insert into {raw_relation} select 'r', 'b', {key}, {images.object_sql(columns)}, "
            f"{int(snapshot)}, -1, -1 from {upstream_relation}")


def has_op_column(columns: Sequence[str]) -> bool:
    """Whether a model's rows (`columns`) carry VIEW_OP_COLUMN (from logstore_changes): then a
    merge deletes the keys whose op is 'd' and upserts the rest."""
    return VIEW_OP_COLUMN in columns


def upserts_sql(relation: str, columns: Sequence[str]) -> str:
    """The rows of `relation` to keep (op other than 'd'), without the columns under
    VIEW_COLUMN_PREFIX."""
    kept = ", ".join(quote_identifier(c) for c in columns if not c.startswith(VIEW_COLUMN_PREFIX))
    return f"select {kept} from {relation} where {VIEW_OP_COLUMN} <> 'd'"
