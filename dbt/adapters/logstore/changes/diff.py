"""Change computation: Spark SQL that turns "rows before" and "rows after" a commit into the
commit's change set, so the diff runs as joins inside Spark and never in the driver.

Every change set has the same four columns, OP, KEY, BEFORE and AFTER (names.CHANGE_COLUMNS,
where what they hold is said).

Rows are compared as typed structs when both sides have the same columns with the same types,
so JSON is rendered only for the rows that changed (rendering every row of both sides was most
of a keyed rebuild's cost). Otherwise (a changed column set or type, or a column whose Spark
equality is not JSON equality, see _NOT_TYPED) they are compared by their JSON images: what a
consumer would see, so a change of type or columns shows up as a change.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

from dbt.adapters.logstore.spark.json_images import (
    DEFAULT_IMAGES, JsonImages, json_object_sql, quote_identifier, row_struct_sql,
)
from dbt.adapters.logstore.names import (
    CHANGE_COLUMNS, SCRATCH_KEY as _KEY, SCRATCH_REPEATED as _REPEATED, SCRATCH_ROW as _ROW,
)

OP, KEY, BEFORE, AFTER = CHANGE_COLUMNS

# The op of a new row whose key another new row also has. Such rows exist only in a change set
# built with mark_duplicates, which the run checks and fails on before its table commit: they
# are never logged.
OP_DUPLICATE = "x"


@dataclass(frozen=True)
class ChangeInput:
    """One side of a diff: a relation (or subquery), its column names and, when known, their
    Spark types (same order)."""

    relation: str
    columns: Sequence[str]
    types: Sequence[str] = ()


def shaped_like(rows: ChangeInput, table_columns: Sequence[str]) -> ChangeInput:
    """`rows` as an insert by column name into a table of `table_columns` takes them: the
    table's columns that `rows` has, in the table's order (Spark's names are case-insensitive)."""
    position = {name.lower(): i for i, name in enumerate(rows.columns)}
    kept = [position[name.lower()] for name in table_columns if name.lower() in position]
    return ChangeInput(rows.relation, [rows.columns[i] for i in kept],
                       [rows.types[i] for i in kept] if rows.types else ())


# Types whose Spark equality is not JSON equality: maps and variants cannot be compared at all,
# and a collated string may call 'a' and 'A' equal where the log would show a change.
_NOT_TYPED = ("map<", "variant", "collate")


_FLOATING = ("float", "double")


def _normal(spark_type: str) -> str:
    return spark_type.lower().replace(" ", "")


def typed_comparison(old: ChangeInput, new: ChangeInput) -> bool:
    """Whether the rows of both sides can be compared as typed structs: same column names (case
    included, as the JSON field names are) and types, none of them in _NOT_TYPED, and no float
    or double inside an array or struct (Spark calls 0.0 and -0.0 equal, JSON does not; a
    top-level one is compared as text besides, see floating_columns)."""
    old_types = [_normal(t) for t in old.types]
    new_types = [_normal(t) for t in new.types]
    return (bool(new_types) and list(old.columns) == list(new.columns)
            and old_types == new_types and len(new_types) == len(new.columns)
            and not any(word in t for t in new_types for word in _NOT_TYPED)
            and not any("<" in t and any(f in t for f in _FLOATING) for t in new_types))


def _types_of(inp: ChangeInput, columns: Sequence[str]) -> List[str]:
    """The types of some of a side's columns ('' where unknown)."""
    types = dict(zip(inp.columns, inp.types))
    return [types.get(c, "") for c in columns]


def floating_columns(inp: ChangeInput) -> List[str]:
    """The columns of type float or double."""
    return [c for c, t in zip(inp.columns, inp.types) if _normal(t) in _FLOATING]


class _Rows:
    """How a diff holds a side's rows: typed structs (JSON rendered for changed rows only) or
    JSON images."""

    def __init__(self, typed: bool, images: JsonImages) -> None:
        self.typed, self.images = typed, images

    def row(self, inp: ChangeInput) -> str:
        return row_struct_sql(inp.columns) if self.typed else self.images.object_sql(inp.columns, types=inp.types)

    def key(self, inp: ChangeInput, unique_key: Sequence[str]) -> str:
        # one join column: equal structs (or JSON texts) are equal keys, nulls included
        if self.typed:
            return row_struct_sql(unique_key)
        return self.images.object_sql(unique_key, types=_types_of(inp, unique_key))

    def image(self, row: str, inp: ChangeInput, columns: Sequence[str]) -> str:
        """The JSON image of a typed row (`columns` of `inp`), or the image itself."""
        if not self.typed:
            return row
        if self.images.renders_by_field(_types_of(inp, columns)):
            fields = [(c, f"{row}.{quote_identifier(c)}") for c in columns]
            # a null row stays null (absent side of the diff), not an object of nulls
            return (f"case when {row} is null then cast(null as string) else "
                    f"{self.images.object_sql([f for f, _ in fields], alias=f'({row})', types=_types_of(inp, columns))} end")
        return self.images.to_json_sql(row)


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
        types=old.types,
    )


