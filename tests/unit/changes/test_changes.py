"""Change-set SQL (string level; no Spark)."""
import re

import pytest

from dbt.adapters.logstore.changes import diff as changes
from dbt.adapters.logstore.changes.diff import (
    RECORD_OVERHEAD,
    AFTER,
    BEFORE,
    CHANGE_COLUMNS,
    KEY,
    OP,
    ChangeInput,
    change_set_sql,
    duplicate_keys_sql,
    existing_keys_sql,
    inserts_sql,
    keyed_diff_sql,
    keyless_diff_sql,
    ChangeSetSummary,
    change_set_summary,
    change_set_summary_sql,
    scoped_to,
    upserted_rows_sql,
)
from dbt.adapters.logstore.spark.json_images import json_object_sql, row_struct_sql, to_json_sql

NEW = ChangeInput("db.orders__staged", ["id", "name", "amount"])
OLD = ChangeInput("db.orders", ["id", "name", "amount"])
TYPES = ["bigint", "string", "decimal(12,2)"]
T_NEW = ChangeInput(NEW.relation, NEW.columns, TYPES)
T_OLD = ChangeInput(OLD.relation, OLD.columns, TYPES)


def norm(sql: str) -> str:
    return re.sub(r"\s+", " ", sql).strip().lower()


def test_change_columns():
    assert CHANGE_COLUMNS == ("__logstore_op", "__logstore_key", "__logstore_before",
                              "__logstore_after")
    assert (OP, KEY, BEFORE, AFTER) == CHANGE_COLUMNS


# --- no old rows: inserts only ------------------------------------------------------------


def test_change_set_without_old_rows_is_inserts_only():
    sql = change_set_sql(NEW, None)
    assert sql == inserts_sql(NEW)
    assert sql.startswith("select 'c' as __logstore_op, cast(null as string) as __logstore_key, "
                          "cast(null as string) as __logstore_before, ")
    assert sql.endswith(f"{json_object_sql(NEW.columns)} as __logstore_after "
                        f"from db.orders__staged")
    low = norm(sql)
    for word in (" join ", " except ", " union ", "'d'", "'u'"):
        assert word not in low


def test_inserts_with_unique_key_render_key_json():
    sql = change_set_sql(NEW, None, unique_key=("id",))
    assert f"{json_object_sql(['id'])} as __logstore_key" in sql
    assert "cast(null as string) as __logstore_key" not in sql


def test_inserts_ignore_partition_by_without_old_rows():
    assert change_set_sql(NEW, None, (), ("dt",)) == inserts_sql(NEW)


# --- keyed diff ---------------------------------------------------------------------------


def test_keyed_diff_joins_on_one_key_column():
    sql = change_set_sql(NEW, OLD, unique_key=("tenant", "id"))
    assert sql == keyed_diff_sql(OLD, NEW, ("tenant", "id"))
    low = norm(sql)
    assert " full outer join " in low
    # one key column per side (a struct, or JSON text): equal keys match, nulls included
    assert " on o.__logstore_k = n.__logstore_k " in low
    assert " except " not in low


def test_keyed_diff_filters_unchanged_rows():
    sql = keyed_diff_sql(OLD, NEW, ("id",))
    assert sql.rstrip().endswith("where not (o.__logstore_row <=> n.__logstore_row) or false")


def test_keyed_diff_op_classification():
    low = norm(keyed_diff_sql(OLD, NEW, ("id",)))
    assert ("case when false then 'x' when o.__logstore_row is null then 'c' "
            "when n.__logstore_row is null then 'd' else 'u' end as __logstore_op") in low


def test_keyed_diff_without_types_compares_json_images():
    sql = keyed_diff_sql(OLD, NEW, ("id",))
    assert "o.__logstore_row as __logstore_before, n.__logstore_row as __logstore_after" in sql
    old_side = (f"(select {json_object_sql(['id'])} as __logstore_k, "
                f"{json_object_sql(OLD.columns)} as __logstore_row from db.orders) o")
    new_side = (f"(select {json_object_sql(['id'])} as __logstore_k, "
                f"{json_object_sql(NEW.columns)} as __logstore_row from db.orders__staged) n")
    assert old_side in sql
    assert new_side in sql
    assert sql.index(old_side) < sql.index("full outer join") < sql.index(new_side)
    assert "coalesce(n.__logstore_k, o.__logstore_k) as __logstore_key" in sql


