"""The two record formats' encoders and the decoder, side by side (formats/debezium_json.py,
formats/json_rows.py, formats/__init__.py)."""
import dataclasses
import json

import pytest

from dbt.adapters.logstore.__version__ import version
from dbt.adapters.logstore.formats import (
    OP_DELETE, OP_INSERT, OP_UPDATE, OPS, is_tombstone_after_delete,
)
from dbt.adapters.logstore.formats.debezium_json import DebeziumEncoder, EnvelopeWriter
from dbt.adapters.logstore.formats.json_rows import BareRowEncoder
from dbt.adapters.logstore.names import H_TOMBSTONE


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


def test_key_bytes(writer):
    key = DebeziumEncoder(writer).key
    assert key(None) is None
    assert key('{"id":1}') == b'{"id":1}'
    assert key('{"name":"é"}') == '{"name":"é"}'.encode("utf-8")


# --- record values by log.format and log.changelog-mode --------------------------------------

ROW_BEFORE = '{"id":1,"v":"old"}'
ROW_AFTER = '{"id":1,"v":"new"}'


def encoder(writer, format="debezium-json", upsert=False, keyed=False):
    if format == "json":
        return BareRowEncoder(upsert=upsert, keyed=keyed)
    return DebeziumEncoder(writer, upsert=upsert, keyed=keyed)


def test_record_encoder_defaults_are_debezium_all(writer):
    enc = DebeziumEncoder(writer)
    assert enc.upsert is False
    assert enc.value(OP_UPDATE, ROW_BEFORE, ROW_AFTER) == writer.value(OP_UPDATE, ROW_BEFORE, ROW_AFTER)


@pytest.mark.parametrize("op,before,after", [
    (OP_INSERT, None, ROW_AFTER),
    (OP_UPDATE, ROW_BEFORE, ROW_AFTER),
    (OP_DELETE, ROW_BEFORE, None),
])
def test_debezium_all_is_the_full_envelope(writer, op, before, after):
    value = encoder(writer).value(op, before, after)
    assert value == writer.value(op, before, after)
    doc = json.loads(value)
    assert doc["op"] == op
    assert doc["before"] == (json.loads(before) if before else None)
    assert doc["after"] == (json.loads(after) if after else None)


def test_debezium_upsert_update_drops_the_before_image(writer):
    doc = json.loads(encoder(writer, upsert=True).value(OP_UPDATE, ROW_BEFORE, ROW_AFTER))
    assert doc["before"] is None
    assert doc["after"] == {"id": 1, "v": "new"}
    assert doc["op"] == "u"
    assert doc["source"]["table"] == "orders"


def test_debezium_upsert_insert_is_the_envelope(writer):
    value = encoder(writer, upsert=True).value(OP_INSERT, None, ROW_AFTER)
    assert value == writer.value(OP_INSERT, None, ROW_AFTER)


@pytest.mark.parametrize("format", ["debezium-json", "json"])
def test_upsert_delete_is_a_tombstone(writer, format):
    assert encoder(writer, format=format, upsert=True).value(OP_DELETE, ROW_BEFORE, None) is None


@pytest.mark.parametrize("upsert", [False, True])
def test_json_insert_is_the_bare_row(writer, upsert):
    value = encoder(writer, format="json", upsert=upsert).value(OP_INSERT, None, ROW_AFTER)
    assert value == ROW_AFTER.encode()
    assert b"before" not in value and b"source" not in value


def test_json_keeps_exact_row_bytes(writer):
    row = '{"amount":12345678901234567890.120,"name":"\u00e9","n":null}'
    assert encoder(writer, format="json").value(OP_INSERT, None, row) == row.encode()


def test_json_upsert_update_is_the_new_row(writer):
    value = encoder(writer, format="json", upsert=True).value(OP_UPDATE, ROW_BEFORE, ROW_AFTER)
    assert value == ROW_AFTER.encode()


