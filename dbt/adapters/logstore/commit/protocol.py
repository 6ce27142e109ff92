"""The commit protocol: the order in which a logged model changes its table and its log, run
here, step by step, for every logged materialization. (Names in capitals are the protocol's
names, defined in names.py; `steps` is what the protocol asks of dbt and Spark, `Steps` below,
which the adapter gives: impl.py.)

`begin`, before anything changes:
  1. the model's run lock (run_lock.py): one run of a model at a time;
  2. the log is the table's log (lifecycle/identity.py): the topics, the cluster and the records
     the table recorded are still there, and a table without a log finds no earlier log of
     itself in the topic; if not, with `log.on-lost: fail` the run stops here, changing nothing,
     and with `restart` the log starts a new generation (below). Then the log is made ready
     (reachable, its topics created), else the run fails here;
  3. what a failed run left behind is settled: a swap it began is finished; its change set is
     written to the log again if its table commit happened (`recovery_action`), else dropped;
  4. a log that starts now (`log_is_new`: log just enabled, a new topic or cluster) or starts a
     new generation (a lost log restarted, `logstore_resnapshot`, `log.generation.interval`)
     first receives the table's current rows, as a commit of their own (steps 7 and 8) that
     starts a generation (lifecycle/generations.py). Without a table yet, the run's own first
     build starts it.

The materialization stages the new rows. Then:
  5. `build_changes`: the commit's change set is written to a change table `<model>` +
     CHANGES_SUFFIX tagged with its id (the dbt invocation id, or a microbatch batch's), checked
     as it is written (changes/checks.py): keys unique, records small enough, the format can
     write it. Nothing has changed yet.
  6. The table commit, in one of two ways, tagged `COMMITTED = <id>`:
     - `commit_by_swap` (rebuilds): on Iceberg and Delta one `create or replace table` commits
       the rows and the tag together; otherwise the staged table is tagged, the old table
       dropped and the staged one renamed in (a run that dies in between is finished by step 3);
     - `commit_by_statement` (incremental insert, overwrite, merge): first the intent (the change
       set id, the row counts before and after, the table's state before), then the statement,
       then the tag. A run that dies between statement and tag is judged by `recovery_action`.
  7. `finish`: the change set is written to the log as the table's next snapshot
     (commit/snapshots.py: every record carries headers naming table, snapshot, change set and
     write attempt; a confirmation record in the control topic `<topic>` + CONTROL_TOPIC_SUFFIX
     states what the attempt wrote);
  8. the table is tagged `MIRRORED = <id>` with the snapshot id and the log offsets after it,
     and the change table dropped.

Before steps 6, 7 and 8 the run checks that it still holds its lock (run_lock.hold): a run paused
past its lease, whose model another run took over, stops there and changes nothing more.

So a committed change reaches the log exactly once, as consumers count it (docs/log-format.md):
a run that dies after step 6 leaves its change table, and the next run's step 3 asks the control
topic whether an attempt was confirmed; if so its snapshot is adopted, otherwise the change set
is written again as a new attempt. A change table whose table commit never happened is dropped.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional, Protocol, Sequence, Set, Tuple

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore.spark.catalog import logger, properties_list_sql
from dbt.adapters.logstore.changes import checks as change_checks
from dbt.adapters.logstore.formats import option_default
from dbt.adapters.logstore.log.lifecycle.generations import GenerationStart
from dbt.adapters.logstore.log.lifecycle.identity import Assessment, lost_message
from dbt.adapters.logstore.config.log_config import LogConfig, LogConfigError
from dbt.adapters.logstore.config.continuation import continues_log
from dbt.adapters.logstore.names import (
    COMMITTED, CHANGESET_ID, INTENT, INTENT_ROWS_AFTER, INTENT_ROWS_BEFORE, INTENT_TABLE_STATE,
    MIRRORED, RELATION_MARK, STAGED_SUFFIXES, TOPIC_PARTITIONS,
)


class Steps(Protocol):
    """What the protocol asks of dbt and Spark (the adapter's methods, impl.py; the unit tests
    record them). Relations are dbt's."""

    def logstore_check_catalog(self, log: LogConfig, partition_by: Any) -> str: ...
    def logstore_lock(self, log: LogConfig, target_relation: Any, invocation_id: str) -> str: ...
    def logstore_prepare(self, log: LogConfig) -> int: ...
    # the log's life (lifecycle/)
    def logstore_assess_log(self, log: LogConfig, target_relation: Any, relation: Any) -> Assessment: ...
    def logstore_start_generation(self, start: Optional[GenerationStart]) -> None: ...
    def logstore_relation(self, target_relation: Any, kind: str) -> Any: ...
    def logstore_own_relations(self, target_relation: Any) -> Set[str]: ...
    def get_relation(self, database: Any, schema: Any, identifier: Any) -> Any: ...
    def rename_relation(self, from_relation: Any, to_relation: Any) -> None: ...
    def drop_relation(self, relation: Any) -> None: ...
    def execute(self, sql: str) -> Any: ...
    def logstore_crash_point(self, point: str) -> str: ...
    def logstore_hold_lock(self, log: LogConfig) -> None: ...
    # what the table's properties record (table_commit.py)
    def logstore_interrupted_swap(self, changes_relation: Any, target_relation: Any) -> Any: ...
    def logstore_log_is_new(self, log: LogConfig, relation: Any, topic_partitions: int) -> bool: ...
    def logstore_pending_changeset(self, changes_relation: Any, target_relation: Any,
                                   log_starts: bool = False) -> Optional[str]: ...
    def logstore_settle_sources(self, relation: Any, changeset: str) -> None: ...
    def logstore_set_properties(self, relation: Any, properties: Mapping[str, str]) -> str: ...
    def logstore_properties(self, log: LogConfig, changeset_id: Optional[str] = None,
                            topic_partitions: Optional[int] = None, carry_from: Any = None,
                            record_sources: bool = True) -> Dict[str, str]: ...
    def logstore_intent_properties(self, new_relation: Any, old_relation: Any, new_rows: int,
                                   replaced_by: Any = None, replaces_rows: bool = True) -> Dict[str, str]: ...
    # the change set (changes/diff.py, changes/checks.py)
    def logstore_change_sql(self, log: LogConfig, new_relation: Any, old_relation: Any = None,
                            scope_by: Any = None, scope_relation: Any = None,
                            mark_duplicates: bool = False, shape_of: Any = None) -> str: ...
    def logstore_create(self, relation: Any, sql: str) -> str: ...
    def logstore_readable_table_options(self) -> str: ...
    def logstore_check_change_set(self, log: LogConfig, changes_relation: Any, marked_duplicates: bool = False,
                                  new_relation: Any = None, failed: bool = False) -> None: ...
    def logstore_retract(self, log: LogConfig, changes_relation: Any) -> None: ...
    # the log write (mirror.py)
    def logstore_mirror(self, log: LogConfig, changes_relation: Any, target_relation: Any,
                        changeset: str, rows_affected: Optional[int] = None,
                        recovering: bool = False, log_starts: bool = False,
                        committed_properties: Optional[Mapping[str, str]] = None) -> Any: ...
    def logstore_snapshot_properties(self, response: Any, changeset: str) -> Dict[str, str]: ...