def inserts_sql(new: ChangeInput, unique_key: Sequence[str] = (),
                images: JsonImages = DEFAULT_IMAGES, mark_duplicates: bool = False) -> str:
    """Every new row as an insert (first build, incremental append). With `mark_duplicates` (and
    a key), a row whose key another row also has comes out as OP_DUPLICATE, counted in the same
    query (a first build's uniqueness check needs no query of its own)."""
    key = (images.object_sql(unique_key, types=_types_of(new, unique_key)) if unique_key
           else "cast(null as string)")
    op = "'c'"
    if mark_duplicates and unique_key:
        keys = ", ".join(quote_identifier(k) for k in unique_key)
        op = f"case when count(*) over (partition by {keys}) > 1 then '{OP_DUPLICATE}' else 'c' end"
    return (
        f"select {op} as {OP}, {key} as {KEY}, cast(null as string) as {BEFORE}, "
        f"{images.object_sql(new.columns, types=new.types)} as {AFTER} from {new.relation}"
    )


def keyed_diff_sql(old: ChangeInput, new: ChangeInput, unique_key: Sequence[str],
                   mark_duplicates: bool = False, images: JsonImages = DEFAULT_IMAGES) -> str:
    """Insert, update (before and after) or delete per key; unchanged keys produce nothing.
    With `mark_duplicates`, new rows whose key repeats come out as OP_DUPLICATE: the count
    runs within the join's own partitioning, so the uniqueness check costs no extra pass."""
    floating = floating_columns(new)
    # a float key would join 0.0 with -0.0, which are two keys in the log
    rows = _Rows(typed_comparison(old, new) and not set(unique_key) & set(floating), images)

    def side(inp: ChangeInput) -> str:
        return f"select {rows.key(inp, unique_key)} as {_KEY}, {rows.row(inp)} as {_ROW} from {inp.relation}"

    differs = f"not (o.{_ROW} <=> n.{_ROW})"
    if rows.typed:  # 0.0 and -0.0 are equal as values, not as JSON: compare their texts too
        for column in floating:
            o, n = (f"cast({alias}.{_ROW}.{quote_identifier(column)} as string)" for alias in "on")
            differs += f" or not ({o} <=> {n})"

    new_side, repeated = side(new), "false"
    if mark_duplicates:
        new_side = (f"select *, count(*) over (partition by {_KEY}) > 1 as {_REPEATED} "
                    f"from ({new_side})")
        repeated = f"n.{_REPEATED}"
    # a side's row is never null where the side has the key, so null means "absent"
    return (
        f"select case when {repeated} then '{OP_DUPLICATE}' when o.{_ROW} is null then 'c' "
        f"when n.{_ROW} is null then 'd' else 'u' end as {OP}, "
        f"{rows.image(f'coalesce(n.{_KEY}, o.{_KEY})', new, unique_key)} as {KEY}, "
        f"{rows.image(f'o.{_ROW}', old, old.columns)} as {BEFORE}, "
        f"{rows.image(f'n.{_ROW}', new, new.columns)} as {AFTER} "
        f"from ({side(old)}) o full outer join ({new_side}) n on o.{_KEY} = n.{_KEY} "
        f"where {differs} or {repeated}"
    )


def keyless_diff_sql(old: ChangeInput, new: ChangeInput, images: JsonImages = DEFAULT_IMAGES) -> str:
    """Whole-row multiset difference: rows that left are deletes, rows that came are inserts.
    (EXCEPT ALL calls 0.0 and -0.0 equal, so float columns keep it on JSON images.)"""
    rows = _Rows(typed_comparison(old, new) and not floating_columns(new), images)
    old_rows = f"select {rows.row(old)} as {_ROW} from {old.relation}"
    new_rows = f"select {rows.row(new)} as {_ROW} from {new.relation}"
    return (
        f"select 'd' as {OP}, cast(null as string) as {KEY}, {rows.image(_ROW, old, old.columns)} as {BEFORE}, "
        f"cast(null as string) as {AFTER} from ({old_rows} except all {new_rows}) "
        f"union all "
        f"select 'c' as {OP}, cast(null as string) as {KEY}, cast(null as string) as {BEFORE}, "
        f"{rows.image(_ROW, new, new.columns)} as {AFTER} from ({new_rows} except all {old_rows})"
    )


def change_set_sql(
    new: ChangeInput,
    old: Optional[ChangeInput],
    unique_key: Sequence[str] = (),
    scope_by: Sequence[str] = (),
    ignore_delete: bool = False,
    scope_source: Optional[ChangeInput] = None,
    mark_duplicates: bool = False,
    images: JsonImages = DEFAULT_IMAGES,
) -> str:
    """The change set from `old` to `new`; with no old rows every new row is an insert.
    `scope_by` limits the old rows to those sharing these columns' values with new rows (or
    with `scope_source`: the rows a merge was given, deletes included). `mark_duplicates`: see
    keyed_diff_sql and inserts_sql (keyed change sets only)."""
    if old is None:
        sql = inserts_sql(new, unique_key, images, mark_duplicates)
    elif unique_key:
        sql = keyed_diff_sql(scoped_to(old, scope_source or new, scope_by), new, unique_key,
                             mark_duplicates, images)
    else:
        sql = keyless_diff_sql(scoped_to(old, scope_source or new, scope_by), new, images)
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


