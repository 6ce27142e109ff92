"""The commit protocol: recovery decisions and streaming a change set into a (fake) log."""
import json
import time

import pytest

from dbt.adapters.logstore import commit_protocol, log_system
from dbt.adapters.logstore.commit_protocol import (
    CHANGESET_ID,
    COMMITTED,
    MIRRORED,
    TableRef,
    parse_properties,
    prepare_log,
    recovery_action,
    write_change_set,
)
from dbt.adapters.logstore.log_config import LogConfig
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

    def prepare(self, log):
        FakeSystem.prepared.append(log)

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
    prepare_log(LOG)
    assert fake_system.prepared == [LOG]


def test_unknown_system_fails_before_writing():
    log = LogConfig(model="m", system="nope", topic="t", bootstrap_servers="x:1")
    with pytest.raises(ValueError, match="unknown log system 'nope'"):
        write_change_set(log, TABLE, ROWS)
