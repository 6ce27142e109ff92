"""Whether a logged model's table and its log agree (`dbt-logstore status`).

Always checked, from metadata: the log is still the table's log (lifecycle/identity.py: the same
topics on the same cluster, its confirmations and records still there, retention short of the
table's latest complete copy), the table's recorded snapshot and offsets against the log's last
confirmation, and nothing of a failed run left behind. It also says from where a consumer still
reaches the table (`start`: the earliest offset, or a generation's start). With `verify`, also the content: the
confirmed log replayed (one row image per key, or a multiset for keyless logs) against the
table's rows, encoded as the log encodes them.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

from dbt.adapters.logstore.commit import snapshots as log_snapshots
from dbt.adapters.logstore import names
from dbt.adapters.logstore.log.lifecycle import identity, retention
from dbt.adapters.logstore.log.log_system import open_model_log
from dbt.adapters.logstore.reading.project import DbtProject, LoggedModel, TableReadError
from dbt.adapters.logstore.reading.reader import ChangelogReader, StartPoint, open_log
from dbt.adapters.logstore.reading.replay import Replica


@dataclass
class ModelStatus:
    model: str
    relation: str
    topic: str
    table_snapshot: Optional[int] = None
    table_offsets: Dict[str, int] = field(default_factory=dict)
    log_snapshot: Optional[int] = None
    log_end_offsets: Dict[str, int] = field(default_factory=dict)
    records: int = 0
    generation: Optional[int] = None  # the log's latest generation
    start: Optional[str] = None  # the oldest start point that still reaches the table
    problems: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)

    @property
    def agree(self) -> bool:
        return not self.problems

    def as_dict(self) -> Dict[str, Any]:
        return {**asdict(self), "agree": self.agree}


def model_status(project: DbtProject, model: LoggedModel, verify: bool = False) -> ModelStatus:
    log = model.log
    status = ModelStatus(model.name, model.relation, str(log.topic))
    model_log = open_model_log(log)  # the model's log system, looked up once for its status
    reader = ChangelogReader(open_log(model_log), model.table_id)
    state = model_log.observe()
    status.warnings = retention.warnings(log, state)
    try:
        props = project.table_properties(model.relation)
    except TableReadError as exc:  # never "does not exist" for a table that could not be read
        status.problems.append(f"cannot tell: {exc}")
        return status
    assessment = identity.assess(log, props, state, model.table_id)
    status.warnings.extend(assessment.notes)
    confirmations = list(assessment.confirmations)
    if confirmations:
        last = confirmations[-1]
        status.log_snapshot = last.snapshot
        status.log_end_offsets = {str(p): o for p, o in sorted(last.end_offsets.items())}
        status.records = sum(c.records for c in confirmations)
    if assessment.generations:
        status.generation = assessment.generations[-1].number
    if assessment.reachable is not None:
        first = assessment.generations[0]
        status.start = ("earliest" if assessment.reachable == first and first.held(state.start_offsets)
                        and len(assessment.generations) == 1
                        else f"generation:{assessment.reachable.number}")
    status.problems.extend(f"the log is lost: {finding}" for finding in assessment.findings)
    if assessment.lost:
        status.problems.append(identity.advice(log))
        return status
    if props is None:
        if confirmations:
            status.problems.append(f"table {model.relation} does not exist, but the log has "
                                   f"{len(confirmations)} snapshots")
        return status
    snapshot = log_snapshots.Snapshot.from_properties(props)
    status.table_snapshot = snapshot.id
    if props.get("kafka.topic") is None and not confirmations:
        # a table whose log has not started (a first build under `dbt run --empty`, which
        # creates it with no rows: run_modes.py); its next run starts the log with its rows
        if verify:
            _, rows = project.snapshot_rows(model)
            held = sum(1 for _ in rows)
            if held:
                status.problems.append(f"the log has not started, but the table has {held} rows "
                                       f"(its next run starts the log with them)")
        return status
    status.table_offsets = {str(p): o for p, o in sorted(snapshot.end_offsets.items())}
    if props.get("kafka.topic") != log.topic:
        status.problems.append(f"the table logs to '{props.get('kafka.topic')}', the model's "
                               f"config to '{log.topic}' (its next run starts the new log)")
        return status
    changes = f"{model.relation}{names.CHANGES_SUFFIX}"
    if project.relation_exists(changes):
        status.problems.append(f"a failed run left its change set in {changes}; the next run or "
                               f"dbt run-operation logstore_recover settles it")
    if props.get(names.COMMITTED) != props.get(names.MIRRORED):
        status.problems.append(f"change set {props.get(names.COMMITTED)} is committed "
                               f"to the table but not recorded as in the log")
    if snapshot.id != (status.log_snapshot or 0):
        status.problems.append(f"the table is at snapshot {snapshot.id}, the log's last "
                               f"confirmed snapshot is {status.log_snapshot or 0}")
    elif status.table_offsets != status.log_end_offsets:
        status.problems.append(f"the table records log offsets {status.table_offsets}, the log's "
                               f"confirmation {status.log_end_offsets}")
    if verify and status.agree:
        # from the latest generation (the contract's start) and, while it is all held, from the
        # earliest offset (the reset rule across every generation: docs/log-format.md, section 6)
        whole = bool(assessment.generations) and assessment.generations[0].held(state.start_offsets)
        _verify_content(project, model, reader, status, from_earliest=whole)
    return status


def _image(row: Any) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def _verify_content(project: DbtProject, model: LoggedModel, reader: ChangelogReader,
                    status: ModelStatus, from_earliest: bool = False) -> None:
    # read against the table's columns (docs/log-format.md, "Row images across schema changes")
    columns = project.table_columns(model)[0]
    _, rows = project.snapshot_rows(model)
    table = Counter(_image(row) for _, row in rows)
    starts = [StartPoint("latest-generation")] + ([StartPoint("earliest")] if from_earliest else [])
    for start in starts:
        replica = Replica(columns=columns)
        try:
            for record in reader.changes(start):
                replica.apply(record)
        except ValueError as exc:  # a keyless delete of a row the log never had
            status.problems.append(f"the log does not replay from {start}: {exc}")
            return
        logged = Counter(_image(row) for row in replica.rows())
        if logged != table:
            missing, extra = table - logged, logged - table
            status.problems.append(
                f"content differs: the table has {sum(table.values())} rows, replaying the log "
                f"from {start} gives {sum(logged.values())}; {sum(missing.values())} rows only in "
                f"the table, {sum(extra.values())} only in the log"
                + (f" (e.g. {next(iter(missing))})" if missing else "")
                + (f" (e.g. {next(iter(extra))} only in the log)" if extra and not missing else ""))
            return
