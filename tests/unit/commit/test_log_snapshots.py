"""A table's snapshots in its log: snapshots, confirmations and streaming a change set into a
(fake) log (commit/snapshots.py)."""
import json
import os
import re
import time

import pytest

from dbt.adapters.logstore import faults
from dbt.adapters.logstore.commit import snapshots as log_snapshots
from dbt.adapters.logstore.log import log_system
from dbt.adapters.logstore.spark.catalog import parse_properties
from dbt.adapters.logstore.log.control_records import Confirmation, confirmation_record
from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.commit.snapshots import CARRIED, Attempt, Snapshot, TableRef, prepare_log
from dbt.adapters.logstore.commit.snapshots import write_change_set as write_records
from dbt.adapters.logstore.log.log_system import LogSystem, LogWriter, WriteResult, register
from dbt.adapters.logstore.names import (
    CHANGESET_ID, COMMITTED, H_ATTEMPT, H_CHANGESET, H_SNAPSHOT, H_TABLE, MIRRORED, SNAPSHOT_ATTEMPT,
    SNAPSHOT_ID, SNAPSHOT_OFFSETS, SNAPSHOT_TABLE_VERSION, TOPIC_PARTITIONS,
)


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
    """Records what it is sent; record i of a partition gets offset start[partition] + i."""

    def __init__(self, log, writer_id, fail_on=None, fail_commit=False, start=None,
                 partition_of=None):
        self.log, self.writer_id = log, writer_id
        self.sent = []  # (key, value, route)
        self.headers = []  # the headers of each sent record
        self.aborted = 0
        self.committed = 0
        self.fail_on = fail_on
        self.fail_commit = fail_commit
        self.next_offsets = dict(start or {})
        self.partition_of = partition_of or (lambda key, route: 0)
        self.confirm = None  # the callable commit() received
        self.confirmation = None  # the (key, value) it built
        self.result = WriteResult(topic=str(log.topic))

    def send(self, key, value, route, headers=()):
        if self.fail_on is not None and len(self.sent) == self.fail_on:
            raise RuntimeError("send failed")
        self.sent.append((key, value, route))
        self.headers.append(tuple(headers))
        partition = self.partition_of(key, route)
        offset = self.next_offsets.get(partition, 0)
        self.next_offsets[partition] = offset + 1
        self.result.records += 1
        self.result.acknowledge(partition, offset)

    def commit(self, confirmation):
        if self.fail_commit:
            raise RuntimeError("commit failed")
        self.confirm = confirmation
        self.confirmation = confirmation(self.result)
        self.committed += 1
        return self.result

    def abort(self):
        self.aborted += 1


class FakeSystem(LogSystem):
    name = "fake"
    writers = []
    prepared = []
    writer_options = {}
    confirmations = {}  # (table_id, changeset) -> confirmation
    asked = []

    partitions = 3

    def prepare(self, log):
        FakeSystem.prepared.append(log)
        return FakeSystem.partitions

    def check(self, log):
        return ["fake: reachable"]

    def find_confirmation(self, log, table_id, changeset):
        FakeSystem.asked.append((log, table_id, changeset))
        return FakeSystem.confirmations.get((table_id, changeset))

    def open_writer(self, log, writer_id):
        writer = FakeWriter(log, writer_id, **FakeSystem.writer_options)
        FakeSystem.writers.append(writer)
        return writer

    def open_reader(self, log):
        raise NotImplementedError("the commit protocol reads nothing but find_confirmation")


@pytest.fixture
def fake_system(monkeypatch):
    monkeypatch.setattr(log_system, "_REGISTRY", dict(log_system._REGISTRY))
    monkeypatch.setattr(FakeSystem, "writers", [])
    monkeypatch.setattr(FakeSystem, "prepared", [])
    monkeypatch.setattr(FakeSystem, "writer_options", {})
    monkeypatch.setattr(FakeSystem, "confirmations", {})
    monkeypatch.setattr(FakeSystem, "asked", [])
    monkeypatch.delenv(faults.ENV, raising=False)
    register("fake", FakeSystem)
    return FakeSystem


LOG = LogConfig(model="orders_model", system="fake", topic="analytics.orders",
                bootstrap_servers="x:1", unique_key=("id",))
TABLE = TableRef("analytics", "orders")
PREVIOUS = Snapshot()  # the table's first snapshot comes next
CHANGESET = "run-1"

