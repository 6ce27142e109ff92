"""What a logged table's properties record of its commits, written around the table commit and
read back by recovery: the intent of an incremental commit (row counts before and after), the
change-set tag and log options of a commit, the snapshot history a rebuilt table carries on,
and the upstream positions a downstream commit records (docs/log-format.md, section 5)."""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, Mapping, Optional, Sequence

from dbt.adapters.logstore.changes import diff as changes
from dbt.adapters.logstore.commit import protocol as commit_protocol, snapshots as log_snapshots
from dbt.adapters.logstore.spark import leftovers, table_formats
from dbt.adapters.logstore import names
from dbt.adapters.logstore.spark.catalog import Catalog
from dbt.adapters.logstore.spark.json_images import sql_string
from dbt.adapters.logstore.config.log_config import LogConfig


def pending_changeset(catalog: Catalog, changes_relation: Any, target_relation: Any,
                      log_starts: bool = False) -> Optional[str]:
    """The id of a change set a failed run committed but did not finish logging, if any.
    None when the log starts now (a new topic): it begins with the table's current rows,
    whatever the failed run committed, so nothing needs judging."""
    changes_props = catalog.properties(changes_relation)
    table_props = catalog.properties(target_relation) if target_relation else {}
    row_count = state = None
    changeset = changes_props.get(names.CHANGESET_ID)
    if table_props.get(names.INTENT) == changeset:
        # the run died in or after its table commit: what it had not committed must never surface
        leftovers.remove_uncommitted_output(catalog, target_relation,
                                            failed_step(table_props, changeset))
        if not log_starts:
            row_count = catalog.row_count(target_relation)
            state = table_formats.table_state(catalog, target_relation)
    if log_starts:
        return None
    atomic = table_formats.is_version_state(table_props.get(names.INTENT_TABLE_STATE))
    if commit_protocol.recovery_action(changes_props, table_props, row_count, state, atomic,
                                       lambda: catalog.row_count(changes_relation)) == "mirror":
        return changes_props[names.CHANGESET_ID]
    return None


def drop_what_a_failed_run_staged(catalog: Catalog, target_relation: Any,
                                  relation_of: Callable[[Any, str], Any]) -> None:
    """After a model run that failed with an error (dbt's on_schema_change check, a Spark error
    in its statement, an unreachable broker): what only its next run would drop goes now. Its
    staged relations always (never committed once the table is in place); its change set when
    its table commit did not happen (`recovery_action`), else it stays for the next run to write
    to the log. A missing table (a swap that failed midway) is left to recovery, as a kill's.
    `relation_of(target, kind)`: the model's relation of that kind ('changes', a staged one).
    What is there comes from one listing (dbt's relation cache never lists the change table)."""
    if catalog.sibling(target_relation, target_relation.identifier) is None:
        return
    present = leftovers.own_relations(catalog, target_relation)
    for kind in names.STAGED_SUFFIXES:
        if relation_of(target_relation, kind).identifier.lower() in present:
            catalog.run(leftovers.drop_sql(relation_of(target_relation, kind)))
    changes = relation_of(target_relation, "changes")
    if changes.identifier.lower() in present and pending_changeset(catalog, changes, target_relation) is None:
        catalog.run(leftovers.drop_sql(changes))


def failed_step(table_props: Dict[str, str], changeset: Optional[str]) -> str:
    """Where a failed run that left change set `changeset` died, by what the table recorded."""
    if table_props.get(names.MIRRORED) == changeset:
        return "after the log write"
    if table_props.get(names.COMMITTED) == changeset:
        return "in the log write, after the table commit"
    return "in the table commit"


