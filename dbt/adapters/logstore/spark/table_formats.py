"""What the commit protocol needs of a table format with its own history (Iceberg, Delta):
whether a rebuild can replace the table in one atomic commit (keeping its history), the
format's version a commit made (Iceberg snapshot id, Delta version) and how to read the table as
of one. Plain tables (parquet, orc, ...) have none of these: they are rebuilt by swap
(table_commit) and read as they are."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from dbt.adapters.logstore.spark.catalog import Catalog

# formats whose `create or replace table ... as` is one commit that keeps the table's history
VERSIONED = ("iceberg", "delta")
# Delta commits that change no rows: a version after one of them holds the rows of the one
# before, so the version a data commit made is the newest that is not one of these.
_DELTA_METADATA_ONLY = ("SET TBLPROPERTIES", "UNSET TBLPROPERTIES", "ADD COLUMNS",
                        "CHANGE COLUMN", "REPLACE COLUMNS", "RENAME COLUMN", "DROP COLUMNS")
_VERSION_STATE = "version:"
# a run makes at most a few of them after its data commit (intent, tag, mirrored snapshot)
_DELTA_HISTORY_LOOKBACK = 20


def format_of(relation: Any, catalog: Optional[Catalog] = None) -> Optional[str]:
    """The versioned format of an existing table, as dbt-spark's relation lists it or, when
    the relation says nothing (one dbt cached from a create), as `catalog` reads its
    properties; else None."""
    if relation is None:
        return None
    # Iceberg's session catalog lists its tables as Hive's (`Provider: hive`), with Iceberg's
    # own metastore parameter among their properties
    information = str(getattr(relation, "information", None) or "").lower()
    if getattr(relation, "is_iceberg", False) or "table_type=iceberg" in information:
        return "iceberg"
    if getattr(relation, "is_delta", False):
        return "delta"
    if catalog is not None and relation.is_table and not information:
        return format_of_properties(catalog.properties(relation))
    return None


def format_of_properties(props: Mapping[str, str]) -> Optional[str]:
    """The versioned format a table's properties (`SHOW TBLPROPERTIES`) show, else None."""
    if props.get("format", "").startswith("iceberg"):
        return "iceberg"
    if any(key.startswith("delta.") for key in props):
        return "delta"
    return None


def replaces_in_place(file_format: Optional[str], old_relation: Any,
                      catalog: Optional[Catalog] = None) -> bool:
    """Whether a rebuild into `file_format` is one `create or replace table ... as`: the model's
    format is versioned and there is no table yet or a table of that format. (A view, or a
    table changing format, is swapped: Iceberg and Delta replace only a table of their own.)
    Its staged rows are then a plain parquet table of the adapter's own."""
    file_format = (file_format or "").lower()
    if file_format not in VERSIONED:
        return False
    return old_relation is None or (old_relation.is_table and format_of(old_relation, catalog) == file_format)


def committed_version(catalog: Catalog, relation: Any,
                      props: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The version of the table's newest data commit (Iceberg: the current snapshot id; Delta:
    the newest version that changed rows), or None for a table without versions. Read under
    the model's run lock, right after the commit, so it is this run's. `props`: the table's
    properties, if already read."""
    props = catalog.properties(relation) if props is None else props
    table_format = format_of_properties(props)
    if table_format == "iceberg":
        snapshot = props.get("current-snapshot-id")
        return snapshot if snapshot and snapshot != "none" else None
    if table_format != "delta":
        return None
    for row in catalog.rows(f"describe history {relation} limit {_DELTA_HISTORY_LOOKBACK}"):
        if str(row["operation"]) not in _DELTA_METADATA_ONLY:  # newest first
            return str(row["version"])
    return None


def table_state(catalog: Catalog, relation: Any, props: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """What a commit changes, to tell afterwards whether it took effect: an Iceberg or Delta
    table's data version (`version:<v>`), else a fingerprint of the data files the table reads
    (`files:<sha-256 of their paths>`; every insert or overwrite writes new files). None when
    neither can be read (a table Spark does not read through files). `props`: the table's
    properties, if already read."""
    version = committed_version(catalog, relation, props)
    if version is not None:
        return _VERSION_STATE + version
    try:
        rows = catalog.rows(f"select sha2(concat_ws(',', sort_array(collect_set(_metadata.file_path))), 256) "
                            f"from {relation}")
    except Exception:  # not a file source table: the row counts alone judge
        return None
    return f"files:{rows[0][0]}"


def is_version_state(state: Optional[str]) -> bool:
    """Whether a table state (table_state) is a format version: a table whose version moved
    took its whole commit (Iceberg and Delta commit atomically)."""
    return bool(state) and state.startswith(_VERSION_STATE)


def as_of(relation: Any, version: Optional[str]) -> str:
    """The table, or its rows as of the format's `version` (time travel) when one is known."""
    return f"{relation} version as of {int(version)}" if version else str(relation)
