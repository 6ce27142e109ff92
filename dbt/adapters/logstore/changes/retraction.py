"""A re-base's retraction (docs/log-format.md, section 6): when a generation starts on a topic that
still holds records of the table's earlier log, its snapshot also deletes every key whose latest
record there holds a row the table no longer has. A plain upsert reader (Kafka Streams' KTable,
Flink's upsert-kafka, a new consumer group from the earliest offset) then ends with the table,
whether or not the broker has compacted the topic, without knowing of generations.

How: the topic's records before the generation land in a table of (key, row, partition, offset)
(formats.held_after: the row a plain reader holds for the key after the record, None once
deleted), read by Spark tasks, one per partition, with the session method, or by dbt in batches
behind a Thrift Server. One anti join in Spark then adds a delete per lost key to the generation's
change table, which the mirror writes like any other delete (a `d` event with the row as its
before image, then the tombstone; a json log's tombstone). The driver holds one batch of records
at a time, never the topic's keys.
"""
from __future__ import annotations

import time
from typing import Any, Iterator, List, Optional, Tuple

from dbt.adapters.logstore.spark import leftovers
from dbt.adapters.logstore.spark.catalog import Catalog, insert_batches_sql, logger
from dbt.adapters.logstore.formats import OP_DELETE, get_format, held_after
from dbt.adapters.logstore.spark.json_images import quote_identifier
from dbt.adapters.logstore.log.lifecycle.generations import GenerationStart
from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.log.log_system import LogReader, ModelLog
from dbt.adapters.logstore.names import CHANGE_COLUMNS
from dbt.adapters.logstore.spark.row_source import active_spark
from dbt.adapters.logstore.spark.tasks import rows_by_task

HeldRow = Tuple[str, Optional[str], int, int]  # key, row (None: deleted), partition, offset
Range = Tuple[int, int, int]  # partition, first offset, end offset
THRIFT_BATCH = 2000  # rows per INSERT behind a Thrift Server
# Offsets one Spark task reads: a partition's range in pieces, so every core reads (the latest
# record per key is chosen by partition and offset afterwards, whoever read it).
TASK_OFFSETS = 200_000


def needed(log: LogConfig, start: Optional[GenerationStart]) -> bool:
    """Whether the generation `start` begins on records that deletes can retract: a keyed log
    that writes deletes (not `log.ignore-delete`, nor a json log of appends), on a topic that
    held records when the generation began. (Keyless logs cannot be compacted, nor their rows
    deleted by key: their readers start at the generation, docs/consumers.md.)"""
    return (start is not None and bool(log.unique_key) and not log.ignore_delete
            and get_format(log.format).refuse_changes(log.upsert, 1) is None
            and any(end > 0 for end in start.offsets.values()))


def ranges(reader: LogReader, start: GenerationStart) -> List[Range]:
    """Per partition, the offsets a plain reader of the topic reads before the generation: from
    the first the broker still holds to the generation's start."""
    first = reader.start_offsets()
    return [(p, first.get(p, 0), end) for p, end in sorted(start.offsets.items())
            if end > first.get(p, 0)]


def held_rows(reader: LogReader, chosen: Iterator[Range]) -> Iterator[HeldRow]:
    """Each keyed record of the ranges as (key, row it leaves its key holding, partition,
    offset). Runs in a Spark task or in dbt."""
    for partition, first, end in chosen:
        for record in reader.read_range(partition, first, end):
            key, row = held_after(record.key, record.value)
            if key is not None:
                yield key, row, record.partition, record.offset


def held_table_ddl(relation: str) -> str:
    return (f"create table {relation} (key string, row string, part bigint, off bigint) "
            f"using parquet")


def retraction_sql(changes_relation: str, held_relation: str) -> str:
    """The deletes a re-base adds to its change set: each key whose latest record holds a row
    (the delete's before image) and which the generation's rows do not have."""
    op, key, before, after = (quote_identifier(c) for c in CHANGE_COLUMNS)
    latest = (f"select key, row, row_number() over (partition by key order by part desc, "
              f"off desc) as n from {held_relation}")
    return (f"insert into {changes_relation} select '{OP_DELETE}', h.key, h.row, "
            f"cast(null as string) from ({latest}) h left anti join {changes_relation} c "
            f"on c.{key} = h.key where h.n = 1 and h.row is not null")


def _land(catalog: Catalog, handle: Any, reader: LogReader, chosen: List[Range],
          held_relation: str) -> None:
    spark = active_spark(handle)
    if spark is not None:  # Spark tasks, one per partition
        from pyspark.sql.types import LongType, StringType, StructField, StructType

        schema = StructType([StructField("key", StringType()), StructField("row", StringType()),
                             StructField("part", LongType()), StructField("off", LongType())])
        pieces = [(p, a, min(a + TASK_OFFSETS, end)) for p, first, end in chosen
                  for a in range(first, end, TASK_OFFSETS)]
        rows_by_task(spark, pieces, "part bigint, lo bigint, hi bigint",
                     lambda mine: held_rows(reader, mine), schema).write.insertInto(held_relation)
        return
    # thrift: dbt reads the ranges and inserts them in batches (of about 0.5 MB of SQL)
    for statement in insert_batches_sql(held_relation, held_rows(reader, iter(chosen)), THRIFT_BATCH):
        catalog.run(statement)


def retract_lost_keys(catalog: Catalog, handle: Any, model_log: ModelLog, start: GenerationStart,
                      changes_relation: Any, held_relation: Any) -> None:
    """Add to the generation's change table (`changes_relation`) a delete of every key the topic
    holds a row of that the table no longer has (`model_log`: the run's log, the adapter
    resolved it); `held_relation` is scratch, dropped after."""
    log = model_log.config
    reader = model_log.open_reader()
    chosen = ranges(reader, start)
    if not chosen:
        return
    started = time.monotonic()
    catalog.run(leftovers.drop_sql(held_relation))
    leftovers.create_or_clear(catalog, held_relation, held_table_ddl(str(held_relation)))
    try:
        _land(catalog, handle, reader, chosen, str(held_relation))
        catalog.run(retraction_sql(str(changes_relation), str(held_relation)))
    finally:
        catalog.run(leftovers.drop_sql(held_relation))
    deletes = catalog.rows(f"select count(*) from {changes_relation} "
                           f"where {quote_identifier(CHANGE_COLUMNS[0])} = '{OP_DELETE}'")[0][0]
    records = sum(end - first for _, first, end in chosen)
    logger.info(f"{log.model}: generation {start.number} retracts {deletes} keys that "
                f"'{log.topic}' still holds and the table no longer has (read {records} offsets "
                f"in {time.monotonic() - started:.1f} s)")

