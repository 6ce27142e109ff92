"""The commit protocol: recovery decisions and streaming a change set into a (fake) log."""
import json
import time

import pytest

from dbt.adapters.logstore import commit_protocol, log_system
from dbt.adapters.logstore.commit_protocol import (
    CHANGESET_ID,
    COMMITTED,
    MIRRORED,
    TOPIC_PARTITIONS,
    TableRef,
    log_is_new,
    parse_properties,
    prepare_log,
    recovery_action,
    write_change_set,
)
from dbt.adapters.logstore.log_config import LogConfig, LogConfigError
from dbt.adapters.logstore.log_system import LogSystem, LogWriter, WriteResult, register

# --- recovery_action ----------------------------------------------------------------------


@pytest.mark.parametrize("changes_props", [{}, {CHANGESET_ID: ""}, {"other": "x"}])
def test_no_changeset_id_drops(changes_props):
    table = {COMMITTED: "run-1", MIRRORED: "run-0"}
    assert recovery_action(changes_props, table) == "drop"


def test_committed_not_mirrored_mirrors():
    assert recovery_action({CHANGESET_ID: "run-2"}, {COMMITTED: "run-2"}) == "mirror"
    assert recovery_action({CHANGESET_ID: "run-2"},
                           {COMMITTED: "run-2", MIRRORED: "run-1"}) == "mirror"


def test_committed_and_mirrored_drops():
    assert recovery_action({CHANGESET_ID: "run-2"},
                           {COMMITTED: "run-2", MIRRORED: "run-2"}) == "drop"


@pytest.mark.parametrize("table_props", [
    {},
    {COMMITTED: "run-1"},  # an older commit: this change set's commit never happened
    {COMMITTED: "run-1", MIRRORED: "run-1"},
    {MIRRORED: "run-2"},
])
def test_not_committed_drops(table_props):
    assert recovery_action({CHANGESET_ID: "run-2"}, table_props) == "drop"


def test_property_names():
    assert TOPIC_PARTITIONS == "logstore.topic.partitions"
    assert CHANGESET_ID == "logstore.changeset.id"
    assert COMMITTED == "logstore.changeset.committed"
    assert MIRRORED == "logstore.changeset.mirrored"


def test_parse_properties():
    rows = [("logstore.changeset.id", "abc"), ("numRows", 3)]
    assert parse_properties(rows) == {"logstore.changeset.id": "abc", "numRows": "3"}


def test_table_ref_writer_id():
    assert TableRef("analytics", "orders").writer_id == "analytics.orders"


# --- write_change_set with a fake log system ---------------------------------------------


class FakeWriter(LogWriter):
    def __init__(self, log, writer_id, fail_on=None, fail_commit=False):
        self.log, self.writer_id = log, writer_id
        self.sent = []
        self.aborted = 0
        self.committed = 0
        self.fail_on = fail_on
        self.fail_commit = fail_commit
        self.result = WriteResult(topic=str(log.topic))

    def send(self, key, value, route):
        if self.fail_on is not None and len(self.sent) == self.fail_on:
            raise RuntimeError("send failed")
        self.sent.append((key, value, route))
        self.result.records += 1
        self.result.acknowledge(0, len(self.sent) - 1)

    def commit(self):
        if self.fail_commit:
            raise RuntimeError("commit failed")
        self.committed += 1
        return self.result

    def abort(self):
        self.aborted += 1


class FakeSystem(LogSystem):
    name = "fake"
    writers = []
    prepared = []
    writer_options = {}

    partitions = 3

    def prepare(self, log):
        FakeSystem.prepared.append(log)
        return FakeSystem.partitions

    def check(self, log):
        return ["fake: reachable"]

    def open_writer(self, log, writer_id):
        writer = FakeWriter(log, writer_id, **FakeSystem.writer_options)
        FakeSystem.writers.append(writer)
        return writer


@pytest.fixture
def fake_system(monkeypatch):
    monkeypatch.setattr(log_system, "_REGISTRY", dict(log_system._REGISTRY))
    monkeypatch.setattr(FakeSystem, "writers", [])
    monkeypatch.setattr(FakeSystem, "prepared", [])
    monkeypatch.setattr(FakeSystem, "writer_options", {})
    register("fake", FakeSystem)
    return FakeSystem


LOG = LogConfig(model="orders_model", system="fake", topic="analytics.orders",
                bootstrap_servers="x:1", unique_key=("id",))
TABLE = TableRef("analytics", "orders")