def records_of(rows):
    """The records of change rows, one batch per row (so a failing generator fails mid-way),
    encoded by the Python reference encoder (tests/functional/test_codec_sql.py holds Spark's
    records_sql to it)."""
    return lambda attempt: (attempt.encode_rows([row]) for row in rows)


def write_change_set(log, table, rows, *args, **kwargs):
    return write_records(log, table, records_of(rows), *args, **kwargs)


ROWS = [
    ("c", '{"id":1}', None, '{"id":1,"v":"a"}'),
    ("u", '{"id":2}', '{"id":2,"v":"b"}', '{"id":2,"v":"B"}'),
    ("d", '{"id":3}', '{"id":3,"v":"c"}', None),
]


def test_write_change_set_sends_every_row(fake_system):
    before = int(time.time() * 1000)
    result = write_change_set(LOG, TABLE, ROWS, PREVIOUS, CHANGESET)
    after = int(time.time() * 1000)

    (writer,) = fake_system.writers
    assert writer.writer_id == "analytics.orders"
    assert writer.log is LOG
    # a keyed delete is a `d` event followed by a tombstone of its key (Debezium's convention)
    assert [s[0] for s in writer.sent] == [b'{"id":1}', b'{"id":2}', b'{"id":3}', b'{"id":3}']
    assert writer.sent[3][1] is None
    assert dict(writer.headers[3])["logstore.tombstone"] == b"after-delete"
    assert "logstore.tombstone" not in dict(writer.headers[2])

    values = [json.loads(s[1]) for s in writer.sent[:3]]
    assert [v["op"] for v in values] == ["c", "u", "d"]
    assert values[0]["before"] is None and values[0]["after"] == {"id": 1, "v": "a"}
    assert values[1]["before"] == {"id": 2, "v": "b"} and values[1]["after"] == {"id": 2, "v": "B"}
    assert values[2]["before"] == {"id": 3, "v": "c"} and values[2]["after"] is None
    for v in values:
        assert v["source"]["db"] == "analytics"
        assert v["source"]["table"] == "orders"
        assert before <= v["ts_ms"] <= after
    assert len({v["ts_ms"] for v in values}) == 1  # one timestamp per commit

    # keyed records are placed by their key: no route
    assert [s[2] for s in writer.sent] == [None] * 4
    assert writer.committed == 1
    assert writer.aborted == 0
    assert isinstance(result, Snapshot)
    assert result.records == 4  # the delete and its tombstone
    assert result.id == 1
    assert result.written == writer.result.offsets == {0: (0, 4)}


KEYLESS_LOG = LogConfig(model="events", system="fake", topic="analytics.events",
                        bootstrap_servers="x:1")


def test_write_change_set_keyless_rows(fake_system):
    rows = [("c", None, None, '{"x":1}'), ("d", None, '{"x":1}', None)]
    write_change_set(KEYLESS_LOG, TABLE, rows, PREVIOUS, CHANGESET)
    (writer,) = fake_system.writers
    assert [s[0] for s in writer.sent] == [None, None]
    # an insert and a later delete of an equal row share the route (so the partition)
    assert writer.sent[0][2] == writer.sent[1][2] == b'{"x":1}'


def test_write_change_set_route_of_row_without_images(fake_system):
    write_change_set(KEYLESS_LOG, TABLE, [("d", None, None, None)], PREVIOUS, CHANGESET)
    assert fake_system.writers[0].sent[0][2] == b""


def test_write_change_set_empty(fake_system):
    result = write_change_set(LOG, TABLE, [], PREVIOUS, CHANGESET)
    (writer,) = fake_system.writers
    assert writer.sent == []
    assert writer.committed == 1
    assert result.records == 0


def test_write_change_set_accepts_generator(fake_system):
    result = write_change_set(LOG, TABLE, (row for row in ROWS), PREVIOUS, CHANGESET)
    assert result.records == 4


def test_send_failure_aborts_and_propagates(fake_system):
    fake_system.writer_options = {"fail_on": 1}
    with pytest.raises(RuntimeError, match="send failed"):
        write_change_set(LOG, TABLE, ROWS, PREVIOUS, CHANGESET)
    (writer,) = fake_system.writers
    assert writer.aborted == 1
    assert writer.committed == 0
    assert len(writer.sent) == 1


