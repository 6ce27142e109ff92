"""Debezium's transaction metadata (formats/debezium_transactions.py): the block in each event,
BEGIN and END around an attempt's events, snapshot reads of a log's first records."""
import json

import pytest

from dbt.adapters.logstore.commit.snapshots import Attempt, TableRef
from dbt.adapters.logstore.formats import debezium_transactions as tx
from dbt.adapters.logstore.config.log_config import LogConfigError, ModelRef, resolve_log_config


class RecordingWriter:
    def __init__(self):
        self.sent = []

    def send(self, key, value, route, headers=()):
        self.sent.append((None, key, value))

    def send_beside(self, topic, key, value):
        self.sent.append((topic, key, value))


def _attempt(extra=None, snapshot_read=False, unique_key=("id",)):
    raw = {"log.system": "kafka", "log.transaction-metadata": True, "unique_key": list(unique_key) or None,
           **(extra or {})}
    log = resolve_log_config(ModelRef("m", "shop", "orders", "table"), raw, "x:1")
    return Attempt(log, TableRef("shop", "orders"), 1, "cs", "attempt-1", 1700000000000,
                   columns=(("id", "int"), ("v", "string")), snapshot_read=snapshot_read)


CHANGES = [("c", '{"id":1}', None, '{"id":1,"v":"a"}'), ("u", '{"id":2}', '{"id":2,"v":"a"}', '{"id":2,"v":"b"}'),
           ("d", '{"id":3}', '{"id":3,"v":"c"}', None)]


@pytest.mark.parametrize("extra", [{}, {"log.format.schema-include": True}], ids=["plain", "connect"])
def test_begin_events_with_their_blocks_end(extra):
    attempt, writer = _attempt(extra), RecordingWriter()
    assert attempt.log.transaction_topic == "shop.orders.transaction"
    count = attempt.send_batches(writer, [attempt.encode_rows(CHANGES)])
    assert count == 3
    topics = [topic for topic, _, _ in writer.sent]
    # BEGIN, c, u, d, the d's tombstone, END
    assert topics == ["shop.orders.transaction", None, None, None, None, "shop.orders.transaction"]
    begin, end = (tx.parse_event(writer.sent[i][2]) for i in (0, -1))
    assert begin == {"status": "BEGIN", "id": "attempt-1", "event_count": None, "data_collections": None,
                     "ts_ms": 1700000000000}
    assert end["status"] == "END" and end["event_count"] == 3
    assert end["data_collections"] == [{"data_collection": "shop.orders", "event_count": 3}]
    assert tx.parse_event(writer.sent[0][1]) == {"id": "attempt-1"}
    events = [json.loads(value) for _, _, value in writer.sent[1:4]]
    if extra:
        assert all("transaction" in [f["field"] for f in e["schema"]["fields"]] for e in events)
        events = [e["payload"] for e in events]
    assert [e["transaction"] for e in events] == [
        {"id": "attempt-1", "total_order": n, "data_collection_order": n} for n in (1, 2, 3)]
    assert [e["op"] for e in events] == ["c", "u", "d"]
    assert writer.sent[4][2] is None  # the tombstone after the delete has no block


def test_a_logs_first_records_are_snapshot_reads():
    attempt, writer = _attempt(snapshot_read=True), RecordingWriter()
    attempt.send_batches(writer, [attempt.encode_rows(CHANGES[:1])])
    event = json.loads(writer.sent[1][2])
    assert event["op"] == "r" and event["source"]["snapshot"] == "true"
    # without transaction metadata a first build keeps writing `c` (existing topics' bytes)
    plain = resolve_log_config(ModelRef("m", "shop", "orders", "table"), {"log.system": "kafka"}, "x:1")
    value = Attempt(plain, TableRef("shop", "orders"), 1, "cs", "a", 1, snapshot_read=True).encode_rows(CHANGES[:1])[1][0]
    assert json.loads(value)["op"] == "c" and "snapshot" not in json.loads(value)["source"]


def test_our_decoder_keeps_r_and_ignores_the_block():
    from dbt.adapters.logstore.formats import decode_json, decode_value

    attempt, writer = _attempt(snapshot_read=True), RecordingWriter()
    attempt.send_batches(writer, [attempt.encode_rows(CHANGES[:1])])
    change = decode_value(decode_json(writer.sent[1][1]), decode_json(writer.sent[1][2]))
    assert (change.op, change.after) == ("r", {"id": 1, "v": "a"})  # applied as an insert


def test_the_topic_can_be_named_and_parallel_writers_are_refused():
    assert _attempt({"log.transaction-metadata.topic": "tx.all"}).log.transaction_topic == "tx.all"
    with pytest.raises(LogConfigError, match="log.mirror.parallelism"):
        _attempt({"log.mirror.parallelism": 4})
    with pytest.raises(LogConfigError, match="log.transaction-metadata.topic"):
        _attempt({"log.transaction-metadata.topic": "bad topic"})


def test_a_topic_cannot_turn_the_option_on_midstream():
    from dbt.adapters.logstore.commit.protocol import log_is_new

    log = _attempt().log
    props = {"log.system": "kafka", "kafka.topic": log.topic, "kafka.bootstrap.servers": "x:1",
             "log.key": "id"}
    with pytest.raises(LogConfigError, match="'log.transaction-metadata' changed from 'false' to 'true'"):
        log_is_new(log, props, 1)
    assert log_is_new(log, {**props, **log.table_properties()}, 1) is False
