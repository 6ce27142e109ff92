"""The checks a logged run makes before its table commit, each failing with "Nothing was
changed": a keyed log's key columns present and one row per key, a change that fits in one Kafka
record, a bare-rows log (`log.format: json`) given only inserts, columns a Kafka Connect envelope
can describe, a catalog that keeps renamed partitions."""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore.changes import diff as changes
from dbt.adapters.logstore.spark.catalog import Catalog
from dbt.adapters.logstore.formats import connect_schema, get_format
from dbt.adapters.logstore.config.log_config import LogConfig


# raise_error's message when a change fails a row check inside the change set's own query
CHECK_FAILED = "dbt-logstore: a change failed the checks before the table commit"


def checked_sql(log: LogConfig, change_sql: str, marked_duplicates: bool = False) -> str:
    """The change set's query with check_change_set's row checks inside it: a change that would
    fail them stops the query (`raise_error`), before the change table exists. So the checks
    cost no Spark job of their own (one was about 0.2 s of a small model's run); which check
    failed, and on which keys, check_change_set says by running over `change_sql` (only then)."""
    failing = [f"{changes.change_size_sql()} + {changes.RECORD_OVERHEAD} > {_record_limit(log)}"]
    if marked_duplicates and log.keyed:
        failing.append(f"{changes.OP} = '{changes.OP_DUPLICATE}'")
    if get_format(log.format).refuse_changes(log.upsert, 1):
        failing.append(f"{changes.OP} <> 'c'")
    return (f"select case when {' or '.join(failing)} then raise_error('{CHECK_FAILED}') "
            f"else {changes.OP} end as {changes.OP}, {changes.KEY}, {changes.BEFORE}, "
            f"{changes.AFTER} from ({change_sql})")


def failed_inside(error: BaseException) -> bool:
    """Whether `error` is a query of checked_sql stopped by a change that failed a check."""
    return CHECK_FAILED in str(error)


def _record_limit(log: LogConfig) -> int:
    return int(log.client_properties.get("max.request.size", 1048576))


def check_change_set(catalog: Catalog, log: LogConfig, changes_relation: str,
                     marked_duplicates: bool = False, new_relation: Optional[str] = None) -> Optional[int]:
    """No key repeats (when the change set was built with mark_duplicates), every change fits in
    one Kafka record, and the format can write every change (`log.format: json` without upsert
    mode: only inserts). Returns the rows of `new_relation` (the rows the change set leads to),
    counted by the same query, when given."""
    summary = changes.change_set_summary(
        catalog.rows(changes.change_set_summary_sql(changes_relation, new_relation))[0])
    if marked_duplicates and log.keyed and summary.duplicates:
        raise not_unique(log, [row[0] for row in catalog.rows(changes.marked_duplicates_sql(changes_relation))])
    limit = _record_limit(log)
    if summary.rows and summary.largest_size + changes.RECORD_OVERHEAD > limit:
        raise DbtRuntimeError(
            f"Model '{log.model}': the change of row key {summary.largest_key} is "
            f"{summary.largest_size} bytes, more than one Kafka record may hold "
            f"(max.request.size = {limit}). Allowed: records up to the limit; raise it with "
            f"'kafka.max.request.size' (and the broker's message.max.bytes). Nothing was changed."
        )
    refusal = get_format(log.format).refuse_changes(log.upsert, summary.non_inserts)
    if refusal:
        raise DbtRuntimeError(f"Model '{log.model}': {refusal} Nothing was changed.")
    return summary.new_rows


def check_key_columns(log: LogConfig, columns: Sequence[str]) -> None:
    """Every unique_key column is one of the new rows' `columns` (Spark's names are
    case-insensitive): one sentence naming the missing ones, instead of Spark's UNRESOLVED_COLUMN
    from the middle of the change-set query."""
    have = {c.lower() for c in columns}
    missing = [k for k in log.unique_key if k.lower() not in have]
    if missing:
        named = (f"column '{missing[0]}'" if len(missing) == 1
                 else "columns " + ", ".join(f"'{m}'" for m in missing))
        raise DbtRuntimeError(
            f"Model '{log.model}': config 'unique_key' = {list(log.unique_key)} names {named}, "
            f"which the model's rows do not have (allowed: {', '.join(columns)}); nothing was "
            f"changed.")


def check_columns(log: LogConfig, columns: Sequence[Tuple[str, str]]) -> None:
    """The unique_key columns are among the new rows' columns (check_key_columns), and every
    column can be written in the log's format: in Kafka Connect's envelope, each needs a Connect
    schema (the mirror, after the commit, could not write it)."""
    check_key_columns(log, [name for name, _ in columns])
    if not connect_schema.included(log.format_options):
        return
    unsupported = connect_schema.without_schema(columns)
    if unsupported:
        raise DbtRuntimeError(
            f"Model '{log.model}': config '{connect_schema.SCHEMA_INCLUDE}' = true, but the columns "
            f"{', '.join(unsupported)} have no Kafka Connect schema. Allowed: columns of boolean, "
            f"integer, float, double, decimal, string, binary, date, timestamp, timestamp_ntz, "
            f"array, map and struct types (cast the others), or the log without the envelope. "
            f"Nothing was changed.")


def check_unique(catalog: Catalog, log: LogConfig, relation: Any, appended_to: Any = None,
                 columns: Optional[Sequence[str]] = None) -> None:
    """A keyed log needs one row per key: fail before the commit if the new rows repeat a key,
    or (append) bring a key the table already has. `columns`: the relation's, if known."""
    if not log.keyed:
        return
    check_key_columns(log, catalog.column_names(relation) if columns is None else columns)
    checks = [changes.duplicate_keys_sql(str(relation), log.unique_key)]
    if appended_to is not None:
        checks.append(changes.existing_keys_sql(str(relation), str(appended_to), log.unique_key))
    for sql in checks:
        rows = catalog.rows(sql)
        if rows:
            raise not_unique(log, [row[0] for row in rows])


def not_unique(log: LogConfig, examples: List[Any]) -> DbtRuntimeError:
    return DbtRuntimeError(
        f"Model '{log.model}': config 'unique_key' = {list(log.unique_key)} would not be "
        f"unique in the table (repeated keys, e.g. {'; '.join(str(e) for e in examples)}). "
        f"A logged model with a unique_key needs exactly one row per key. Nothing was changed."
    )


def check_catalog(model: str, partition_by: Any, spark: Any) -> None:
    """Refuse a partitioned logged model on Spark's in-memory catalog (not dbt-spark's): it
    keeps a renamed table's old partition paths, so the staged table renamed in reads empty.
    `spark`: the session (None: a server's, whose catalog is its own)."""
    if spark is not None and partition_by:
        if spark.conf.get("spark.sql.catalogImplementation", "hive") == "in-memory":
            raise DbtRuntimeError(in_memory_catalog_message(model))


def in_memory_catalog_message(model: str) -> str:
    return (f"Model '{model}': a partitioned logged model needs Spark's Hive catalog, and this "
            f"session uses the in-memory one (spark.sql.catalogImplementation = in-memory), which "
            f"loses the partitions of a renamed table: the model's commit renames its staged table "
            f"in. Start the Spark session with Hive support (dbt-spark's session method does, "
            f"unless a session was already running in this process). Nothing was changed.")
