"""The snapshot a table holds, from its properties: what a reader of the table may start from
(`logged_snapshot`, `readable_snapshot`: the hybrid read, logstore_changes) and what a model that
reads it as an input read (`input_snapshot`: commit/model_inputs.py). A leaf of commit/: the
properties are written by snapshots.py and table_commit.py."""
from __future__ import annotations

from typing import Mapping, Optional, Tuple

from dbt.adapters.logstore.names import COMMITTED, INTENT, MIRRORED, SNAPSHOT_ID, SNAPSHOT_TABLE_VERSION


class UnloggedCommit(ValueError):
    """A table holds a commit whose change set is not in its log yet."""


def logged_snapshot(props: Mapping[str, str], model: str) -> int:
    """The table's snapshot, when its rows are exactly what its log holds up to that snapshot
    (what a reader may start from); else UnloggedCommit saying how to settle it."""
    if props.get(COMMITTED) != props.get(MIRRORED):
        raise UnloggedCommit(
            f"'{model}' holds change set {props.get(COMMITTED)}, which is not in its log yet; run "
            f"it, or dbt run-operation logstore_recover --args '{{model: {model}}}', first.")
    return int(props.get(SNAPSHOT_ID) or 0)


def readable_snapshot(props: Mapping[str, str], model: str) -> Tuple[int, Optional[str]]:
    """The snapshot a hybrid read starts from and the table format's version holding its rows
    (None for a plain table, read as it is). A table with versions (Iceberg, Delta) is read as
    of the newest logged snapshot's version, so the read is exact even while a newer commit is
    on its way to the log; a plain table only when its rows are what its log holds."""
    version = props.get(SNAPSHOT_TABLE_VERSION) or None
    if version is None:
        return logged_snapshot(props, model), None
    return int(props.get(SNAPSHOT_ID) or 0), version


def input_snapshot(props: Optional[Mapping[str, str]]) -> Optional[int]:
    """The snapshot a table's rows are as a downstream build reads them; None when a commit is
    under way (an intent not committed yet), or committed but not logged yet, or the table is
    missing: which snapshot is then not known."""
    if props is None:
        return None
    intent = props.get(INTENT)
    if intent and intent != props.get(COMMITTED):
        return None
    if props.get(COMMITTED) != props.get(MIRRORED):
        return None
    return int(props.get(SNAPSHOT_ID) or 0)