def test_keyed_diff_with_same_types_compares_typed_rows_and_renders_json_after():
    sql = keyed_diff_sql(T_OLD, T_NEW, ("id",))
    assert (f"(select {row_struct_sql(['id'])} as __logstore_k, {row_struct_sql(OLD.columns)} "
            f"as __logstore_row from db.orders) o") in sql
    assert "where not (o.__logstore_row <=> n.__logstore_row)" in sql
    # JSON only for what comes out of the join: key, before and after
    assert f"{to_json_sql('coalesce(n.__logstore_k, o.__logstore_k)')} as __logstore_key" in sql
    assert f"{to_json_sql('o.__logstore_row')} as __logstore_before" in sql
    assert f"{to_json_sql('n.__logstore_row')} as __logstore_after" in sql
    assert sql.count("to_json(") == 3


@pytest.mark.parametrize("old_types,new_types,old_cols,typed", [
    (TYPES, TYPES, OLD.columns, True),
    (["BIGINT", "string", "decimal(12, 2)"], TYPES, OLD.columns, True),  # spelling only
    (["int", "string", "decimal(12,2)"], TYPES, OLD.columns, False),     # a type changed
    (TYPES, TYPES, ["id", "Name", "amount"], False),                     # a name's case changed
    (TYPES[:2], TYPES, OLD.columns[:2], False),                          # a column added
    ((), TYPES, OLD.columns, False),                                     # types unknown
    (["bigint", "map<string,int>", "string"], ["bigint", "map<string,int>", "string"],
     OLD.columns, False),                                                # maps cannot be compared
    (["bigint", "variant", "string"], ["bigint", "variant", "string"], OLD.columns, False),
    (["bigint", "string collate UTF8_LCASE", "string"], ["bigint", "string collate UTF8_LCASE", "string"],
     OLD.columns, False),                                                # 'a' = 'A' there
    (["bigint", "struct<m:map<string,int>>", "string"], ["bigint", "struct<m:map<string,int>>", "string"],
     OLD.columns, False),                                                # nested maps too
])
def test_typed_comparison(old_types, new_types, old_cols, typed):
    old = ChangeInput("o", old_cols, old_types)
    assert changes.typed_comparison(old, ChangeInput("n", NEW.columns, new_types)) is typed


def test_nested_floats_keep_the_json_path():
    nested = ["bigint", "array<double>", "struct<x:float>"]
    assert not changes.typed_comparison(ChangeInput("o", OLD.columns, nested),
                                        ChangeInput("n", NEW.columns, nested))


def test_top_level_floats_are_also_compared_as_text():
    floats = ["bigint", "string", "double"]
    sql = keyed_diff_sql(ChangeInput("o", OLD.columns, floats), ChangeInput("n", NEW.columns, floats), ("id",))
    assert changes.floating_columns(ChangeInput("n", NEW.columns, floats)) == ["amount"]
    assert ("where not (o.__logstore_row <=> n.__logstore_row) or not "
            "(cast(o.__logstore_row.`amount` as string) <=> cast(n.__logstore_row.`amount` as string))") in sql
    assert sql.count("to_json(") == 3  # still typed


def test_float_keys_and_keyless_floats_keep_the_json_path():
    floats = ["double", "string", "bigint"]  # the key `id` is a double here
    o, n = ChangeInput("o", OLD.columns, floats), ChangeInput("n", NEW.columns, floats)
    assert f"{json_object_sql(['id'])} as __logstore_k" in keyed_diff_sql(o, n, ("id",))
    assert "to_json(__logstore_row" not in keyless_diff_sql(o, n)
    assert keyless_diff_sql(o, n) == keyless_diff_sql(OLD, NEW).replace("db.orders__staged", "n").replace("db.orders", "o")


def test_scoping_keeps_the_types():
    assert scoped_to(T_OLD, T_NEW, ("id",)).types == TYPES