ROWS = [
    ("c", '{"id":1}', None, '{"id":1,"v":"a"}'),
    ("u", '{"id":2}', '{"id":2,"v":"b"}', '{"id":2,"v":"B"}'),
    ("d", '{"id":3}', '{"id":3,"v":"c"}', None),
]


def test_write_change_set_sends_every_row(fake_system):
    before = int(time.time() * 1000)
    result = write_change_set(LOG, TABLE, ROWS)
    after = int(time.time() * 1000)

    (writer,) = fake_system.writers
    assert writer.writer_id == "analytics.orders"
    assert writer.log is LOG
    assert [s[0] for s in writer.sent] == [b'{"id":1}', b'{"id":2}', b'{"id":3}']

    values = [json.loads(s[1]) for s in writer.sent]
    assert [v["op"] for v in values] == ["c", "u", "d"]
    assert values[0]["before"] is None and values[0]["after"] == {"id": 1, "v": "a"}
    assert values[1]["before"] == {"id": 2, "v": "b"} and values[1]["after"] == {"id": 2, "v": "B"}
    assert values[2]["before"] == {"id": 3, "v": "c"} and values[2]["after"] is None
    for v in values:
        assert v["source"]["db"] == "analytics"
        assert v["source"]["table"] == "orders"
        assert before <= v["ts_ms"] <= after
    assert len({v["ts_ms"] for v in values}) == 1  # one timestamp per commit

    # route: the after image, else the before image
    assert [s[2] for s in writer.sent] == [b'{"id":1,"v":"a"}', b'{"id":2,"v":"B"}',
                                           b'{"id":3,"v":"c"}']
    assert writer.committed == 1
    assert writer.aborted == 0
    assert result is writer.result
    assert result.records == 3


def test_write_change_set_keyless_rows(fake_system):
    rows = [("c", None, None, '{"x":1}'), ("d", None, '{"x":1}', None)]
    write_change_set(LOG, TABLE, rows)
    (writer,) = fake_system.writers
    assert [s[0] for s in writer.sent] == [None, None]
    # an insert and a later delete of an equal row share the route (so the partition)
    assert writer.sent[0][2] == writer.sent[1][2] == b'{"x":1}'


def test_write_change_set_route_of_row_without_images(fake_system):
    write_change_set(LOG, TABLE, [("d", '{"id":1}', None, None)])
    assert fake_system.writers[0].sent[0][2] == b""


def test_write_change_set_empty(fake_system):
    result = write_change_set(LOG, TABLE, [])
    (writer,) = fake_system.writers
    assert writer.sent == []
    assert writer.committed == 1
    assert result.records == 0


def test_write_change_set_accepts_generator(fake_system):
    result = write_change_set(LOG, TABLE, (row for row in ROWS))
    assert result.records == 3


def test_send_failure_aborts_and_propagates(fake_system):
    fake_system.writer_options = {"fail_on": 1}
    with pytest.raises(RuntimeError, match="send failed"):
        write_change_set(LOG, TABLE, ROWS)
    (writer,) = fake_system.writers
    assert writer.aborted == 1
    assert writer.committed == 0
    assert len(writer.sent) == 1


def test_commit_failure_aborts_and_propagates(fake_system):
    fake_system.writer_options = {"fail_commit": True}
    with pytest.raises(RuntimeError, match="commit failed"):
        write_change_set(LOG, TABLE, ROWS)
    assert fake_system.writers[0].aborted == 1


def test_row_source_failure_aborts(fake_system):
    def rows():
        yield ROWS[0]
        raise KeyboardInterrupt  # BaseException too: the writer is still released

    with pytest.raises(KeyboardInterrupt):
        write_change_set(LOG, TABLE, rows())
    assert fake_system.writers[0].aborted == 1
    assert fake_system.writers[0].committed == 0


def test_unknown_op_aborts(fake_system):
    with pytest.raises(ValueError, match="unknown change op"):
        write_change_set(LOG, TABLE, [("x", None, None, "{}")])
    assert fake_system.writers[0].aborted == 1


def test_progress_reported(fake_system, monkeypatch):
    monkeypatch.setattr(commit_protocol, "PROGRESS_EVERY", 2)
    seen = []
    rows = [("c", None, None, f'{{"i":{i}}}') for i in range(5)]
    write_change_set(LOG, TABLE, rows, progress=seen.append)
    assert seen == [2, 4]


def test_prepare_log_uses_the_configured_system(fake_system):
    assert prepare_log(LOG) == 3  # the topic's partition count, as the system reports it
    assert fake_system.prepared == [LOG]