class LogLost(DbtRuntimeError):
    """The topic no longer holds the table's log and the model says `log.on-lost: fail`."""


def begin(steps: Steps, log: LogConfig, target: Any, partition_by: Any, invocation_id: str,
          changeset: str, resnapshot: bool = False) -> int:
    """Steps 1 to 4, before anything of this run changes; returns the topic's partition count.
    `changeset`: this run's change-set id (a log that starts now uses it + '-start').
    `resnapshot`: start a new generation now (dbt run-operation logstore_resnapshot)."""
    steps.logstore_check_catalog(log, partition_by)
    steps.logstore_lock(log, target, invocation_id)
    changes = steps.logstore_relation(target, "changes")
    leftover = steps.get_relation(changes.database, changes.schema, changes.identifier)
    existing = steps.get_relation(target.database, target.schema, target.identifier)
    if leftover is not None and existing is None:
        # a run that died between dropping the old table and renaming the new one in
        staged = steps.logstore_interrupted_swap(leftover, target)
        if staged is not None:
            logger.info(f"putting {staged} in place of {target} (a failed run had committed it)")
            steps.rename_relation(staged, target)
            existing = target.incorporate(type="table")
    table = existing if existing is not None and existing.is_table else None
    if resnapshot and table is None:
        raise DbtRuntimeError(f"Model '{log.model}': {target} is not a table yet; its first run "
                              f"starts its log with its rows.")
    assessment = steps.logstore_assess_log(log, target, table)
    start, why = _generation_to_start(log, assessment, resnapshot)
    partitions = steps.logstore_prepare(log)
    log_starts = steps.logstore_log_is_new(log, existing, partitions) or (
        start is not None and table is not None)
    if log_starts and start is None:
        # a log that starts on a new topic starts its first generation there; recorded with the
        # commit below, so that a run that dies before its log write is finished as such
        start = assessment.next_start
    if leftover is not None:
        # a log that starts now starts from the table's rows: a failed run's change set is moot
        pending = steps.logstore_pending_changeset(leftover, existing, log_starts)
        if pending:
            logger.info(f"re-sending change set {pending} of {target} left by a failed run")
            steps.logstore_settle_sources(existing, pending)
            finish(steps, log, existing, leftover, pending, recovering=True)
        else:
            steps.drop_relation(leftover)
    if start is not None:
        # the generation's copy of the table: the table's rows now (below), or the run's own
        # first build when there is no table yet (its commit records the start)
        steps.logstore_start_generation(start)
    if log_starts or why:
        # said once (logstore_resnapshot says it itself, when it is done)
        say = logger.debug if resnapshot else logger.info
        say(f"{target} starts {'its log' if start is None else f'generation {start.number} of its log'} "
            f"in {log.topic} with {'the table' if log_starts else 'this run'}'s rows"
            + (f" ({why})" if why else ""))
    if log_starts:
        begun = f"{changeset}-start"
        build_changes(steps, log, changes, existing, changeset=begun)
        steps.logstore_set_properties(existing, steps.logstore_properties(
            log, begun, partitions, record_sources=False))
        finish(steps, log, existing, changes, begun, log_starts=True)
        steps.logstore_start_generation(None)  # the run's own commit continues it
    # what a failed run staged is never committed now: one listing finds it (almost never any)
    present = steps.logstore_own_relations(target)
    for kind in STAGED_SUFFIXES:
        staged = steps.logstore_relation(target, kind)
        if staged.identifier.lower() in present:
            steps.drop_relation(staged)
    return partitions


