"""The run record of an invocation (log/run_records.py has its format): which snapshots this
process confirmed (`note_confirmed`, called as each model's log write returns), what dbt said
of every node (`RunWatch`: its NodeFinished events; the manifest's nodes from the adapter), and
the latest confirmation of each logged model this invocation did not confirm (read from its
control topic), written once as dbt closes the invocation's connections.

Why not an on-run-end hook of the package: every project on the adapter would run it, and dbt
counts a hook among the run's results ("1 project hook", run_results.json, PASS=), logged
models or not."""
from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore.config.log_config import LogConfig, node_field
from dbt.adapters.logstore.config.options import LOGGABLE_RESOURCES
from dbt.adapters.logstore.log.control_records import parse_control_record
from dbt.adapters.logstore.log.log_system import ModelLog
from dbt.adapters.logstore.log.run_records import (
    CHANGED, FAILED, NOT_LOGGED, NOT_SELECTED, SKIPPED, UNCHANGED, ModelAtRun, RunRecord,
)
from dbt.adapters.logstore.names import RUN_WRITER_PREFIX, invocation_of, run_topic_for

logger = AdapterLogger("logstore")

# Commands whose runs may change logged tables (`dbt retry` runs one of them again); `test`,
# `compile`, `docs` and the like write no record.
RECORDED_COMMANDS = ("run", "build", "seed", "snapshot", "retry")

_lock = threading.Lock()
# topic -> the last confirmation this process wrote or adopted there (its JSON, changeset too):
# dbt runs models on threads of one process, and the run record is written on its main thread
_confirmed: Dict[str, Dict[str, Any]] = {}


def note_confirmed(log: LogConfig, changeset: str, snapshot: Any) -> None:
    """A model's log write (or a recovery's adoption) confirmed `snapshot` (log_snapshots.Snapshot)
    for change set `changeset`."""
    value = {"snapshot": snapshot.id, "end_offsets": dict(snapshot.end_offsets),
             "generation": snapshot.generation, "table_version": snapshot.table_version,
             "changeset": changeset, "records": snapshot.records}
    with _lock:
        before = _confirmed.get(str(log.topic))
        if before and invocation_of(before["changeset"]) == invocation_of(changeset):
            value["records"] += before["records"]  # a microbatch model's earlier batches
        _confirmed[str(log.topic)] = value


def _confirmed_by(invocation_id: str, topic: str) -> Optional[Dict[str, Any]]:
    with _lock:
        value = _confirmed.get(topic)
    if value and invocation_of(value["changeset"]) == invocation_id:
        return value
    return None


class RunWatch:
    """One invocation as the adapter sees it: the manifest's nodes (handed over after the parse)
    and each node's status as dbt reports it (its NodeFinished events)."""

    def __init__(self) -> None:
        self.invocation_id: Optional[str] = None
        self.nodes: Dict[str, Any] = {}  # the manifest's, by unique id
        self.sources: Dict[str, Any] = {}  # the manifest's sources, by unique id
        self.unlogged_sources: Set[str] = set()  # tables of sources found not logged (model_inputs)
        self.statuses: Dict[str, str] = {}
        self.written: Optional[str] = None  # the invocation whose record is written

    def watch(self, invocation_id: str, nodes: Mapping[str, Any],
              sources: Optional[Mapping[str, Any]] = None) -> None:
        from dbt_common.events.event_manager_client import get_event_manager

        if invocation_id != self.invocation_id:
            self.invocation_id, self.statuses, self.unlogged_sources = invocation_id, {}, set()
        self.nodes, self.sources = dict(nodes), dict(sources or {})
        callbacks = get_event_manager().callbacks  # reset by dbt as each invocation starts
        if self._heard not in callbacks:
            callbacks.append(self._heard)

    def _heard(self, msg: Any) -> None:
        if msg.info.name == "NodeFinished":
            self.statuses[msg.data.node_info.unique_id] = str(msg.data.run_result.status).lower()

    def due(self, invocation_id: str, flags: Any, reduced_inputs: Optional[str]) -> bool:
        """Whether the invocation ending now writes its record: one that ran nodes of a command
        that may change logged tables, not from reduced inputs (--empty, --sample log
        nothing), not written yet."""
        return (invocation_id == self.invocation_id and self.written != invocation_id
                and bool(self.statuses) and not reduced_inputs
                and str(getattr(flags, "WHICH", "") or "") in RECORDED_COMMANDS)


def args_of(flags: Any) -> Dict[str, Any]:
    """The invocation's command and selection, from dbt's flags."""
    def value(name: str) -> Any:
        found = getattr(flags, name, None)
        return list(found) if isinstance(found, (tuple, list)) else found

    return {"which": value("WHICH"), "select": value("SELECT"), "exclude": value("EXCLUDE"),
            "selector": value("SELECTOR"), "full_refresh": value("FULL_REFRESH")}


def _did(status: Optional[str], confirmed: Optional[Dict[str, Any]]) -> str:
    if status is None:
        return NOT_SELECTED
    if status in ("error", "runtime error", "fail"):
        return FAILED
    if status == "skipped":
        return SKIPPED
    return CHANGED if confirmed and confirmed.get("records") else UNCHANGED


def _from_confirmation(value: Mapping[str, Any]) -> Dict[str, Any]:
    return {"snapshot": int(value["snapshot"]),
            "end_offsets": {int(p): int(o) for p, o in (value.get("end_offsets") or {}).items()},
            "generation": None if value.get("generation") is None else int(value["generation"]),
            "table_version": value.get("table_version"), "changeset": value.get("changeset")}