def test_unknown_system_fails_before_writing():
    log = LogConfig(model="m", system="nope", topic="t", bootstrap_servers="x:1")
    with pytest.raises(ValueError, match="unknown log system 'nope'"):
        write_change_set(log, TABLE, ROWS)


# --- write_change_set: record values by format and changelog mode -------------------------

UPSERT_LOG = LogConfig(model="orders_model", system="fake", topic="analytics.orders",
                       bootstrap_servers="x:1", unique_key=("id",), changelog_mode="upsert")


def test_write_change_set_all_mode_sends_deletes_as_envelopes(fake_system):
    write_change_set(LOG, TABLE, ROWS)
    values = [s[1] for s in fake_system.writers[0].sent]
    assert all(v is not None for v in values)  # no tombstones outside upsert mode


def test_write_change_set_upsert_sends_tombstones_for_deletes(fake_system):
    result = write_change_set(UPSERT_LOG, TABLE, ROWS)
    (writer,) = fake_system.writers
    keys = [s[0] for s in writer.sent]
    values = [s[1] for s in writer.sent]
    assert keys == [b'{"id":1}', b'{"id":2}', b'{"id":3}']  # the tombstone keeps its key
    assert values[2] is None
    insert, update = json.loads(values[0]), json.loads(values[1])
    assert insert["op"] == "c" and insert["after"] == {"id": 1, "v": "a"}
    assert update["op"] == "u" and update["before"] is None  # no before image in upsert mode
    assert update["after"] == {"id": 2, "v": "B"}
    assert writer.sent[2][2] == b'{"id":3,"v":"c"}'  # route: the before image
    assert result.records == 3
    assert writer.committed == 1


def test_write_change_set_json_upsert_sends_bare_rows(fake_system):
    log = LogConfig(model="m", system="fake", topic="t", bootstrap_servers="x:1",
                    unique_key=("id",), changelog_mode="upsert", format="json")
    write_change_set(log, TABLE, ROWS)
    values = [s[1] for s in fake_system.writers[0].sent]
    assert values == [b'{"id":1,"v":"a"}', b'{"id":2,"v":"B"}', None]


def test_write_change_set_json_all_inserts_only(fake_system):
    log = LogConfig(model="m", system="fake", topic="t", bootstrap_servers="x:1", format="json")
    rows = [("c", None, None, '{"x":1}'), ("c", None, None, '{"x":2}')]
    write_change_set(log, TABLE, rows)
    (writer,) = fake_system.writers
    assert [s[1] for s in writer.sent] == [b'{"x":1}', b'{"x":2}']
    assert writer.committed == 1


def test_write_change_set_json_all_update_aborts(fake_system):
    log = LogConfig(model="m", system="fake", topic="t", bootstrap_servers="x:1", format="json")
    with pytest.raises(ValueError, match="cannot express op 'u'"):
        write_change_set(log, TABLE, ROWS)
    (writer,) = fake_system.writers
    assert len(writer.sent) == 1  # the insert before it was queued, then the writer aborted
    assert writer.aborted == 1
    assert writer.committed == 0


# --- log_is_new: a log that starts now, or continues with the same meaning ------------------

KAFKA_LOG = LogConfig(model="orders_model", system="kafka", topic="analytics.orders",
                      bootstrap_servers="b1:9092,b2:9092", unique_key=("id",),
                      changelog_mode="upsert", partitions=3)


def stored(log=KAFKA_LOG, partitions="3", **overrides):
    """The table properties a previous commit of `log` left, plus overrides (None: absent)."""
    props = dict(log.table_properties())
    if partitions is not None:
        props[TOPIC_PARTITIONS] = partitions
    props.update(overrides)
    return {k: v for k, v in props.items() if v is not None}


def test_log_continues_when_nothing_changed():
    assert log_is_new(KAFKA_LOG, stored(), 3) is False


def test_log_is_new_for_a_table_without_log_properties():
    assert log_is_new(KAFKA_LOG, {}, 3) is True
    assert log_is_new(KAFKA_LOG, {"numFiles": "2"}, 3) is True


def test_log_is_new_when_the_log_was_disabled():
    assert log_is_new(KAFKA_LOG, {"log.system": "none"}, 3) is True


@pytest.mark.parametrize("key,value", [
    ("log.system", "other"),
    ("kafka.topic", "analytics.orders_v1"),
    ("kafka.bootstrap.servers", "old-cluster:9092"),
])
def test_log_is_new_on_another_system_topic_or_cluster(key, value):
    assert log_is_new(KAFKA_LOG, stored(**{key: value}), 3) is True


