"""Reading at a run: a project's run records (log/run_records.py), and each logged model's
changes up to the snapshot a run record names for it, so several models are read as one cut
(what the run left: every model as of the same moment of the project's history)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterator, List, Optional, Sequence, Tuple, Union

from dbt.adapters.logstore.config.log_config import LogConfig

from dbt.adapters.logstore.log.log_system import open_model_log
from dbt.adapters.logstore.log.run_records import RunRecord
from dbt.adapters.logstore.names import run_topic_for
from dbt.adapters.logstore.reading.reader import (
    ChangeRecord, ChangelogReader, StartPoint, UsageError, open_log, topic_log,
)


class NoSuchRun(UsageError):
    """The run or model asked for is not in the project's run records (a usage error: the
    command line asked for what is not there)."""


def run_records(log: Union[LogConfig, str], project: str, schema: str, last_only: bool = False,
                **client_properties: Any) -> List[RunRecord]:
    """Every run record of dbt project `project` on its target of schema `schema`, oldest
    first (`last_only`: the last alone): on the cluster of `log` (a model's LogConfig: its log
    system and client settings) or at the address `log` names (bootstrap servers;
    `client_properties` as a profile's `kafka_properties`)."""
    topic = run_topic_for(project, schema)
    if isinstance(log, str):
        log = topic_log(log, topic, **client_properties)
    return [RunRecord.decode(r.value) for r in open_model_log(log).run_records(topic, last_only)]


def find_run(log: Union[LogConfig, str], project: str, schema: str, invocation: str = "latest",
             **client_properties: Any) -> RunRecord:
    """The run record of `invocation` ('latest': read from near the topic's end)."""
    return run_at(run_records(log, project, schema, invocation == "latest", **client_properties),
                  invocation)


def run_at(records: Sequence[RunRecord], invocation: str = "latest") -> RunRecord:
    """The run record of `invocation` (an invocation id, or 'latest': the last to end)."""
    if not records:
        raise NoSuchRun("no run record yet: a dbt run, build, seed or snapshot of a logged model "
                        "writes one as it ends")
    if invocation == "latest":
        return records[-1]
    for record in records:
        if record.invocation_id == invocation:
            return record
    raise NoSuchRun(f"no run record of invocation '{invocation}' (the last: "
                    f"{', '.join(r.invocation_id for r in records[-3:])})")


def changes_at_run(log: Union[LogConfig, str], record: RunRecord, model: str,
                   table: Optional[str] = None, **client_properties: Any) -> Iterator[ChangeRecord]:
    """`model`'s confirmed changes from its log's start up to the snapshot `record` names for it
    (none when it had no snapshot then): applied in order, the model's rows as of the run.
    `log`: the model's LogConfig, or the address of its topic (as run_records takes it)."""
    at = record.model(model)
    if not at.logged:
        raise NoSuchRun(f"model '{at.name}' has no log: run {record.invocation_id} names it as "
                        f"not logged")
    if at.snapshot is None:
        return iter(())
    if isinstance(log, LogConfig) and str(log.topic) != at.topic:  # the topic it had then
        log = replace(log, topic=at.topic)
    reader = ChangelogReader(open_log(log, str(at.topic), **client_properties), table)
    return reader.changes(StartPoint("earliest"), up_to_snapshot=at.snapshot)


def changes_between_runs(address: str, earlier: Optional[RunRecord], later: RunRecord,
                         models: Sequence[str], **client_properties: Any
                         ) -> Iterator[Tuple[str, List[ChangeRecord]]]:
    """Per model (in the order given: upstream first keeps a join's inputs ahead of it), the
    change sets after the snapshot `earlier` names (from the log's start without one) up to the
    snapshot `later` names: (model name, that model's changes between the two cuts)."""
    for name in models:
        at = later.model(name)
        before = earlier.model(name).snapshot if earlier is not None else None
        if not at.logged or at.snapshot is None or (before is not None and before >= at.snapshot):
            yield at.name, []
            continue
        reader = ChangelogReader(open_log(address, str(at.topic), **client_properties))
        start = StartPoint("earliest") if before is None else StartPoint("snapshot", snapshot=before)  # after it
        yield at.name, list(reader.changes(start, up_to_snapshot=at.snapshot))