def latest_confirmations(logs: List[LogConfig], open_log: Callable[[LogConfig], ModelLog]
                         ) -> Dict[str, Optional[Dict[str, Any]]]:
    """Per log's topic, its latest confirmation: the first confirmation of the highest snapshot
    in its control topic (a snapshot's first confirmation counts, docs/log-format.md section
    5); None: none yet. All of them in one read where the log system can (Kafka: one consumer
    reads every control topic's last records)."""
    if not logs:
        return {}
    found: Dict[str, Optional[Dict[str, Any]]] = {}
    for topic, records in open_log(logs[0]).system.control_tails(logs).items():
        latest: Optional[Dict[str, Any]] = None
        for value in (parse_control_record(r.value) for r in records):
            if latest is None or int(value["snapshot"]) > int(latest["snapshot"]):
                latest = value
        found[topic] = latest
    return found


def build_run_record(invocation_id: str, project: str, schema: str, args: Mapping[str, Any],
                     started_at: str, nodes: Iterable[Any], statuses: Mapping[str, str],
                     log_of: Callable[[Any], LogConfig],
                     latest_of: Callable[[List[LogConfig]], Dict[str, Optional[Dict[str, Any]]]],
                     ) -> Tuple[RunRecord, List[LogConfig]]:
    """The record, and the logs of the logged models (the run topic is written beside them)."""
    built = [n for n in sorted(nodes, key=lambda n: str(node_field(n, "unique_id")))
             if str(node_field(n, "resource_type")) in LOGGABLE_RESOURCES]
    log_by_id = {str(node_field(n, "unique_id")): log_of(n) for n in built}
    logs = [log for log in log_by_id.values() if log.enabled]
    confirmed_here = {str(log.topic): _confirmed_by(invocation_id, str(log.topic)) for log in logs}
    # the others' latest confirmations: one read for all of them (latest_of)
    others = latest_of([log for log in logs if confirmed_here[str(log.topic)] is None])
    models: List[ModelAtRun] = []
    for node in built:
        uid, name = str(node_field(node, "unique_id")), str(node_field(node, "name"))
        log = log_by_id[uid]
        if not log.enabled:
            models.append(ModelAtRun(uid, name, NOT_LOGGED))
            continue
        confirmed = confirmed_here[str(log.topic)]
        state = confirmed if confirmed is not None else others.get(str(log.topic))
        at_run = ModelAtRun(uid, name, _did(statuses.get(uid), confirmed), topic=str(log.topic))
        if state is not None:
            at_run = replace(at_run, **_from_confirmation(state))
        models.append(at_run)
    selection = {k: args.get(k) for k in ("select", "exclude", "selector", "full_refresh")
                 if args.get(k) not in (None, (), [], False)}
    record = RunRecord(invocation_id=invocation_id, project=project, schema=schema,
                       command=str(args.get("which")), selection=selection, started_at=started_at,
                       ended_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       models=tuple(models), ts_ms=int(time.time() * 1000))
    return record, logs


def write_run_record(record: RunRecord, logs: List[LogConfig],
                     open_log: Callable[[LogConfig], ModelLog]) -> Optional[str]:
    """Write `record` to the project's run topic, once, in a transaction of its own; None when
    the project has no logged model (nothing to record). Returns the run topic; a failure is
    a DbtRuntimeError saying what was not written and what stands."""
    if not logs:
        return None
    # the first logged model's cluster (the profile's, unless the model names one)
    log = replace(logs[0], model=f"{record.project} (run record)")
    topic = run_topic_for(record.project, record.schema)
    key, value = record.encode()
    started = time.monotonic()
    try:
        open_log(log).write_run_record(topic, RUN_WRITER_PREFIX + record.invocation_id, key, value)
    except DbtRuntimeError as exc:
        said = str(getattr(exc, "msg", exc)).replace(" Nothing was changed.", "")
        raise DbtRuntimeError(
            f"{said} The run record of invocation {record.invocation_id} was not written to "
            f"topic '{topic}': every table and log change of this run stands, and the next "
            f"run's record names it.") from exc
    changed = sum(1 for m in record.models if m.did == CHANGED)
    logger.debug(f"run record of {record.invocation_id} written to {topic} in "
                 f"{time.monotonic() - started:.3f} s: {len(logs)} logged models, {changed} changed")
    return topic


def record_the_run(watch: RunWatch, project: str, schema: str, flags: Any, started_at: str,
                   log_of: Callable[[Any], LogConfig],
                   open_log: Callable[[LogConfig], ModelLog]) -> None:
    """As the invocation ends: its record, written once. A record that cannot be written is an
    error on the console, not an exception: dbt calls this while closing the run, and an
    exception there would cost the run its results (run_results.json, which `dbt retry` reads)."""
    watch.written = watch.invocation_id
    try:
        record, logs = build_run_record(
            str(watch.invocation_id), project, schema, args_of(flags), started_at, watch.nodes.values(),
            watch.statuses, log_of, lambda logs: latest_confirmations(logs, open_log))
        write_run_record(record, logs, open_log)
    except DbtRuntimeError as exc:
        logger.error(str(getattr(exc, "msg", exc)))
    except Exception as exc:  # noqa: BLE001 - never the end of the run's own results
        logger.error(f"The run record of invocation {watch.invocation_id} was not written "
                     f"({type(exc).__name__}: {exc}); every table and log change of this run "
                     f"stands, and the next run's record names it.")


__all__ = ["note_confirmed", "RunWatch", "args_of", "build_run_record", "write_run_record",
           "latest_confirmations", "FAILED", "SKIPPED", "NOT_LOGGED"]
