"""Is the log the table recorded still the log the broker holds? Checked by every run before its
table changes (commit_protocol.begin) and by plain `status`, from the log's state (LogState:
ids, offsets, settings, confirmations) and the table's properties.

A log is lost when a consumer that follows the documented start point (docs/log-format.md,
section 6) would no longer reach the table: a topic deleted or created again, another cluster
behind the same address, confirmations or records gone, retention past the start of the
table's complete copy; and the other way round, a table with no record of a log whose topic
already holds one of it (dropped and rebuilt, replaced by a view, logged with 'log.system:
none' meanwhile). Each finding is one plain sentence. What a run does then is `log.on-lost`'s
(commit_protocol.begin): fail, or re-base the log on the table with a new generation.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import List, Mapping, Optional, Sequence, Tuple

from dbt.adapters.logstore.log.control_records import Confirmation
from dbt.adapters.logstore.log.lifecycle import generations
from dbt.adapters.logstore.log.lifecycle.generations import Generation, GenerationStart
from dbt.adapters.logstore.config.log_config import LogConfig, control_topic_for
from dbt.adapters.logstore.config.continuation import continues_log
from dbt.adapters.logstore.log.log_system import LogState
from dbt.adapters.logstore.names import (
    GENERATION, LOG_CLUSTER_ID, LOG_CONTROL_TOPIC_ID, LOG_TOPIC_ID, SNAPSHOT_ID, SNAPSHOT_OFFSETS,
)


@dataclass(frozen=True)
class Assessment:
    """What a run or `status` found of one table's log."""

    findings: Tuple[str, ...] = ()  # why the log is lost; empty: it is the table's log
    confirmations: Tuple[Confirmation, ...] = ()  # of this table, in snapshot order
    generations: Tuple[Generation, ...] = ()
    reachable: Optional[Generation] = None  # the oldest generation still held whole
    next_start: GenerationStart = field(default_factory=lambda: GenerationStart(1, 0))
    finishing: bool = False  # a committed generation start waits for recovery to log it
    due: bool = False  # log.generation.interval: the latest generation is older than it
    notes: Tuple[str, ...] = ()  # what could not be checked, and why (warnings, not findings)

    @property
    def lost(self) -> bool:
        return bool(self.findings)


def table_confirmations(state: LogState, table_id: str) -> List[Confirmation]:
    """The confirmations of one table, first per snapshot, in snapshot order."""
    found = {}
    for record in state.control_records:
        confirmation = Confirmation.from_record(record.value)
        if confirmation.table == table_id:
            found.setdefault(confirmation.snapshot, confirmation)
    return [found[s] for s in sorted(found)]


def identity_properties(state: LogState) -> dict:
    """What the table records of the log with each snapshot (compared by `assess`)."""
    return {LOG_CLUSTER_ID: state.cluster_id or "", LOG_TOPIC_ID: state.topic_id or "",
            LOG_CONTROL_TOPIC_ID: state.control_topic_id or ""}


def assess(log: LogConfig, table_props: Optional[Mapping[str, str]], state: LogState,
           table_id: str, now_ms: Optional[int] = None) -> Assessment:
    """Compare the log's state with what the table recorded (`table_props`; None: no table)."""
    props = table_props or {}
    confirmations = table_confirmations(state, table_id)
    found = generations.generations(confirmations)
    reachable = generations.reachable(found, state.start_offsets)
    recorded_snapshot = int(props.get(SNAPSHOT_ID) or 0)
    last = confirmations[-1].snapshot if confirmations else 0
    # numbers and snapshot ids go on from the table's and the log's, whichever is further (a
    # table's generations count in the topic it recorded; a new topic starts at generation 1)
    same_topic = bool(props) and continues_log(log, props)
    recorded_generation = int(props.get(GENERATION) or (1 if recorded_snapshot else 0)) if same_topic else 0
    next_start = GenerationStart(max(generations.numbers(confirmations), recorded_generation) + 1,
                                 max(recorded_snapshot, last), dict(state.end_offsets))
    common = dict(confirmations=tuple(confirmations), generations=tuple(found),
                  reachable=reachable, next_start=next_start)
    if generations.finishing_generation(props):
        return Assessment(finishing=True, **common)
    if not state.known:  # a log system that cannot observe its logs: nothing to compare
        return Assessment(**common)
    logged_here = same_topic and recorded_snapshot > 0
    if not logged_here:
        findings = _history(log, confirmations, table_props is not None)
        return Assessment(findings=tuple(findings), **common)
    findings = _identity(log, props, state) or _contents(log, props, state, confirmations)
    notes = _held_back(log, props, state, confirmations)
    due = False
    if not findings and log.generation_interval_ms and found:
        age = (now_ms if now_ms is not None else int(time.time() * 1000)) - found[-1].ts_ms
        due = age >= log.generation_interval_ms
    if not findings and reachable is None and found:
        findings = [_retention_finding(log, found[-1], state)]
    return Assessment(findings=tuple(findings), due=due, notes=tuple(notes), **common)