def test_commit_failure_aborts_and_propagates(fake_system):
    fake_system.writer_options = {"fail_commit": True}
    with pytest.raises(RuntimeError, match="commit failed"):
        write_change_set(LOG, TABLE, ROWS, PREVIOUS, CHANGESET)
    assert fake_system.writers[0].aborted == 1


def test_row_source_failure_aborts(fake_system):
    def rows():
        yield ROWS[0]
        raise KeyboardInterrupt  # BaseException too: the writer is still released

    with pytest.raises(KeyboardInterrupt):
        write_change_set(LOG, TABLE, rows(), PREVIOUS, CHANGESET)
    assert fake_system.writers[0].aborted == 1
    assert fake_system.writers[0].committed == 0


def test_unknown_op_aborts(fake_system):
    with pytest.raises(ValueError, match="unknown change op"):
        write_change_set(LOG, TABLE, [("x", None, None, "{}")], PREVIOUS, CHANGESET)
    assert fake_system.writers[0].aborted == 1


def test_progress_reported(fake_system, monkeypatch):
    monkeypatch.setattr(log_snapshots, "PROGRESS_EVERY", 2)
    seen = []
    rows = [("c", None, None, f'{{"i":{i}}}') for i in range(5)]
    write_change_set(LOG, TABLE, rows, PREVIOUS, CHANGESET, progress=seen.append)
    assert seen == [2, 4]


def test_prepare_log_uses_the_configured_system(fake_system):
    assert prepare_log(LOG) == 3  # the topic's partition count, as the system reports it
    assert fake_system.prepared == [LOG]


def test_unknown_system_fails_before_writing():
    log = LogConfig(model="m", system="nope", topic="t", bootstrap_servers="x:1")
    with pytest.raises(ValueError, match="unknown log system 'nope'"):
        write_change_set(log, TABLE, ROWS, PREVIOUS, CHANGESET)


# --- write_change_set: record values by format and changelog mode -------------------------

UPSERT_LOG = LogConfig(model="orders_model", system="fake", topic="analytics.orders",
                       bootstrap_servers="x:1", unique_key=("id",), changelog_mode="upsert")


def test_write_change_set_all_mode_sends_deletes_as_envelopes(fake_system):
    write_change_set(LOG, TABLE, ROWS, PREVIOUS, CHANGESET)
    values = [s[1] for s in fake_system.writers[0].sent]
    assert json.loads(values[2])["op"] == "d"  # the delete itself is an event with its row
    assert values[3] is None  # then the tombstone, for compaction only


def test_write_change_set_upsert_sends_tombstones_for_deletes(fake_system):
    result = write_change_set(UPSERT_LOG, TABLE, ROWS, PREVIOUS, CHANGESET)
    (writer,) = fake_system.writers
    keys = [s[0] for s in writer.sent]
    values = [s[1] for s in writer.sent]
    assert keys == [b'{"id":1}', b'{"id":2}', b'{"id":3}']  # the tombstone keeps its key
    assert values[2] is None
    insert, update = json.loads(values[0]), json.loads(values[1])
    assert insert["op"] == "c" and insert["after"] == {"id": 1, "v": "a"}
    assert update["op"] == "u" and update["before"] is None  # no before image in upsert mode
    assert update["after"] == {"id": 2, "v": "B"}
    assert writer.sent[2][2] is None  # keyed: placed by its key
    assert result.records == 3
    assert writer.committed == 1


def test_write_change_set_json_upsert_sends_bare_rows(fake_system):
    log = LogConfig(model="m", system="fake", topic="t", bootstrap_servers="x:1",
                    unique_key=("id",), changelog_mode="upsert", format="json")
    write_change_set(log, TABLE, ROWS, PREVIOUS, CHANGESET)
    values = [s[1] for s in fake_system.writers[0].sent]
    assert values == [b'{"id":1,"v":"a"}', b'{"id":2,"v":"B"}', None]


def test_write_change_set_json_all_inserts_only(fake_system):
    log = LogConfig(model="m", system="fake", topic="t", bootstrap_servers="x:1", format="json")
    rows = [("c", None, None, '{"x":1}'), ("c", None, None, '{"x":2}')]
    write_change_set(log, TABLE, rows, PREVIOUS, CHANGESET)
    (writer,) = fake_system.writers
    assert [s[1] for s in writer.sent] == [b'{"x":1}', b'{"x":2}']
    assert writer.committed == 1


