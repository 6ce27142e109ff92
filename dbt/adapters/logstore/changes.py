"""Change computation: Spark SQL that turns "rows before" and "rows after" a commit into the
commit's change set, so the diff runs as joins inside Spark and never in the driver.

Every change set has the same four columns:
  __logstore_op      'c' insert, 'u' update, 'd' delete
  __logstore_key     JSON object of the unique_key columns, or NULL for keyless models
  __logstore_before  JSON image of the old row (NULL for inserts)
  __logstore_after   JSON image of the new row (NULL for deletes)

Two rows are "the same" when their JSON images are equal, so what is compared is exactly what
a consumer would see; a changed column type or column set therefore shows up as a change.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from dbt.adapters.logstore.encoding import json_object_sql, json_struct_sql, quote_identifier

OP, KEY, BEFORE, AFTER = "__logstore_op", "__logstore_key", "__logstore_before", "__logstore_after"
CHANGE_COLUMNS = (OP, KEY, BEFORE, AFTER)
_IMG, _PRESENT = "__logstore_img", "__logstore_present"


@dataclass(frozen=True)
class ChangeInput:
    """One side of a diff: a relation (or subquery) and its column names."""

    relation: str
    columns: Sequence[str]


def scoped_to(old: ChangeInput, new: ChangeInput, scope_by: Sequence[str]) -> ChangeInput:
    """Restrict the old rows to those the new rows replace: the partitions an insert_overwrite
    rewrites, or the keys an upsert touches."""
    if not scope_by:
        return old
    on = " and ".join(
        f"o.{quote_identifier(p)} <=> s.{quote_identifier(p)}" for p in scope_by
    )
    cols = ", ".join(quote_identifier(p) for p in scope_by)
    return ChangeInput(
        relation=f"(select o.* from {old.relation} o left semi join "
                 f"(select distinct {cols} from {new.relation}) s on {on})",
        columns=old.columns,
    )


def inserts_sql(new: ChangeInput, unique_key: Sequence[str] = ()) -> str:
    """Every new row as an insert (first build, incremental append)."""
    key = json_object_sql(unique_key) if unique_key else "cast(null as string)"
    return (
        f"select 'c' as {OP}, {key} as {KEY}, cast(null as string) as {BEFORE}, "
        f"{json_object_sql(new.columns)} as {AFTER} from {new.relation}"
    )


def keyed_diff_sql(old: ChangeInput, new: ChangeInput, unique_key: Sequence[str]) -> str:
    """Insert, update (before and after) or delete per key; unchanged keys produce nothing."""
    keys = [quote_identifier(k) for k in unique_key]

    def side(inp: ChangeInput) -> str:
        return (f"select {', '.join(keys)}, {json_object_sql(inp.columns)} as {_IMG}, "
                f"true as {_PRESENT} from {inp.relation}")

    # the key comes from whichever side holds the row (both do for updates)
    key = json_struct_sql(
        [(k, f"case when n.{_PRESENT} then n.{q} else o.{q} end") for k, q in zip(unique_key, keys)]
    )
    on = " and ".join(f"o.{q} <=> n.{q}" for q in keys)
    return (
        f"select case when o.{_PRESENT} is null then 'c' "
        f"when n.{_PRESENT} is null then 'd' else 'u' end as {OP}, "
        f"{key} as {KEY}, "
        f"o.{_IMG} as {BEFORE}, n.{_IMG} as {AFTER} "
        f"from ({side(old)}) o full outer join ({side(new)}) n on {on} "
        f"where not (o.{_IMG} <=> n.{_IMG})"
    )


def keyless_diff_sql(old: ChangeInput, new: ChangeInput) -> str:
    """Whole-row multiset difference: rows that left are deletes, rows that came are inserts."""
    old_img = f"select {json_object_sql(old.columns)} as {_IMG} from {old.relation}"
    new_img = f"select {json_object_sql(new.columns)} as {_IMG} from {new.relation}"
    return (
        f"select 'd' as {OP}, cast(null as string) as {KEY}, {_IMG} as {BEFORE}, "
        f"cast(null as string) as {AFTER} from ({old_img} except all {new_img}) "
        f"union all "
        f"select 'c' as {OP}, cast(null as string) as {KEY}, cast(null as string) as {BEFORE}, "
        f"{_IMG} as {AFTER} from ({new_img} except all {old_img})"
    )


def change_set_sql(
    new: ChangeInput,
    old: Optional[ChangeInput],
    unique_key: Sequence[str] = (),
    scope_by: Sequence[str] = (),
    ignore_delete: bool = False,
    scope_source: Optional[ChangeInput] = None,
) -> str:
    """The change set from `old` to `new`; with no old rows every new row is an insert.
    `scope_by` limits the old rows to those sharing these columns' values with new rows (or
    with `scope_source`: the rows a merge was given, deletes included)."""
    if old is None:
        sql = inserts_sql(new, unique_key)
    elif unique_key:
        sql = keyed_diff_sql(scoped_to(old, scope_source or new, scope_by), new, unique_key)
    else:
        sql = keyless_diff_sql(scoped_to(old, scope_source or new, scope_by), new)
    if ignore_delete:  # log.ignore-delete: the log never carries deletes
        sql = f"select * from ({sql}) where {OP} <> 'd'"
    return sql


def upserted_rows_sql(old: ChangeInput, new: ChangeInput, unique_key: Sequence[str],
                      replaced: Optional[str] = None) -> str:
    """The table's rows after upserting `new` into `old` by key (for file formats without
    MERGE): old rows whose key is not in `new` (or in `replaced`: the rows a merge was given,
    deletes included), then every new row, in the old column order."""
    on = " and ".join(f"o.{quote_identifier(k)} <=> n.{quote_identifier(k)}" for k in unique_key)
    cols = ", ".join(quote_identifier(c) for c in old.columns)
    return (
        f"select o.* from {old.relation} o left anti join {replaced or new.relation} n on {on} "
        f"union all select {cols} from {new.relation}"
    )


# Bytes a record needs beyond its key and images: envelope, headers, batch framing.
RECORD_OVERHEAD = 1024


def largest_change_sql(changes_relation: str) -> str:
    """The key and byte size of the largest change (key plus images)."""
    size = (f"coalesce(octet_length({KEY}), 0) + coalesce(octet_length({BEFORE}), 0) + "
            f"coalesce(octet_length({AFTER}), 0)")
    return f"select {KEY}, {size} as size from {changes_relation} order by size desc limit 1"


def non_insert_count_sql(changes_relation: str) -> str:
    return f"select count(*) from {changes_relation} where {OP} <> 'c'"


def duplicate_keys_sql(relation: str, unique_key: Sequence[str], limit: int = 3) -> str:
    """Up to `limit` keys that occur more than once (a keyed log needs one row per key)."""
    keys = ", ".join(quote_identifier(k) for k in unique_key)
    return (
        f"select {json_object_sql(unique_key)} as k, count(*) as n from {relation} "
        f"group by {keys} having count(*) > 1 limit {limit}"
    )


def existing_keys_sql(new_relation: str, old_relation: str, unique_key: Sequence[str],
                      limit: int = 3) -> str:
    """Up to `limit` keys of the new rows that the table already holds (append must not
    repeat a key of a keyed log)."""
    on = " and ".join(f"n.{quote_identifier(k)} <=> o.{quote_identifier(k)}" for k in unique_key)
    return (
        f"select {json_object_sql(unique_key, alias='n')} as k, 2 as n from {new_relation} n "
        f"left semi join {old_relation} o on {on} limit {limit}"
    )