def test_keyed_diff_marks_repeated_new_keys_in_its_own_partitioning():
    sql = change_set_sql(T_NEW, T_OLD, ("id",), mark_duplicates=True)
    low = norm(sql)
    assert "count(*) over (partition by __logstore_k) > 1 as __logstore_repeated" in low
    assert low.startswith("select case when n.__logstore_repeated then 'x' ")
    assert low.endswith("or n.__logstore_repeated")
    # the count runs on the new side only
    assert low.index("full outer join") < low.index("count(*) over")


def test_mark_duplicates_without_old_rows_counts_keys_in_the_inserts():
    # a first build: its uniqueness check is a window of the change set's own query
    low = norm(change_set_sql(NEW, None, ("id", "day"), mark_duplicates=True))
    assert low.startswith("select case when count(*) over (partition by `id`, `day`) > 1 then 'x' else 'c' end "
                          "as __logstore_op, ")
    assert change_set_sql(NEW, None, ("id",)) == inserts_sql(NEW, ("id",))


def test_mark_duplicates_does_not_apply_without_a_key():
    assert change_set_sql(NEW, None, (), mark_duplicates=True) == inserts_sql(NEW, ())
    assert change_set_sql(NEW, OLD, (), mark_duplicates=True) == keyless_diff_sql(OLD, NEW)


def test_marked_duplicates_sql():
    assert norm(changes.marked_duplicates_sql("db.c")) == (
        "select distinct __logstore_key from db.c where __logstore_op = 'x' limit 3")


def test_keyed_diff_quotes_odd_key_names():
    sql = keyed_diff_sql(ChangeInput("o_rel", ["we`ird"]), ChangeInput("n_rel", ["we`ird"]),
                         ("we`ird",))
    assert "'we`ird', `we``ird`" in sql


# --- keyless diff -------------------------------------------------------------------------


def test_keyless_diff_uses_except_all_both_ways():
    sql = change_set_sql(NEW, OLD)
    assert sql == keyless_diff_sql(OLD, NEW)
    old_img = f"select {json_object_sql(OLD.columns)} as __logstore_row from db.orders"
    new_img = f"select {json_object_sql(NEW.columns)} as __logstore_row from db.orders__staged"
    assert f"({old_img} except all {new_img})" in sql
    assert f"({new_img} except all {old_img})" in sql
    assert norm(sql).count(" except all ") == 2
    assert " union all " in norm(sql)
    assert " join " not in norm(sql)


def test_keyless_diff_with_same_types_compares_typed_rows():
    sql = keyless_diff_sql(T_OLD, T_NEW)
    old_rows = f"select {row_struct_sql(OLD.columns)} as __logstore_row from db.orders"
    assert f"({old_rows} except all " in sql
    assert f"{to_json_sql('__logstore_row')} as __logstore_before" in sql
    assert f"{to_json_sql('__logstore_row')} as __logstore_after" in sql
    assert sql.count("to_json(") == 2


def test_keyless_diff_deletes_then_inserts():
    sql = keyless_diff_sql(OLD, NEW)
    deletes, inserts = sql.split(" union all ")
    assert deletes.startswith("select 'd' as __logstore_op, cast(null as string) as "
                              "__logstore_key, __logstore_row as __logstore_before, "
                              "cast(null as string) as __logstore_after")
    assert inserts.startswith("select 'c' as __logstore_op, cast(null as string) as "
                              "__logstore_key, cast(null as string) as __logstore_before, "
                              "__logstore_row as __logstore_after")
    # deletes: old minus new; inserts: new minus old
    old_at = lambda part: re.search(r"from db\.orders\b(?!__)", part).start()  # noqa: E731
    assert old_at(deletes) < deletes.index("from db.orders__staged")
    assert inserts.index("from db.orders__staged") < old_at(inserts)


# --- partition scoping --------------------------------------------------------------------


def test_scoped_to_without_partitions_is_identity():
    assert scoped_to(OLD, NEW, ()) is OLD


def test_scoped_to_uses_left_semi_join():
    scoped = scoped_to(OLD, NEW, ("dt", "region"))
    assert scoped.columns == OLD.columns
    assert scoped.relation == (
        "(select o.* from db.orders o left semi join "
        "(select distinct `dt`, `region` from db.orders__staged) s "
        "on o.`dt` <=> s.`dt` and o.`region` <=> s.`region`)"
    )


