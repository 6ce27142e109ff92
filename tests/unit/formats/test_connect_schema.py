"""Kafka Connect's schema envelope (formats/connect_schema.py): JsonConverter's schema rules per
Spark type, the wrapping in Python and in SQL form, the options that turn it on."""
import json
from decimal import Decimal

import pytest

from dbt.adapters.logstore.commit.snapshots import Attempt, TableRef
from dbt.adapters.logstore.formats import connect_schema, decode_value, decode_json, value_shape, ENVELOPE, BARE_ROW
from dbt.adapters.logstore.formats.connect_schema import field_schema
from dbt.adapters.logstore.config.log_config import LogConfigError, ModelRef, resolve_log_config

COLUMNS = (("id", "int"), ("name", "string"), ("amount", "decimal(12,3)"), ("day", "date"),
           ("at", "timestamp"), ("at_ntz", "timestamp_ntz"), ("flag", "boolean"), ("big", "bigint"),
           ("ratio", "double"), ("f", "float"), ("small", "smallint"), ("tiny", "tinyint"),
           ("raw", "binary"), ("tags", "array<string>"), ("attrs", "map<string,int>"),
           ("point", "struct<x:double,y:double,seen:date>"), ("code", "varchar(8)"))


@pytest.mark.parametrize("spark_type, schema", [
    ("int", {"type": "int32"}), ("bigint", {"type": "int64"}), ("smallint", {"type": "int16"}),
    ("tinyint", {"type": "int8"}), ("boolean", {"type": "boolean"}), ("float", {"type": "float"}),
    ("double", {"type": "double"}), ("string", {"type": "string"}), ("binary", {"type": "bytes"}),
    ("varchar(8)", {"type": "string"}), ("char(2)", {"type": "string"}),
    ("decimal(12,3)", {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
                       "parameters": {"scale": "3", "connect.decimal.precision": "12"}}),
    ("decimal", {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
                 "parameters": {"scale": "0", "connect.decimal.precision": "10"}}),
    ("date", {"type": "int32", "name": "org.apache.kafka.connect.data.Date", "version": 1}),
    ("timestamp", {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "version": 1}),
    ("timestamp_ntz", {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "version": 1}),
    ("array<int>", {"type": "array", "items": {"type": "int32", "optional": True}}),
    ("map<string,decimal(5,2)>", {"type": "map", "keys": {"type": "string", "optional": False},
                                  "values": {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
                                             "version": 1, "optional": True,
                                             "parameters": {"scale": "2", "connect.decimal.precision": "5"}}}),
    ("struct<x:int,`d`:date>", {"type": "struct", "fields": [
        {"field": "x", "type": "int32", "optional": True},
        {"field": "d", "type": "string", "optional": True}]}),  # nested dates stay text
])
def test_spark_types_map_to_jsonconverter_schemas(spark_type, schema):
    assert field_schema(spark_type) == schema


def test_a_type_without_a_connect_schema_is_refused_by_name():
    with pytest.raises(ValueError, match="variant"):
        field_schema("variant")


def _attempt(fmt="debezium-json", unique_key=("id",), extra=None):
    raw = {"log.system": "kafka", "log.format": fmt, "log.format.schema-include": True,
           "unique_key": list(unique_key) or None, **(extra or {})}
    log = resolve_log_config(ModelRef("m", "shop", "orders", "table"), raw, "x:1")
    return Attempt(log, TableRef("shop", "orders"), 1, "cs", "a1", 1700000000000, columns=COLUMNS)


def test_a_debezium_event_is_wrapped_with_its_envelope_schema():
    attempt = _attempt()
    keys, values, _, _ = attempt.encode_rows([("u", '{"id":1}', '{"id":1,"name":"a"}', '{"id":1,"name":"b"}')])
    key, value = json.loads(keys[0]), json.loads(values[0])
    assert key["payload"] == {"id": 1}
    assert key["schema"] == {"type": "struct", "name": "shop.orders.Key", "optional": False,
                             "fields": [{"field": "id", "type": "int32", "optional": False}]}
    assert value["payload"]["before"] == {"id": 1, "name": "a"} and value["payload"]["op"] == "u"
    schema = value["schema"]
    assert schema["name"] == "shop.orders.Envelope" and schema["type"] == "struct"
    fields = {f["field"]: f for f in schema["fields"]}
    assert list(fields) == ["before", "after", "op", "ts_ms", "source"]
    assert fields["after"]["name"] == "shop.orders.Value" and fields["after"]["optional"] is True
    row = {f["field"]: f for f in fields["after"]["fields"]}
    assert list(row) == [name for name, _ in COLUMNS]
    assert row["id"]["optional"] is False and row["name"]["optional"] is True  # the key is required
    assert row["amount"]["parameters"] == {"scale": "3", "connect.decimal.precision": "12"}


