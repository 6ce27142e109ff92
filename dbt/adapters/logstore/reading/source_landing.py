"""A downstream run's range of an upstream log, landed (`logstore_changes(ref(...))`): which
range (source_changes.plan_read over the upstream's confirmations), the landing table written
(by Spark tasks with the session method, by dbt in batches with thrift), and the view over it.
source_changes.py holds the SQL and the plan; this module runs them."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore.spark import leftovers, table_formats
from dbt.adapters.logstore.commit import table_snapshot
from dbt.adapters.logstore import names
from dbt.adapters.logstore.reading import source_changes
from dbt.adapters.logstore.spark.catalog import Catalog, insert_batches_sql, logger
from dbt.adapters.logstore.formats import connect_schema
from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.config.continuation import continue_stored_shape
from dbt.adapters.logstore.log.log_system import LogReader
from dbt.adapters.logstore.spark.row_source import active_spark


@dataclass(frozen=True)
class Landed:
    """The view a downstream run reads, and its positions in its upstreams' logs (to record
    with its commit: names.SOURCES)."""

    view: str
    sources: str


def check_reads_upstream(log: LogConfig, materialized: Optional[str],
                         upstream_log: Optional[LogConfig], upstream_relation: Any) -> None:
    """A model may read an upstream's changes when it is incremental with a log of its own
    (whose commit records how far it read) and the upstream (a ref() of this project) has a log."""
    if upstream_log is None:
        raise DbtRuntimeError(f"Model '{log.model}': logstore_changes() takes a ref() to a "
                              f"model of this project, got {upstream_relation}.")
    if not upstream_log.enabled:
        raise DbtRuntimeError(
            f"Model '{log.model}': logstore_changes(ref('{upstream_log.model}')) needs "
            f"'{upstream_log.model}' to have a log. Allowed: a model with 'log.system' set.")
    if connect_schema.included(upstream_log.format_options):
        # its payload carries Connect's epoch days and microseconds, which the landing's
        # from_json (json_images) does not read back yet
        raise DbtRuntimeError(
            f"Model '{log.model}': logstore_changes(ref('{upstream_log.model}')) cannot read a log "
            f"written with '{connect_schema.SCHEMA_INCLUDE}' = true yet. Allowed: read it with "
            f"Flink or a Kafka Connect sink, or log '{upstream_log.model}' without the envelope.")
    if not log.enabled or materialized != "incremental":
        raise DbtRuntimeError(
            f"Model '{log.model}': logstore_changes() is for incremental models with a log "
            f"('log.system'), whose commit records how far the upstream was read. Allowed: "
            f"materialized='incremental' with 'log.system' set.")


def checked_at_run(log: LogConfig, upstream_log: LogConfig, at_run: Any) -> Optional[str]:
    """logstore_changes()'s `at_run`: none, 'latest' or an invocation id (a non-empty string)."""
    if at_run is None or (isinstance(at_run, str) and at_run.strip()):
        return None if at_run is None else at_run.strip()
    raise DbtRuntimeError(
        f"Model '{log.model}': logstore_changes(ref('{upstream_log.model}'), at_run={at_run!r}) "
        f"names no run. Allowed: 'latest' or a dbt invocation id (a run record's).")