def test_change_set_with_partitions_scopes_old_side_keyless():
    sql = change_set_sql(NEW, OLD, (), ("dt",))
    assert norm(sql).count(" left semi join ") == 2  # old image appears in both except alls
    scoped = scoped_to(OLD, NEW, ("dt",)).relation
    assert f"from {scoped})" in sql
    assert "from db.orders)" not in sql  # the unscoped old relation is never read


def test_change_set_with_partitions_scopes_old_side_keyed():
    sql = change_set_sql(NEW, OLD, ("id",), ("dt",))
    scoped = scoped_to(OLD, NEW, ("dt",)).relation
    assert f"as __logstore_row from {scoped}) o full outer join" in sql
    assert "as __logstore_row from db.orders__staged) n" in sql
    assert norm(sql).count(" left semi join ") == 1


# --- uniqueness checks --------------------------------------------------------------------


def test_duplicate_keys_sql():
    sql = duplicate_keys_sql("db.staged", ("tenant", "id"))
    assert sql == (
        f"select {json_object_sql(['tenant', 'id'])} as k, count(*) as n from db.staged "
        "group by `tenant`, `id` having count(*) > 1 limit 3"
    )


def test_duplicate_keys_sql_limit():
    assert duplicate_keys_sql("r", ("id",), limit=10).endswith(" limit 10")


def test_existing_keys_sql():
    sql = existing_keys_sql("db.new", "db.old", ("tenant", "id"))
    assert sql == (
        f"select {json_object_sql(['tenant', 'id'], alias='n')} as k, 2 as n from db.new n "
        "left semi join db.old o on n.`tenant` <=> o.`tenant` and n.`id` <=> o.`id` limit 3"
    )


def test_existing_keys_sql_limit():
    assert existing_keys_sql("a", "b", ("id",), limit=1).endswith(" limit 1")


def test_sql_is_single_statement():
    for sql in (change_set_sql(NEW, None), change_set_sql(NEW, OLD), change_set_sql(NEW, OLD, ("id",)),
                duplicate_keys_sql("r", ("id",)), existing_keys_sql("a", "b", ("id",))):
        assert ";" not in sql
        assert sql.count("(") == sql.count(")")


@pytest.mark.parametrize("unique_key", [(), ("id",)])
def test_all_change_sets_project_the_four_columns(unique_key):
    for sql in (change_set_sql(NEW, None, unique_key), change_set_sql(NEW, OLD, unique_key)):
        for column in changes.CHANGE_COLUMNS:
            assert f"as {column}" in sql


# --- key scoping (merge) ------------------------------------------------------------------


def test_scoped_to_by_key_columns():
    scoped = scoped_to(OLD, NEW, ("tenant", "id"))
    assert scoped.relation == (
        "(select o.* from db.orders o left semi join "
        "(select distinct `tenant`, `id` from db.orders__staged) s "
        "on o.`tenant` <=> s.`tenant` and o.`id` <=> s.`id`)"
    )
    assert scoped.columns == OLD.columns


def test_scoped_to_quotes_odd_names():
    scoped = scoped_to(ChangeInput("o_rel", ["we`ird"]), ChangeInput("n_rel", ["we`ird"]),
                       ("we`ird",))
    assert "select distinct `we``ird` from n_rel" in scoped.relation
    assert "o.`we``ird` <=> s.`we``ird`" in scoped.relation


def test_merge_change_set_scopes_old_rows_to_the_new_keys():
    # merge: old rows of keys the new rows do not touch must not show up as deletes
    sql = change_set_sql(NEW, OLD, ("id",), ("id",))
    scoped = scoped_to(OLD, NEW, ("id",)).relation
    assert sql == keyed_diff_sql(scoped_to(OLD, NEW, ("id",)), NEW, ("id",))
    assert f"as __logstore_row from {scoped}) o full outer join" in sql
    assert "from db.orders)" not in sql  # the unscoped old table is never read


