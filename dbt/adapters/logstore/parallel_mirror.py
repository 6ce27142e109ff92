"""The parallel mirror (session method, `log.mirror.parallelism` > 1): Spark tasks write the
change set, so the mirror scales with the executors and no row passes through the driver.

The change table is split into `parallelism` Spark partitions. Each task writes its share with
its own producer (transactional id `dbt-logstore.<schema>.<table>.task-<index>`, so a restarted
task fences its predecessor) and commits it on its own; it returns what it wrote. The driver then
writes the one confirmation of the attempt, listing every task's offsets
(`commit_protocol.write_change_set_parallel`). Records carry the usual four headers plus
`logstore.writer` (the task attempt), so a consumer that follows docs/log-format.md delivers the
records of the confirmed task attempts only, even when Spark retried a task.
"""
from __future__ import annotations

import itertools
from functools import partial
from typing import Any, Callable, Iterable, Iterator, List, Tuple

from dbt.adapters.logstore import changes
from dbt.adapters.logstore.commit_protocol import Attempt, write_task_share
from dbt.adapters.logstore.log_system import WriteResult


def _task(attempt: Attempt, rows: Iterable[Any]) -> Iterator[Tuple[str, WriteResult]]:
    """Runs in a Spark task (a Python worker): write this partition's rows."""
    from pyspark import TaskContext

    rows = iter(rows)
    first = next(rows, None)
    if first is None:  # nothing to write: no producer, no transaction
        return
    context = TaskContext.get()
    task, task_attempt = (context.partitionId(), context.attemptNumber()) if context else (0, 0)
    yield write_task_share(attempt, task, task_attempt, itertools.chain([first], rows))


def spark_tasks(spark: Any, changes_relation: str, parallelism: int) -> Callable[[Attempt], List[Tuple[str, WriteResult]]]:
    """`run_tasks` for write_change_set_parallel: the change table, split into `parallelism`
    partitions, each written by one Spark task. Only the tasks' results reach the driver."""
    columns = ", ".join(changes.CHANGE_COLUMNS)

    def run(attempt: Attempt) -> List[Tuple[str, WriteResult]]:
        frame = spark.sql(f"select {columns} from {changes_relation}").repartition(parallelism)
        return frame.rdd.mapPartitions(partial(_task, attempt)).collect()

    return run


def active_spark(handle: Any) -> Any:
    """The SparkSession behind a dbt-spark session connection, or None for other methods."""
    from dbt.adapters.spark.session import SessionConnectionWrapper

    if not isinstance(handle, SessionConnectionWrapper):
        return None
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