def test_a_tombstone_stays_null_and_a_delete_keeps_its_tombstone():
    attempt = _attempt()
    _, values, _, _ = attempt.encode_rows([("d", '{"id":1}', '{"id":1}', None)])
    assert json.loads(values[0])["payload"]["op"] == "d"
    assert attempt.encoder().tombstone_after_delete
    upsert = _attempt("json")
    keys, values, _, _ = upsert.encode_rows([("d", '{"id":1}', '{"id":1}', None),
                                             ("c", '{"id":2}', None, '{"id":2}')])
    assert values[0] is None and json.loads(keys[0])["payload"] == {"id": 1}
    bare = json.loads(values[1])
    assert bare["payload"] == {"id": 2} and bare["schema"]["name"] == "shop.orders.Value"
    assert bare["schema"]["optional"] is False


def test_the_decoder_unwraps_the_envelope():
    attempt = _attempt()
    keys, values, _, _ = attempt.encode_rows([("c", '{"id":7}', None, '{"id":7,"amount":1.250}')])
    change = decode_value(decode_json(keys[0]), decode_json(values[0]))
    assert (change.key, change.op, change.after) == ({"id": 7}, "c", {"id": 7, "amount": Decimal("1.250")})
    assert value_shape(decode_json(values[0])) == (ENVELOPE, "c")
    _, values, _, _ = _attempt("json").encode_rows([("c", '{"id":7}', None, '{"id":7}')])
    assert value_shape(decode_json(values[0])) == (BARE_ROW, "c")
    # a row that merely has columns named schema and payload is a row
    assert connect_schema.unwrap({"schema": "s", "payload": 1}) == {"schema": "s", "payload": 1}


def test_sql_form_wraps_as_the_python_form_does():
    encoder = _attempt().encoder()
    key_sql, value_sql, _ = encoder.record_sql("op", "k", "b", "a")
    head = '{"schema":' + encoder.value_schema_json + ',"payload":'
    assert value_sql.startswith("cast(case when op in")
    assert "concat(" in value_sql and json.dumps(head)[1:-1].replace('\\"', '"')[:40] in value_sql.replace("\\'", "'")
    assert key_sql.startswith("cast(concat(")


def test_schema_include_writes_iso_timestamps_and_refuses_sql_ones():
    log = _attempt().log
    assert log.timestamp_standard == "ISO-8601" and log.images.epoch_temporals
    assert log.table_properties()["log.format.schema-include"] == "true"
    with pytest.raises(LogConfigError, match="ZonedTimestamp"):
        _attempt(extra={"log.timestamp-format.standard": "SQL"})


def test_options_of_another_format_are_refused_by_name():
    with pytest.raises(LogConfigError, match="'log.transaction-metadata' applies to 'log.format' 'debezium-json'"):
        _attempt("json", extra={"log.transaction-metadata": True})


def test_a_log_without_the_option_records_nothing_new():
    log = resolve_log_config(ModelRef("m", "shop", "orders", "table"), {"log.system": "kafka"}, "x:1")
    props = log.table_properties()
    assert not any(k.startswith(("log.format.", "log.transaction")) for k in props)
    assert not log.images.epoch_temporals and log.transaction_topic is None


def test_columns_without_a_connect_schema_are_refused_before_the_commit():
    from dbt_common.exceptions import DbtRuntimeError

    from dbt.adapters.logstore.changes.checks import check_columns

    log = _attempt().log
    check_columns(log, COLUMNS)  # every type of the table above has one
    with pytest.raises(DbtRuntimeError) as info:
        check_columns(log, [("id", "int"), ("v", "variant"), ("span", "interval day to second")])
    message = str(info.value)
    assert "Model 'm'" in message and "log.format.schema-include" in message
    assert "v variant, span interval day to second" in message and "Nothing was changed" in message
    # without the envelope nothing is asked of the columns
    plain = resolve_log_config(ModelRef("m", "shop", "orders", "table"), {"log.system": "kafka"}, "x:1")
    check_columns(plain, [("v", "variant")])