def test_scope_by_accepts_list():
    assert change_set_sql(NEW, OLD, ["id"], ["id"]) == change_set_sql(NEW, OLD, ("id",), ("id",))


# --- log.ignore-delete --------------------------------------------------------------------


@pytest.mark.parametrize("old,unique_key,scope_by", [
    (None, (), ()),
    (None, ("id",), ()),
    (OLD, (), ()),
    (OLD, ("id",), ()),
    (OLD, ("id",), ("id",)),
    (OLD, (), ("dt",)),
])
def test_ignore_delete_filters_deletes_of_every_change_set(old, unique_key, scope_by):
    inner = change_set_sql(NEW, old, unique_key, scope_by)
    sql = change_set_sql(NEW, old, unique_key, scope_by, ignore_delete=True)
    assert sql == f"select * from ({inner}) where __logstore_op <> 'd'"
    assert sql.count("(") == sql.count(")")
    assert ";" not in sql


@pytest.mark.parametrize("old,unique_key", [(None, ()), (OLD, ()), (OLD, ("id",))])
def test_without_ignore_delete_there_is_no_filter(old, unique_key):
    sql = change_set_sql(NEW, old, unique_key, ignore_delete=False)
    assert sql == change_set_sql(NEW, old, unique_key)
    assert "<> 'd'" not in sql
    assert not sql.startswith("select * from (")


def test_ignore_delete_keeps_the_four_columns():
    sql = change_set_sql(NEW, OLD, ("id",), ignore_delete=True)
    assert sql.startswith("select * from (")  # the inner projection passes through unchanged
    for column in CHANGE_COLUMNS:
        assert f"as {column}" in sql


# --- upsert by rewrite (file formats without MERGE) ----------------------------------------


def test_upserted_rows_sql_shape():
    sql = upserted_rows_sql(OLD, NEW, ("id",))
    assert sql == (
        "select o.* from db.orders o left anti join db.orders__staged n on o.`id` <=> n.`id` "
        "union all select `id`, `name`, `amount` from db.orders__staged"
    )


def test_upserted_rows_sql_composite_key_is_null_safe():
    sql = upserted_rows_sql(OLD, NEW, ("tenant", "id"))
    assert " on o.`tenant` <=> n.`tenant` and o.`id` <=> n.`id` union all " in sql
    assert " = " not in sql  # null keys match null keys, as in the change set


def test_upserted_rows_sql_selects_new_rows_in_the_old_column_order():
    new = ChangeInput("db.orders__staged", ["amount", "id", "name"])
    sql = upserted_rows_sql(OLD, new, ("id",))
    old_rows, new_rows = sql.split(" union all ")
    assert new_rows == "select `id`, `name`, `amount` from db.orders__staged"
    assert old_rows.startswith("select o.* from db.orders o left anti join")


def test_upserted_rows_sql_old_rows_first_then_every_new_row():
    sql = upserted_rows_sql(OLD, NEW, ("id",))
    old_rows, new_rows = sql.split(" union all ")
    assert " left anti join " in old_rows  # old rows whose key is not in the new rows
    assert " join " not in new_rows  # every new row, unfiltered
    assert norm(sql).count(" union all ") == 1
    assert " union " not in norm(sql).replace(" union all ", " ")  # never de-duplicates


def test_upserted_rows_sql_quotes_odd_names():
    old = ChangeInput("o_rel", ["we`ird", "o'neil"])
    new = ChangeInput("n_rel", ["we`ird", "o'neil"])
    sql = upserted_rows_sql(old, new, ("we`ird",))
    assert "o.`we``ird` <=> n.`we``ird`" in sql
    assert sql.endswith("select `we``ird`, `o'neil` from n_rel")


# --- the change set's summary (the last checks before the commit, one pass) ----------------


def test_change_set_summary_sql_is_one_pass_over_the_change_set():
    sql = change_set_summary_sql("db.orders__logstore_changes")
    assert sql.count("select") == 1 and sql.count("from") == 1
    assert sql.endswith("from db.orders__logstore_changes")
    assert "count_if(__logstore_op = 'x')" in sql  # marked duplicates
    assert "count_if(__logstore_op <> 'c')" in sql  # updates and deletes


