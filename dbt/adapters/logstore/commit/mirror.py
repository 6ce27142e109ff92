"""After the table commit: its change set written to the log as the table's next snapshot, by
the driver (one writer, log_snapshots.write_change_set) or by Spark tasks (parallel_mirror),
or, when a run recovers, the snapshot an earlier attempt already confirmed adopted."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from dbt.adapters.contracts.connection import AdapterResponse
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore.log.control_records import ModelInput
from dbt.adapters.logstore.names import LOG_TOPIC
from dbt.adapters.logstore.commit import snapshots as log_snapshots, parallel_mirror
from dbt.adapters.logstore.spark import table_formats
from dbt.adapters.logstore.spark.catalog import Catalog, logger
from dbt.adapters.logstore.formats import connect_schema
from dbt.adapters.logstore.log.lifecycle import identity
from dbt.adapters.logstore.log.lifecycle.generations import GenerationStart
from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.log.log_system import LogState, LogWriteInterrupted, ModelLog, SqlWriteUnconfirmed
from dbt.adapters.logstore.spark.row_source import active_spark, iter_column_batches, run_statement


@dataclass
class LogstoreAdapterResponse(AdapterResponse):
    """dbt-spark's response plus what the log received (shown in run_results.json)."""

    rows_mirrored: Optional[int] = None
    topic: Optional[str] = None
    log_offsets: Optional[Dict[str, List[int]]] = None
    log_snapshot: Optional[int] = None
    log_end_offsets: Optional[Dict[str, int]] = None
    log_attempt: Optional[str] = None
    log_table_version: Optional[str] = None  # the table format's version of these rows
    log_seconds: Optional[float] = None  # from the table commit to the log commit
    log_transactions: Optional[int] = None  # Kafka transactions the records took
    log_longest_transaction_s: Optional[float] = None  # the longest of them, begin to commit
    log_skipped: Optional[str] = None  # the dbt flag of a reduced-input run (run_modes.py)
    log_generation: Optional[int] = None  # the log's generation (lifecycle/generations.py)
    # when this snapshot starts its generation: per partition, where its copy of the table starts
    log_generation_start: Optional[Dict[str, int]] = None


def response(log: LogConfig, snapshot: log_snapshots.Snapshot, rows_affected: Optional[int],
             seconds: float) -> LogstoreAdapterResponse:
    """What a logged model's run reports (dbt's console line and run_results.json)."""
    offsets = {str(p): [a, b - 1] for p, (a, b) in sorted(snapshot.written.items())}
    ranges = ", ".join(f"p{p}:{a}-{b}" for p, (a, b) in offsets.items())
    written = "" if rows_affected is None else f"{rows_affected} rows, "
    starts = f", starts generation {snapshot.generation}" if snapshot.starts_generation else ""
    return LogstoreAdapterResponse(
        _message=f"OK, {written}mirrored {snapshot.records} records to {log.topic}"
                 + (f" ({ranges})" if ranges else "") + f", snapshot {snapshot.id}{starts}",
        rows_affected=rows_affected,
        rows_mirrored=snapshot.records,
        topic=log.topic,
        log_offsets=offsets,  # inclusive [first, last] offset written per partition
        log_snapshot=snapshot.id,
        log_end_offsets={str(p): o for p, o in sorted(snapshot.end_offsets.items())},
        log_attempt=snapshot.attempt,
        log_table_version=snapshot.table_version,
        log_seconds=round(seconds, 3),
        log_transactions=snapshot.transactions,
        log_longest_transaction_s=round(snapshot.longest_transaction_s, 3),
        log_generation=snapshot.generation,
        log_generation_start=({str(p): o for p, o in sorted(snapshot.generation_start.items())}
                              if snapshot.starts_generation else None),
    )


def snapshot_properties(response: LogstoreAdapterResponse, changeset: str,
                        log_state: Optional[LogState] = None) -> Dict[str, str]:
    """Table properties recording the snapshot a mirror wrote (or adopted), with the log's
    identity as the run found it (`log_state`, lifecycle/identity.py)."""
    snapshot = log_snapshots.Snapshot(
        id=int(response.log_snapshot or 0), attempt=response.log_attempt,
        table_version=response.log_table_version,
        end_offsets={int(p): int(o) for p, o in (response.log_end_offsets or {}).items()},
        generation=int(response.log_generation or 1),
        generation_start=None if response.log_generation_start is None else {
            int(p): int(o) for p, o in response.log_generation_start.items()})
    return {**snapshot.properties(changeset), **({LOG_TOPIC: response.topic} if response.topic else {}),
            **(identity.identity_properties(log_state) if log_state is not None else {})}