def intent_properties(catalog: Catalog, new_relation: Any, old_relation: Any, new_rows: Optional[int],
                      replaced_by: Sequence[str] = (), replaces_rows: bool = True,
                      sources: Optional[str] = None,
                      old_properties: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The intent of an incremental commit: the table's state before it (table_formats), and,
    unless that state is an Iceberg or Delta version, its row count before and after, so
    recovery can tell whether a commit that died untagged happened (recovery_action: a version
    that moved took the whole commit, so the counts would never be read, and each is a Spark
    job). `new_rows`: the rows the commit brings (None: counted here, if needed).
    `replaced_by` names the columns whose values the new rows replace (partitions of an
    overwrite, keys of a merge); without them an overwrite replaces every row and an append
    (`replaces_rows` false) none. `sources`: the upstream positions the commit records, if it
    reads upstream changes; `old_properties`: the table's properties, when the run already read
    them (its format and version)."""
    state = table_formats.table_state(catalog, old_relation, old_properties)
    intent = {} if state is None else {names.INTENT_TABLE_STATE: state}
    if not table_formats.is_version_state(state):
        intent.update(_row_counts(catalog, new_relation, old_relation, new_rows, replaced_by, replaces_rows))
    if sources:
        intent[names.SOURCES_INTENT] = sources
    return intent


def _row_counts(catalog: Catalog, new_relation: Any, old_relation: Any, new_rows: Optional[int],
                replaced_by: Sequence[str], replaces_rows: bool) -> Dict[str, str]:
    before = catalog.row_count(old_relation)
    if not replaces_rows:
        replaced = 0
    elif replaced_by:
        scoped = changes.scoped_to(
            changes.ChangeInput(str(old_relation), ()), changes.ChangeInput(str(new_relation), ()),
            tuple(replaced_by))
        replaced = catalog.row_count(scoped.relation)
    else:
        replaced = before
    new_rows = catalog.row_count(new_relation) if new_rows is None else new_rows
    return {names.INTENT_ROWS_BEFORE: str(before), names.INTENT_ROWS_AFTER: str(before - replaced + new_rows)}


def commit_properties(catalog: Catalog, log: LogConfig, changeset_id: Optional[str] = None,
                      topic_partitions: Optional[int] = None, carry_from: Any = None,
                      sources: Optional[str] = None,
                      carried: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """Table properties of a commit: the log options, the change-set tag (with the upstream
    positions read, `sources`), the partition count the records were placed with. A table that
    replaces `carry_from` carries on its snapshot history (id, offsets), so snapshot ids stay
    monotonic across rebuilds (`carried`: its properties, when this run knows them already)."""
    props: Dict[str, str] = {}
    if carry_from is not None and carry_from.is_table:
        old = carried if carried is not None else catalog.properties(carry_from)
        props.update({k: v for k, v in old.items() if k in log_snapshots.CARRIED})
    props.update(log.table_properties())
    if changeset_id:
        props[names.COMMITTED] = changeset_id
        props[names.COMMITTED_MS] = str(int(time.time() * 1000))  # the records' ts_ms
        if sources:  # how far upstream logs were read: commits with it
            props[names.SOURCES] = sources
    if topic_partitions:
        props[names.TOPIC_PARTITIONS] = str(topic_partitions)
    return props


def settle_sources(catalog: Catalog, relation: Any, changeset: str) -> None:
    """Recovery of an incremental commit judged committed by its intent: the upstream position
    it recorded as intended becomes the table's."""
    props = catalog.properties(relation)
    intended = props.get(names.SOURCES_INTENT)
    if intended and props.get(names.INTENT) == changeset and props.get(names.COMMITTED) != changeset:
        catalog.run(f"alter table {relation} set tblproperties "
                    f"({sql_string(names.SOURCES)} = {sql_string(intended)})")


def interrupted_swap(catalog: Catalog, changes_relation: Any, target_relation: Any) -> Optional[Any]:
    """The staged table a failed run had tagged and was renaming into the place of the old
    table it had just dropped, if any: its rows are committed and must be put in place."""
    changeset = catalog.properties(changes_relation).get(names.CHANGESET_ID)
    for suffix in names.STAGED_SUFFIXES.values():
        staged = catalog.sibling(target_relation, f"{target_relation.identifier}{suffix}")
        if staged is not None and changeset and catalog.properties(staged).get(names.COMMITTED) == changeset:
            return staged
    return None
