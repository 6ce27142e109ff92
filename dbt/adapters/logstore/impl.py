"""The adapter: dbt-spark's, plus thin `@available` methods the logstore macros call.

Each method turns Jinja's loose values into typed objects and hands off to plain Python:
config resolution (`log_config`), change computation (`changes`), the commit protocol
(`commit_protocol`) and the log system (`log_system`, `kafka_log`).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from dbt.adapters.base import available
from dbt.adapters.contracts.connection import AdapterResponse
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.impl import SparkAdapter
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore import (
    changes, commit_protocol, faults, leftovers, names, parallel_mirror, row_source, run_lock,
    source_changes,
)
from dbt.adapters.logstore.connections import LogstoreConnectionManager
from dbt.adapters.logstore.log_config import LogConfig, LogConfigError, ModelRef, resolve_log_config
from dbt.adapters.logstore.log_continuation import continue_stored_shape
from dbt.adapters.logstore.log_system import get_log_system
from dbt.adapters.logstore.row_source import active_spark, iter_column_batches

logger = AdapterLogger("logstore")


@dataclass
class LogstoreAdapterResponse(AdapterResponse):
    """dbt-spark's response plus what the log received (shown in run_results.json)."""

    rows_mirrored: Optional[int] = None
    topic: Optional[str] = None
    log_offsets: Optional[Dict[str, List[int]]] = None
    log_snapshot: Optional[int] = None
    log_end_offsets: Optional[Dict[str, int]] = None
    log_attempt: Optional[str] = None
    log_seconds: Optional[float] = None  # from the table commit to the log commit
    log_transactions: Optional[int] = None  # Kafka transactions the records took
    log_longest_transaction_s: Optional[float] = None  # the longest of them, begin to commit


def in_memory_catalog_message(model: str) -> str:
    return (f"Model '{model}': a partitioned logged model needs Spark's Hive catalog, and this "
            f"session uses the in-memory one (spark.sql.catalogImplementation = in-memory), which "
            f"loses the partitions of a renamed table: the model's commit renames its staged table "
            f"in. Start the Spark session with Hive support (dbt-spark's session method does, "
            f"unless a session was already running in this process). Nothing was changed.")


@dataclass
class ModelRunState:
    """What a thread's model run holds until dbt's post-model hook: its run lock, the upstream
    positions to record with its commit, and the upstream changes it landed (tables, views)."""

    lock: Optional[str] = None
    owner: Optional[run_lock.LockOwner] = None  # this run, as its lock names it
    sources: Optional[str] = None
    landed: List[str] = field(default_factory=list)


