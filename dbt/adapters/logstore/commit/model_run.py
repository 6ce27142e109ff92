"""What a thread's model run holds from its first step to dbt's post-model hook (the adapter
keeps one per thread: LogstoreAdapter._run_state), among it the model's log, resolved once."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from dbt.adapters.logstore.commit import run_lock
from dbt.adapters.logstore.commit.model_inputs import InputsRead
from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.log.lifecycle.generations import GenerationStart
from dbt.adapters.logstore.log.log_system import LogState, ModelLog, open_model_log


@dataclass
class ModelRunState:
    """What a thread's model run holds until dbt's post-model hook: its run lock, the upstream
    positions to record with its commit, and the upstream changes it landed (tables, views)."""

    lock: Optional[str] = None
    owner: Optional[run_lock.LockOwner] = None  # this run, as its lock names it
    # whether this run took its lock over from a run that ended without releasing it: only
    # then can that run have staged tables this dbt invocation's listing of the schema missed
    took_over: bool = False
    sources: Optional[str] = None
    landed: List[str] = field(default_factory=list)
    log: Optional[ModelLog] = None  # the model's log and its log system, resolved once
    log_state: Optional[LogState] = None  # the log as this run found it (lifecycle/identity.py)
    generation: Optional[GenerationStart] = None  # the generation this run's commit starts
    target: Any = None  # the model's table, once this run holds its lock
    committed: bool = False  # its commit and log write went through (else a failure cleans up)
    # the table's properties as `begin` read them for the identity check, for the steps that
    # need them before this run writes any property (is the log new? what a rebuild carries on):
    # under the run's lock only the run itself changes them
    found_properties: Optional[Tuple[str, Dict[str, str]]] = None
    # the columns of each table this run created (None: not described yet); nothing changes a
    # table's columns between its creation and its rename or drop, so it is described once
    created_columns: Dict[str, Optional[List[Any]]] = field(default_factory=dict)
    # the rows of each table this run staged, counted by its change set's check (nothing
    # changes a staged table between that check and its commit)
    staged_rows: Dict[str, int] = field(default_factory=dict)
    inputs: Optional[InputsRead] = None  # the logged models its build reads, as it began
    # the upstreams its logstore_changes() read (rendered before `begin`): snapshot read up to
    read_up_to: Dict[str, int] = field(default_factory=dict)
    changes_of: Optional[str] = None  # the model whose logstore_changes() set these

    def read_changes(self, model: str) -> Dict[str, int]:
        """As logstore_changes() renders for `model`: where its reads go (`read_up_to`)."""
        self.of_model(model)
        self.changes_of = model
        return self.read_up_to

    def of_model(self, model: str) -> "ModelRunState":
        """As `model`'s run begins: what another model's logstore_changes() left on this thread
        (its compile failed after it, so dbt's post-model hook, which clears this state, never
        came for it) is not this model's: its upstream positions and reads are forgotten (the
        landed tables stay listed, for the hook to drop)."""
        if self.changes_of not in (None, model):
            self.sources, self.read_up_to, self.changes_of = None, {}, None
        return self

    def model_log(self, log: LogConfig) -> ModelLog:
        """The model's log for this run: its log system looked up once (log_system.ModelLog),
        then the same for every step, whatever options the step's `log` carries (a continuing
        log's stored shape)."""
        if self.log is None or self.log.config.system != log.system:
            self.log = open_model_log(log)
        self.log = self.log.with_config(log)
        return self.log

    def properties_found(self, relation: Any) -> Optional[Dict[str, str]]:
        """The properties `begin` read of `relation` for the identity check, while this run has
        written none (None: read them)."""
        found = self.found_properties
        return found[1] if found and found[0] == str(relation) else None

    def properties_of(self, relation: Any, read: Callable[[Any], Dict[str, str]]) -> Dict[str, str]:
        """The properties of `relation`: as `begin` read them, while this run has written none,
        else `read` (a `show tblproperties`)."""
        found = self.properties_found(relation)
        return found if found is not None else read(relation)

    def columns_of(self, relation: Any, describe: Callable[[Any], List[Any]]) -> List[Any]:
        """The columns of `relation` (`describe`: dbt's get_columns_in_relation), a table this
        run created described once."""
        if str(relation) not in self.created_columns:
            return describe(relation)
        if self.created_columns[str(relation)] is None:
            self.created_columns[str(relation)] = describe(relation)
        return list(self.created_columns[str(relation)] or [])