def _generation_to_start(log: LogConfig, assessment: Assessment,
                         resnapshot: bool) -> Tuple[Optional[GenerationStart], str]:
    """The generation this run starts, if any, and why; a lost log stops the run unless the
    model restarts it (`log.on-lost`) or it is being resnapshotted."""
    if assessment.lost and not (resnapshot or log.on_lost == "restart"):
        raise LogLost(lost_message(log, assessment))
    if assessment.lost:
        logger.warning(f"Model '{log.model}': {'; '.join(assessment.findings)}.")
        return assessment.next_start, "its log was lost"
    if resnapshot:
        return assessment.next_start, "as asked"
    if assessment.due:
        return assessment.next_start, "its latest is older than 'log.generation.interval'"
    return None, ""


def build_changes(steps: Steps, log: LogConfig, changes: Any, new: Any, old: Any = None,
                  scope_by: Sequence[str] = (), changeset: str = "", scope_relation: Any = None,
                  unique_check: bool = False, shape_of: Any = None) -> None:
    """Step 5: the change set from `old` (None: no old rows) to `new` as a table tagged with its
    id, and the checks before the table commit. `scope_by` limits the old rows (partitions or
    keys replaced, `scope_relation`'s keys when given). `unique_check`: fail if `new` repeats a
    key of a keyed log (the change set's query counts keys in its own shuffle). `shape_of`: the
    table `new`'s rows are inserted into by column name."""
    mark_duplicates = unique_check
    try:
        sql = steps.logstore_change_sql(log, new, old, scope_by or None, scope_relation,
                                        mark_duplicates, shape_of)
        try:  # the checks run inside the change set's own query (change_checks.checked_sql)
            steps.logstore_create(changes, (
                f"create table {changes} using parquet {steps.logstore_readable_table_options()} "
                f"tblproperties {properties_list_sql({CHANGESET_ID: changeset})} as "
                f"{change_checks.checked_sql(log, sql, mark_duplicates)}"))
        except Exception as error:
            if change_checks.failed_inside(error):  # say which check failed, on which keys
                steps.logstore_check_change_set(log, f"({sql})", mark_duplicates, failed=True)
            raise
        # a generation's copy of the table also deletes the keys the topic holds and the table
        # lost (retraction.py): a plain reader of the topic ends with the table
        steps.logstore_retract(log, changes)
        steps.logstore_check_change_set(log, changes, mark_duplicates, new)
    except Exception:
        # "Nothing was changed": nor is anything this run staged left in the user's schema
        steps.drop_relation(changes)
        if RELATION_MARK in str(getattr(new, "identifier", "")):
            steps.drop_relation(new)
        raise
    steps.logstore_crash_point("before_table_commit")
    steps.logstore_hold_lock(log)  # a run that lost its lock commits nothing