def test_write_change_set_json_all_update_aborts(fake_system):
    log = LogConfig(model="m", system="fake", topic="t", bootstrap_servers="x:1", format="json")
    with pytest.raises(ValueError, match="cannot express op 'u'"):
        write_change_set(log, TABLE, ROWS, PREVIOUS, CHANGESET)
    (writer,) = fake_system.writers
    assert len(writer.sent) == 1  # the insert before it was queued, then the writer aborted
    assert writer.aborted == 1
    assert writer.committed == 0


# --- property and header names -------------------------------------------------------------


def test_snapshot_property_names():
    assert SNAPSHOT_ID == "logstore.snapshot.id"
    assert SNAPSHOT_OFFSETS == "logstore.snapshot.offsets"
    assert SNAPSHOT_ATTEMPT == "logstore.snapshot.attempt"


def test_carried_properties():
    # a rebuilt table continues the snapshot history, the log's partition count and how far
    # it has read its upstream logs ...
    # and the table format's version its snapshot's rows are in
    # and the log's identity and generation (lifecycle/identity.py compares them every run)
    # and its topic's name (a source's reader names it among its inputs)
    from dbt.adapters.logstore.names import (
        GENERATION, GENERATION_OFFSETS, GENERATION_SNAPSHOT, LOG_CLUSTER_ID, LOG_CONTROL_TOPIC_ID,
        LOG_TOPIC, LOG_TOPIC_ID, SNAPSHOT_TABLE_VERSION, SOURCES,
    )

    assert CARRIED == (SNAPSHOT_ID, SNAPSHOT_OFFSETS, SNAPSHOT_ATTEMPT, SNAPSHOT_TABLE_VERSION,
                       MIRRORED, TOPIC_PARTITIONS, SOURCES, LOG_CLUSTER_ID, LOG_TOPIC_ID,
                       LOG_CONTROL_TOPIC_ID, LOG_TOPIC, GENERATION, GENERATION_SNAPSHOT,
                       GENERATION_OFFSETS)
    # ... but never the change-set tags of the commit being made
    assert COMMITTED not in CARRIED and CHANGESET_ID not in CARRIED


def test_header_names():
    assert (H_TABLE, H_SNAPSHOT, H_CHANGESET, H_ATTEMPT) == (
        "logstore.table", "logstore.snapshot", "logstore.changeset", "logstore.attempt")


# --- Snapshot ------------------------------------------------------------------------------


def test_snapshot_defaults():
    snapshot = Snapshot()
    assert (snapshot.id, snapshot.end_offsets, snapshot.attempt, snapshot.records,
            snapshot.written) == (0, {}, None, 0, {})
    assert Snapshot().end_offsets is not Snapshot().end_offsets  # not shared


def test_snapshot_properties():
    snapshot = Snapshot(id=7, end_offsets={2: 5, 0: 12}, attempt="a" * 32, records=4,
                        written={0: (10, 12)})
    props = snapshot.properties("run-7")
    assert props == {
        MIRRORED: "run-7",
        SNAPSHOT_ID: "7",
        SNAPSHOT_OFFSETS: '{"0": 12, "2": 5}',
        SNAPSHOT_ATTEMPT: "a" * 32,
        SNAPSHOT_TABLE_VERSION: "",  # a plain table has no version of its own: cleared
        "logstore.generation": "1",  # the log's generation goes on
        "logstore.generation.pending": "",  # a generation this commit started is in the log
    }
    assert all(isinstance(v, str) for v in props.values())  # table properties are strings


def test_snapshot_properties_sort_partitions_numerically():
    props = Snapshot(id=1, end_offsets={10: 1, 2: 3, 1: 0}, attempt="x").properties("c")
    assert list(json.loads(props[SNAPSHOT_OFFSETS])) == ["1", "2", "10"]


def test_snapshot_properties_round_trip():
    snapshot = Snapshot(id=7, end_offsets={0: 12, 2: 5, 11: 0}, attempt="f" * 32)
    props = snapshot.properties("run-7")
    assert Snapshot.from_properties(props) == snapshot
    # as they come back from SHOW TBLPROPERTIES, among the table's other properties
    rows = list(props.items()) + [("numFiles", 3), ("log.system", "kafka")]
    assert Snapshot.from_properties(parse_properties(rows)) == snapshot


