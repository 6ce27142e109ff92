"""The consumer's replay of change records: normalized by key, applied to a replica (no broker)."""
from decimal import Decimal

import pytest

from dbt.adapters.logstore.formats import decode_json
from dbt.adapters.logstore.reading.replay import ChangeRecord, Normalizer, Replica

_offset = iter(range(10_000))


def rec(op, key=None, before=None, after=None):
    return ChangeRecord(partition=0, offset=next(_offset), key=key, op=op, before=before,
                        after=after, ts_ms=0)


# --- normalize ----------------------------------------------------------------------------


def test_normalizer_gives_upsert_logs_real_before_images_and_drops_repeats():
    records = [rec("c", {"id": 1}, after={"v": 1}), rec("c", {"id": 1}, after={"v": 2}),
               rec("u", {"id": 1}, after={"v": 2}),  # a retry's repeat
               rec("d", {"id": 1}), rec("d", {"id": 1}),  # tombstone twice
               rec("c", None, after={"v": 9})]  # keyless passes through
    out = [(r.op, r.before, r.after) for r in Normalizer().apply(records)]
    assert out == [("c", None, {"v": 1}), ("u", {"v": 1}, {"v": 2}), ("d", {"v": 2}, None),
                   ("c", None, {"v": 9})]


# --- keyed replay -------------------------------------------------------------------------


def test_keyed_insert_update_delete():
    r = Replica()
    r.apply(rec("c", key={"id": 1}, after={"id": 1, "v": "a"}))
    r.apply(rec("c", key={"id": 2}, after={"id": 2, "v": "b"}))
    assert r.rows() == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]

    r.apply(rec("u", key={"id": 1}, before={"id": 1, "v": "a"}, after={"id": 1, "v": "A"}))
    assert r.rows() == [{"id": 1, "v": "A"}, {"id": 2, "v": "b"}]

    r.apply(rec("d", key={"id": 2}, before={"id": 2, "v": "b"}))
    assert r.rows() == [{"id": 1, "v": "A"}]


def test_keyed_insert_of_existing_key_upserts():
    r = Replica()
    r.apply(rec("c", key={"id": 1}, after={"id": 1, "v": 1}))
    r.apply(rec("c", key={"id": 1}, after={"id": 1, "v": 2}))
    assert r.rows() == [{"id": 1, "v": 2}]


def test_keyed_delete_of_unknown_key_is_ignored():
    r = Replica()
    r.apply(rec("d", key={"id": 9}))
    assert r.rows() == []


def test_keyed_tombstone_deletes_by_key():
    r = Replica()
    r.apply(rec("c", key={"id": 1}, after={"id": 1}))
    r.apply(rec("d", key={"id": 1}, before=None, after=None))  # a tombstone has no images
    assert r.rows() == []


def test_composite_key_order_does_not_matter():
    r = Replica()
    r.apply(rec("c", key={"tenant": "t", "id": 1}, after={"tenant": "t", "id": 1, "v": 1}))
    r.apply(rec("u", key={"id": 1, "tenant": "t"}, after={"tenant": "t", "id": 1, "v": 2}))
    assert r.rows() == [{"tenant": "t", "id": 1, "v": 2}]
    r.apply(rec("d", key={"id": 1, "tenant": "t"}))
    assert r.rows() == []


def test_distinct_keys_are_distinct():
    r = Replica()
    r.apply(rec("c", key={"id": 1}, after={"id": 1}))
    r.apply(rec("c", key={"id": "1"}, after={"id": "1"}))
    assert len(r.rows()) == 2


def test_decimal_keys():
    r = Replica()
    r.apply(rec("c", key={"id": Decimal("1.10")}, after={"id": Decimal("1.10")}))
    r.apply(rec("d", key={"id": Decimal("1.10")}))
    assert r.rows() == []


# --- keyless replay -----------------------------------------------------------------------


def test_keyless_add_and_remove_one_equal_row():
    r = Replica()
    row = {"x": 1, "y": "a"}
    r.apply(rec("c", after=dict(row)))
    r.apply(rec("c", after=dict(row)))
    r.apply(rec("c", after={"x": 2, "y": "b"}))
    assert len(r.rows()) == 3

    r.apply(rec("d", before=dict(row)))  # removes one of the two equal rows
    assert r.rows() == [{"x": 1, "y": "a"}, {"x": 2, "y": "b"}]

    r.apply(rec("d", before=dict(row)))
    assert r.rows() == [{"x": 2, "y": "b"}]


def test_keyless_delete_of_never_seen_row_raises():
    r = Replica()
    r.apply(rec("c", after={"x": 1}))
    with pytest.raises(ValueError):
        r.apply(rec("d", before={"x": 2}))
    assert r.rows() == [{"x": 1}]


def test_keyless_delete_on_empty_replica_raises():
    with pytest.raises(ValueError):
        Replica().apply(rec("d", before={"x": 1}))


def test_keyless_decimal_rows_compare_by_value():
    r = Replica()
    r.apply(rec("c", after=decode_json(b'{"amount":1.50}')))
    r.apply(rec("d", before=decode_json(b'{"amount":1.50}')))
    assert r.rows() == []


def test_keyed_and_keyless_rows_listed_together():
    r = Replica()
    r.apply(rec("c", key={"id": 1}, after={"id": 1}))
    r.apply(rec("c", after={"free": True}))
    assert r.rows() == [{"id": 1}, {"free": True}]
    assert r.rows() is not r.rows()  # a copy


# --- images across schema changes (docs/log-format.md) -------------------------------------


def test_a_column_an_old_image_lacks_reads_as_null():
    # an incremental append model gained `phase` (append_new_columns): old records lack it
    r = Replica(columns=["id", "phase", "tag"])
    r.apply(rec("c", after={"id": 12, "tag": "v"}))
    r.apply(rec("c", after={"id": 13, "phase": 2, "tag": "w"}))
    assert r.rows() == [{"id": 12, "phase": None, "tag": "v"}, {"id": 13, "phase": 2, "tag": "w"}]


def test_a_keyless_delete_written_after_a_column_was_added_finds_the_old_row():
    # insert_overwrite replaces a partition logged before the column existed: the delete's
    # image, rendered from the table, has the column as null
    r = Replica(columns=["day", "phase", "tag"])
    r.apply(rec("c", after={"day": 1, "tag": "v"}))
    r.apply(rec("d", before={"day": 1, "phase": None, "tag": "v"}))
    assert r.rows() == []
    # without the consumer's columns the images differ: the rule is what makes them equal
    plain = Replica()
    plain.apply(rec("c", after={"day": 1, "tag": "v"}))
    with pytest.raises(ValueError):
        plain.apply(rec("d", before={"day": 1, "phase": None, "tag": "v"}))


def test_a_field_the_consumer_does_not_know_is_ignored():
    r = Replica(columns=["id", "v"])
    r.apply(rec("c", key={"id": 1}, after={"id": 1, "dropped": "x", "v": "a"}))
    r.apply(rec("c", after={"id": 2, "dropped": "y", "v": "b"}))
    r.apply(rec("d", before={"id": 2, "v": "b"}))
    assert r.rows() == [{"id": 1, "v": "a"}]


def test_a_null_column_is_not_a_missing_value_of_another_row():
    # the rule is exact: null in the new column is not any value
    r = Replica(columns=["id", "phase"])
    r.apply(rec("c", after={"id": 1}))
    with pytest.raises(ValueError):
        r.apply(rec("d", before={"id": 1, "phase": 3}))
