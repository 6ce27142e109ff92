"""The Kafka read side (kafka/reading.py) against a fake kafka-python consumer: the one consumer's
settings, the control topic read to its end, offset ranges, end offsets and the live read, all
handed out as log_system.LogRecord; client errors as ReaderError in plain words."""
import pickle
import time
from collections import namedtuple

import kafka
import pytest
from kafka.errors import KafkaTimeoutError

from dbt.adapters.logstore.log.kafka import reading
from dbt.adapters.logstore.log.kafka.reading import END_POLLS, KafkaLogReader
from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.log.log_system import LogRecord, ReaderError
from dbt.adapters.logstore.reading.reader import ChangelogReader, open_log

REAL_CONSUMER = kafka.KafkaConsumer
TOPIC, CONTROL, TABLE = "analytics.orders", "analytics.orders__logstore_commits", "analytics.orders"
Msg = namedtuple("Msg", "topic partition offset key value headers")  # as kafka-python's records


def log(**properties):
    return LogConfig(model="orders_model", system="kafka", topic=TOPIC,
                     bootstrap_servers="b1:9092, b2:9092", client_properties=properties)


class FakeConsumer:
    """Serves `records` (kafka-python-like messages) per topic partition, up to `batch` per
    partition and poll; highwater is None until the first poll, as in kafka-python."""

    DEFAULT_CONFIG = REAL_CONSUMER.DEFAULT_CONFIG
    instances = []
    records = []
    topics = {TOPIC: {0, 1}, CONTROL: {0}}
    batch = 2
    fail_on_poll = None

    def __init__(self, **config):
        unknown = set(config) - set(REAL_CONSUMER.DEFAULT_CONFIG)
        if unknown:
            raise kafka.errors.KafkaConfigurationError(f"Unrecognized configs: {unknown}")
        self.config, self.calls, self.assigned, self.positions = config, [], [], {}
        self.fetched, self.closed, self.offset_timeouts = False, False, []
        FakeConsumer.instances.append(self)

    def partitions_for_topic(self, topic):
        return set(self.topics.get(topic, ()))

    def assign(self, tps):
        self.calls.append(("assign", list(tps)))
        self.assigned = list(tps)

    def seek_to_beginning(self, *tps):
        self.calls.append(("seek_to_beginning", list(tps)))
        self.positions.update({tp: 0 for tp in tps})

    def seek(self, tp, offset):
        self.calls.append(("seek", tp, offset))
        self.positions[tp] = offset

    def _of(self, tp):
        return [m for m in self.records if (m.topic, m.partition) == tuple(tp)]

    def poll(self, timeout_ms=0):
        if self.fail_on_poll is not None:
            raise self.fail_on_poll
        self.fetched = True
        out = {}
        for tp in self.assigned:
            batch = [m for m in self._of(tp) if m.offset >= self.positions[tp]][:self.batch]
            if batch:
                out[tp] = batch
                self.positions[tp] = batch[-1].offset + 1
        return out

    def position(self, tp):
        return self.positions[tp]

    def highwater(self, tp):
        return (max([m.offset + 1 for m in self._of(tp)], default=0)) if self.fetched else None

    def end_offsets(self, tps, timeout_ms=None):
        self.offset_timeouts.append(timeout_ms)
        if FakeConsumer.stale_leaders:  # a try whose metadata names a dead leader
            FakeConsumer.stale_leaders -= 1
            raise kafka.errors.KafkaTimeoutError(f"Failed to get offsets by timestamps in {timeout_ms} ms")
        return {tp: max([m.offset + 1 for m in self._of(tp)], default=0) for tp in tps}

    def beginning_offsets(self, tps, timeout_ms=None):
        self.offset_timeouts.append(timeout_ms)
        return {tp: min([m.offset for m in self._of(tp)], default=0) for tp in tps}

    def close(self):
        self.closed = True


@pytest.fixture
def consumer(monkeypatch):
    monkeypatch.setattr(FakeConsumer, "instances", [])
    monkeypatch.setattr(FakeConsumer, "records", [])
    monkeypatch.setattr(FakeConsumer, "topics", {TOPIC: {0, 1}, CONTROL: {0}})
    monkeypatch.setattr(FakeConsumer, "fail_on_poll", None)
    monkeypatch.setattr(FakeConsumer, "stale_leaders", 0, raising=False)
    monkeypatch.setattr(kafka, "KafkaConsumer", FakeConsumer)
    return FakeConsumer


def data(partition, offset, attempt="a", snapshot=1):
    headers = [("logstore.table", TABLE.encode()), ("logstore.snapshot", str(snapshot).encode()),
               ("logstore.attempt", attempt.encode())]
    return Msg(TOPIC, partition, offset, b'{"id":1}',
               b'{"before":null,"after":{"id":1},"op":"c","ts_ms":0,"source":{}}', headers)