def test_snapshot_round_trip_keeps_id_offsets_and_attempt_only():
    # records and written describe one commit; the table keeps where the log stands
    snapshot = Snapshot(id=3, end_offsets={0: 9}, attempt="b" * 32, records=9,
                        written={0: (0, 9)})
    assert Snapshot.from_properties(snapshot.properties("c")) == Snapshot(
        id=3, end_offsets={0: 9}, attempt="b" * 32)


@pytest.mark.parametrize("props", [{}, {"numFiles": "2"}, {SNAPSHOT_ID: "", SNAPSHOT_OFFSETS: ""}])
def test_snapshot_from_properties_of_a_table_without_snapshots(props):
    assert Snapshot.from_properties(props) == Snapshot()


def test_snapshot_from_properties_parses_types():
    snapshot = Snapshot.from_properties({SNAPSHOT_ID: "41", SNAPSHOT_OFFSETS: '{"3": 17, "0": 2}',
                                         SNAPSHOT_ATTEMPT: "abc"})
    assert snapshot.id == 41
    assert snapshot.end_offsets == {3: 17, 0: 2}
    assert all(isinstance(p, int) and isinstance(o, int) for p, o in snapshot.end_offsets.items())
    assert snapshot.attempt == "abc"


CONFIRMATION = {
    "table": "analytics.orders", "topic": "analytics.orders", "snapshot": 3,
    "changeset": "run-3", "attempt": "c" * 32, "records": 5,
    "offsets": {"0": [7, 9], "2": [4, 5]},  # inclusive
    "end_offsets": {"0": 10, "1": 4, "2": 6},
    "ts_ms": 1,
}


def test_snapshot_from_confirmation():
    snapshot = Snapshot.from_confirmation(CONFIRMATION)
    assert snapshot == Snapshot(id=3, end_offsets={0: 10, 1: 4, 2: 6}, attempt="c" * 32,
                                records=5, written={0: (7, 10), 2: (4, 6)})  # [first, next)


def test_snapshot_from_confirmation_of_an_empty_change_set():
    confirmation = dict(CONFIRMATION, records=0, offsets={}, end_offsets={"0": 10})
    snapshot = Snapshot.from_confirmation(confirmation)
    assert (snapshot.id, snapshot.records, snapshot.written, snapshot.end_offsets) == (
        3, 0, {}, {0: 10})


def test_snapshot_from_confirmation_then_properties():
    # recovery adopts a confirmed snapshot and records it with the table
    props = Snapshot.from_confirmation(CONFIRMATION).properties("run-3")
    assert props == {MIRRORED: "run-3", SNAPSHOT_ID: "3",
                     SNAPSHOT_OFFSETS: '{"0": 10, "1": 4, "2": 6}', SNAPSHOT_ATTEMPT: "c" * 32,
                     SNAPSHOT_TABLE_VERSION: "", "logstore.generation": "1",
                     "logstore.generation.pending": ""}


def test_the_table_formats_version_goes_from_confirmation_to_table_and_back():
    # an Iceberg snapshot id or Delta version confirmed with the snapshot is recorded with it
    props = Snapshot.from_confirmation({**CONFIRMATION, "table_version": "8470"}).properties("run-3")
    assert props[SNAPSHOT_TABLE_VERSION] == "8470"
    assert Snapshot.from_properties(props).table_version == "8470"
    previous = Snapshot(id=3, end_offsets={0: 10})
    result = WriteResult(topic="analytics.orders", records=1, offsets={0: (10, 11)})
    _, value = confirmation_record(LOG, TABLE, 4, "run-4", "att", previous, result,
                                   table_version="12")
    assert json.loads(value)["table_version"] == "12"
    assert Confirmation.from_record(value).table_version == "12"
    _, value = confirmation_record(LOG, TABLE, 4, "run-4", "att", previous, result)
    assert "table_version" not in json.loads(value)  # a plain table's: as before


# --- confirmation_record ------------------------------------------------------------------


