"""The adapter: dbt-spark's, plus thin `@available` methods the logstore macros call, and the
steps the commit protocol asks of dbt and Spark (`commit_protocol.Steps`, not callable from Jinja).

The materializations hand each commit to `commit_protocol` in three calls (`logstore_begin`,
`logstore_build_changes`, `logstore_commit_by_swap` or `_by_statement`), which runs its steps on
this adapter. Each method turns Jinja's loose values into typed objects and hands off to plain
Python (config, lock, changes, table commit, mirror, landing: docs/architecture.md), giving it
the model thread's connection as a `catalog.Catalog`. It keeps what only dbt's adapter knows:
relations, columns, the thread's model run (ModelRunState) and dbt's hooks.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Set

from dbt.adapters.base import available
from dbt.adapters.spark.impl import SparkAdapter
from dbt.flags import get_flags  # dbt's own run flags (Jinja's `flags` lacks SAMPLE)
from dbt_common.exceptions import DbtRuntimeError
from dbt_common.invocation import get_invocation_id, get_invocation_started_at

from dbt.adapters.logstore import faults, names
from dbt.adapters.logstore.changes import checks as change_checks, diff as changes, retraction
from dbt.adapters.logstore.commit import mirror, model_inputs, run_lock, run_modes, run_record, table_commit
from dbt.adapters.logstore.commit import protocol as commit_protocol, snapshots as log_snapshots
from dbt.adapters.logstore.commit.model_run import ModelRunState
from dbt.adapters.logstore.config.address import servers_setting_of, with_servers_setting
from dbt.adapters.logstore.config.continuation import continue_stored_shape
from dbt.adapters.logstore.config.log_config import LogConfig, ModelRef, check_all, node_config, resolve_log_config
from dbt.adapters.logstore.connections import LogstoreConnectionManager, debug_lines
from dbt.adapters.logstore.log.lifecycle import identity, retention
from dbt.adapters.logstore.log.lifecycle.generations import GenerationStart
from dbt.adapters.logstore.log.log_system import ModelLog, open_model_log
from dbt.adapters.logstore.reading import source_changes, source_landing
from dbt.adapters.logstore.spark import connect_fencing, leftovers, row_source, table_formats
from dbt.adapters.logstore.spark.catalog import Catalog, logger, set_properties_sql
from dbt.adapters.logstore.spark.row_source import active_spark

class LogstoreAdapter(SparkAdapter):
    ConnectionManager = LogstoreConnectionManager  # type: ignore[assignment]

    @classmethod
    def type(cls) -> str:
        return "logstore"

    # --- config resolution -------------------------------------------------------------

    @available
    def logstore_config(self, node: Any) -> LogConfig:
        """The validated log options of a model (raises a clear error on bad input)."""
        creds = self.config.credentials
        log = resolve_log_config(
            ModelRef.from_node(node), node_config(node),
            profile_bootstrap_servers=getattr(creds, "kafka_bootstrap_servers", None),
            profile_properties=getattr(creds, "kafka_properties", None),
            profile_client=getattr(creds, "kafka_client", None),
        )
        # its Kafka errors name the setting its servers came from: the model's or the profile's
        return with_servers_setting(log, servers_setting_of(node_config(node))) if log.enabled else log

    # --- the protocol's names the macros write (names.py) --------------------------------

    @available
    def logstore_names(self) -> Dict[str, str]:
        """The table properties the macros set themselves: `adapter.logstore_names().intent`."""
        return {"changeset_id": names.CHANGESET_ID, "intent": names.INTENT}

    @available
    def logstore_relation(self, target_relation: Any, kind: str) -> Any:
        """The model's own relation `kind`: 'changes', or a staged one (names.STAGED_SUFFIXES);
        an unknown kind fails (Jinja would render it '', naming the model's own table)."""
        suffix = names.CHANGES_SUFFIX if kind == "changes" else names.STAGED_SUFFIXES.get(kind)
        if suffix is None:
            raise DbtRuntimeError(f"no relation of kind {kind!r}")
        return target_relation.incorporate(
            path={"identifier": f"{target_relation.identifier}{suffix}"}, type="table")

    def set_macro_resolver(self, macro_resolver: Any) -> None:
        """dbt hands the manifest over after every parse, before anything runs: every node's log
        options are checked at once, so `dbt parse`, `compile` and `run` name every bad model
        in one error, and nothing is built or written."""
        super().set_macro_resolver(macro_resolver)
        nodes = getattr(macro_resolver, "nodes", None)
        if nodes:
            check_all(nodes.values(), self.logstore_config)
            self._run_watch.watch(get_invocation_id(), nodes, getattr(macro_resolver, "sources", None))

    @available
    def logstore_changeset_id(self, invocation_id: str, node: Any) -> str:
        """The id of the change set this model run commits: one per microbatch batch."""
        batch = node.get("batch") if isinstance(node, Mapping) else getattr(node, "batch", None)
        if isinstance(batch, Mapping):
            batch = batch.get("id")
        elif batch is not None:
            batch = getattr(batch, "id", None)
        return names.changeset_id(invocation_id, batch)

    # --- runs from reduced inputs (run_modes.py) ----------------------------------------

    @available
    def logstore_reduced_inputs(self) -> str:
        """The dbt flag of this run if it builds models from reduced inputs ('--empty',
        '--sample'), else '': then a logged model does not reach its log."""
        return run_modes.reduced_inputs(get_flags()) or ""

    @available
    def logstore_limit_zero_sql(self, sql: str) -> str:
        return run_modes.limit_zero_sql(sql)

    @available
    def logstore_not_logged(self, log: LogConfig, flag: str, created: bool) -> mirror.LogstoreAdapterResponse:
        """The run result of a reduced-input run, whose reason is also said on the console."""
        logger.info(run_modes.not_logged_explanation(log, flag))
        return run_modes.not_logged(log, flag, created)

    # --- the commit protocol, as the materializations call it (commit/protocol.py) -------
    # The adapter is the protocol's `steps`: the methods below these four.

    @available.parse_none
    def logstore_begin(self, log: LogConfig, target_relation: Any, partition_by: Any, invocation_id: str,
                       changeset: str, resnapshot: bool = False, depends_on: Any = None) -> int:
        """Before anything changes: lock, log ready, a failed run settled, a log or generation
        started (commit_protocol.begin); the logged inputs' snapshots read (model_inputs)."""
        partitions = commit_protocol.begin(self, log, target_relation, partition_by, invocation_id, changeset, bool(resnapshot))
        state, watch = self._run_state().of_model(log.model), self._run_watch  # (read_up_to: rendered)
        state.inputs = model_inputs.read_at_start(self._catalog(), depends_on, watch.nodes, self.logstore_config,
                                                  state.read_up_to, watch.sources, watch.unlogged_sources)
        return partitions

    @available.parse_none
    def logstore_build_changes(self, log: LogConfig, changes_relation: Any, new_relation: Any,
                               old_relation: Any = None, scope_by: Any = None,
                               changeset: str = "", scope_relation: Any = None,
                               unique_check: bool = False, shape_of: Any = None) -> str:
        """The change set, as a tagged change table, checked (commit_protocol.build_changes)."""
        if isinstance(scope_by, str):
            scope_by = [scope_by]
        commit_protocol.build_changes(self, log, changes_relation, new_relation, old_relation,
                                      tuple(scope_by or ()), changeset, scope_relation,
                                      unique_check, shape_of)
        return ""

    @available.parse_none
    def logstore_commit_by_swap(self, log: LogConfig, staged_relation: Any, target_relation: Any,
                                old_relation: Any, changes_relation: Any, changeset: str,
                                partitions: int, rows_affected: Optional[int],
                                file_format: Optional[str] = None, replace_clauses: str = "",
                                model_properties: Optional[Mapping[str, str]] = None
                                ) -> mirror.LogstoreAdapterResponse:
        """A rebuilt table's commit, then its log write (commit_protocol.commit_by_swap);
        `replace_clauses` are used where the table is replaced in place (table_formats)."""
        in_place = self.logstore_replaces_in_place(file_format, old_relation)
        response = commit_protocol.commit_by_swap(
            self, log, staged_relation, target_relation, old_relation, changes_relation, changeset,
            partitions, rows_affected, replace_clauses if in_place else None, model_properties,
            versioned=(file_format or "").lower() in table_formats.VERSIONED)
        self._run_state().committed = True
        return response

    @available.parse_none
    def logstore_commit_by_statement(self, log: LogConfig, target_relation: Any, staged_relation: Any,
                                     existing_relation: Any, changes_relation: Any, changeset: str,
                                     partitions: int, statement: str, rows_affected: int,
                                     replaced_by: Any = None, replaces_rows: bool = True
                                     ) -> mirror.LogstoreAdapterResponse:
        """An incremental statement's commit, then its log write (commit_protocol.commit_by_statement)."""
        replaced_by = [replaced_by] if isinstance(replaced_by, str) else replaced_by
        response = commit_protocol.commit_by_statement(
            self, log, target_relation, staged_relation, existing_relation, changes_relation,
            changeset, partitions, statement, rows_affected, tuple(replaced_by or ()), replaces_rows)
        self._run_state().committed = True
        return response

    def logstore_set_properties(self, relation: Any, properties: Mapping[str, str]) -> str:
        self._run_state().found_properties = None  # the properties as read are no more
        self.execute(set_properties_sql(relation, properties))
        return ""

    # --- one run at a time per model ----------------------------------------------------

    def logstore_own_relations(self, target_relation: Any) -> Set[str]:
        """The model's own relations that exist, by identifier (leftovers.own_relations): from
        dbt's relation cache when it holds the schema and this run found the lock free."""
        where = (target_relation.database, target_relation.schema)
        cached = None if self._run_state().took_over or where not in self.cache else self.cache.get_relations(*where)
        return leftovers.own_relations(self._catalog(), target_relation, cached)

    def _catalog(self) -> Catalog:
        return Catalog(self.execute, self.get_relation, self.get_columns_in_relation)

    def logstore_lock(self, log: LogConfig, target_relation: Any, invocation_id: str) -> str:
        """Take the model's run lock (see run_lock.py) or fail, naming the run that holds it.
        The post-model hook releases it when the materialization ends, however it ends."""
        lock, state = run_lock.lock_relation(target_relation), self._run_state()
        if state.lock == lock and state.owner is not None:
            return lock  # taken as the run started (logstore_continue_log)
        handle = self.connections.get_thread_connection().handle
        owner = run_lock.LockOwner.this_process(invocation_id, self._lease_seconds(), connect_fencing.session_of(handle))
        state.took_over = run_lock.take(self._catalog(), log.model, lock, owner, connect_fencing.session_stopper(handle))
        state.lock, state.owner, state.target = lock, owner, target_relation
        return lock

    @available.parse_none
    def logstore_create(self, relation: Any, sql: str) -> str:
        """Create one of the adapter's own relations (leftovers.create_or_clear)."""
        leftovers.create_or_clear(self._catalog(), relation, sql)
        state = self._run_state()
        state.created_columns[str(relation)] = None
        state.staged_rows.pop(str(relation), None)
        return ""

    @available.parse_none
    def logstore_unlock(self, target_relation: Any) -> str:
        """Remove a model's run lock (`dbt run-operation logstore_unlock`), naming its owner."""
        return run_lock.unlock(self._catalog(), run_lock.lock_relation(target_relation))

    def _lease_seconds(self) -> float:
        return float(getattr(self.config.credentials, "lock_lease_seconds", None) or run_lock.DEFAULT_LEASE_SECONDS)

    def logstore_hold_lock(self, log: LogConfig) -> None:
        """Before a step that changes the table or the log: this run still holds its lock
        (run_lock.hold), or stops."""
        state = self._run_state()
        if state.lock is None or state.owner is None:
            return  # recovery without a run lock of its own (never the case in a model run)
        try:
            state.owner = run_lock.hold(self._catalog(), log.model, state.lock, state.owner,
                                        self._lease_seconds())
        except run_lock.LockLost:
            state.lock = None  # not ours to release any more
            raise

    @available.parse_none
    def logstore_release_lock(self) -> str:
        """Release the lock this thread took (dbt calls it after every model, via the hook),
        unless another run has taken it over meanwhile."""
        state = self._run_state()
        (lock, owner), state.lock, state.owner = (state.lock, state.owner), None, None
        if lock is not None:
            run_lock.release(self._catalog(), lock, owner, self._lease_seconds())
        return ""

    def post_model_hook(self, config: Mapping[str, Any], context: Any) -> None:
        state = self._run_state()
        leftovers.drop_landed(self._catalog(), state.landed)
        if state.lock is not None and state.target is not None and not state.committed:
            try:  # a failed run: what it staged goes now, while it still holds the lock
                table_commit.drop_what_a_failed_run_staged(self._catalog(), state.target, self.logstore_relation)
            except Exception as exc:  # its next run settles it; the run's own error stands
                logger.debug(f"logstore: left for the next run: {exc}")
        self.logstore_release_lock()
        self._run_states.pop(threading.get_ident(), None)
        super().post_model_hook(config, context)

    @property
    def _run_watch(self) -> run_record.RunWatch:
        return self.__dict__.setdefault("run_record_watch", run_record.RunWatch())

    @property
    def _run_states(self) -> Dict[int, ModelRunState]:
        return self.__dict__.setdefault("_model_run_states", {})

    def _run_state(self) -> ModelRunState:
        return self._run_states.setdefault(threading.get_ident(), ModelRunState())

    def _model_log(self, log: LogConfig) -> ModelLog:
        return self._run_state().model_log(log)

    # --- before the table changes --------------------------------------------------------

    def logstore_check_catalog(self, log: LogConfig, partition_by: Any) -> str:
        """Refuse a partitioned logged model on Spark's in-memory catalog (change_checks)."""
        handle = self.connections.get_thread_connection().handle
        change_checks.check_catalog(log.model, partition_by, active_spark(handle))
        return ""

    def logstore_prepare(self, log: LogConfig) -> int:
        """The log is reachable and its topic exists; returns the topic's partition count."""
        model_log = self._model_log(log)
        partitions = log_snapshots.prepare_log(log, model_log)
        state = self._run_state().log_state
        if state is not None and not (state.topic_exists and state.control_topic_exists):
            # topics created just now: their ids are recorded with the snapshot
            state = self._run_state().log_state = model_log.observe(not state.control_topic_exists)
        for warning in retention.warnings(log, state) if state is not None else ():
            logger.warning(warning)  # what the topic's settings keep (lifecycle/retention.py)
        return partitions

    def logstore_assess_log(self, log: LogConfig, target_relation: Any, relation: Any) -> identity.Assessment:
        """Whether the topic still holds the table's log (lifecycle/identity.py), observed
        without changing anything (kept for the run: its ids are recorded with the snapshot)."""
        state = self._run_state().log_state = self._model_log(log).observe()
        logger.debug(f"{log.model}: the log as found: cluster {state.cluster_id}, topic "
                     f"{state.topic_id} ({state.start_offsets} to {state.end_offsets}), control topic "
                     f"{state.control_topic_id} ({len(state.control_records)} records), {state.settings}")
        props = None if relation is None else self._run_state().properties_of(relation, self._table_properties)
        self._run_state().found_properties = None if props is None else (str(relation), props)
        table_id = log_snapshots.TableRef(str(target_relation.schema),
                                          str(target_relation.identifier)).writer_id
        assessment = identity.assess(log, props, state, table_id)
        for note in assessment.notes:
            logger.warning(note)
        return assessment

    def logstore_start_generation(self, start: Optional[GenerationStart]) -> None:
        """The generation the run's next commit starts (None: it continues the log)."""
        self._run_state().generation = start

    @available.parse_none
    def logstore_continue_log(self, log: LogConfig, target_relation: Any) -> LogConfig:
        """The options this run writes with: a log that goes on keeps the shape its table
        recorded where the model leaves it to a default (log_continuation.continue_stored_shape)."""
        existing = self.get_relation(target_relation.database, target_relation.schema,
                                     target_relation.identifier)
        if existing is None or not existing.is_table:
            return log
        # the run's lock first: the properties read now are those its commit builds on
        self.logstore_lock(log, target_relation, get_invocation_id())
        props = self._table_properties(existing)
        self._run_state().found_properties = (str(existing), props)
        log, warnings = continue_stored_shape(log, props)
        for warning in warnings:
            logger.warning(warning)
        return log

    def logstore_log_is_new(self, log: LogConfig, relation: Any, topic_partitions: int) -> bool:
        """Whether the existing table's log starts now (see commit_protocol.log_is_new)."""
        if relation is None or not relation.is_table:
            return False
        props = self._run_state().properties_of(relation, self._table_properties)
        return commit_protocol.log_is_new(log, props, topic_partitions)

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
        change_checks.check_columns(log, list(zip(new.columns, new.types)))
        old = self._change_input(old_relation) if old_relation is not None else None
        if isinstance(scope_by, str):
            scope_by = [scope_by]
        source = changes.ChangeInput(str(scope_relation), ()) if scope_relation is not None else None
        return changes.change_set_sql(new, old, log.unique_key, tuple(scope_by or ()),
                                      ignore_delete=log.ignore_delete, scope_source=source,
                                      mark_duplicates=mark_duplicates, images=log.images)

    @available.parse_none
    def logstore_snapshot_rows_sql(self, old_relation: Any, staging_relation: Any, columns: Mapping[str, str],
                                   valid_to_current: Optional[str] = None) -> str:
        """A dbt snapshot's rows after its run, as dbt's snapshot MERGE leaves them
        (changes.snapshot_rows_sql); `columns`: dbt's snapshot_table_column_names."""
        return changes.snapshot_rows_sql(
            changes.ChangeInput(str(old_relation), self._column_names(old_relation)),
            changes.ChangeInput(str(staging_relation), self._column_names(staging_relation)),
            columns["dbt_scd_id"], columns["dbt_valid_to"], valid_to_current)

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

    def logstore_check_change_set(self, log: LogConfig, changes_relation: Any, marked_duplicates: bool = False,
                                  new_relation: Any = None, failed: bool = False) -> None:
        """Last checks before the table commit, only where change_checks.checked_sql did not
        check every row: a re-base's retraction added some, or its query `failed` (then
        `changes_relation` is the query without the checks, to say which check and keys)."""
        staged = str(new_relation) if names.RELATION_MARK in str(getattr(new_relation, "identifier", "")) else None
        state = self._run_state()
        if failed or (retraction.needed(log, state.generation) and state.target is not None):
            rows = change_checks.check_change_set(self._catalog(), log, str(changes_relation), marked_duplicates, staged)
            state.staged_rows.update({str(staged): rows} if staged else {})  # for logstore_row_count

    def logstore_retract(self, log: LogConfig, changes_relation: Any) -> None:
        """A generation's change set also deletes the keys the table lost (retraction.py)."""
        state = self._run_state()
        if retraction.needed(log, state.generation) and state.target is not None:
            retraction.retract_lost_keys(
                self._catalog(), self.connections.get_thread_connection().handle,
                self._model_log(log), state.generation, changes_relation,
                self.logstore_relation(state.target, "held"))

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
        counted = self._run_state().staged_rows.get(str(relation))
        return counted if counted is not None else self._catalog().row_count(relation)

    @available.parse_none
    def logstore_check_unique(self, log: LogConfig, relation: Any, appended_to: Any = None) -> None:
        """A keyed log needs one row per key (change_checks.check_unique); columns described once, as the diff's."""
        change_checks.check_unique(self._catalog(), log, relation, appended_to, self._column_names(relation))

    # --- after the table commit -----------------------------------------------------------

    def logstore_mirror(self, log: LogConfig, changes_relation: Any, target_relation: Any,
                        changeset: str, rows_affected: Optional[int] = None,
                        recovering: bool = False, log_starts: bool = False,
                        committed_properties: Optional[Mapping[str, str]] = None
                        ) -> mirror.LogstoreAdapterResponse:
        """Write the committed change set to the log as the table's next snapshot (or, when
        recovering, adopt the snapshot an earlier attempt already confirmed)."""
        started = time.monotonic()
        inputs = self._run_state().inputs
        snapshot = mirror.mirror_change_set(
            self._model_log(log), self._catalog(), self.connections.get_thread_connection().handle,
            str(changes_relation), target_relation, changeset, recovering, log_starts,
            committed_properties, inputs.settle(self._catalog()) if inputs and not recovering else None)
        run_record.note_confirmed(log, changeset, snapshot)
        return mirror.response(log, snapshot, rows_affected, time.monotonic() - started)

    def logstore_snapshot_properties(self, response: mirror.LogstoreAdapterResponse, changeset: str) -> Dict[str, str]:
        """Table properties recording the snapshot a mirror wrote (mirror.snapshot_properties)."""
        return mirror.snapshot_properties(response, changeset, self._run_state().log_state)

    def logstore_pending_changeset(self, changes_relation: Any, target_relation: Any,
                                   log_starts: bool = False) -> Optional[str]:
        """A change set a failed run committed but did not finish logging (table_commit)."""
        return table_commit.pending_changeset(self._catalog(), changes_relation, target_relation, log_starts)

    def logstore_interrupted_swap(self, changes_relation: Any, target_relation: Any) -> Any:
        """A committed staged table a failed run was renaming in (table_commit)."""
        return table_commit.interrupted_swap(self._catalog(), changes_relation, target_relation)

    @available
    def logstore_drop_sql(self, relation: Any) -> str:
        """dbt-spark's drop, and for the adapter's own tables a purge (leftovers.drop_sql)."""
        kind = str(relation.type or "table")
        if names.RELATION_MARK in str(relation.identifier):
            return leftovers.drop_sql(relation, kind)
        return f"drop {kind} if exists {relation}"

    @available.parse_none
    def logstore_replaces_in_place(self, file_format: Optional[str], old_relation: Any) -> bool:
        """Whether a rebuild is one atomic `create or replace` (table_formats)."""
        return table_formats.replaces_in_place(file_format, old_relation, self._catalog())

    def logstore_intent_properties(self, new_relation: Any, old_relation: Any, new_rows: int,
                                   replaced_by: Any = None, replaces_rows: bool = True) -> Dict[str, str]:
        """The intent of an incremental commit (table_commit.intent_properties)."""
        replaced_by = [replaced_by] if isinstance(replaced_by, str) else replaced_by
        state = self._run_state()
        return table_commit.intent_properties(self._catalog(), new_relation, old_relation, new_rows,
                                              tuple(replaced_by or ()), replaces_rows, state.sources,
                                              state.properties_found(old_relation))

    def logstore_properties(self, log: LogConfig, changeset_id: Optional[str] = None,
                            topic_partitions: Optional[int] = None,
                            carry_from: Any = None, record_sources: bool = True) -> Dict[str, str]:
        """Table properties of a commit (table_commit.commit_properties)."""
        state = self._run_state()
        sources = state.sources if record_sources else None
        props = table_commit.commit_properties(self._catalog(), log, changeset_id, topic_partitions,
                                               carry_from, sources, state.properties_found(carry_from))
        start = state.generation
        if start is not None and changeset_id:  # this commit starts a generation
            props.update(start.pending_properties(changeset_id))
        return props

    # --- downstream models reading upstream changes -------------------------------------

    @available.parse_none
    def logstore_source_changes(self, node: Any, this_relation: Any, upstream_relation: Any,
                                upstream_node: Any, normalize: bool = False,
                                full_refresh: bool = False, at_run: Optional[str] = None) -> str:
        """`logstore_changes(ref(...))`: land the upstream's changes, return their view (land)."""
        log = self.logstore_config(node)
        # the upstream's own table (a reduced-input run renders a ref as a subquery)
        upstream_relation = dataclasses.replace(upstream_relation, limit=None, event_time_filter=None)
        upstream_log = self.logstore_config(upstream_node) if upstream_node is not None else None
        source_landing.check_reads_upstream(log, node_config(node).get("materialized"),
                                            upstream_log, upstream_relation)
        state, read_up_to = self._run_state(), self._run_state().read_changes(log.model)
        landed = source_landing.land(
            self._catalog(), self.connections.get_thread_connection().handle, log, upstream_log,
            this_relation, upstream_relation, normalize, full_refresh, state.landed,
            bool(self.logstore_reduced_inputs()), at_run,
            (self.config.project_name, self.config.credentials.schema), read_up_to, state.sources)
        state.sources = landed.sources
        return landed.view

    @available.parse_none
    def logstore_has_op_column(self, relation: Any) -> bool:
        """Whether a model's rows come from logstore_changes (source_changes.has_op_column)."""
        return source_changes.has_op_column(self._column_names(relation))

    @available.parse_none
    def logstore_upserts_sql(self, relation: Any) -> str:
        """The rows of `relation` a merge upserts (source_changes.upserts_sql)."""
        return source_changes.upserts_sql(str(relation), self._column_names(relation))

    def logstore_settle_sources(self, relation: Any, changeset: str) -> None:
        """Recovery: an intended upstream position becomes the table's (table_commit)."""
        self._run_state().found_properties = None
        table_commit.settle_sources(self._catalog(), relation, changeset)

    # --- dbt debug -----------------------------------------------------------------------

    def debug_query(self) -> None:
        """`dbt debug`: Spark answers, then the profile's Kafka is reachable and can create topics."""
        super().debug_query()
        for line in debug_lines(self.config.credentials):
            logger.info(line)

    # --- the run record, as the invocation ends (commit/run_record.py) ---------------------

    def cleanup_connections(self) -> None:
        """dbt closes the connections as a run ends (and at other times): the run record of a
        run that ran nodes is written then, once."""
        super().cleanup_connections()
        watch, flags = self._run_watch, get_flags()
        if watch.due(get_invocation_id(), flags, self.logstore_reduced_inputs()):
            run_record.record_the_run(watch, self.config.project_name, self.config.credentials.schema,
                                      flags, get_invocation_started_at().isoformat(),
                                      self.logstore_config, open_model_log)

    # --- helpers -------------------------------------------------------------------------

    def _column_names(self, relation: Any) -> List[str]:
        return [c.name for c in self._run_state().columns_of(relation, self.get_columns_in_relation)]

    def _change_input(self, relation: Any) -> changes.ChangeInput:
        columns = self._run_state().columns_of(relation, self.get_columns_in_relation)
        return changes.ChangeInput(str(relation), [c.name for c in columns], [c.dtype for c in columns])

    def _table_properties(self, relation: Any) -> Dict[str, str]:
        return self._catalog().properties(relation)
