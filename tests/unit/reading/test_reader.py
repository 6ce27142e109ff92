"""The reader's decoding of record bytes (no broker)."""
from decimal import Decimal

from dbt.adapters.logstore.formats import decode_json


# --- decode_json --------------------------------------------------------------------------


def test_decode_json_none():
    assert decode_json(None) is None


def test_decode_json_keeps_decimals_exact():
    value = decode_json(b'{"amount":12345678901234567890.123456789,"rate":0.1,"n":3}')
    assert value["amount"] == Decimal("12345678901234567890.123456789")
    assert isinstance(value["amount"], Decimal)
    assert value["rate"] == Decimal("0.1")
    assert str(value["rate"]) == "0.1"
    assert value["n"] == 3 and isinstance(value["n"], int)


def test_decode_json_keeps_scale():
    assert str(decode_json(b'{"x":1.50}')["x"]) == "1.50"


def test_decode_json_envelope():
    value = decode_json(b'{"before":null,"after":{"id":1},"op":"c","ts_ms":5,"source":{}}')
    assert value["before"] is None
    assert value["after"] == {"id": 1}