def commit_by_swap(steps: Steps, log: LogConfig, staged: Any, target: Any, old: Any, changes: Any,
                   changeset: str, partitions: int, rows_affected: Optional[int],
                   replace_clauses: Optional[str] = None,
                   model_properties: Optional[Mapping[str, str]] = None,
                   versioned: bool = False) -> Any:
    """Step 6 for a rebuilt table, then 7 and 8: the staged rows and the change-set tag commit
    together. With `replace_clauses` (Iceberg, Delta: table_formats.replaces_in_place) one
    `create or replace table` with those clauses (`using`, `partitioned by`, ... as dbt-spark
    renders them) commits both and keeps the table's history; the commit's properties go next
    to the model's own (`model_properties`). Otherwise the tagged staged table takes the
    model's name; then, unless the table is of a `versioned` format (whose version the log
    write reads from the table), the properties it was tagged with are all the log write needs
    of the committed table: nothing else writes them under the run's lock."""
    properties = steps.logstore_properties(log, changeset, partitions, old)
    if replace_clauses is not None:
        steps.execute(f"create or replace table {target} {replace_clauses} tblproperties "
                      f"{properties_list_sql({**(model_properties or {}), **properties})} "
                      f"as select * from {staged}")
        steps.drop_relation(staged)
    else:
        steps.logstore_set_properties(staged, properties)
        if old is not None:
            steps.drop_relation(old)
            steps.logstore_crash_point("mid_swap")
        steps.rename_relation(staged, target)
        if not versioned:
            return finish(steps, log, target, changes, changeset, rows_affected,
                          committed_properties=properties)
    return finish(steps, log, target, changes, changeset, rows_affected)


def commit_by_statement(steps: Steps, log: LogConfig, target: Any, staged: Any, existing: Any,
                        changes: Any, changeset: str, partitions: int, statement: str,
                        rows_affected: int, replaced_by: Any, replaces_rows: bool) -> Any:
    """Step 6 for an incremental statement (insert, overwrite, merge into the table), then 7
    and 8. The intent first, so a run that dies between the statement and its tag can be judged
    (`recovery_action`): `replaced_by` names the columns whose values the new rows replace
    (partitions, keys), `replaces_rows` is false for an append."""
    intent = steps.logstore_intent_properties(staged, existing, rows_affected, replaced_by, replaces_rows)
    steps.logstore_set_properties(target, {**intent, INTENT: changeset})
    steps.logstore_crash_point("incremental_intent")
    steps.execute(statement)
    steps.logstore_crash_point("incremental_commit")
    steps.logstore_set_properties(target, steps.logstore_properties(log, changeset, partitions))
    return finish(steps, log, target, changes, changeset, rows_affected)


def finish(steps: Steps, log: LogConfig, target: Any, changes: Any, changeset: str,
           rows_affected: Optional[int] = None, recovering: bool = False,
           log_starts: bool = False, committed_properties: Optional[Mapping[str, str]] = None) -> Any:
    """Steps 7 and 8, after the table commit: the change set written to the log as the next
    snapshot (when `recovering`, a snapshot an earlier attempt confirmed is adopted), recorded
    with the table, and the change table dropped. Returns the run's response.
    `committed_properties`: the table's properties as the commit wrote them, when they are all
    it has (else the log write reads them)."""
    steps.logstore_crash_point("after_table_commit")
    steps.logstore_hold_lock(log)  # a run that lost its lock writes no log (Kafka fences it too)
    response = steps.logstore_mirror(log, changes, target, changeset, rows_affected, recovering,
                                     log_starts, committed_properties)
    # nor records a write: the run that took the model over may have logged newer snapshots
    steps.logstore_hold_lock(log)
    steps.logstore_set_properties(target, steps.logstore_snapshot_properties(response, changeset))
    steps.drop_relation(changes)
    return response


