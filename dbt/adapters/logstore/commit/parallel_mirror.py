"""The parallel mirror (session method, `log.mirror.parallelism` > 1): Spark tasks write the
change set, so the mirror scales with the executors and no row passes through the driver.

The attempt's records, rendered by Spark (`Attempt.records_sql`), are split into `parallelism`
partitions and reach each task as Arrow batches (`mapInArrow`). Each task writes its share with
its own producer (its transactional id is names.task_writer_id of its index, so a restarted task
fences its predecessor) and commits it on its own; it returns what it wrote. The driver then
writes the one confirmation of the attempt, listing every task's offsets
(`log_snapshots.write_change_set_parallel`). Records carry the usual four headers plus
H_WRITER (names.py: the task attempt), so a consumer that follows docs/log-format.md delivers
the records of the confirmed task attempts only, even when Spark retried a task.
"""
from __future__ import annotations

import pickle
from functools import partial
from typing import Any, Callable, Iterable, Iterator, List, Optional, Tuple

from dbt.adapters.logstore.commit.snapshots import Attempt, write_task_share
from dbt.adapters.logstore.log.log_system import LogWriteInterrupted, ModelLog, WriteResult
from dbt.adapters.logstore.spark.row_source import Columns


def _task(attempt: Attempt, model_log: Optional[ModelLog], batches: Iterable[Any]) -> Iterator[Any]:
    """Runs in a Spark task (a Python worker, mapInArrow): write this partition's records,
    which arrive as Arrow batches; one row of the pickled (writer name, WriteResult) out."""
    import pyarrow as pa
    from pyspark import TaskContext

    columns: Iterator[Columns] = (
        [column.to_pylist() for column in batch.columns] for batch in batches if batch.num_rows)
    first = next(columns, None)
    if first is None:  # nothing to write: no producer, no transaction
        return
    context = TaskContext.get()
    task, task_attempt = (context.partitionId(), context.attemptNumber()) if context else (0, 0)
    outcome = write_task_share(attempt, task, task_attempt, _chain(first, columns), model_log)
    yield pa.RecordBatch.from_arrays([pa.array([pickle.dumps(outcome)], pa.binary())],
                                     names=["outcome"])


def _chain(first: Columns, rest: Iterator[Columns]) -> Iterator[Columns]:
    yield first
    yield from rest


def spark_tasks(spark: Any, changes_relation: str, parallelism: int,
                model_log: Optional[ModelLog] = None) -> Callable[[Attempt], List[Tuple[str, WriteResult]]]:
    """`run_tasks` for write_change_set_parallel: the attempt's records, split into
    `parallelism` partitions, each written by one Spark task (with the run's `model_log`,
    pickled). Only the tasks' results reach the driver."""

    def run(attempt: Attempt) -> List[Tuple[str, WriteResult]]:
        frame = spark.sql(attempt.records_sql(changes_relation)).repartition(parallelism)
        try:
            rows = frame.mapInArrow(partial(_task, attempt, model_log), "outcome binary").collect()
        except Exception as exc:
            # A task's error reaches the driver as Spark's, its Python traceback in the text,
            # which ends in the exception's qualified name: a task whose write a lost node broke
            # off makes the attempt one the mirror writes again
            if f"{LogWriteInterrupted.__module__}.{LogWriteInterrupted.__name__}:" in str(exc):
                raise LogWriteInterrupted(
                    f"Model '{attempt.log.model}': a Spark task's write to Kafka topic "
                    f"'{attempt.log.topic}' was broken off by a Kafka node going down.") from exc
            raise
        return [pickle.loads(row[0]) for row in rows]

    return run
