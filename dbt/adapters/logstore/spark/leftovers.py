"""Relations of the adapter's own that a killed run left half-made.

A process killed inside `CREATE TABLE ... AS SELECT` leaves the table's directory in the
warehouse with no metastore entry, and Spark then refuses every later CREATE of that name with
LOCATION_ALREADY_EXISTS: the model would be stuck until someone deleted the directory by hand.
So the adapter creates its relations (staged rows, change sets, merged rows, landed upstream
changes, the run lock) through `create_or_clear`: on that error it removes the
directory and creates the relation again.

Only what is certainly ours is removed: the relation's name carries names.RELATION_MARK, the
error is LOCATION_ALREADY_EXISTS for that very name, and the directory Spark names ends in that
name.

A killed INSERT leaves something else: the output its finished tasks committed to the table's
`_temporary` directory (Hadoop's FileOutputCommitter, algorithm 1), which no reader sees. But
the next INSERT into that table merges *every* task output under `_temporary/0` at its job
commit, so the killed run's rows would appear with the next run's, after recovery had judged
(rightly, by the row count) that the killed commit never happened. Recovery of a run that died
in its table commit therefore removes `<table>/_temporary` before it counts the rows: it holds
the model's lock, so no other write of the table is under way.

The removal needs no file-system access from dbt (the thrift server's warehouse may be
elsewhere): a managed table is pointed at the directory and dropped, and a managed table's
drop deletes its location.
"""
from __future__ import annotations

import re
from typing import Any, List, Optional, Set

from dbt.adapters.logstore.spark.catalog import Catalog, logger
from dbt.adapters.logstore.spark.json_images import sql_string
from dbt.adapters.logstore.names import GC_SUFFIX, RELATION_MARK, UNCOMMITTED_SUFFIX

_LOCATION = re.compile(r"LOCATION_ALREADY_EXISTS.*?location '([^']+)'", re.S)


def orphan_location(error_text: str, identifier: str) -> Optional[str]:
    """The leftover directory of our relation `identifier` that `error_text` (a failed CREATE)
    names, or None when the error is anything else or the directory is not certainly ours."""
    match = _LOCATION.search(error_text)
    if match is None or RELATION_MARK not in identifier:
        return None
    location = match.group(1)
    if location.rstrip("/").rsplit("/", 1)[-1].lower() != identifier.lower():
        return None
    return location


def uncommitted_output(table_location: str) -> str:
    """Where a killed INSERT into the table at `table_location` left its uncommitted output."""
    return table_location.rstrip("/") + "/_temporary"


def location_of(describe_rows) -> Optional[str]:
    """The table's location from the rows of `describe table extended`."""
    for row in describe_rows:
        if row[0] is not None and str(row[0]).strip() == "Location" and row[1]:
            return str(row[1]).strip()
    return None


def removal_sql(gc_relation: str, location: str) -> List[str]:
    """Statements that delete `location` through the metastore. A run killed among them leaves
    `gc_relation` pointing at the directory; the first statement of the next removal drops it,
    and the directory with it."""
    create = f"create table {gc_relation} (removed int) using parquet"
    return [
        drop_sql(gc_relation),
        create,
        f"alter table {gc_relation} set location {sql_string(location)}",
        drop_sql(gc_relation),  # deletes `location`
        create,  # at its own (empty) directory again, so that its drop removes that too
        drop_sql(gc_relation),
    ]


def own_relations(catalog: Catalog, target_relation: Any, cached: Optional[List[Any]] = None) -> Set[str]:
    """The identifiers (lower case) of the model's own relations (names.RELATION_MARK) in its
    schema, from one listing: a run asks once instead of dropping each name it might have left.

    `cached`: dbt's relations of the schema as this dbt invocation listed them when it began,
    given when the run found its lock free; then nothing is listed now. A run of the model
    that began after that listing held the lock, so it ended before this one took it, and
    dropped what it staged (one whose drop failed as well leaves a table whose name this run's
    CREATE then refuses, loudly, for the next invocation to clear). A lock taken over from a
    run that never ended is the case the listing is for."""
    prefix = f"{target_relation.identifier}{RELATION_MARK}".replace("`", "")
    if cached is not None:
        return {str(r.identifier).lower() for r in cached
                if str(r.identifier).lower().startswith(prefix.lower())}
    rows = catalog.rows(f"show tables in {target_relation.schema} like {sql_string(prefix + '*')}")
    # (the listing also holds the session's temporary views, whatever their schema)
    return {str(row[1]).lower() for row in rows if len(row) < 3 or str(row[2]).lower() != "true"}


def drop_sql(relation: Any, kind: str = "table") -> str:
    """Drop one of the adapter's own relations, and a table's files with it. PURGE, because
    Iceberg's session catalog (SparkSessionCatalog) drops a table that is not Iceberg's from
    the metastore only and leaves its directory, whose next CREATE Spark then refuses
    (LOCATION_ALREADY_EXISTS); a purge it hands to Spark's own catalog, which deletes it."""
    return f"drop {kind} if exists {relation}" + (" purge" if kind == "table" else "")


def drop_landed(catalog: Catalog, landed: List[str]) -> None:
    """Drop a model run's landed upstream changes ("<kind> <name>"), read and done; one that
    cannot be dropped is a warning (the model's run stands)."""
    for raw in landed:
        kind, _, name = raw.rpartition(" ")
        try:
            catalog.run(drop_sql(name, kind or "table"))
        except Exception as exc:
            logger.warning(f"could not drop {raw}: {exc}")


def create_or_clear(catalog: Catalog, relation: Any, sql: str) -> None:
    """Create one of the adapter's own relations with `sql`. If a killed run left that
    relation's directory without a metastore entry, remove it and create again, saying what
    was removed."""
    try:
        catalog.run(sql)
    except Exception as exc:
        identifier = getattr(relation, "identifier", None) or str(relation).rsplit(".", 1)[-1]
        location = orphan_location(str(exc), identifier.strip("`"))
        if location is None:
            raise
        logger.info(f"logstore: removing {location}, left behind by a run that was killed while "
                    f"creating {relation} (it has no metastore entry)")
        remove_directory(catalog, relation, location)
        catalog.run(sql)


def remove_directory(catalog: Catalog, relation: Any, location: str) -> None:
    """Delete `location` through the metastore, with a scratch table named after `relation`."""
    gc = f"{relation}{GC_SUFFIX}" if "`" not in str(relation) else str(relation)[:-1] + GC_SUFFIX + "`"
    for statement in removal_sql(gc, location):
        catalog.run(statement)


def remove_uncommitted_output(catalog: Catalog, target_relation: Any,
                              step: str = "in the table commit") -> None:
    """Remove what a killed INSERT into the model's table left for the next INSERT's job
    commit to pick up; `step`: where the failed run died (table_commit.failed_step)."""
    location = location_of(catalog.rows(f"describe table extended {target_relation}"))
    if location is None:
        return  # not a file-based table (nothing of a killed job can surface)
    scratch = uncommitted_output(location)
    logger.info(f"logstore: removing {scratch}, if present: the uncommitted output of the "
                f"run that failed {step} of {target_relation}")
    own = target_relation.incorporate(path={"identifier": target_relation.identifier + UNCOMMITTED_SUFFIX})
    remove_directory(catalog, own, scratch)
