"""Streaming a query's result out of Spark without holding it in the driver.

Session method: the result crosses as Arrow, one file of the table it reads at a time: each file
is its own query and job, whose Arrow batches Spark's JVM sends straight to the driver's Python
(`DataFrame.toArrow`: no Spark Python worker on the way), where each column becomes one list.
The next files (FILES_AHEAD) are computed while the driver sends the current one: the driver's
JVM and Python hold at most three files' results.
Thrift method: the cursor is read in batches with `fetchmany` (PyHive's rows; no Arrow there).
Connect method (spark/connect.py): as the session method, on its Spark Connect session, whose
server sends the Arrow batches over gRPC.

The tables the mirror reads are written in files of at most ROWS_PER_FILE rows (`table_options`),
so a file's result is small whatever the table's size. (`toLocalIterator` over the whole table,
one partition per file, kept every partition's result alive in the driver's JVM: a 10M-row
change set ran a 1 GiB driver out of heap after 57 files of 50k rows, as `TaskResultLost`.
Packing Arrow batches into binary cells with `mapInArrow` and collecting those sent every row
through a Python worker and back: 1.75 times slower than `toArrow`, and about 4 s more for the
worker's first start in a process.)

This module is the one place that knows which dbt-spark connection method is in use.
"""
from __future__ import annotations

import itertools
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Iterator, List, Optional, Tuple

BATCH_SIZE = 10_000

# Rows per file of a table the mirror reads: what one query brings into the driver
# (records of about 1 KiB: some 50 MiB).
ROWS_PER_FILE = 50_000
# Spark packs small files into one partition while their size plus this cost per file stays
# under spark.sql.files.maxPartitionBytes; at 1 TiB no two files share a partition.
# Files read ahead of the one being sent: each file is one Spark task, so two keep two cores busy.
# The driver holds at most FILES_AHEAD + 1 files' results.
# (Measured on 1M rows, no Kafka: 580k rows/s with two ahead, 380k with one.)
FILES_AHEAD = 2
_ONE_FILE_PER_PARTITION = {"spark.sql.files.openCostInBytes": str(1 << 40)}

Columns = List[list]  # one batch of a result: a list of values per column, all of one length


def active_spark(handle: Any) -> Optional[Any]:
    """The SparkSession behind a dbt-spark session connection (the connect method's: its Spark
    Connect session, spark/connect.py), or None for other methods."""
    from dbt.adapters.spark.session import SessionConnectionWrapper

    from dbt.adapters.logstore.spark.connect import connection_of

    if not isinstance(handle, SessionConnectionWrapper):
        return None
    remote = connection_of(handle)
    if remote is not None:
        return remote.spark
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()


def _remote(spark: Any) -> bool:
    """A Spark Connect session (pyspark.sql.connect), not one with a JVM in this process."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def table_options() -> str:
    """The OPTIONS clause of a CREATE TABLE ... AS whose result the mirror will read."""
    return f"options ('maxRecordsPerFile' = '{ROWS_PER_FILE}')"


# dbt's model threads share the session: one plans at a time, or a thread could save another's
# setting as "before" and leave it set for good
_planning = threading.Lock()


@contextmanager
def _planned_one_partition_per_file(spark: Any) -> Iterator[None]:
    """Session settings for planning a query (file partitions are fixed when it is planned),
    restored right after, so that other statements of the session are not affected."""
    with _planning:
        before = {key: spark.conf.get(key, None) for key in _ONE_FILE_PER_PARTITION}
        for key, value in _ONE_FILE_PER_PARTITION.items():
            spark.conf.set(key, value)
        try:
            yield
        finally:
            for key, value in before.items():
                if value is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, value)


def iter_column_batches(handle: Any, relation: str, render: Callable[[str], str],
                        batch_size: int = BATCH_SIZE) -> Iterator[Columns]:
    """Yield the result of `render(relation)` (a query over one table) in batches of at most
    `batch_size` rows, as lists of column values. `handle` is the open dbt-spark connection
    handle."""
    spark = active_spark(handle)
    if spark is not None:
        from dbt.adapters.logstore.spark.connect import answering_for

        with answering_for(handle):  # a Connect server that stopped answering, in one sentence
            yield from _arrow_file_by_file(spark, relation, render, batch_size)
        return
    rows = iter_query_rows(handle, render(relation), batch_size)
    while True:
        batch = list(itertools.islice(rows, batch_size))
        if not batch:
            return
        # PyHive may hand binary values out as bytearray; the Kafka clients take bytes
        yield [[bytes(v) if isinstance(v, bytearray) else v for v in column]
               for column in zip(*batch)]


def one_file_of(relation: str, file_name: str) -> str:
    """The rows of `relation` stored in one of its files (a file source table's `_metadata`)."""
    quoted = file_name.replace("\\", "\\\\").replace("'", "\\'")
    return f"(select * from {relation} where _metadata.file_name = '{quoted}')"


def _arrow_file_by_file(spark: Any, relation: str, render: Callable[[str], str],
                        batch_size: int) -> Iterator[Columns]:
    files = sorted(path.rsplit("/", 1)[-1] for path in spark.table(relation).inputFiles())
    if not files:
        return

    def collect(file_name: str) -> Any:
        return spark.sql(render(one_file_of(relation, file_name))).toArrow()

    # files ahead: Spark computes them (in the JVM, one core each; py4j waits without the GIL)
    # while this thread hands the current one to the Kafka client
    with ThreadPoolExecutor(max_workers=FILES_AHEAD, thread_name_prefix="logstore-prefetch") as ahead:
        queued = iter(files)
        pending = deque(ahead.submit(collect, name) for name in itertools.islice(queued, FILES_AHEAD))
        while pending:
            result = pending.popleft().result()
            for following in itertools.islice(queued, 1):
                pending.append(ahead.submit(collect, following))
            for batch in result.to_batches(max_chunksize=batch_size):
                yield [column.to_pylist() for column in batch.columns]
            del result


def iter_query_rows(handle: Any, sql: str, batch_size: int = BATCH_SIZE) -> Iterator[Tuple[Any, ...]]:
    """Yield the rows of `sql` as tuples (Spark's Rows are tuples), one Spark partition (or one
    cursor batch) at a time."""
    spark = active_spark(handle)
    if spark is not None:
        with _planned_one_partition_per_file(spark):
            rows = spark.sql(sql).toLocalIterator(prefetchPartitions=False)  # (no prefetch: above)
            # Spark Connect's iterator sends the query when first asked: the first row is
            # asked for here, so that the query is planned with the settings above
            first = list(itertools.islice(rows, 1)) if _remote(spark) else []
        yield from first
        yield from rows
        return
    for rows in _fetch_batches(handle, sql, batch_size):
        yield from rows


def _fetch_batches(handle: Any, sql: str, batch_size: int) -> Iterator[List[Tuple[Any, ...]]]:
    """PyHive (thrift/http): execute through dbt-spark's wrapper (it polls async queries), then
    page through the DB-API cursor it holds (dbt-spark offers no public way to it)."""
    handle.cursor()
    handle.execute(sql)
    cursor = handle._cursor
    while True:
        batch = cursor.fetchmany(batch_size)
        if not batch:
            return
        yield [tuple(row) for row in batch]


def run_statement(handle: Any, sql: str) -> List[Tuple[Any, ...]]:
    """One statement on the model's connection (thrift): its rows, [] for a statement without."""
    handle.cursor()
    handle.execute(sql)
    cursor = handle._cursor
    return [tuple(row) for row in cursor.fetchall()] if cursor.description else []