def test_confirmation_record_content():
    previous = Snapshot(id=3, end_offsets={0: 10, 1: 20, 2: 30}, attempt="old")
    result = WriteResult(topic="analytics.orders", records=3, offsets={0: (10, 12), 2: (30, 31)})
    before = int(time.time() * 1000)
    key, value = confirmation_record(LOG, TABLE, 4, "run-4", "att", previous, result)
    after = int(time.time() * 1000)

    assert key == b"analytics.orders"  # the table: a compacted control topic keeps its latest
    record = json.loads(value)
    assert before <= record.pop("ts_ms") <= after
    assert record == {
        "table": "analytics.orders", "topic": "analytics.orders", "snapshot": 4,
        "changeset": "run-4", "attempt": "att", "records": 3,
        "offsets": {"0": [10, 11], "2": [30, 30]},  # inclusive [first, last]
        # partition 1 got nothing this time: it carries on from the previous snapshot
        "end_offsets": {"0": 12, "1": 20, "2": 31},
        "transactions": 1,  # Kafka transactions the records took
        "generation": 1,  # the log's generation it is in
    }
    assert previous.end_offsets == {0: 10, 1: 20, 2: 30}  # not modified


def test_a_snapshot_that_starts_a_generation_says_where_its_copy_starts():
    # per partition: its first record, or where it wrote none, the partition's end before it
    previous = Snapshot(id=3, end_offsets={0: 10, 1: 20, 2: 30})
    result = WriteResult(topic="analytics.orders", records=3, offsets={0: (10, 12), 2: (30, 31)})
    _, value = confirmation_record(LOG, TABLE, 4, "run-4", "att", previous, result,
                                   generation=2, starts_generation=True)
    record = json.loads(value)
    assert (record["generation"], record["generation_start"]) == (2, {"0": 10, "1": 20, "2": 30})
    confirmation = Confirmation.from_record(value)
    assert (confirmation.generation, confirmation.generation_start) == (2, {0: 10, 1: 20, 2: 30})
    snapshot = Snapshot.from_confirmation(json.loads(value))
    props = snapshot.properties("run-4")
    assert (props["logstore.generation"], props["logstore.generation.snapshot"],
            props["logstore.generation.offsets"]) == ("2", "4", '{"0": 10, "1": 20, "2": 30}')
    assert Snapshot.from_properties(props).generation == 2
    # the records of such a snapshot carry the generation in a header; others do not
    starting = Attempt.new(LOG, TABLE, previous, "run-4", generation=2, starts_generation=True)
    assert ("logstore.starts-generation", b"2") in starting.headers()
    assert all(k != "logstore.starts-generation" for k, _ in Attempt.new(LOG, TABLE, previous, "r").headers())


def test_confirmation_record_is_compact_json():
    _, value = confirmation_record(LOG, TABLE, 1, "c", "a", Snapshot(),
                                   WriteResult(topic="t", records=1, offsets={0: (0, 1)}))
    assert b" " not in value
    assert value.startswith(b'{"table":"analytics.orders",')


def test_confirmation_record_adds_new_partitions():
    previous = Snapshot(id=1, end_offsets={0: 5})
    result = WriteResult(topic="t", records=2, offsets={1: (0, 1), 0: (5, 6)})
    _, value = confirmation_record(LOG, TABLE, 2, "c", "a", previous, result)
    record = json.loads(value)
    assert record["end_offsets"] == {"0": 6, "1": 1}
    assert list(record["offsets"]) == ["0", "1"]  # sorted by partition


def test_confirmation_record_of_an_empty_change_set_keeps_the_end_offsets():
    previous = Snapshot(id=8, end_offsets={0: 5, 1: 7})
    _, value = confirmation_record(LOG, TABLE, 9, "c", "a", previous, WriteResult(topic="t"))
    record = json.loads(value)
    assert (record["records"], record["offsets"], record["end_offsets"]) == (
        0, {}, {"0": 5, "1": 7})


def test_confirmation_record_round_trips_through_from_confirmation():
    previous = Snapshot(id=3, end_offsets={0: 10, 1: 20})
    result = WriteResult(topic="t", records=4, offsets={0: (10, 13), 2: (0, 1)})
    _, value = confirmation_record(LOG, TABLE, 4, "run-4", "att", previous, result)
    assert Snapshot.from_confirmation(json.loads(value)) == Snapshot(
        id=4, end_offsets={0: 13, 1: 20, 2: 1}, attempt="att", records=4,
        written={0: (10, 13), 2: (0, 1)})


# --- write_change_set: snapshots, headers and the confirmation ----------------------------


def split_by_key(key, route):
    """Partition 1 for even ids, 0 otherwise (keyed rows only)."""
    return json.loads(key)["id"] % 2


