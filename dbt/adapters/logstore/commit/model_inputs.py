"""A model's inputs (issue 54): which snapshot of each logged model it `ref()`s, and of each
`source()` that is a logged table (another project's logged model, say), its build read,
recorded in its confirmation (log/control_records.ModelInput), so a consumer can check that
gold@7 came from customers@12 without any run record.

A ref's log is known from its config; a source's only from its table: it is logged when its
properties carry a snapshot (its topic is LOG_TOPIC). A source found not logged is remembered
for the invocation (`not_logged`), so an unlogged source costs one statement a run, not two a
model.

How it is known: an input's snapshot is in its table's properties (SNAPSHOT_ID), read as the
model's run begins and again before its log write. The same snapshot both times, with no commit
under way or unlogged in between, is the one the build read: the input's rows change only by a
commit, and a commit changes the property (or first sets the intent a statement commit writes
before its rows). Anything else is named as not known, never guessed."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from dbt.adapters.logstore.config.log_config import LogConfig, node_field
from dbt.adapters.logstore.config.options import LOGGABLE_RESOURCES
from dbt.adapters.logstore.log.control_records import ModelInput
from dbt.adapters.logstore.commit.table_snapshot import input_snapshot
from dbt.adapters.logstore.names import LOG_TOPIC, SNAPSHOT_ID
from dbt.adapters.logstore.spark.catalog import Catalog


@dataclass(frozen=True)
class InputTable:
    name: str
    topic: Optional[str]  # None: not known (a source logged before its table named its topic)
    relation: str


def logged_inputs(depends_on: Iterable[str], nodes: Mapping[str, Any],
                  log_of: Callable[[Any], LogConfig]) -> List[InputTable]:
    """The logged models among a model's `depends_on` nodes (`nodes`: the manifest's, by id)."""
    found = []
    for uid in sorted(set(depends_on)):
        node = nodes.get(uid)
        if node is None or str(node_field(node, "resource_type")) not in LOGGABLE_RESOURCES:
            continue
        log = log_of(node)
        if log.enabled:
            alias = node_field(node, "alias") or node_field(node, "name")
            found.append(InputTable(str(node_field(node, "name")), str(log.topic),
                                    f"{node_field(node, 'schema')}.{alias}"))
    return found


def source_tables(depends_on: Iterable[str], sources: Mapping[str, Any]) -> List[InputTable]:
    """The sources among a model's `depends_on` (`sources`: the manifest's, by id), named
    `<source name>.<table name>`; whether each is logged is for its table to say."""
    found = []
    for uid in sorted(set(depends_on)):
        source = sources.get(uid)
        if source is not None:
            table = node_field(source, "identifier") or node_field(source, "name")
            found.append(InputTable(f"{node_field(source, 'source_name')}.{node_field(source, 'name')}",
                                    None, f"{node_field(source, 'schema')}.{table}"))
    return found


def _properties(catalog: Catalog, relation: str) -> Optional[Dict[str, str]]:
    try:
        return catalog.properties(relation)
    except Exception:  # noqa: BLE001 - a missing or unreadable table: not known
        return None


def read(catalog: Catalog, inputs: List[InputTable]) -> Dict[str, Optional[int]]:
    """Each input's snapshot now (one `show tblproperties` each)."""
    return {table.name: input_snapshot(_properties(catalog, table.relation)) for table in inputs}


def logged_sources(catalog: Catalog, candidates: List[InputTable], not_logged: Set[str]
                   ) -> Tuple[List[InputTable], Dict[str, Optional[int]]]:
    """The candidates whose tables are logged, with their topics, and their snapshots now (one
    `show tblproperties` each); the others go into `not_logged`, not read again."""
    tables, now = [], {}
    for table in candidates:
        if table.relation in not_logged:
            continue
        props = _properties(catalog, table.relation)
        if props is None or SNAPSHOT_ID not in props:
            not_logged.add(table.relation)
            continue
        tables.append(InputTable(table.name, props.get(LOG_TOPIC) or None, table.relation))
        now[table.name] = input_snapshot(props)
    return tables, now


@dataclass
class InputsRead:
    """A model run's logged inputs and their snapshots as the run began."""

    tables: List[InputTable]
    before: Dict[str, Optional[int]]
    # inputs read through logstore_changes(), by name: the snapshot their changes were read up
    # to, known exactly whatever the table did meanwhile (the build read the log, not the table)
    read_up_to: Dict[str, int] = field(default_factory=dict)

    def settle(self, catalog: Catalog) -> Tuple[ModelInput, ...]:
        """Read again after the build: what the confirmation says of each input."""
        if not self.tables:
            return ()
        unsure = [t for t in self.tables if t.name not in self.read_up_to]
        said = {i.name: i for i in settled(unsure, self.before, read(catalog, unsure))} if unsure else {}
        return tuple(said.get(t.name) or ModelInput(t.name, t.topic, self.read_up_to[t.name])
                     for t in self.tables)


def read_at_start(catalog: Catalog, depends_on: Optional[Iterable[str]], nodes: Mapping[str, Any],
                  log_of: Callable[[Any], LogConfig],
                  read_up_to: Optional[Mapping[str, int]] = None,
                  sources: Optional[Mapping[str, Any]] = None,
                  not_logged: Optional[Set[str]] = None) -> Optional[InputsRead]:
    """A model run's inputs as it begins (None: not a model's build, e.g. a recovery);
    `read_up_to`: the inputs its logstore_changes() read, as they were read (no statement);
    `sources` the manifest's, `not_logged` the sources this invocation found not logged."""
    if depends_on is None:
        return None
    depends_on = list(depends_on)
    tables = logged_inputs(depends_on, nodes, log_of)
    known = dict(read_up_to or {})
    before = read(catalog, [t for t in tables if t.name not in known])
    from_sources, now = logged_sources(catalog, source_tables(depends_on, sources or {}),
                                       set() if not_logged is None else not_logged)
    return InputsRead(sorted(tables + from_sources, key=lambda t: t.name), {**before, **now}, known)


def settled(inputs: List[InputTable], before: Mapping[str, Optional[int]],
            after: Mapping[str, Optional[int]]) -> Tuple[ModelInput, ...]:
    """What the confirmation says of each input: its snapshot when read the same before and
    after the build, else not known (with both readings)."""
    said = []
    for table in inputs:
        first, last = before.get(table.name), after.get(table.name)
        if first is not None and first == last:
            said.append(ModelInput(table.name, table.topic, first))
        else:
            said.append(ModelInput(table.name, table.topic, None, (first, last)))
    return tuple(said)
