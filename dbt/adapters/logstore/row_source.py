"""Streaming a query's result out of Spark without holding it in the driver.

Session method: a large result crosses as Arrow (a small one as pickled rows, ARROW_FROM), one
file of the table it reads at a time: each file is its own query and job (`collect`), whose
Spark task packs its Arrow batches (at most `spark.sql.execution.arrow.maxRecordsPerBatch` rows,
10,000 by default) into binary cells (`mapInArrow`), so one pickled object carries thousands of
rows and each column reaches Python as one list. The next file is computed while the driver
sends the current one: the driver's JVM holds at most two files' results.
Thrift method: the cursor is read in batches with `fetchmany` (PyHive's rows; no Arrow there).

The tables the mirror reads are written in files of at most ROWS_PER_FILE rows (`table_options`),
so a file's result is small whatever the table's size. (`toLocalIterator` over the whole table,
one partition per file, kept every partition's result alive in the driver's JVM: a 10M-row
change set ran a 1 GiB driver out of heap after 57 files of 50k rows, as `TaskResultLost`.)

This module is the one place that knows which dbt-spark connection method is in use.
"""
from __future__ import annotations

import itertools
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, List, Optional, Tuple

BATCH_SIZE = 10_000
# Results of at least this many rows cross as Arrow. Arrow needs a Python worker in Spark, whose
# first start in a process (pyarrow and pandas imports) costs about 4 s here; a smaller result
# crosses sooner as pickled rows (about 100k rows/s).
ARROW_FROM = 100_000

# Rows per file of a table the mirror reads: what one partition brings into the driver's JVM
# (records of about 1 KiB: some 50 MiB).
ROWS_PER_FILE = 50_000
# Spark packs small files into one partition while their size plus this cost per file stays
# under spark.sql.files.maxPartitionBytes; at 1 TiB no two files share a partition.
_ONE_FILE_PER_PARTITION = {"spark.sql.files.openCostInBytes": str(1 << 40)}

Columns = List[list]  # one batch of a result: a list of values per column, all of one length


def active_spark(handle: Any) -> Optional[Any]:
    """The SparkSession behind a dbt-spark session connection, or None for other methods."""
    from dbt.adapters.spark.session import SessionConnectionWrapper

    if not isinstance(handle, SessionConnectionWrapper):
        return None
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()


# Spark contexts whose Python worker start is under way or done (weakly held: the id of a
# stopped context may be reused by the next one)
_warmed: "weakref.WeakSet[Any]" = weakref.WeakSet()


def _no_rows(batches: Iterable[Any]) -> Iterator[Any]:
    return iter(())


def start_python_worker(spark: Any) -> None:
    """Start Spark's Python worker now, in the background, for an Arrow read to come: its first
    start in a process (pyarrow and pandas imports, about 4 s here) then overlaps the table
    commit instead of delaying the log. Spark keeps an idle worker for the next task
    (spark.python.worker.reuse). Once per Spark context."""
    context = spark.sparkContext
    if context in _warmed:
        return
    _warmed.add(context)

    def run() -> None:
        try:
            spark.range(1, numPartitions=1).mapInArrow(_no_rows, "id long").collect()
        except Exception:  # only a head start: the read itself starts the worker otherwise
            pass

    threading.Thread(target=run, name="logstore-python-worker", daemon=True).start()


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


def pack_arrow_batches(batches: Iterable[Any]) -> Iterator[Any]:
    """Runs in Spark's Python workers (mapInArrow): each Arrow batch becomes one row holding
    the batch in Arrow's IPC stream format."""
    import pyarrow as pa

    for batch in batches:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as stream:
            stream.write_batch(batch)
        packed = sink.getvalue()
        # one binary value over the stream's buffer, without copying it
        offsets = pa.array([0, packed.size], pa.int32()).buffers()[1]
        cell = pa.Array.from_buffers(pa.binary(), 1, [None, offsets, packed])
        yield pa.RecordBatch.from_arrays([cell], names=["arrow"])


def unpack_arrow_batch(packed: bytes) -> Iterator[Any]:
    """The Arrow batches of one cell written by pack_arrow_batches."""
    import pyarrow as pa

    with pa.ipc.open_stream(packed) as stream:
        yield from stream


def iter_column_batches(handle: Any, relation: str, render: Callable[[str], str],
                        batch_size: int = BATCH_SIZE,
                        expected_rows: Optional[int] = None) -> Iterator[Columns]:
    """Yield the result of `render(relation)` (a query over one table) in batches of columns.
    `handle` is the open dbt-spark connection handle; `expected_rows`, when known, picks the
    way a session result crosses."""
    spark = active_spark(handle)
    if spark is not None and (expected_rows is None or expected_rows >= ARROW_FROM):
        yield from _arrow_file_by_file(spark, relation, render)
        return
    rows = iter_query_rows(handle, render(relation), batch_size)
    while True:
        batch = list(itertools.islice(rows, batch_size))
        if not batch:
            return
        # pyspark hands binary values out as bytearray; the Kafka clients take bytes
        yield [[bytes(v) if isinstance(v, bytearray) else v for v in column]
               for column in zip(*batch)]


def one_file_of(relation: str, file_name: str) -> str:
    """The rows of `relation` stored in one of its files (a file source table's `_metadata`)."""
    quoted = file_name.replace("\\", "\\\\").replace("'", "\\'")
    return f"(select * from {relation} where _metadata.file_name = '{quoted}')"


def _arrow_file_by_file(spark: Any, relation: str, render: Callable[[str], str]) -> Iterator[Columns]:
    files = sorted(path.rsplit("/", 1)[-1] for path in spark.table(relation).inputFiles())
    if not files:
        return

    def collect(file_name: str) -> list:
        query = spark.sql(render(one_file_of(relation, file_name)))
        return query.mapInArrow(pack_arrow_batches, "arrow binary").collect()

    # one file ahead: Spark computes it (the JVM, py4j waits without the GIL) while this
    # thread hands the current one to the Kafka client
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="logstore-prefetch") as ahead:
        pending = ahead.submit(collect, files[0])
        for following in [*files[1:], None]:
            cells = pending.result()
            pending = ahead.submit(collect, following) if following is not None else None
            for (packed,) in cells:
                for batch in unpack_arrow_batch(packed):
                    yield [column.to_pylist() for column in batch.columns]
            del cells


def iter_query_rows(handle: Any, sql: str, batch_size: int = BATCH_SIZE) -> Iterator[Tuple[Any, ...]]:
    """Yield the rows of `sql` as tuples (Spark's Rows are tuples), one Spark partition (or one
    cursor batch) at a time."""
    spark = active_spark(handle)
    if spark is not None:
        with _planned_one_partition_per_file(spark):
            rows = spark.sql(sql).toLocalIterator(prefetchPartitions=False)  # (no prefetch: above)
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