def control(offset, attempt="a", snapshot=1, offsets='{"0":[0,0]}', end='{"0":1}'):
    value = (f'{{"table":"{TABLE}","snapshot":{snapshot},"attempt":"{attempt}","records":1,'
             f'"offsets":{offsets},"end_offsets":{end},"ts_ms":0,"changeset":"c{snapshot}"}}')
    return Msg(CONTROL, 0, offset, TABLE.encode(), value.encode(), [])


def test_the_one_consumer_reads_committed_records_without_a_group(consumer):
    KafkaLogReader(log(**{"security.protocol": "SSL", "linger.ms": "5"})).control_records()
    (c,) = consumer.instances
    assert c.config["isolation_level"] == "read_committed"  # aborted attempts are invisible
    assert c.config["group_id"] is None and c.config["enable_auto_commit"] is False
    assert c.config["auto_offset_reset"] == "earliest"
    assert c.config["bootstrap_servers"] == ["b1:9092", "b2:9092"]
    assert c.config["security_protocol"] == "SSL"  # the profile's client properties
    assert "linger_ms" not in c.config  # producer-only settings stay with the producer
    assert c.closed


def test_the_control_topic_is_read_to_its_end_as_log_records(consumer):
    consumer.records = [control(i, attempt=f"a{i}", snapshot=i + 1) for i in range(5)]
    records = KafkaLogReader(log()).control_records()
    assert [r.offset for r in records] == [0, 1, 2, 3, 4]  # past several polls of two
    assert all(type(r) is LogRecord for r in records)
    assert (records[0].partition, records[0].key, records[0].headers) == (0, TABLE.encode(), ())


def test_a_missing_control_topic_has_no_records(consumer):
    consumer.topics = {TOPIC: {0}}
    assert KafkaLogReader(log()).control_records() == []
    assert consumer.instances[0].calls == [] and consumer.instances[0].closed


def counted_polls(monkeypatch) -> list:
    """The fake consumer's polls, one entry each, as they happen."""
    calls = []
    real_poll = FakeConsumer.poll

    def counting(self, timeout_ms=0):
        calls.append(timeout_ms)
        return real_poll(self, timeout_ms)

    monkeypatch.setattr(FakeConsumer, "poll", counting)
    return calls


def test_reading_to_the_end_stops_at_the_last_stable_offset(consumer, monkeypatch):
    consumer.records = [control(0)]
    calls = counted_polls(monkeypatch)
    KafkaLogReader(log()).control_records()
    assert len(calls) == 1  # at the stable offset and the high watermark: no idle polls
    consumer.records = []
    assert KafkaLogReader(log()).control_records() == [] and len(calls) == 2  # empty: one poll


def test_a_transaction_left_open_ends_the_read_at_the_stable_offset(consumer, monkeypatch):
    # Apache Kafka: records past the stable offset are not served to read_committed readers
    consumer.records = [control(0), control(1), control(2)]
    monkeypatch.setattr(FakeConsumer, "end_offsets", lambda self, tps, timeout_ms=None: {tp: 1 for tp in tps})
    real_poll = FakeConsumer.poll

    def up_to_stable(self, timeout_ms=0):
        out = real_poll(self, timeout_ms)
        for tp in list(out):
            out[tp] = [m for m in out[tp] if m.offset < 1]
            self.positions[tp] = min(self.positions[tp], 1)
            if not out[tp]:
                del out[tp]
        return out

    monkeypatch.setattr(FakeConsumer, "poll", up_to_stable)
    reader = KafkaLogReader(log())
    assert [r.offset for r in reader.control_records()] == [0]
    assert reader.held_back == (1, 3)  # offsets 1 and 2 exist, not read: no proof of loss


def test_without_a_known_end_reading_waits_for_empty_polls_at_the_high_watermark(consumer, monkeypatch):
    consumer.records = [control(0)]
    calls = counted_polls(monkeypatch)
    monkeypatch.setattr(FakeConsumer, "end_offsets", lambda self, tps, timeout_ms=None: {})
    KafkaLogReader(log()).control_records()
    assert len(calls) == 1 + END_POLLS


def test_a_control_topic_whose_end_is_not_reached_is_a_reader_error(consumer, monkeypatch):
    import itertools
    import time

    monkeypatch.setattr(FakeConsumer, "highwater", lambda self, tp: 10)  # never reached
    monkeypatch.setattr(FakeConsumer, "end_offsets", lambda self, tps, timeout_ms=None: {tp: 10 for tp in tps})
    clock = itertools.count(0, 7.0)
    monkeypatch.setattr(time, "monotonic", lambda: next(clock))
    with pytest.raises(ReaderError, match=f"orders_model.*'{CONTROL}' to its end within 60 s"):
        KafkaLogReader(log()).control_records()
    assert consumer.instances[0].closed


def test_client_errors_are_reader_errors_in_plain_words(consumer):
    consumer.records = [control(0)]
    consumer.fail_on_poll = KafkaTimeoutError("poll failed")
    quick = {"bootstrap.timeout.ms": "100", "request.timeout.ms": "100"}  # the retries' window
    with pytest.raises(ReaderError, match="orders_model.*b1:9092.*poll failed"):
        KafkaLogReader(log(**quick)).control_records()
    assert all(c.closed for c in consumer.instances)  # each try's consumer
    tried = len(consumer.instances)
    with pytest.raises(ReaderError, match="poll failed"):
        list(KafkaLogReader(log(**quick)).read_range(0, 0, 5))
    assert consumer.instances[tried].closed