# dbt's snapshot staging columns, which are not the snapshot's (dbt leaves them out of its MERGE)
SNAPSHOT_STAGING_ONLY = ("dbt_change_type", "dbt_unique_key")


def snapshot_rows_sql(old: ChangeInput, staging: ChangeInput, scd_id: str, valid_to: str,
                      valid_to_current: Optional[str] = None) -> str:
    """A dbt snapshot's rows after its run, as dbt's snapshot MERGE (snapshot_merge_sql) leaves
    them, for a staged table that is diffed and swapped in (file formats without MERGE, and the
    log's change set on every format): a current version (`valid_to` null, or
    `valid_to_current`) that the staging rows update or delete takes their `valid_to`; the
    staging rows to insert whose `scd_id` is new are added. Columns the staging rows bring (a
    source column added since) are added, null in the old rows, as dbt's create_columns does."""
    def staging_only(column: str) -> bool:
        return column.lower() in SNAPSHOT_STAGING_ONLY or column.lower().startswith("dbt_unique_key_")

    new_columns = [c for c in staging.columns if not staging_only(c) and c not in old.columns]
    columns = list(old.columns) + new_columns
    q = quote_identifier
    current = f"o.{q(valid_to)} is null"
    if valid_to_current:
        current = f"(o.{q(valid_to)} = {valid_to_current} or {current})"
    closed = (f"case when u.{q(scd_id)} is not null and {current} then u.{q(valid_to)} "
              f"else o.{q(valid_to)} end")
    old_rows = ", ".join(
        f"{closed} as {q(c)}" if c == valid_to else
        (f"o.{q(c)}" if c in old.columns else f"null as {q(c)}") for c in columns)
    changed = (f"select {q(scd_id)}, {q(valid_to)} from {staging.relation} "
               f"where dbt_change_type in ('update', 'delete')")
    inserted = ", ".join(q(c) if c in staging.columns else f"null as {q(c)}" for c in columns)
    return (f"select {old_rows} from {old.relation} o left join ({changed}) u "
            f"on o.{q(scd_id)} = u.{q(scd_id)} "
            f"union all select {inserted} from {staging.relation} s left anti join "
            f"{old.relation} x on x.{q(scd_id)} = s.{q(scd_id)} where s.dbt_change_type = 'insert'")


# Bytes a record needs beyond its key and images: envelope, headers, batch framing.
RECORD_OVERHEAD = 1024


@dataclass(frozen=True)
class ChangeSetSummary:
    """What the last checks before a table commit need of a change set, from one pass over it."""

    rows: int
    duplicates: int  # rows marked OP_DUPLICATE (a change set built with mark_duplicates)
    non_inserts: int  # updates and deletes
    largest_key: Optional[str]  # the key of the largest change
    largest_size: int  # its bytes: key plus images
    new_rows: Optional[int] = None  # the rows of the relation the change set leads to, if counted


def change_size_sql() -> str:
    """A change's bytes: its key and images (a record adds RECORD_OVERHEAD)."""
    return (f"coalesce(octet_length({KEY}), 0) + coalesce(octet_length({BEFORE}), 0) + "
            f"coalesce(octet_length({AFTER}), 0)")


def change_set_summary_sql(changes_relation: str, new_relation: Optional[str] = None) -> str:
    """One pass over a change set for ChangeSetSummary (one query, not one per check: each is a
    Spark job and a metastore lookup, a fixed cost of every run); with `new_relation`, its rows
    counted in the same query (the row count dbt reports, without a statement of its own)."""
    size = change_size_sql()
    counted = f", (select count(*) from {new_relation})" if new_relation else ""
    return (f"select count(*), count_if({OP} = '{OP_DUPLICATE}'), count_if({OP} <> 'c'), "
            f"max_by({KEY}, {size}), coalesce(max({size}), 0){counted} from {changes_relation}")


def change_set_summary(row: Sequence) -> ChangeSetSummary:
    rows, duplicates, non_inserts, largest_key, largest_size = row[:5]
    new_rows = int(row[5]) if len(row) > 5 and row[5] is not None else None
    return ChangeSetSummary(int(rows), int(duplicates or 0), int(non_inserts or 0),
                            largest_key, int(largest_size or 0), new_rows)


def marked_duplicates_sql(changes_relation: str, limit: int = 3) -> str:
    """Up to `limit` keys a change set built with mark_duplicates found repeated."""
    return (f"select distinct {KEY} from {changes_relation} "
            f"where {OP} = '{OP_DUPLICATE}' limit {limit}")


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
