"""Row images: Spark to_json SQL of a row, with the log's options."""
import dataclasses
import json
import re

import pytest

from dbt.adapters.logstore.spark.json_images import (
    DEFAULT_IMAGES,
    TIMESTAMP_ISO,
    JsonImages,
    json_object_sql,
    quote_identifier,
    sql_string,
)

# The default (SQL) timestamp standard, always rendered in UTC.
OPTIONS_SQL = (
    "map('ignoreNullFields', 'false', 'dateFormat', 'yyyy-MM-dd', "
    "'timestampFormat', 'yyyy-MM-dd HH:mm:ss.SSSSSSXXX', "
    "'timestampNTZFormat', 'yyyy-MM-dd HH:mm:ss.SSSSSS', 'timeZone', 'UTC')"
)


# --- quoting ------------------------------------------------------------------------------


@pytest.mark.parametrize("name,expected", [
    ("id", "`id`"),
    ("order id", "`order id`"),
    ("we`ird", "`we``ird`"),
    ("``", "``````"),
    ("select", "`select`"),
])
def test_quote_identifier(name, expected):
    assert quote_identifier(name) == expected


@pytest.mark.parametrize("value,expected", [
    ("abc", "'abc'"),
    ("it's", "'it\\'s'"),
    ("back\\slash", "'back\\\\slash'"),
    ("\\'", "'\\\\\\''"),  # backslash first, then the quote
    ("", "''"),
])
def test_sql_string_escapes(value, expected):
    assert sql_string(value) == expected


def test_sql_string_has_no_unescaped_inner_quote():
    literal = sql_string("a'b'c\\'")
    inner = literal[1:-1]
    # every quote inside is preceded by an odd number of backslashes
    for match in re.finditer("'", inner):
        backslashes = len(inner[:match.start()]) - len(inner[:match.start()].rstrip("\\"))
        assert backslashes % 2 == 1


# --- to_json SQL --------------------------------------------------------------------------


def test_json_options_keep_nulls():
    assert DEFAULT_IMAGES.options()["ignoreNullFields"] == "false"


def test_json_options_fix_the_zone_to_utc_whatever_the_session():
    for images in (JsonImages(), JsonImages(TIMESTAMP_ISO)):
        assert images.options()["timeZone"] == "UTC"


def test_timestamp_standards_differ_only_in_the_separator():
    sql, iso = JsonImages().options(), JsonImages(TIMESTAMP_ISO).options()
    assert sql["timestampFormat"] == "yyyy-MM-dd HH:mm:ss.SSSSSSXXX"
    assert iso["timestampFormat"] == "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"
    assert sql["timestampNTZFormat"] == "yyyy-MM-dd HH:mm:ss.SSSSSS"
    assert iso["timestampNTZFormat"] == "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"


def test_from_json_uses_the_writers_options():
    sql = JsonImages(TIMESTAMP_ISO).from_json_sql("value", "struct<a: int>")
    assert sql.startswith("from_json(value, 'struct<a: int>', map(")
    assert "yyyy-MM-dd\\'T\\'HH:mm:ss.SSSSSSXXX" in sql


def test_plain_decimals_cast_decimal_columns_to_text():
    sql = JsonImages(plain_decimals=True).object_sql(["id", "amount"], types=["int", "decimal(20,10)"])
    assert sql.startswith("concat('{\"id\":', substr(to_json(named_struct('v', `id`)")
    assert "trim(to_char(abs(`amount`), '9999999990.0000000000'))" in sql and sql.endswith(", '}')")
    plain = JsonImages(plain_decimals=True).object_sql(["n"], types=["decimal"])
    assert "to_char(abs(`n`), '9999999990')" in plain  # Spark's decimal is decimal(10,0)
    only_fraction = JsonImages(plain_decimals=True).object_sql(["f"], types=["decimal(4,4)"])
    assert "to_char(abs(`f`), '0.0000')" in only_fraction


def test_plain_decimals_without_decimal_columns_is_plain_to_json():
    images = JsonImages(plain_decimals=True)
    assert images.object_sql(["id"], types=["int"]) == DEFAULT_IMAGES.object_sql(["id"])


def test_json_object_sql_quotes_columns_in_order():
    sql = json_object_sql(["b", "a", "c"])
    assert sql == (
        "to_json(named_struct('b', `b`, 'a', `a`, 'c', `c`), " + OPTIONS_SQL + ")"
    )


def test_json_object_sql_with_alias():
    sql = json_object_sql(["id", "name"], alias="n")
    assert sql.startswith("to_json(named_struct('id', n.`id`, 'name', n.`name`), map(")


def test_json_object_sql_name_with_backtick_and_quote():
    sql = json_object_sql(["we`ird", "o'neil"])
    assert "'we`ird', `we``ird`" in sql
    assert "'o\\'neil', `o'neil`" in sql


def test_json_object_sql_includes_all_options():
    sql = json_object_sql(["x"])
    assert "'ignoreNullFields', 'false'" in sql
    assert "'dateFormat', 'yyyy-MM-dd'" in sql
    assert sql.endswith(OPTIONS_SQL + ")")