def expected_headers(snapshot_id, attempt, changeset=CHANGESET):
    return ((H_TABLE, b"analytics.orders"), (H_SNAPSHOT, str(snapshot_id).encode()),
            (H_CHANGESET, changeset.encode()), (H_ATTEMPT, attempt.encode()))


def test_write_change_set_sends_headers_on_every_record(fake_system):
    snapshot = write_change_set(LOG, TABLE, ROWS, Snapshot(id=4), "run-5")
    (writer,) = fake_system.writers
    assert len(writer.headers) == len(writer.sent) == 4
    for headers in writer.headers[:3]:
        assert headers == expected_headers(5, snapshot.attempt, "run-5")
        assert all(isinstance(name, str) and isinstance(v, bytes) for name, v in headers)
    # the tombstone after the delete: the same headers, and the one that marks it
    assert writer.headers[3] == expected_headers(5, snapshot.attempt, "run-5") + (
        ("logstore.tombstone", b"after-delete"),)


def test_write_change_set_headers_on_tombstones_and_keyless_records(fake_system):
    write_change_set(UPSERT_LOG, TABLE, ROWS, PREVIOUS, CHANGESET)
    write_change_set(LOG, TABLE, [("c", None, None, '{"x":1}')], PREVIOUS, CHANGESET)
    upsert, keyless = fake_system.writers
    assert upsert.sent[2][1] is None  # the tombstone ...
    assert dict(upsert.headers[2])[H_CHANGESET] == b"run-1"  # ... still names its commit
    assert dict(keyless.headers[0])[H_SNAPSHOT] == b"1"


def test_write_change_set_returns_the_next_snapshot(fake_system):
    fake_system.writer_options = {"start": {0: 100, 1: 50}, "partition_of": split_by_key}
    previous = Snapshot(id=6, end_offsets={0: 100, 1: 50, 2: 9}, attempt="earlier")
    snapshot = write_change_set(LOG, TABLE, ROWS, previous, "run-7")

    assert snapshot.id == 7  # previous.id + 1
    assert re.fullmatch(r"[0-9a-f]{32}", snapshot.attempt)  # uuid4 hex
    assert snapshot.attempt != previous.attempt
    assert snapshot.records == 4  # the delete of id 3 is followed by its tombstone
    # id 2 -> partition 0, ids 1 and 3 -> partition 1: [first, next) this commit
    assert snapshot.written == {0: (100, 101), 1: (50, 53)}
    # after it: this commit's next offsets; partition 2 unchanged from the previous snapshot
    assert snapshot.end_offsets == {0: 101, 1: 53, 2: 9}
    assert previous.end_offsets == {0: 100, 1: 50, 2: 9}


def test_write_change_set_snapshot_ids_follow_the_previous_snapshot(fake_system):
    first = write_change_set(LOG, TABLE, ROWS[:1], PREVIOUS, "run-1")
    second = write_change_set(LOG, TABLE, ROWS[1:], first, "run-2")
    assert (first.id, second.id) == (1, 2)
    assert second.end_offsets == {0: 3}  # each fake writer starts at offset 0 (u, d, tombstone)


def test_write_change_set_each_call_is_a_new_attempt(fake_system):
    # a retried change set (recovery) is the same snapshot id, written by a fresh attempt
    a = write_change_set(LOG, TABLE, ROWS, Snapshot(id=2), CHANGESET)
    b = write_change_set(LOG, TABLE, ROWS, Snapshot(id=2), CHANGESET)
    assert a.id == b.id == 3
    assert a.attempt != b.attempt
    first, second = fake_system.writers
    assert {dict(h)[H_ATTEMPT] for h in first.headers} == {a.attempt.encode()}
    assert {dict(h)[H_ATTEMPT] for h in second.headers} == {b.attempt.encode()}


def test_write_change_set_empty_is_still_a_confirmed_snapshot(fake_system):
    previous = Snapshot(id=2, end_offsets={0: 5})
    snapshot = write_change_set(LOG, TABLE, [], previous, CHANGESET)
    (writer,) = fake_system.writers
    assert writer.confirmation is not None
    assert (snapshot.id, snapshot.records, snapshot.written, snapshot.end_offsets) == (
        3, 0, {}, {0: 5})