def recovery_action(changes_props: Mapping[str, str], table_props: Mapping[str, str],
                    row_count: Optional[int] = None, state: Optional[str] = None,
                    atomic: bool = False, changes_rows: Optional[Callable[[], int]] = None) -> str:
    """What to do with a change table a previous run left behind: 'mirror' or 'drop'.

    An incremental commit (an insert, overwrite or merge, then the tag) records its intent
    first: the change set, the table's state before (table_formats.table_state) and, unless
    that state is a version of a table that commits atomically (`atomic`: Iceberg, Delta), its
    row count before and after. A run that died between the statement and the tag is judged by
    the state and row count it left (`state`, `row_count`): the same state as before, the
    statement never took effect; another version of an atomic table, it did; other data files
    of a plain table, it did if the row count is the one intended. A change set that changes no
    row (`changes_rows`, counted only when the rest cannot tell) needs no judging: whether or
    not its commit happened, the table's rows are the ones the log already has."""
    changeset = changes_props.get(CHANGESET_ID)
    if not changeset or table_props.get(MIRRORED) == changeset:
        return "drop"
    if table_props.get(COMMITTED) == changeset:
        return "mirror"
    if table_props.get(INTENT) != changeset:
        return "drop"  # the run died before its table commit began
    # an atomic table's intent records no counts (any there are an older intent's)
    before, after = (None, None) if atomic else (int(table_props[INTENT_ROWS_BEFORE]),
                                                 int(table_props[INTENT_ROWS_AFTER]))
    state_before = table_props.get(INTENT_TABLE_STATE)
    if state_before and state is not None:
        if state == state_before:
            return "drop"
        if atomic or row_count == after:
            return "mirror"
    elif after is not None and row_count == after and after != before:
        return "mirror"
    elif after is not None and row_count == before and after != before:
        return "drop"
    if changes_rows is not None and changes_rows() == 0:
        return "drop"
    judged = (f"the table's state was {state_before} before it and cannot be read now ({state})" if atomic else
              f"the table holds {row_count} rows, and the commit would have taken it from {before} to {after} rows")
    raise DbtRuntimeError(
        f"A run died during the table commit of change set {changeset}: {judged}, so "
        f"whether it happened cannot be told. Give the model a new 'kafka.topic': a new log "
        f"starts with the table's current rows (move its consumers to it; docs/operations.md, 'Moving an "
        f"existing log').")


def log_is_new(log: LogConfig, table_props: Mapping[str, str], topic_partitions: int) -> bool:
    """Whether this table's log starts now (log just enabled, or a new topic or cluster): then
    the table's current rows are written first, so a consumer of the new log sees the whole table.

    A log that continues must keep its meaning: the same record key and format, and the same
    topic partition count, or a key's records would land in two partitions (Paimon #815, #4763).
    (Its changelog mode and timestamp standard are kept by log_continuation.continue_stored_shape.)
    """
    if not continues_log(log, table_props):
        return True
    advice = "Allowed: keep it, or log to a new 'kafka.topic' (a new topic starts with the table's rows)."
    stored_key = table_props.get("log.key")
    if stored_key is not None and stored_key != ",".join(log.unique_key):
        raise LogConfigError(
            f"Model '{log.model}': 'unique_key' changed from [{stored_key}] to "
            f"[{','.join(log.unique_key)}], but topic '{log.topic}' already holds records keyed by "
            f"[{stored_key}]; consumers could not match them. {advice}")
    stored_format = table_props.get("log.format", "debezium-json")
    if stored_format != log.format:
        raise LogConfigError(
            f"Model '{log.model}': 'log.format' changed from '{stored_format}' to '{log.format}' "
            f"on topic '{log.topic}'; one topic must hold one format. {advice}")
    for key, value in log.format_options.items():
        stored = table_props.get(key, option_default(key))
        if stored != value:
            raise LogConfigError(
                f"Model '{log.model}': '{key}' changed from '{stored}' to '{value}' on topic "
                f"'{log.topic}'; its consumers read one shape. {advice}")
    stored_partitions = table_props.get(TOPIC_PARTITIONS)
    if stored_partitions and int(stored_partitions) != topic_partitions:
        # No re-base in place: a key's earlier records stay in its old partition, and a reader
        # that reads the partitions in another order than they were written (upsert-kafka, a
        # KTable) would end with them (docs/operations.md, 'A topic whose partition count changed').
        raise LogConfigError(
            f"Model '{log.model}': topic '{log.topic}' now has {topic_partitions} partitions, but "
            f"its records were written with {stored_partitions}; keys would move between "
            f"partitions and lose their order. Ways out: log to a new 'kafka.topic' (with any "
            f"partition count; it starts with the table's rows), or delete the topic, create it "
            f"again with {stored_partitions} partitions and run the model with 'log.on-lost: "
            f"restart' (a new generation with the table's rows). Either way its consumers read "
            f"the log again from its start.")
    return False