def land(catalog: Catalog, handle: Any, log: LogConfig, upstream_log: LogConfig,
         this_relation: Any, upstream_relation: Any, normalize: bool, full_refresh: bool,
         drop_after: List[str], reduced_inputs: bool = False, at_run: Any = None,
         run_topic_parts: Tuple[str, str] = ("", ""),
         read_up_to: Optional[Dict[str, int]] = None, landed_before: Optional[str] = None) -> Landed:
    """Land this run's range of the upstream's changes: from the position the downstream table
    recorded (none on its first run or a full refresh) up to the upstream's latest confirmed
    snapshot, or the one run record `at_run` names for it (an invocation id or 'latest', of
    the project and target schema `run_topic_parts`; the snapshot read up to goes into
    `read_up_to`, by upstream model, for the confirmation's inputs; `landed_before`: the
    positions this model's earlier logstore_changes() calls of this render reached, kept for
    their upstreams). Each relation it creates is added to
    `drop_after` as soon as it exists (as dbt's post-model hook drops it: a table's name, or
    'view <name>'), failure or not. A run from reduced inputs (run_modes.py) lands no change and
    moves no position: the view has the columns and no rows."""
    from dbt.adapters.logstore.reading.reader import ChangelogReader, ReaderError, open_log
    from dbt.adapters.logstore.reading import runs

    at_run = checked_at_run(log, upstream_log, at_run)
    upstream_id = f"{upstream_relation.schema}.{upstream_relation.identifier}"
    existing = catalog.sibling(this_relation, this_relation.identifier)
    this_props = catalog.properties(existing) if existing is not None and existing.is_table \
        and not full_refresh else {}
    columns = catalog.columns(upstream_relation)
    sources = source_changes.parse_sources(this_props.get(names.SOURCES))
    for other, position in source_changes.parse_sources(landed_before).items():
        if other != upstream_id:  # another upstream this model read just now: where it got to
            sources[other] = position
    if reduced_inputs:
        raw = _raw_table(catalog, this_relation, upstream_relation, drop_after)
        view = _changes_view(catalog, this_relation, upstream_relation, raw, columns, normalize,
                             upstream_log, drop_after)
        logger.info(f"{log.model}: reading no changes of {upstream_log.model} (reduced inputs)")
        return Landed(view, source_changes.dump_sources(sources))
    reader = ChangelogReader(open_log(upstream_log), upstream_id)
    upstream_props = catalog.properties(upstream_relation)
    upstream_log, _ = continue_stored_shape(upstream_log, upstream_props)  # how it is written
    try:
        table_at, version = table_snapshot.readable_snapshot(upstream_props, upstream_log.model)
        confirmations, upstream_snapshot = reader.confirmations(), table_at
        if at_run is not None:  # the range ends where the run record names the upstream
            at = runs.find_run(upstream_log, *run_topic_parts, at_run).model(upstream_log.model)
            confirmations, upstream_snapshot, version = source_changes.bound_by_run(
                upstream_id, str(upstream_log.topic), confirmations, at, at_run, table_at, version)
        plan, end = source_changes.plan_read(upstream_id, str(upstream_log.topic),
                                             confirmations, sources.get(upstream_id),
                                             upstream_snapshot, reader.log.start_offsets())
    except (ReaderError, table_snapshot.UnloggedCommit, KeyError) as exc:
        raise DbtRuntimeError(f"Model '{log.model}': {str(exc).strip(chr(34))}") from None
    if plan.hybrid and version is None and plan.to_snapshot not in (0, table_at):
        raise DbtRuntimeError(
            f"Model '{log.model}': its first read of upstream '{upstream_log.model}' at run "
            f"{at_run} needs that table at snapshot {plan.to_snapshot}, and it is at {table_at} "
            f"now; a table without versions (not Iceberg or Delta) keeps no older rows to "
            f"read. Allowed: at_run='latest' (or no at_run) for the first run, or an upstream "
            f"on Iceberg or Delta.")
    raw = _raw_table(catalog, this_relation, upstream_relation, drop_after)
    names_only = [name for name, _ in columns]
    if plan.hybrid and (plan.to_snapshot or at_run is None):  # (a run before its first: none)
        rows_then = table_formats.as_of(upstream_relation, version)
        if version is not None:  # an older version may lack a column added since: null then
            held = set(catalog.column_names(rows_then))
            names_only = [name for name in names_only if name in held]
        catalog.run(source_changes.hybrid_rows_sql(
            str(raw), rows_then, names_only, upstream_log.unique_key, plan.to_snapshot,
            upstream_log.images))
        now = catalog.properties(upstream_relation).get(names.SNAPSHOT_ID)
        if version is None and int(now or 0) != plan.to_snapshot:  # read as of it otherwise
            raise DbtRuntimeError(f"Model '{log.model}': upstream '{upstream_log.model}' "
                                  f"committed while it was read; run again.")
    elif plan.ranges:
        _land_ranges(catalog, handle, plan, str(raw), reader.log)
    view = _changes_view(catalog, this_relation, upstream_relation, raw, columns, normalize,
                         upstream_log, drop_after)
    sources[upstream_id] = plan.position(end)
    if read_up_to is not None:
        read_up_to[upstream_log.model] = plan.to_snapshot
    logger.info(f"{log.model}: reading {upstream_log.model} "
                + ("as of its snapshot " if plan.hybrid else f"changes after snapshot {plan.from_snapshot} up to ")
                + str(plan.to_snapshot) + (f" (run {at_run})" if at_run else ""))
    return Landed(view, source_changes.dump_sources(sources))


def _raw_table(catalog: Catalog, this_relation: Any, upstream_relation: Any,
               drop_after: List[str]) -> Any:
    """The empty landing table of the upstream's raw records."""
    raw_name = f"{this_relation.identifier}{names.SOURCE_RAW_INFIX}{upstream_relation.identifier}"
    raw = this_relation.incorporate(path={"identifier": raw_name}, type="table")
    catalog.run(leftovers.drop_sql(raw))
    leftovers.create_or_clear(catalog, raw, source_changes.raw_table_ddl(str(raw)))
    drop_after.append(str(raw))
    return raw


def _changes_view(catalog: Catalog, this_relation: Any, upstream_relation: Any, raw: Any,
                  columns: Any, normalize: bool, upstream_log: LogConfig,
                  drop_after: List[str]) -> str:
    """The temporary view the downstream model reads, over the landed raw records."""
    view = f"{this_relation.identifier}{names.SOURCE_VIEW_INFIX}{upstream_relation.identifier}"
    catalog.run(source_changes.changes_view_sql(
        view, str(raw), list(columns), upstream_log.unique_key, normalize, upstream_log.images))
    drop_after.append(f"view {view}")
    return view


def _land_ranges(catalog: Catalog, handle: Any, plan: source_changes.ReadPlan, raw: str,
                 log: LogReader) -> None:
    spark = active_spark(handle)
    if spark is not None:  # Spark tasks, one per partition range
        source_changes.raw_rows_in_spark(spark, plan, log).write.insertInto(raw)
        return
    # thrift: dbt reads the ranges and inserts them in batches
    rows = itertools.chain.from_iterable(
        source_changes.read_range(log, p, a, b, plan.attempts) for p, a, b in plan.ranges)
    for statement in insert_batches_sql(raw, rows):
        catalog.run(statement)