def _history(log: LogConfig, confirmations: Sequence[Confirmation], table_exists: bool) -> List[str]:
    if not confirmations:
        return []
    why = ("the table has no record of it" if table_exists
           else "the table does not exist")
    return [f"topic '{log.topic}' already holds a log of this table (snapshots "
            f"{confirmations[0].snapshot} to {confirmations[-1].snapshot}), but {why}: it was "
            f"dropped and rebuilt, replaced by a view, or built with 'log.system: none' "
            f"meanwhile, so its rows would be logged again over the old ones"]


def _identity(log: LogConfig, props: Mapping[str, str], state: LogState) -> List[str]:
    """Another cluster, or a topic deleted or created again (ids a table recorded are compared;
    a table written before ids were recorded is compared by its offsets)."""
    findings = []
    cluster = props.get(LOG_CLUSTER_ID)
    if cluster and state.cluster_id and cluster != state.cluster_id:
        findings.append(f"the servers '{log.bootstrap_servers}' are now another Kafka cluster "
                        f"(id '{state.cluster_id}', the table recorded '{cluster}'): a failover "
                        f"or a rebuilt cluster does not hold this table's log")
    for label, name, exists, now, recorded_id in (
            ("topic", str(log.topic), state.topic_exists, state.topic_id, props.get(LOG_TOPIC_ID)),
            ("control topic", control_topic_for(str(log.topic)), state.control_topic_exists,
             state.control_topic_id, props.get(LOG_CONTROL_TOPIC_ID))):
        if not exists:
            findings.append(f"the {label} '{name}' no longer exists (deleted)")
        elif recorded_id and now and recorded_id != now:
            findings.append(f"the {label} '{name}' was deleted and created again (its id is "
                            f"now {now}, the table recorded {recorded_id})")
    return findings


def _contents(log: LogConfig, props: Mapping[str, str], state: LogState,
              confirmations: Sequence[Confirmation]) -> List[str]:
    """Confirmations or records the table counts on, gone."""
    findings = []
    recorded_snapshot = int(props.get(SNAPSHOT_ID) or 0)
    last = confirmations[-1].snapshot if confirmations else 0
    if last < recorded_snapshot and state.control_held_back is None:
        findings.append(f"the control topic '{control_topic_for(str(log.topic))}' confirms "
                        + (f"snapshots up to {last}" if last else "no snapshot")
                        + f" of this table, but the table is at snapshot {recorded_snapshot}: "
                          f"confirmations were lost")
    recorded_ends = {int(p): int(o) for p, o in json.loads(props.get(SNAPSHOT_OFFSETS) or "{}").items()}
    short = {p: (state.end_offsets.get(p, 0), o) for p, o in sorted(recorded_ends.items())
             if state.end_offsets.get(p, 0) < o}
    if short:
        where = ", ".join(f"partition {p} ends at {now}, the table recorded {was}"
                          for p, (now, was) in short.items())
        findings.append(f"the topic '{log.topic}' holds fewer records than the table's log had "
                        f"({where}): it was emptied or created again")
    return findings


def _held_back(log: LogConfig, props: Mapping[str, str], state: LogState,
               confirmations: Sequence[Confirmation]) -> List[str]:
    """Confirmations missing while the control topic's last records are held back (an open
    transaction of a writer that died or froze mid-commit, until it is aborted): not lost, but
    not checked either. The run goes on; its writer fences the table's open transaction."""
    recorded_snapshot = int(props.get(SNAPSHOT_ID) or 0)
    last = confirmations[-1].snapshot if confirmations else 0
    if state.control_held_back is None or last >= recorded_snapshot:
        return []
    first, end = state.control_held_back
    return [f"Model '{log.model}': the control topic '{control_topic_for(str(log.topic))}' "
            f"confirms snapshots up to {last} of this table as far as it can be read, but its "
            f"records from offset {first} to {end} are held back by an open transaction (a "
            f"writer stopped in the middle of a commit, until the broker aborts it): the "
            f"confirmations of snapshots {last + 1} to {recorded_snapshot} were not checked"]


def _retention_finding(log: LogConfig, latest: Generation, state: LogState) -> str:
    settings = ", ".join(f"{k}={v}" for k, v in sorted(state.settings.items())) or "its settings"
    starts = ", ".join(f"p{p}:{o}" for p, o in sorted(state.start_offsets.items()))
    return (f"the broker has deleted records of the table's latest complete copy in "
            f"'{log.topic}' ({latest.describe()}; the topic now starts at {starts}, by "
            f"{settings}): no consumer can read the whole table from the log")


def advice(log: LogConfig) -> str:
    """The ways out of a lost log, for its error message."""
    model = log.model
    return (f"Ways out: set 'log.on-lost: restart' on the model (its next run starts a new "
            f"generation: the table's rows, after which consumers reset), or run dbt "
            f"run-operation logstore_resnapshot --args '{{model: {model}}}' once, or give the model a "
            f"new 'kafka.topic' (docs/operations.md, 'The log's life').")


def lost_message(log: LogConfig, assessment: Assessment) -> str:
    found = "; ".join(assessment.findings)
    return (f"Model '{log.model}': the log in topic '{log.topic}' is not the table's log any "
            f"more: {found}. Nothing was changed. {advice(log)}")