def test_commit_receives_a_confirmation_callable(fake_system):
    fake_system.writer_options = {"start": {0: 40}}
    before = int(time.time() * 1000)
    snapshot = write_change_set(LOG, TABLE, ROWS, Snapshot(id=1, end_offsets={0: 40, 3: 8}),
                                "run-2")
    (writer,) = fake_system.writers
    assert callable(writer.confirm)
    key, value = writer.confirmation
    assert isinstance(key, bytes) and isinstance(value, bytes)
    assert key == b"analytics.orders"
    record = json.loads(value)
    assert {"table", "snapshot", "changeset", "attempt", "records", "offsets",
            "end_offsets"} <= set(record)
    assert record["table"] == "analytics.orders"
    assert record["topic"] == "analytics.orders"
    assert record["snapshot"] == 2
    assert record["changeset"] == "run-2"
    assert record["attempt"] == snapshot.attempt
    assert record["attempt"].encode() == dict(writer.headers[0])[H_ATTEMPT]
    assert record["records"] == 4
    assert record["offsets"] == {"0": [40, 43]}
    assert record["end_offsets"] == {"0": 44, "3": 8}
    assert record["ts_ms"] >= before
    # the snapshot returned is the one the confirmation states
    assert snapshot == Snapshot.from_confirmation(record)


def test_confirmation_callable_builds_from_the_result_it_is_given(fake_system):
    write_change_set(LOG, TABLE, ROWS, Snapshot(id=1, end_offsets={0: 3}), CHANGESET)
    (writer,) = fake_system.writers
    # what the writer reports at commit time (all records acknowledged) is what gets confirmed
    _, value = writer.confirm(WriteResult(topic="x", records=9, offsets={4: (0, 9)}))
    record = json.loads(value)
    assert record["records"] == 9
    assert record["offsets"] == {"4": [0, 8]}
    assert record["end_offsets"] == {"0": 3, "4": 9}
    assert record["snapshot"] == 2


def test_no_confirmation_without_commit(fake_system):
    fake_system.writer_options = {"fail_on": 2}
    with pytest.raises(RuntimeError):
        write_change_set(LOG, TABLE, ROWS, PREVIOUS, CHANGESET)
    (writer,) = fake_system.writers
    assert writer.confirm is None and writer.aborted == 1


# --- write_change_set: crash points (os._exit faked, never really exits) -------------------


@pytest.fixture
def crash_log(monkeypatch):
    """Each faked os._exit records (code, records sent, commits) at the moment of the crash."""
    crashes = []
    monkeypatch.setattr(os, "_exit", lambda code: crashes.append(
        (code, len(FakeSystem.writers[-1].sent), FakeSystem.writers[-1].committed)))
    return crashes


def test_crash_mid_log_write_after_the_second_record(fake_system, monkeypatch, crash_log):
    monkeypatch.setenv(faults.ENV, "mid_log_write")
    write_change_set(LOG, TABLE, ROWS, PREVIOUS, CHANGESET)
    assert crash_log == [(75, 2, 0)]  # two records queued, nothing committed


def test_no_mid_log_write_crash_for_a_single_record(fake_system, monkeypatch, crash_log):
    monkeypatch.setenv(faults.ENV, "mid_log_write")
    write_change_set(LOG, TABLE, ROWS[:1], PREVIOUS, CHANGESET)
    assert crash_log == []


def test_crash_after_log_commit(fake_system, monkeypatch, crash_log):
    monkeypatch.setenv(faults.ENV, "after_log_commit")
    write_change_set(LOG, TABLE, ROWS, PREVIOUS, CHANGESET)
    assert crash_log == [(75, 4, 1)]  # committed (and confirmed), then the process dies


def test_no_crash_without_fault_injection(fake_system, crash_log):
    write_change_set(LOG, TABLE, ROWS, PREVIOUS, CHANGESET)
    assert crash_log == []


def test_logged_snapshot_only_when_the_table_holds_no_unlogged_commit():
    from dbt.adapters.logstore.commit.table_snapshot import UnloggedCommit, logged_snapshot

    assert logged_snapshot({COMMITTED: "a", MIRRORED: "a", SNAPSHOT_ID: "7"}, "orders") == 7
    assert logged_snapshot({}, "orders") == 0  # never logged: nothing committed either
    with pytest.raises(UnloggedCommit, match="'orders' holds change set b.*logstore_recover"):
        logged_snapshot({COMMITTED: "b", MIRRORED: "a", SNAPSHOT_ID: "7"}, "orders")