@pytest.mark.parametrize("op,before,after", [
    (OP_UPDATE, ROW_BEFORE, ROW_AFTER),
    (OP_DELETE, ROW_BEFORE, None),
])
def test_json_without_upsert_rejects_non_inserts(writer, op, before, after):
    with pytest.raises(ValueError) as info:
        encoder(writer, format="json").value(op, before, after)
    message = str(info.value)
    assert "'json'" in message and repr(op) in message and "upsert" in message


def test_debezium_all_delete_is_not_a_tombstone(writer):
    value = encoder(writer).value(OP_DELETE, ROW_BEFORE, None)
    assert value is not None
    assert json.loads(value)["before"] == {"id": 1, "v": "old"}


@pytest.mark.parametrize("format,upsert", [
    ("debezium-json", False), ("debezium-json", True), ("json", False), ("json", True),
])
def test_record_encoder_rejects_unknown_ops_in_every_mode(writer, format, upsert):
    # an unknown op must never reach the log as a plausible record, whatever the format
    # (EnvelopeWriter rejects it; the bare-row path of json + upsert must too)
    op = "x"
    assert op not in OPS
    with pytest.raises(ValueError) as info:
        encoder(writer, format=format, upsert=upsert).value(op, None, ROW_AFTER)
    assert repr(op) in str(info.value)


def test_record_encoder_is_immutable(writer):
    enc = encoder(writer, format="json", upsert=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        enc.upsert = False
    assert enc.upsert is True


@pytest.mark.parametrize("format,upsert,keyed,expected", [
    ("debezium-json", False, True, True),    # a keyed Debezium stream: d, then its tombstone
    ("debezium-json", False, False, False),  # keyless: no key to forget
    ("json", True, True, False),             # upsert: the tombstone is the delete itself
    ("debezium-json", True, True, False),    # the pre-0.4 keyed shape: tombstone only
])
def test_tombstone_after_delete(writer, format, upsert, keyed, expected):
    assert encoder(writer, format, upsert, keyed).tombstone_after_delete is expected


def test_is_tombstone_after_delete_reads_the_header():
    assert is_tombstone_after_delete([("logstore.table", b"t"), (H_TOMBSTONE, b"after-delete")])
    assert not is_tombstone_after_delete([("logstore.table", b"t")])
    assert not is_tombstone_after_delete(None)


# --- encode and decode side by side ----------------------------------------------------------

def test_what_the_encoder_writes_the_decoder_reads_back():
    from collections import namedtuple

    from dbt.adapters.logstore.formats import (
        BARE_ROW, ENVELOPE, TOMBSTONE, decode_json, decode_record, value_shape,
    )

    Msg = namedtuple("Msg", "partition offset key value")
    envelope = EnvelopeWriter(schema="s", table="t", ts_ms=7)
    before, after = '{"id":1,"amount":1.10}', '{"id":1,"amount":2.20}'
    for fmt, upsert in (("debezium-json", False), ("debezium-json", True), ("json", True)):
        encoder = (BareRowEncoder(upsert=upsert, keyed=True) if fmt == "json"
                   else DebeziumEncoder(envelope, upsert=upsert, keyed=True))
        for op, old, new in (("c", None, after), ("u", before, after), ("d", before, None)):
            value = encoder.value(op, old, new)
            record = decode_record(Msg(0, 5, b'{"id":1}', value), snapshot=3)
            assert record.key == {"id": 1} and record.snapshot == 3
            if value is None:  # a tombstone: a delete by key
                assert (record.op, record.after) == ("d", None)
            elif fmt == "json":  # a bare row: an upsert of it
                assert record.op == "c" and record.after == decode_json(new.encode())
            else:
                assert record.op == op and record.ts_ms == 7
                assert (record.after is None) == (new is None)
                # upsert mode writes no before image of an update (Flink's upsert changelog)
                assert (record.before is None) == (old is None or (upsert and op == "u"))
    assert value_shape(None) == (TOMBSTONE, "d")
    assert value_shape({"id": 1}) == (BARE_ROW, "c")
    assert value_shape(json.loads(envelope.value("u", before, after))) == (ENVELOPE, "u")