@pytest.mark.parametrize("key", ["log.system", "kafka.topic", "kafka.bootstrap.servers"])
def test_log_is_new_when_an_identity_property_is_missing(key):
    assert log_is_new(KAFKA_LOG, stored(**{key: None}), 3) is True


def test_new_topic_may_change_key_format_and_partitions():
    props = stored(**{"kafka.topic": "analytics.orders_v1", "log.key": "other",
                      "log.format": "json"}, partitions="12")
    assert log_is_new(KAFKA_LOG, props, 3) is True  # a new topic starts fresh: no error


def error_of(log, props, partitions=3) -> str:
    with pytest.raises(LogConfigError) as info:
        log_is_new(log, props, partitions)
    return str(info.value)


@pytest.mark.parametrize("stored_key,current", [
    ("id", ("order_id",)),
    ("id", ("tenant", "id")),
    ("tenant,id", ("id", "tenant")),  # order is part of the key JSON
    ("id", ()),  # keyed -> keyless
    ("", ("id",)),  # keyless -> keyed
])
def test_unique_key_change_on_the_same_topic_fails(stored_key, current):
    log = LogConfig(model="orders_model", system="kafka", topic="analytics.orders",
                    bootstrap_servers="b1:9092,b2:9092", unique_key=current)
    message = error_of(log, stored(log, **{"log.key": stored_key}))
    assert "orders_model" in message
    assert "'unique_key'" in message
    assert f"[{stored_key}]" in message and f"[{','.join(current)}]" in message
    assert "analytics.orders" in message
    assert "new 'kafka.topic'" in message  # what is allowed


def test_keyless_log_without_stored_key_continues():
    log = LogConfig(model="m", system="kafka", topic="t", bootstrap_servers="b:1")
    props = stored(log)
    props.pop("log.key")  # keyless: an absent key is the empty key
    assert log_is_new(log, props, 3) is False


def test_format_change_on_the_same_topic_fails():
    log = LogConfig(model="orders_model", system="kafka", topic="analytics.orders",
                    bootstrap_servers="b1:9092,b2:9092", unique_key=("id",), format="json",
                    changelog_mode="upsert")
    message = error_of(log, stored(**{"log.format": "debezium-json"}))
    assert "orders_model" in message
    assert "'log.format'" in message
    assert "'debezium-json'" in message and "'json'" in message
    assert "analytics.orders" in message


def test_absent_stored_format_means_debezium_json():
    props = stored(**{"log.format": None})
    assert log_is_new(KAFKA_LOG, props, 3) is False
    json_log = LogConfig(model="m", system="kafka", topic="analytics.orders",
                         bootstrap_servers="b1:9092,b2:9092", unique_key=("id",), format="json")
    assert "'log.format'" in error_of(json_log, props)


@pytest.mark.parametrize("stored_partitions,now", [("3", 6), ("6", 3), ("1", 2)])
def test_partition_count_change_on_the_same_topic_fails(stored_partitions, now):
    message = error_of(KAFKA_LOG, stored(partitions=stored_partitions), now)
    assert "orders_model" in message
    assert f"now has {now} partitions" in message
    assert f"written with {stored_partitions}" in message
    assert "analytics.orders" in message


@pytest.mark.parametrize("partitions", [None, ""])
def test_unknown_stored_partition_count_is_not_checked(partitions):
    # tables written before the partition count was recorded continue
    assert log_is_new(KAFKA_LOG, stored(partitions=partitions), 7) is False


def test_key_is_checked_before_format():
    log = LogConfig(model="m", system="kafka", topic="analytics.orders",
                    bootstrap_servers="b1:9092,b2:9092", unique_key=("other",), format="json")
    assert "'unique_key'" in error_of(log, stored())


@pytest.mark.parametrize("servers", [
    "b2:9092,b1:9092",  # the same brokers, listed in another order
    "b1:9092, b2:9092",  # a space after the comma
])
def test_same_cluster_listed_differently_is_not_a_new_log(servers):
    # A new log re-sends every current row as an insert into the same topic (duplicates for
    # consumers) and skips the key/format/partition checks; the same brokers are the same cluster.
    log = LogConfig(model="orders_model", system="kafka", topic="analytics.orders",
                    bootstrap_servers=servers, unique_key=("id",), changelog_mode="upsert")
    assert log_is_new(log, stored(), 3) is False