def mirror_change_set(model_log: ModelLog, catalog: Catalog, handle: Any, changes_relation: str,
                      target_relation: Any, changeset: str, recovering: bool = False,
                      log_starts: bool = False,
                      committed_properties: Optional[Mapping[str, str]] = None,
                      inputs: Optional[Tuple[ModelInput, ...]] = None) -> log_snapshots.Snapshot:
    """The snapshot the table's committed change set (`changes_relation`) is in the log as.
    `model_log` is the run's log (the adapter resolved it); `handle` is the model thread's
    dbt-spark connection handle (the rows' way out of Spark); `committed_properties`: the
    table's properties as its commit wrote them, when the caller knows they are all it has;
    `inputs`: the logged models the build read (commit/model_inputs.py), for its confirmation."""
    log = model_log.config
    props = (dict(committed_properties) if committed_properties is not None
             else catalog.properties(target_relation))
    table = log_snapshots.TableRef(str(target_relation.schema), str(target_relation.identifier),
                                   log_snapshots.committed_ms(props, changeset))
    previous = log_snapshots.Snapshot.from_properties(props)
    # A snapshot that starts a generation (the table's rows, as a log starts or is re-based on
    # the table: lifecycle/generations.py) follows the snapshot its start names, from the
    # topic's offsets as the run found them; offsets of an earlier topic mean nothing there.
    start = GenerationStart.pending(props, changeset)
    if start is None and (log_starts or previous.id == 0):
        start = GenerationStart(1, previous.id)
    snapshot_read = start is not None  # the table's rows as its log (generation) starts
    generation = start.number if start is not None else previous.generation
    if start is not None:
        previous = log_snapshots.Snapshot(id=start.base, end_offsets=dict(start.offsets))
    confirmed = _confirmed(model_log, table.writer_id, changeset) if recovering else None
    if confirmed is not None:
        return confirmed
    version = table_formats.committed_version(catalog, target_relation, props)
    # the Connect schema describes the table's columns (only read when the log includes it)
    columns = (tuple(catalog.columns(target_relation))
               if connect_schema.included(log.format_options) else ())
    spark = active_spark(handle) if log.parallelism > 1 else None
    # Behind a Thrift Server, Spark's own Kafka writer reached from SQL (kafka/spark_writer.py)
    # is the executors' only way. (The session method keeps its Python tasks: measured side by
    # side they were not slower, and their transactions keep aborted tasks from read_committed
    # readers: docs/performance.md.)
    sql_tasks = (model_log.sql_tasks(lambda sql: run_statement(handle, sql), changes_relation,
                                     _sibling(target_relation, "kafka"))
                 if log.parallelism > 1 and spark is None else None)
    try:
        if sql_tasks is not None:
            try:
                return log_snapshots.write_change_set_parallel(
                    log, table, sql_tasks, previous, changeset, version, columns, snapshot_read,
                    generation, snapshot_read, model_log, inputs)
            except SqlWriteUnconfirmed as exc:  # its records stay unconfirmed: the cursor goes on
                logger.warning(f"{exc.msg} Writing the change set through the cursor instead.")
            finally:
                sql_tasks.close()

        def write() -> log_snapshots.Snapshot:
            if spark is not None:
                return log_snapshots.write_change_set_parallel(
                    log, table,
                    parallel_mirror.spark_tasks(spark, changes_relation, log.parallelism, model_log),
                    previous, changeset, version, columns, snapshot_read, generation,
                    snapshot_read, model_log, inputs)
            return log_snapshots.write_change_set(
                log, table,
                lambda attempt: iter_column_batches(handle, changes_relation, attempt.records_sql),
                previous, changeset,
                progress=lambda n: logger.info(f"{log.model}: {n} changes written to {log.topic}"),
                table_version=version, columns=columns, snapshot_read=snapshot_read,
                generation=generation, starts_generation=snapshot_read, model_log=model_log,
                inputs=inputs,
            )

        return written_once_more_if_interrupted(write, model_log, table.writer_id, changeset)
    except DbtRuntimeError as exc:
        raise DbtRuntimeError(
            f"{exc.msg} The table's change is committed and its change set "
            f"{changes_relation} is kept: the next run of the model (or dbt "
            f"run-operation logstore_recover --args '{{model: {log.model}}}') writes it "
            f"to the log, once.") from exc


def written_once_more_if_interrupted(write: Callable[[], log_snapshots.Snapshot],
                                     model_log: ModelLog, writer_id: str,
                                     changeset: str) -> log_snapshots.Snapshot:
    """`write()`, and when a node going down broke it off (LogWriteInterrupted: a rolling
    restart) a new attempt, as the next run's recovery would make, unless the broken one was
    confirmed after all. A second failure is the run's."""
    try:
        return write()
    except LogWriteInterrupted as exc:
        logger.info(f"{model_log.config.model}: {exc.msg} Writing the change set again, as a new "
                    f"attempt.")
        return _confirmed(model_log, writer_id, changeset) or write()


def _confirmed(model_log: ModelLog, writer_id: str,
               changeset: str) -> Optional[log_snapshots.Snapshot]:
    """The snapshot an earlier attempt confirmed change set `changeset` as, if any (adopted,
    not written again)."""
    confirmed = model_log.find_confirmation(writer_id, changeset)
    if confirmed is None:
        return None
    logger.info(f"{model_log.config.model}: change set {changeset} was already confirmed as "
                f"snapshot {confirmed['snapshot']}; not writing it again")
    return log_snapshots.Snapshot.from_confirmation(confirmed)


def _sibling(target_relation: Any, kind: str) -> str:
    """The model's staged relation `kind` (names.STAGED_SUFFIXES), rendered."""
    from dbt.adapters.logstore.names import STAGED_SUFFIXES

    return str(target_relation.incorporate(
        path={"identifier": f"{target_relation.identifier}{STAGED_SUFFIXES[kind]}"}))