def _as_dict(value: Any) -> Dict[str, Any]:
    """Node configs reach us as dicts at run time and as config objects at parse time."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    if hasattr(value, "to_dict"):
        return value.to_dict(omit_none=True)
    return dict(value)


def _get(node: Any, key: str, default: Any = None) -> Any:
    if isinstance(node, Mapping):
        return node.get(key, default)
    return getattr(node, key, default)


class LogstoreAdapter(SparkAdapter):
    ConnectionManager = LogstoreConnectionManager  # type: ignore[assignment]

    @classmethod
    def type(cls) -> str:
        return "logstore"

    # --- config resolution -------------------------------------------------------------

    @available
    def logstore_config(self, node: Any) -> LogConfig:
        """The validated log options of a model (raises a clear error on bad input)."""
        raw = _as_dict(_get(node, "config"))
        ref = ModelRef(
            name=str(_get(node, "name")),
            schema=str(_get(node, "schema")),
            alias=str(_get(node, "alias") or _get(node, "name")),
            materialized=str(raw.get("materialized")),
            incremental_strategy=raw.get("incremental_strategy"),
            language=str(_get(node, "language") or "sql"),
        )
        creds = self.config.credentials
        return resolve_log_config(
            ref, raw,
            profile_bootstrap_servers=getattr(creds, "kafka_bootstrap_servers", None),
            profile_properties=getattr(creds, "kafka_properties", None),
            profile_client=getattr(creds, "kafka_client", None),
        )

    # --- the protocol's names the macros write (names.py) --------------------------------

    @available
    def logstore_names(self) -> Dict[str, str]:
        """The table properties the macros set themselves: `adapter.logstore_names().intent`."""
        return {"changeset_id": names.CHANGESET_ID, "intent": names.INTENT}

    @available
    def logstore_relation(self, target_relation: Any, kind: str) -> Any:
        """The model's own relation `kind`: 'changes', or a staged one (names.STAGED_SUFFIXES).
        An unknown kind fails here: looked up in a macro it would render as '' (dbt's Jinja
        forgives unknown keys) and name the model's own table."""
        suffix = names.CHANGES_SUFFIX if kind == "changes" else names.STAGED_SUFFIXES.get(kind)
        if suffix is None:
            raise DbtRuntimeError(f"no relation of kind {kind!r}")
        return target_relation.incorporate(
            path={"identifier": f"{target_relation.identifier}{suffix}"}, type="table")

    def set_macro_resolver(self, macro_resolver: Any) -> None:
        """dbt hands over the loaded manifest here after every parse (full or partial), before
        anything runs: the log options of every node are checked at once, so `dbt parse`,
        `compile` and `run` name every model with a bad log configuration in one error, and
        nothing is built or written."""
        super().set_macro_resolver(macro_resolver)
        nodes = getattr(macro_resolver, "nodes", None)
        if nodes:
            self._validate_nodes(nodes.values())

    def _validate_nodes(self, nodes: Any) -> None:
        errors = []
        for node in sorted(nodes, key=lambda n: str(_get(n, "unique_id"))):
            if _get(node, "config") is None:
                continue
            try:
                self.logstore_config(node)
            except LogConfigError as exc:
                errors.append(str(exc.msg))
        if len(errors) == 1:
            raise LogConfigError(errors[0])
        if errors:
            raise LogConfigError(f"{len(errors)} models have an invalid log configuration:\n"
                                 + "\n".join(f"- {e}" for e in errors))

    # --- one run at a time per model ----------------------------------------------------

    @available.parse_none
    def logstore_lock(self, log: LogConfig, target_relation: Any, invocation_id: str) -> str:
        """Take the model's run lock (see run_lock.py) or fail, naming the run that holds it.
        The post-model hook releases it when the materialization ends, however it ends."""
        lock = self._lock_relation(target_relation)
        owner = run_lock.LockOwner.this_process(invocation_id, self._lease_seconds())
        props = ", ".join(f"'{k}' = '{v}'" for k, v in owner.properties().items())
        error: Optional[Exception] = None
        for _ in range(3):
            try:
                self.logstore_create(lock, f"create table {lock} (held_by string) using parquet "
                                           f"tblproperties ({props})")
                self._run_state().lock, self._run_state().owner = lock, owner
                return lock
            except Exception as exc:
                held = self._lock_owner(lock)
                if held is None:  # not a lock conflict (or the lock was just released): retry
                    error = exc
                    continue
                if not held.is_gone():
                    raise DbtRuntimeError(run_lock.locked_message(log.model, lock, held)) from None
                why = "whose lease expired" if held.expired() else "which ended without releasing it"
                logger.info(f"{log.model}: taking over the lock of {held.describe()}, {why}")
                self.execute(f"drop table if exists {lock}")
        raise DbtRuntimeError(f"Model '{log.model}': could not create its run lock {lock}: {error}")

    @available.parse_none
    def logstore_create(self, relation: Any, sql: str) -> str:
        """Create one of the adapter's own relations with `sql`. If a killed run left that
        relation's directory without a metastore entry, remove it and create again (see
        leftovers.py), saying what was removed."""
        try:
            self.execute(sql)
        except Exception as exc:
            identifier = getattr(relation, "identifier", None) or str(relation).rsplit(".", 1)[-1]
            location = leftovers.orphan_location(str(exc), identifier.strip("`"))
            if location is None:
                raise
            logger.info(f"logstore: removing {location}, left behind by a run that was killed while "
                        f"creating {relation} (it has no metastore entry)")
            self._remove_directory(relation, location)
            self.execute(sql)
        return ""

    def _remove_directory(self, relation: Any, location: str) -> None:
        """Delete `location` through the metastore, with a scratch table named after `relation`."""
        gc = f"{relation}{names.GC_SUFFIX}" if "`" not in str(relation) else \
            str(relation)[:-1] + names.GC_SUFFIX + "`"
        for statement in leftovers.removal_sql(gc, location):
            self.execute(statement)

    def _remove_uncommitted_output(self, target_relation: Any) -> None:
        """Remove what a killed INSERT into the model's table left for the next INSERT's job
        commit to pick up (see leftovers.py)."""
        _, described = self.execute(f"describe table extended {target_relation}", fetch=True)
        location = leftovers.location_of(described.rows)
        if location is None:
            return  # not a file-based table (nothing of a killed job can surface)
        scratch = leftovers.uncommitted_output(location)
        logger.info(f"logstore: removing {scratch}, if present: the uncommitted output of the "
                    f"run that was killed in the table commit of {target_relation}")
        own = target_relation.incorporate(path={
            "identifier": target_relation.identifier + names.UNCOMMITTED_SUFFIX})
        self._remove_directory(own, scratch)

    @available.parse_none
    def logstore_unlock(self, target_relation: Any) -> str:
        """Remove a model's run lock (`dbt run-operation logstore_unlock`), naming its owner."""
        lock = self._lock_relation(target_relation)
        held = self._lock_owner(lock)
        self.execute(f"drop table if exists {lock}")
        return f"removed the lock of {held.describe()}" if held else "no lock was held"

    def _lease_seconds(self) -> float:
        return float(getattr(self.config.credentials, "lock_lease_seconds", None)
                     or run_lock.DEFAULT_LEASE_SECONDS)

    def _hold_lock(self, log: LogConfig) -> None:
        """Before a step that changes the table or the log: the lock must still carry this run's
        token (a run paused past its lease has lost it, and stops here); then its lease is
        renewed (run_lock.LockOwner.due_for_renewal)."""
        state = self._run_state()
        if state.lock is None or state.owner is None:
            return  # recovery without a run lock of its own (never the case in a model run)
        held = self._lock_owner(state.lock)
        if held is None or held.token != state.owner.token:
            lock, state.lock = state.lock, None  # not ours to release any more
            raise DbtRuntimeError(run_lock.lost_message(log.model, lock, held))
        lease = self._lease_seconds()
        if not state.owner.due_for_renewal(lease):
            return
        state.owner = state.owner.renewed(lease)
        self.execute(f"alter table {state.lock} set tblproperties "
                     f"('{names.LOCK_EXPIRES}' = '{state.owner.expires_ms}')")

    @available.parse_none
    def logstore_release_lock(self) -> str:
        """Release the lock this thread took (dbt calls it after every model, via the hook),
        unless another run has taken it over meanwhile."""
        state = self._run_state()
        lock, state.lock = state.lock, None
        owner, state.owner = state.owner, None
        if lock is not None:
            held = self._lock_owner(lock)
            if held is not None and owner is not None and held.token and held.token != owner.token:
                return ""  # another run's lock now
            try:
                self.execute(f"drop table if exists {lock}")
            except Exception as exc:  # the run's own error (if any) matters more
                logger.warning(f"could not release the run lock {lock}: {exc}; the next run on "
                               f"this host takes it over")
        return ""

    def post_model_hook(self, config: Mapping[str, Any], context: Any) -> None:
        for raw in self._run_state().landed:  # landed upstream changes: read and done
            kind, _, name = raw.rpartition(" ")
            try:
                self.execute(f"drop {kind or 'table'} if exists {name}")
            except Exception as exc:
                logger.warning(f"could not drop {raw}: {exc}")
        self.logstore_release_lock()
        self._run_states.pop(threading.get_ident(), None)
        super().post_model_hook(config, context)

    @property
    def _run_states(self) -> Dict[int, ModelRunState]:
        return self.__dict__.setdefault("_model_run_states", {})

    def _run_state(self) -> ModelRunState:
        return self._run_states.setdefault(threading.get_ident(), ModelRunState())

    @staticmethod
    def _lock_relation(target_relation: Any) -> str:
        return str(target_relation.incorporate(
            path={"identifier": f"{target_relation.identifier}{names.LOCK_SUFFIX}"}))

    def _lock_owner(self, lock: str) -> Optional[run_lock.LockOwner]:
        try:
            props = self._table_properties(lock)
        except Exception:
            return None  # no lock table
        return run_lock.LockOwner.from_properties(props)

    # --- before the table changes --------------------------------------------------------

    @available.parse_none
    def logstore_check_catalog(self, log: LogConfig, partition_by: Any) -> str:
        """Refuse a partitioned logged model on Spark's in-memory catalog, before anything
        changes: that catalog keeps a renamed table's old partition paths, so the staged table
        renamed in would read empty. (dbt-spark starts its session with the Hive catalog; an
        in-memory one is a session somebody else started in the same process.)"""
        spark = active_spark(self.connections.get_thread_connection().handle)
        if spark is not None and partition_by:
            catalog = spark.conf.get("spark.sql.catalogImplementation", "hive")
            if catalog == "in-memory":
                raise DbtRuntimeError(in_memory_catalog_message(log.model))
        return ""

    @available.parse_none
    def logstore_prepare(self, log: LogConfig) -> int:
        """The log is reachable and its topic exists; returns the topic's partition count."""
        return commit_protocol.prepare_log(log)

    @available.parse_none
    def logstore_continue_log(self, log: LogConfig, target_relation: Any) -> LogConfig:
        """The options this run writes with: a log that goes on keeps the shape its table
        recorded where the model leaves it to a default (log_continuation.continue_stored_shape)."""
        existing = self.get_relation(target_relation.database, target_relation.schema,
                                     target_relation.identifier)
        if existing is None or not existing.is_table:
            return log
        log, warnings = continue_stored_shape(log, self._table_properties(existing))
        for warning in warnings:
            logger.warning(warning)
        return log

    @available.parse_none
    def logstore_log_is_new(self, log: LogConfig, relation: Any, topic_partitions: int) -> bool:
        """Whether the existing table's log starts now (see commit_protocol.log_is_new)."""
        if relation is None or not relation.is_table:
            return False
        return commit_protocol.log_is_new(log, self._table_properties(relation), topic_partitions)

    @available.parse_none
    def logstore_change_sql(
        self, log: LogConfig, new_relation: Any, old_relation: Any = None, scope_by: Any = None,
        scope_relation: Any = None, mark_duplicates: bool = False, shape_of: Any = None,
    ) -> str:
        """SQL of the change set from `old_relation` (None: no old rows) to `new_relation`;
        `mark_duplicates`: the diff also finds repeated keys (logstore_check_change_set fails on
        them), in place of logstore_check_unique. `shape_of`: the table the new rows are
        inserted into, whose columns they take by name (on_schema_change 'ignore' leaves the
        model's other columns out of the table, so out of the log too)."""
        new = self._change_input(new_relation)
        if shape_of is not None:
            new = changes.shaped_like(new, self._column_names(shape_of))
        old = self._change_input(old_relation) if old_relation is not None else None
        if isinstance(scope_by, str):
            scope_by = [scope_by]
        source = changes.ChangeInput(str(scope_relation), ()) if scope_relation is not None else None
        return changes.change_set_sql(new, old, log.unique_key, tuple(scope_by or ()),
                                      ignore_delete=log.ignore_delete, scope_source=source,
                                      mark_duplicates=mark_duplicates, images=log.images)

    @available.parse_none
    def logstore_upserted_rows_sql(self, log: LogConfig, new_relation: Any, old_relation: Any,
                                   replaced: Any = None) -> str:
        """The rows of `old_relation` after upserting `new_relation` by the unique key (and
        removing the keys of `replaced` that `new_relation` does not have: deletes)."""
        return changes.upserted_rows_sql(
            changes.ChangeInput(str(old_relation), self._column_names(old_relation)),
            changes.ChangeInput(str(new_relation), self._column_names(new_relation)),
            log.unique_key, None if replaced is None else str(replaced),
        )

    @available.parse_none
    def logstore_check_change_set(self, log: LogConfig, changes_relation: Any,
                                  marked_duplicates: bool = False) -> None:
        """Last checks before the table commit: no key repeats (when the change set was built
        with mark_duplicates), every change fits in one Kafka record, and `log.format: json`
        without upsert mode gets only inserts."""
        _, table = self.execute(changes.change_set_summary_sql(str(changes_relation)), fetch=True)
        summary = changes.change_set_summary(table.rows[0])
        if marked_duplicates and log.keyed and summary.duplicates:
            _, table = self.execute(changes.marked_duplicates_sql(str(changes_relation)), fetch=True)
            raise self._not_unique(log, [row[0] for row in table.rows])
        limit = int(log.client_properties.get("max.request.size", 1048576))
        if summary.rows and summary.largest_size + changes.RECORD_OVERHEAD > limit:
            raise DbtRuntimeError(
                f"Model '{log.model}': the change of row key {summary.largest_key} is "
                f"{summary.largest_size} bytes, more than one Kafka record may hold "
                f"(max.request.size = {limit}). Allowed: records up to the limit; raise it with "
                f"'kafka.max.request.size' (and the broker's message.max.bytes). Nothing was changed."
            )
        if log.format == "json" and not log.upsert and summary.non_inserts:
            raise DbtRuntimeError(
                f"Model '{log.model}': config 'log.format' = 'json' writes bare rows, which "
                f"cannot express the {summary.non_inserts} updates/deletes of this run. Allowed: "
                f"log.format 'debezium-json', or 'log.changelog-mode' = 'upsert' (deletes as "
                f"tombstones), or 'log.ignore-delete' for insert-and-delete-only logs. Nothing "
                f"was changed."
            )
        faults.maybe_crash("before_table_commit")
        self._hold_lock(log)  # the last step before the table commit: a run that lost its lock stops

    @available.parse_none
    def logstore_crash_point(self, point: str) -> str:
        """Fault tests: die (or pause) here when LOGSTORE_FAULT_INJECT (or _PAUSE) names it."""
        faults.maybe_crash(point)
        return ""

    @available
    def logstore_readable_table_options(self) -> str:
        """OPTIONS of a table the mirror reads: files small enough to cross one at a time."""
        return row_source.table_options()

    @available.parse_none
    def logstore_row_count(self, relation: Any) -> int:
        _, table = self.execute(f"select count(*) from {relation}", fetch=True)
        return int(table.rows[0][0])

    @available.parse_none
    def logstore_check_unique(self, log: LogConfig, relation: Any, appended_to: Any = None) -> None:
        """A keyed log needs one row per key: fail before the commit if the new rows repeat a
        key, or (append) bring a key the table already has."""
        if not log.keyed:
            return
        checks = [changes.duplicate_keys_sql(str(relation), log.unique_key)]
        if appended_to is not None:
            checks.append(changes.existing_keys_sql(str(relation), str(appended_to), log.unique_key))
        for sql in checks:
            _, table = self.execute(sql, fetch=True)
            if len(table.rows):
                raise self._not_unique(log, [row[0] for row in table.rows])

    @staticmethod
    def _not_unique(log: LogConfig, examples: List[Any]) -> DbtRuntimeError:
        return DbtRuntimeError(
            f"Model '{log.model}': config 'unique_key' = {list(log.unique_key)} would not be "
            f"unique in the table (repeated keys, e.g. {'; '.join(str(e) for e in examples)}). "
            f"A logged model with a unique_key needs exactly one row per key. Nothing was changed."
        )

    # --- after the table commit -----------------------------------------------------------

    @available.parse_none
    def logstore_mirror(self, log: LogConfig, changes_relation: Any, target_relation: Any,
                        changeset: str, rows_affected: Optional[int] = None,
                        recovering: bool = False, log_starts: bool = False) -> LogstoreAdapterResponse:
        """Write the committed change set to the log as the table's next snapshot (or, when
        recovering, adopt the snapshot an earlier attempt already confirmed)."""
        faults.maybe_crash("after_table_commit")
        self._hold_lock(log)  # nor write the log
        started = time.monotonic()
        table = commit_protocol.TableRef(str(target_relation.schema), str(target_relation.identifier))
        previous = commit_protocol.Snapshot.from_properties(self._table_properties(target_relation))
        if log_starts:  # a new topic: offsets of an earlier topic mean nothing there
            previous = commit_protocol.Snapshot(id=previous.id)
        log_system = get_log_system(log.system)
        confirmed = log_system.find_confirmation(log, table.writer_id, changeset) if recovering else None
        if confirmed is not None:
            logger.info(f"{log.model}: change set {changeset} was already confirmed as snapshot "
                        f"{confirmed['snapshot']}; not writing it again")
            snapshot = commit_protocol.Snapshot.from_confirmation(confirmed)
        else:
            handle = self.connections.get_thread_connection().handle
            spark = active_spark(handle) if log.parallelism > 1 else None
            if log.parallelism > 1 and spark is None:
                logger.info(f"{log.model}: 'log.mirror.parallelism' needs method: session; "
                            f"streaming the change set through the cursor instead")
            try:
                if spark is not None:
                    snapshot = commit_protocol.write_change_set_parallel(
                        log, table, parallel_mirror.spark_tasks(spark, str(changes_relation), log.parallelism),
                        previous, changeset)
                else:
                    snapshot = commit_protocol.write_change_set(
                        log, table,
                        lambda attempt: iter_column_batches(
                            handle, str(changes_relation), attempt.records_sql),
                        previous, changeset,
                        progress=lambda n: logger.info(f"{log.model}: {n} changes written to {log.topic}"),
                    )
            except DbtRuntimeError as exc:
                raise DbtRuntimeError(
                    f"{exc.msg} The table's change is committed and its change set "
                    f"{changes_relation} is kept: the next run of the model (or dbt "
                    f"run-operation logstore_recover --args '{{model: {log.model}}}') writes it "
                    f"to the log, once.") from exc
        offsets = {str(p): [a, b - 1] for p, (a, b) in sorted(snapshot.written.items())}
        ranges = ", ".join(f"p{p}:{a}-{b}" for p, (a, b) in offsets.items())
        written = "" if rows_affected is None else f"{rows_affected} rows, "
        return LogstoreAdapterResponse(
            _message=f"OK, {written}mirrored {snapshot.records} records to {log.topic}"
                     + (f" ({ranges})" if ranges else "") + f", snapshot {snapshot.id}",
            rows_affected=rows_affected,
            rows_mirrored=snapshot.records,
            topic=log.topic,
            log_offsets=offsets,  # inclusive [first, last] offset written per partition
            log_snapshot=snapshot.id,
            log_end_offsets={str(p): o for p, o in sorted(snapshot.end_offsets.items())},
            log_attempt=snapshot.attempt,
            log_seconds=round(time.monotonic() - started, 3),
            log_transactions=snapshot.transactions,
            log_longest_transaction_s=round(snapshot.longest_transaction_s, 3),
        )

    @available
    def logstore_snapshot_properties(self, response: LogstoreAdapterResponse, changeset: str) -> Dict[str, str]:
        """Table properties recording the snapshot a mirror wrote (or adopted)."""
        snapshot = commit_protocol.Snapshot(
            id=int(response.log_snapshot or 0), attempt=response.log_attempt,
            end_offsets={int(p): int(o) for p, o in (response.log_end_offsets or {}).items()})
        return snapshot.properties(changeset)

    @available.parse_none
    def logstore_pending_changeset(self, changes_relation: Any, target_relation: Any,
                                   log_starts: bool = False) -> Optional[str]:
        """The id of a change set a failed run committed but did not finish logging, if any.
        None when the log starts now (a new topic): it begins with the table's current rows,
        whatever the failed run committed, so nothing needs judging."""
        changes_props = self._table_properties(changes_relation)
        table_props = self._table_properties(target_relation) if target_relation else {}
        row_count = None
        if table_props.get(names.INTENT) == changes_props.get(names.CHANGESET_ID):
            # the run died in its table commit: what it had not committed must never surface
            self._remove_uncommitted_output(target_relation)
            if not log_starts:
                row_count = self.logstore_row_count(target_relation)
        if log_starts:
            return None
        if commit_protocol.recovery_action(changes_props, table_props, row_count) == "mirror":
            return changes_props[names.CHANGESET_ID]
        return None

    @available.parse_none
    def logstore_interrupted_swap(self, changes_relation: Any, target_relation: Any) -> Any:
        """The staged table a failed run had tagged and was renaming into the place of the old
        table it had just dropped, if any: its rows are committed and must be put in place."""
        changeset = self._table_properties(changes_relation).get(names.CHANGESET_ID)
        for suffix in names.STAGED_SUFFIXES.values():
            staged = self.get_relation(
                target_relation.database, target_relation.schema,
                f"{target_relation.identifier}{suffix}")
            if staged is not None and changeset and \
                    self._table_properties(staged).get(names.COMMITTED) == changeset:
                return staged
        return None

    @available.parse_none
    def logstore_intent_properties(self, new_relation: Any, old_relation: Any, new_rows: int,
                                   replaced_by: Any = None, replaces_rows: bool = True) -> Dict[str, str]:
        """The intent of an incremental commit: the change set and the table's row count before
        and after, so recovery can tell whether a commit that died untagged happened.
        `replaced_by` names the columns whose values the new rows replace (partitions of an
        overwrite, keys of a merge); without them an overwrite replaces every row and an append
        (`replaces_rows` false) none."""
        before = self.logstore_row_count(old_relation)
        if not replaces_rows:
            replaced = 0
        elif replaced_by:
            if isinstance(replaced_by, str):
                replaced_by = [replaced_by]
            scoped = changes.scoped_to(
                changes.ChangeInput(str(old_relation), ()), changes.ChangeInput(str(new_relation), ()),
                tuple(replaced_by))
            replaced = self.logstore_row_count(scoped.relation)
        else:
            replaced = before
        intent = {names.INTENT_ROWS_BEFORE: str(before),
                  names.INTENT_ROWS_AFTER: str(before - replaced + new_rows)}
        sources = self._run_state().sources
        if sources:
            intent[names.SOURCES_INTENT] = sources
        return intent

    @available.parse_none
    def logstore_properties(self, log: LogConfig, changeset_id: Optional[str] = None,
                            topic_partitions: Optional[int] = None,
                            carry_from: Any = None, record_sources: bool = True) -> Dict[str, str]:
        """Table properties of a commit: the log options, the change-set tag, the partition
        count the records were placed with. A table that replaces `carry_from` carries on its
        snapshot history (id, offsets), so snapshot ids stay monotonic across rebuilds."""
        props: Dict[str, str] = {}
        if carry_from is not None and carry_from.is_table:
            old = self._table_properties(carry_from)
            props.update({k: v for k, v in old.items() if k in commit_protocol.CARRIED})
        props.update(log.table_properties())
        if changeset_id:
            props[names.COMMITTED] = changeset_id
            sources = self._run_state().sources
            if sources and record_sources:  # how far upstream logs were read: commits with it
                props[names.SOURCES] = sources
        if topic_partitions:
            props[names.TOPIC_PARTITIONS] = str(topic_partitions)
        return props

    # --- downstream models reading upstream changes -------------------------------------

    @available.parse_none
    def logstore_source_changes(self, node: Any, this_relation: Any, upstream_relation: Any,
                                upstream_node: Any, normalize: bool = False,
                                full_refresh: bool = False) -> str:
        """`logstore_changes(ref(...))`: land this run's range of the upstream's changes and
        return the temporary view over them (see source_changes.py). The position reached is
        recorded with this model's table when it commits."""
        from dbt.adapters.logstore.kafka_config import consumer_config
        from dbt.adapters.logstore.reader import ChangelogReader, ReaderError

        log = self.logstore_config(node)
        if upstream_node is None:
            raise DbtRuntimeError(f"Model '{log.model}': logstore_changes() takes a ref() to a "
                                  f"model of this project, got {upstream_relation}.")
        upstream_log = self.logstore_config(upstream_node)
        if not upstream_log.enabled:
            raise DbtRuntimeError(
                f"Model '{log.model}': logstore_changes(ref('{upstream_log.model}')) needs "
                f"'{upstream_log.model}' to have a log. Allowed: a model with 'log.system' set.")
        materialized = _as_dict(_get(node, "config")).get("materialized")
        if not log.enabled or materialized != "incremental":
            raise DbtRuntimeError(
                f"Model '{log.model}': logstore_changes() is for incremental models with a log "
                f"('log.system'), whose commit records how far the upstream was read. Allowed: "
                f"materialized='incremental' with 'log.system' set.")
        upstream_id = f"{upstream_relation.schema}.{upstream_relation.identifier}"
        this_props = {}
        existing = self.get_relation(this_relation.database, this_relation.schema, this_relation.identifier)
        if existing is not None and existing.is_table and not full_refresh:
            this_props = self._table_properties(existing)
        sources = source_changes.parse_sources(this_props.get(names.SOURCES))
        reader = ChangelogReader(str(upstream_log.bootstrap_servers), str(upstream_log.topic),
                                 upstream_id, **consumer_config(upstream_log))
        upstream_props = self._table_properties(upstream_relation)
        upstream_log, _ = continue_stored_shape(upstream_log, upstream_props)  # how it is written
        try:
            upstream_snapshot = commit_protocol.logged_snapshot(upstream_props, upstream_log.model)
            plan, end = source_changes.plan_read(upstream_id, str(upstream_log.topic),
                                                 reader.confirmations(), sources.get(upstream_id),
                                                 upstream_snapshot)
        except (ReaderError, commit_protocol.UnloggedCommit) as exc:
            raise DbtRuntimeError(f"Model '{log.model}': {exc}") from None
        raw_name = f"{this_relation.identifier}{names.SOURCE_RAW_INFIX}{upstream_relation.identifier}"
        raw = this_relation.incorporate(path={"identifier": raw_name}, type="table")
        self.execute(f"drop table if exists {raw}")
        self.logstore_create(raw, source_changes.raw_table_ddl(str(raw)))
        self._run_state().landed.append(str(raw))
        columns = self.get_columns_in_relation(upstream_relation)
        if plan.hybrid:
            self.execute(source_changes.hybrid_rows_sql(
                str(raw), str(upstream_relation), [c.name for c in columns], upstream_log.unique_key,
                plan.to_snapshot, upstream_log.images))
            now = self._table_properties(upstream_relation).get(names.SNAPSHOT_ID)
            if int(now or 0) != plan.to_snapshot:
                raise DbtRuntimeError(f"Model '{log.model}': upstream '{upstream_log.model}' "
                                      f"committed while it was read; run again.")
        elif plan.ranges:
            self._land_ranges(plan, str(raw), upstream_log)
        view = f"{this_relation.identifier}{names.SOURCE_VIEW_INFIX}{upstream_relation.identifier}"
        self.execute(source_changes.changes_view_sql(
            view, str(raw), [(c.name, c.dtype) for c in columns], upstream_log.unique_key, normalize,
            upstream_log.images))
        self._run_state().landed.append(f"view {view}")
        sources[upstream_id] = plan.position(end)
        self._run_state().sources = source_changes.dump_sources(sources)
        logger.info(f"{log.model}: reading {upstream_log.model} "
                    + ("as of its snapshot " if plan.hybrid else f"changes after snapshot {plan.from_snapshot} up to ")
                    + str(plan.to_snapshot))
        return view

    def _land_ranges(self, plan: Any, raw: str, upstream_log: LogConfig) -> None:
        from dbt.adapters.logstore.kafka_config import consumer_config

        config = consumer_config(upstream_log)
        handle = self.connections.get_thread_connection().handle
        spark = active_spark(handle)
        if spark is not None:  # Spark tasks, one per partition range
            source_changes.raw_rows_in_spark(spark, plan, str(upstream_log.bootstrap_servers),
                                             config).write.insertInto(raw)
            return
        # thrift: dbt reads the ranges and inserts them in batches
        import itertools

        rows = itertools.chain.from_iterable(
            source_changes.read_range(str(upstream_log.bootstrap_servers), plan.topic, p, a, b,
                                      plan.attempts, plan.upstream, config)
            for p, a, b in plan.ranges)
        for statement in source_changes.insert_batches_sql(raw, rows):
            self.execute(statement)

    @available.parse_none
    def logstore_has_op_column(self, relation: Any) -> bool:
        """Whether a model's rows carry names.VIEW_OP_COLUMN (from logstore_changes): then a
        merge deletes the keys whose op is 'd' and upserts the rest."""
        return names.VIEW_OP_COLUMN in self._column_names(relation)

    @available.parse_none
    def logstore_upserts_sql(self, relation: Any) -> str:
        """The rows of `relation` to keep (op other than 'd'), without the columns under
        names.VIEW_COLUMN_PREFIX."""
        cols = [c for c in self._column_names(relation) if not c.startswith(names.VIEW_COLUMN_PREFIX)]
        kept = ", ".join(f"`{c}`" for c in cols)
        return f"select {kept} from {relation} where {names.VIEW_OP_COLUMN} <> 'd'"

    @available.parse_none
    def logstore_settle_sources(self, relation: Any, changeset: str) -> None:
        """Recovery of an incremental commit judged committed by its intent: the upstream
        position it recorded as intended becomes the table's."""
        props = self._table_properties(relation)
        intended = props.get(names.SOURCES_INTENT)
        if intended and props.get(names.INTENT) == changeset \
                and props.get(names.COMMITTED) != changeset:
            from dbt.adapters.logstore.encoding import sql_string

            self.execute(f"alter table {relation} set tblproperties "
                         f"({sql_string(names.SOURCES)} = {sql_string(intended)})")

    # --- dbt debug -----------------------------------------------------------------------

    def debug_query(self) -> None:
        """`dbt debug`: Spark answers, then the profile's Kafka is reachable and can create topics."""
        super().debug_query()
        creds = self.config.credentials
        servers = getattr(creds, "kafka_bootstrap_servers", None)
        if not servers:
            logger.info("Kafka: no kafka_bootstrap_servers in the profile (each logged model "
                        "must set kafka.bootstrap.servers)")
            return
        log = LogConfig(model="dbt debug", system="kafka", bootstrap_servers=servers,
                        client_properties=dict(getattr(creds, "kafka_properties", {}) or {}))
        for line in get_log_system("kafka").check(log):
            logger.info(line)

    # --- helpers -------------------------------------------------------------------------

    def _column_names(self, relation: Any) -> List[str]:
        return [c.name for c in self.get_columns_in_relation(relation)]

    def _change_input(self, relation: Any) -> changes.ChangeInput:
        columns = self.get_columns_in_relation(relation)
        return changes.ChangeInput(str(relation), [c.name for c in columns],
                                   [c.dtype for c in columns])

    def _table_properties(self, relation: Any) -> Dict[str, str]:
        _, table = self.execute(f"show tblproperties {relation}", fetch=True)
        return commit_protocol.parse_properties(table.rows)