def test_change_set_summary_counts_bytes_of_key_and_both_images_null_safe():
    sql = norm(change_set_summary_sql("c"))
    for column in (KEY, BEFORE, AFTER):
        # bytes, not characters; a missing image (insert, delete, keyless) counts 0, not NULL
        assert f"coalesce(octet_length({column}), 0)" in sql
    assert "char_length" not in sql
    assert f"max_by({KEY}," in sql  # the largest change's key, to name it in the error


def test_change_set_summary_of_an_empty_change_set():
    # Spark's aggregates over no rows: count 0, count_if 0, max_by / max NULL
    summary = change_set_summary((0, 0, 0, None, 0))
    assert summary == ChangeSetSummary(0, 0, 0, None, 0)
    assert change_set_summary((0, None, None, None, None)).largest_size == 0


def test_change_set_summary_reads_the_row_in_order():
    assert change_set_summary((10, 1, 4, '{"id":7}', 2048)) == ChangeSetSummary(10, 1, 4, '{"id":7}', 2048)


def test_record_overhead():
    assert RECORD_OVERHEAD == 1024
    assert 0 < RECORD_OVERHEAD < 1048576  # well below Kafka's default max.request.size


# --- new rows shaped like the table they are inserted into (on_schema_change) ------------------


def test_shaped_like_keeps_the_tables_columns_in_the_tables_order():
    staged = ChangeInput("db.t__logstore_new", ["tag", "ID", "added"], ["string", "bigint", "string"])
    shaped = changes.shaped_like(staged, ["id", "tag"])  # 'ignore' left `added` out of the table
    assert shaped == ChangeInput("db.t__logstore_new", ["ID", "tag"], ["bigint", "string"])


def test_the_change_set_of_shaped_rows_renders_only_the_tables_columns():
    staged = ChangeInput("db.t__logstore_new", ["id", "tag", "added"], ["bigint", "string", "string"])
    sql = change_set_sql(changes.shaped_like(staged, ["id", "tag"]), None, ())
    assert "`added`" not in sql and "`tag`" in sql and "db.t__logstore_new" in sql


def test_a_snapshots_rows_after_its_run_are_what_its_merge_leaves():
    from dbt.adapters.logstore.changes.diff import snapshot_rows_sql

    old = ChangeInput("s.h", ["id", "dbt_scd_id", "dbt_valid_from", "dbt_valid_to"])
    staging = ChangeInput("s.h__dbt_tmp", ["id", "tier", "dbt_change_type", "dbt_unique_key",
                                           "dbt_scd_id", "dbt_valid_from", "dbt_valid_to"])
    sql = snapshot_rows_sql(old, staging, "dbt_scd_id", "dbt_valid_to", "to_date('9999-12-31')")
    kept, added = sql.split(" union all ")
    # a current version updated or deleted by the staging rows takes their valid_to
    assert ("case when u.`dbt_scd_id` is not null and (o.`dbt_valid_to` = to_date('9999-12-31') "
            "or o.`dbt_valid_to` is null) then u.`dbt_valid_to` else o.`dbt_valid_to` end") in kept
    assert "where dbt_change_type in ('update', 'delete')" in kept
    assert "null as `tier`" in kept  # a source column added since: null in the old versions
    # new versions whose scd id is not there yet, in the table's column order
    assert added.startswith("select `id`, `dbt_scd_id`, `dbt_valid_from`, `dbt_valid_to`, `tier` from s.h__dbt_tmp s left anti join s.h x")
    assert added.endswith("where s.dbt_change_type = 'insert'")
    assert "`dbt_unique_key`" not in sql and "`dbt_change_type`" not in sql  # staging's own columns


def test_the_staged_rows_are_counted_by_the_change_sets_summary_query():
    # the row count dbt reports comes with the checks' query, not a statement of its own
    sql = change_set_summary_sql("db.orders__logstore_changes", "db.orders__logstore_new")
    assert "(select count(*) from db.orders__logstore_new)" in sql
    assert sql.endswith("from db.orders__logstore_changes")
    assert change_set_summary((3, 0, 1, "k", 40, 200)).new_rows == 200
    assert change_set_summary((3, 0, 1, "k", 40)).new_rows is None  # not asked
