"""Record encoding: Spark to_json SQL and the Debezium-style envelope."""
import json
import re

import pytest

from dbt.adapters.logstore.__version__ import version
from dbt.adapters.logstore.encoding import (
    JSON_OPTIONS,
    OP_DELETE,
    OP_INSERT,
    OP_UPDATE,
    EnvelopeWriter,
    json_object_sql,
    json_struct_sql,
    key_bytes,
    quote_identifier,
    sql_string,
)

OPTIONS_SQL = (
    "map('ignoreNullFields', 'false', 'dateFormat', 'yyyy-MM-dd', "
    "'timestampFormat', 'yyyy-MM-dd\\'T\\'HH:mm:ss.SSSSSSXXX', "
    "'timestampNTZFormat', 'yyyy-MM-dd\\'T\\'HH:mm:ss.SSSSSS')"
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
    assert JSON_OPTIONS["ignoreNullFields"] == "false"


def test_json_struct_sql_shape():
    sql = json_struct_sql([("id", "o.`id`"), ("amount", "cast(x as decimal(10,2))")])
    assert sql == (
        "to_json(named_struct('id', o.`id`, 'amount', cast(x as decimal(10,2))), "
        + OPTIONS_SQL + ")"
    )


def test_json_struct_sql_escapes_field_names():
    sql = json_struct_sql([("it's", "`it's`")])
    assert sql.startswith("to_json(named_struct('it\\'s', `it's`), map(")


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


# --- envelope ------------------------------------------------------------------------------

TS = 1714557600123


@pytest.fixture
def writer():
    return EnvelopeWriter(schema="analytics", table="orders", ts_ms=TS)


def test_envelope_insert(writer):
    value = writer.value(OP_INSERT, None, '{"id":1,"name":"a"}')
    assert isinstance(value, bytes)
    doc = json.loads(value)
    assert list(doc) == ["before", "after", "op", "ts_ms", "source"]
    assert doc["before"] is None
    assert doc["after"] == {"id": 1, "name": "a"}
    assert doc["op"] == "c"
    assert doc["ts_ms"] == TS


def test_envelope_update(writer):
    doc = json.loads(writer.value(OP_UPDATE, '{"id":1,"v":null}', '{"id":1,"v":2}'))
    assert doc["before"] == {"id": 1, "v": None}
    assert doc["after"] == {"id": 1, "v": 2}
    assert doc["op"] == "u"


def test_envelope_delete(writer):
    doc = json.loads(writer.value(OP_DELETE, '{"id":1}', None))
    assert doc["before"] == {"id": 1}
    assert doc["after"] is None
    assert doc["op"] == "d"


def test_envelope_source(writer):
    doc = json.loads(writer.value(OP_INSERT, None, "{}"))
    assert doc["source"] == {
        "connector": "dbt-logstore",
        "version": version,
        "db": "analytics",
        "table": "orders",
        "ts_ms": TS,
    }


def test_envelope_source_escapes_names():
    writer = EnvelopeWriter(schema='sch"ema', table="ta\\ble", ts_ms=1)
    doc = json.loads(writer.value(OP_INSERT, None, "{}"))
    assert doc["source"]["db"] == 'sch"ema'
    assert doc["source"]["table"] == "ta\\ble"


def test_envelope_keeps_decimal_digits(writer):
    value = writer.value(OP_INSERT, None, '{"amount":12345678901234567890.120}')
    assert b'"after":{"amount":12345678901234567890.120}' in value


def test_envelope_is_compact_and_deterministic(writer):
    a = writer.value(OP_INSERT, None, '{"id":1}')
    b = writer.value(OP_INSERT, None, '{"id":1}')
    assert a == b
    assert a.startswith(b'{"before":null,"after":{"id":1},"op":"c","ts_ms":')


@pytest.mark.parametrize("op", ["x", "C", "insert", "", "r"])
def test_envelope_rejects_unknown_op(writer, op):
    with pytest.raises(ValueError, match="unknown change op"):
        writer.value(op, None, "{}")


def test_key_bytes():
    assert key_bytes(None) is None
    assert key_bytes('{"id":1}') == b'{"id":1}'
    assert key_bytes('{"name":"é"}') == '{"name":"é"}'.encode("utf-8")