def test_a_range_is_read_from_its_start_to_before_its_end(consumer):
    consumer.records = [data(0, i) for i in range(6)] + [data(1, 0)]
    records = list(KafkaLogReader(log()).read_range(0, 1, 4))
    assert [(r.partition, r.offset) for r in records] == [(0, 1), (0, 2), (0, 3)]
    assert records[0].headers == tuple(data(0, 1).headers) and records[0].key == b'{"id":1}'
    (c,) = consumer.instances
    assert c.calls == [("assign", [(TOPIC, 0)]), ("seek", (TOPIC, 0), 1)] and c.closed


def test_end_offsets_per_partition_and_none_for_a_missing_topic(consumer):
    consumer.records = [data(0, 0), data(0, 1), data(1, 0)]
    assert KafkaLogReader(log()).end_offsets() == {0: 2, 1: 1}
    consumer.topics = {}
    assert KafkaLogReader(log()).end_offsets() == {}
    assert all(c.closed for c in consumer.instances)


def test_offsets_are_read_in_short_tries_each_with_a_fresh_consumer(consumer):
    # kafka-python does not refresh a try's metadata while it asks a dead leader: a try waits
    # out its timeout, so tries are short and the next one (a fresh consumer) asks the new leader
    consumer.records = [data(0, 0), data(0, 1), data(1, 0)]
    consumer.stale_leaders = 2
    started = time.monotonic()
    assert KafkaLogReader(log()).offsets() == ({0: 0, 1: 0}, {0: 2, 1: 1})
    assert time.monotonic() - started < 2  # the backoffs only: 0.1 + 0.2 s
    assert len(consumer.instances) == 3 and all(c.closed for c in consumer.instances)
    assert {t for c in consumer.instances for t in c.offset_timeouts} == {reading.OFFSETS_TRY_MS}
    assert reading.OFFSETS_TRY_MS <= 5000  # several tries within the leader's move (~9 s)


def test_the_tails_of_many_control_topics_in_one_consumer(consumer):
    other = "analytics.customers__logstore_commits"
    consumer.topics = {CONTROL: {0}, other: {0}, "empty__logstore_commits": {0}}
    consumer.records = [control(o, snapshot=o + 1) for o in range(30)] + [
        Msg(other, 0, 0, b"k", b'{"snapshot": 1}', ())]
    tails = KafkaLogReader(log()).tails([CONTROL, other, "empty__logstore_commits", "missing"])
    assert [r.offset for r in tails[CONTROL]] == list(range(14, 30))  # the last 16 offsets
    assert [r.offset for r in tails[other]] == [0]
    assert tails["empty__logstore_commits"] == [] and tails["missing"] == []
    assert len(consumer.instances) == 1 and consumer.instances[0].closed  # one consumer for all


def test_the_live_read_feeds_control_and_data_records_apart(consumer):
    consumer.records = [data(0, 0), data(0, 1), data(1, 0), control(0)]
    feed = KafkaLogReader(log()).feed([0, 1], {1: 1})
    (c,) = consumer.instances
    assert c.calls[0] == ("assign", [(TOPIC, 0), (TOPIC, 1), (CONTROL, 0)])
    assert ("seek", (TOPIC, 1), 1) in c.calls and ("seek_to_beginning", [(TOPIC, 0)]) in c.calls
    assert not feed.at_end()  # nothing fetched yet
    control_records, data_records = feed.poll(200)
    assert [r.offset for r in control_records] == [0]
    assert {p: [r.offset for r in rs] for p, rs in data_records.items()} == {0: [0, 1]}
    assert feed.position(0) == 2 and feed.position(1) == 1 and feed.at_end()
    feed.close()
    assert c.closed


def test_the_reader_reads_a_kafka_log_through_it(consumer):
    consumer.records = [data(0, 0), data(0, 1, attempt="dead"), control(0)]
    changes = list(ChangelogReader(open_log(log()), TABLE).changes(idle_seconds=0))
    assert [(c.partition, c.offset, c.op, c.after) for c in changes] == [(0, 0, "c", {"id": 1})]


def test_open_log_by_config_or_by_servers_and_topic():
    by_config = open_log(log())
    assert isinstance(by_config, KafkaLogReader) and by_config.topic == TOPIC
    by_topic = open_log("h:9", "t", **{"security.protocol": "SSL"})
    assert isinstance(by_topic, KafkaLogReader) and by_topic.address == "h:9"
    assert by_topic.control_topic == "t__logstore_commits"
    assert by_topic.config["security_protocol"] == "SSL"


def test_the_reader_pickles_for_spark_tasks():
    reader = pickle.loads(pickle.dumps(KafkaLogReader(log())))
    assert (reader.topic, reader.config["bootstrap_servers"]) == (TOPIC, ["b1:9092", "b2:9092"])
