"""What the commit protocol needs of a table format with its own history (Iceberg, Delta):
whether a rebuild can replace the table in one atomic commit (keeping its history), the
format's version a commit made (Iceberg snapshot id, Delta version) and how to read the table as
of one. Plain tables (parquet, orc, ...) have none of these: they are rebuilt by swap
(table_commit) and read as they are."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from dbt.adapters.logstore.catalog import Catalog

# formats whose `create or replace table ... as` is one commit that keeps the table's history
VERSIONED = ("iceberg", "delta")
# Delta commits that change no rows: a version after one of them holds the rows of the one
# before, so the version a data commit made is the newest that is not one of these.
_DELTA_METADATA_ONLY = ("SET TBLPROPERTIES", "UNSET TBLPROPERTIES", "ADD COLUMNS",
                        "CHANGE COLUMN", "REPLACE COLUMNS", "RENAME COLUMN", "DROP COLUMNS")
# a run makes at most a few of them after its data commit (intent, tag, mirrored snapshot)
_DELTA_HISTORY_LOOKBACK = 20


def format_of(relation: Any) -> Optional[str]:
    """The versioned format of an existing table, as dbt-spark's relation lists it, else None."""
    if relation is None:
        return None
    # Iceberg's session catalog lists its tables as Hive's (`Provider: hive`), with Iceberg's
    # own metastore parameter among their properties
    information = str(getattr(relation, "information", None) or "").lower()
    if getattr(relation, "is_iceberg", False) or "table_type=iceberg" in information:
        return "iceberg"
    if getattr(relation, "is_delta", False):
        return "delta"
    return None


def replaces_in_place(file_format: Optional[str], old_relation: Any) -> bool:
    """Whether a rebuild into `file_format` is one `create or replace table ... as`: the model's
    format is versioned and there is no table yet or a table of that format. (A view, or a
    table changing format, is swapped: Iceberg and Delta replace only a table of their own.)
    Its staged rows are then a plain parquet table of the adapter's own."""
    file_format = (file_format or "").lower()
    if file_format not in VERSIONED:
        return False
    return old_relation is None or (old_relation.is_table and format_of(old_relation) == file_format)


def committed_version(catalog: Catalog, relation: Any,
                      props: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The version of the table's newest data commit (Iceberg: the current snapshot id; Delta:
    the newest version that changed rows), or None for a table without versions. Read under
    the model's run lock, right after the commit, so it is this run's. `props`: the table's
    properties, if already read."""
    props = catalog.properties(relation) if props is None else props
    if props.get("format", "").startswith("iceberg"):
        snapshot = props.get("current-snapshot-id")
        return snapshot if snapshot and snapshot != "none" else None
    if not any(key.startswith("delta.") for key in props):
        return None
    for row in catalog.rows(f"describe history {relation} limit {_DELTA_HISTORY_LOOKBACK}"):
        if str(row["operation"]) not in _DELTA_METADATA_ONLY:  # newest first
            return str(row["version"])
    return None


def as_of(relation: Any, version: Optional[str]) -> str:
    """The table, or its rows as of the format's `version` (time travel) when one is known."""
    return f"{relation} version as of {int(version)}" if version else str(relation)
