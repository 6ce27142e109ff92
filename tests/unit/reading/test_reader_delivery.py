"""The reader's delivery rules (docs/log-format.md section 5) and start points, against a fake
log (log_system.LogReader) that serves a data topic and its control topic; logstore_changes'
range read (source_changes.read_range) follows the same rule."""
import json
from dataclasses import replace

import pytest

from dbt.adapters.logstore.reading import reader as reader_module
from dbt.adapters.logstore.reading import source_changes
from dbt.adapters.logstore.log.control_records import Confirmation, ConfirmedAttempts
from dbt.adapters.logstore.log.log_system import LogFeed, LogReader, LogRecord
from dbt.adapters.logstore.reading.reader import (
    ChangelogReader, ReaderError, StartPoint, start_after,
)

Msg = LogRecord
TOPIC, CONTROL, TABLE = "t", "t__logstore_commits", "s.t"


def data(partition, offset, snapshot, attempt, op="c", id_=1, table=TABLE):
    value = {"before": None, "after": {"id": id_, "s": snapshot}, "op": op, "ts_ms": 0, "source": {}}
    headers = [("logstore.table", table.encode()), ("logstore.snapshot", str(snapshot).encode()),
               ("logstore.attempt", attempt.encode())]
    return Msg(partition, offset, json.dumps({"id": id_}).encode(), json.dumps(value).encode(), headers)


def confirm(offset, snapshot, attempt, offsets, end, ts=0, table=TABLE):
    value = {"table": table, "snapshot": snapshot, "attempt": attempt, "records": 1,
             "offsets": {str(p): r for p, r in offsets.items()},
             "end_offsets": {str(p): o for p, o in end.items()}, "ts_ms": ts}
    return Msg(0, offset, table.encode(), json.dumps(value).encode(), [])


class FakeFeed(LogFeed):
    """Serves the given polls (a dict {topic: records} each); at its end when none is left."""

    def __init__(self, polls, partitions, from_offsets):
        self.polls, self.partitions = list(polls), list(partitions)
        self.from_offsets = dict(from_offsets)
        self.positions = {p: from_offsets.get(p, 0) for p in partitions}
        self.control_position, self.closed = 0, False

    def poll(self, timeout_ms):
        if not self.polls:
            return [], {}
        batch = self.polls.pop(0)
        control = [m for m in batch.get(CONTROL, []) if m.offset >= self.control_position]
        self.control_position += len(control)
        data_ = {}
        for m in batch.get(TOPIC, []):
            if m.offset >= self.positions[m.partition]:
                data_.setdefault(m.partition, []).append(m)
                self.positions[m.partition] = m.offset + 1
        return control, data_

    def position(self, partition):
        return self.positions[partition]

    def at_end(self):
        return not self.polls

    def close(self):
        self.closed = True


class FakeLog(LogReader):
    """A log whose records are the given polls, in order."""

    topic, address = TOPIC, "h:9"

    def __init__(self, polls, partitions=(0, 1)):
        self.polls, self.partitions, self.fed = polls, partitions, None

    def control_records(self, timeout_seconds=60.0):
        return [m for batch in self.polls for m in batch.get(CONTROL, [])]

    def end_offsets(self):
        return {p: 0 for p in self.partitions}

    def read_range(self, partition, start, end):
        for batch in self.polls:
            yield from (m for m in batch.get(TOPIC, [])
                        if m.partition == partition and start <= m.offset < end)

    def feed(self, partitions, from_offsets):
        self.fed = FakeFeed(self.polls, partitions, from_offsets)
        return self.fed


def run(polls, start=StartPoint("earliest"), **kwargs):
    log = FakeLog(polls)
    r = ChangelogReader(log, TABLE)
    kwargs.setdefault("idle_seconds", 0)
    if "after_snapshot" not in kwargs:
        kwargs["after_snapshot"], kwargs["from_offsets"] = 0, {}
    got = [(c.snapshot, c.partition, c.offset) for c in r.changes(start, **kwargs)]
    assert log.fed.closed
    return got, log.fed


def landed(polls, partition=0, end=100):
    """What logstore_changes lands of a partition's range, by the same rule."""
    log = FakeLog(polls)
    attempts = ConfirmedAttempts(TABLE, ChangelogReader(log, TABLE).confirmations())
    return [(row[4], row[5], row[6]) for row in
            source_changes.read_range(log, partition, 0, end, attempts)]


def test_confirmed_attempts_are_delivered_in_partition_order():
    polls = [{TOPIC: [data(0, 0, 1, "a"), data(1, 0, 1, "a"), data(0, 1, 1, "a")],
              CONTROL: [confirm(0, 1, "a", {0: [0, 1], 1: [0, 0]}, {0: 2, 1: 1})]}]
    got, _ = run(polls)
    assert got == [(1, 0, 0), (1, 0, 1), (1, 1, 0)]


def test_a_record_waits_for_its_confirmation_in_a_later_poll():
    polls = [{TOPIC: [data(0, 0, 1, "a")]}, {}, {CONTROL: [confirm(0, 1, "a", {0: [0, 0]}, {0: 1})]}]
    got, _ = run(polls)
    assert got == [(1, 0, 0)]


def test_a_failed_attempt_is_dropped_when_a_retry_of_its_snapshot_is_confirmed():
    polls = [{TOPIC: [data(0, 0, 1, "dead"), data(0, 1, 1, "dead"), data(0, 3, 1, "retry")],
              CONTROL: [confirm(0, 1, "retry", {0: [3, 3]}, {0: 4})]}]
    got, _ = run(polls)
    assert got == [(1, 0, 3)]


def test_records_outside_the_confirmed_range_are_not_delivered():
    polls = [{TOPIC: [data(0, 0, 1, "a"), data(0, 5, 1, "a")],
              CONTROL: [confirm(0, 1, "a", {0: [0, 0]}, {0: 1})]}]
    assert run(polls)[0] == [(1, 0, 0)]


def test_an_unconfirmed_attempt_at_the_end_is_held_back_not_delivered():
    polls = [{TOPIC: [data(0, 0, 1, "a"), data(0, 1, 2, "inflight")],
              CONTROL: [confirm(0, 1, "a", {0: [0, 0]}, {0: 1})]}]
    assert run(polls)[0] == [(1, 0, 0)]


def test_other_tables_in_the_topic_are_skipped():
    polls = [{TOPIC: [data(0, 0, 1, "x", table="s.other"), data(0, 1, 1, "a")],
              CONTROL: [confirm(0, 1, "x", {0: [0, 0]}, {0: 1}, table="s.other"),
                        confirm(1, 1, "a", {0: [1, 1]}, {0: 2})]}]
    assert run(polls)[0] == [(1, 0, 1)]


def test_after_snapshot_and_up_to_snapshot_bound_the_range():
    polls = [{TOPIC: [data(0, 0, 1, "a"), data(0, 1, 2, "b"), data(0, 2, 3, "c")],
              CONTROL: [confirm(0, 1, "a", {0: [0, 0]}, {0: 1}), confirm(1, 2, "b", {0: [1, 1]}, {0: 2}),
                        confirm(2, 3, "c", {0: [2, 2]}, {0: 3})]}, {}, {}]
    got, feed = run(polls, after_snapshot=1, from_offsets={0: 1}, up_to_snapshot=2)
    assert got == [(2, 0, 1)]
    assert feed.from_offsets == {0: 1}


CONFIRMATIONS = [Confirmation(TABLE, 1, "a", {0: (0, 2)}, {0: 3, 1: 0}, ts_ms=1000),
                 Confirmation(TABLE, 2, "b", {1: (0, 1)}, {0: 3, 1: 2}, ts_ms=2000),
                 Confirmation(TABLE, 3, "c", {0: (3, 3)}, {0: 4, 1: 2}, ts_ms=3000)]


@pytest.mark.parametrize("text, expected", [
    ("earliest", (0, {})), ("snapshot:0", (0, {})), ("latest", (3, {0: 4, 1: 2})),
    ("snapshot:2", (2, {0: 3, 1: 2})), ("snapshot=1", (1, {0: 3, 1: 0})),
    ("timestamp:2000", (1, {0: 3, 1: 0})), ("timestamp:2001", (2, {0: 3, 1: 2})),
    ("timestamp:999", (0, {})), ("timestamp:1970-01-01T00:00:02Z", (1, {0: 3, 1: 0})),
])
def test_start_points(text, expected):
    assert start_after(CONFIRMATIONS, StartPoint.parse(text)) == expected


def test_a_snapshot_not_in_the_log_is_a_clear_error():
    with pytest.raises(ReaderError, match="Snapshot 9 is not in the log. Allowed: 0 .* from 1 to 3"):
        start_after(CONFIRMATIONS, StartPoint.parse("snapshot:9"))
    with pytest.raises(ReaderError, match="no snapshot yet"):
        start_after([], StartPoint.parse("snapshot:1"))


@pytest.mark.parametrize("text", ["", "snapshot", "snapshot:-1", "latest:3", "timestamp:", "x"])
def test_unknown_start_points(text):
    with pytest.raises(ReaderError, match="Allowed|ISO-8601"):
        StartPoint.parse(text)


def test_latest_full_needs_the_table():
    with pytest.raises(ReaderError, match="hybrid_read"):
        list(reader_module.read_changelog("h:9", TOPIC, start="latest-full"))


def test_a_parallel_attempt_is_delivered_only_within_each_writers_range():
    def task(partition, offset, writer):
        m = data(partition, offset, 1, "p")
        return replace(m, headers=m.headers + [("logstore.writer", writer.encode())])

    value = {"table": TABLE, "snapshot": 1, "attempt": "p", "records": 3,
             "offsets": {"0": [0, 3]}, "end_offsets": {"0": 4},
             "writers": {"task-0.0": {"0": [0, 0]}, "task-1.1": {"0": [2, 3]}}, "ts_ms": 0}
    control = Msg(0, 0, TABLE.encode(), json.dumps(value).encode(), [])
    # task-1.0 wrote offset 1 and was retried as task-1.1: its record is not delivered
    polls = [{TOPIC: [task(0, 0, "task-0.0"), task(0, 1, "task-1.0"), task(0, 2, "task-1.1"),
                      task(0, 3, "task-1.1")], CONTROL: [control]}]
    assert run(polls)[0] == [(1, 0, 0), (1, 0, 2), (1, 0, 3)]
    assert landed(polls) == [(1, 0, 0), (1, 0, 2), (1, 0, 3)]  # logstore_changes: the same


def test_logstore_changes_lands_what_the_reader_delivers():
    # one rule for both (control_records.ConfirmedAttempts): confirmed attempts in their
    # ranges, of this table; a failed attempt's records and those past a range are not landed
    polls = [{TOPIC: [data(0, 0, 1, "dead"), data(0, 1, 1, "a"), data(0, 2, 1, "a"),
                      data(0, 3, 1, "x", table="s.other")],
              CONTROL: [confirm(0, 1, "a", {0: [1, 1]}, {0: 2}),
                        confirm(1, 1, "x", {0: [3, 3]}, {0: 4}, table="s.other")]}]
    assert run(polls)[0] == landed(polls) == [(1, 0, 1)]


def test_a_topic_that_does_not_exist_is_a_clear_error():
    with pytest.raises(ReaderError, match="Topic 't' does not exist on h:9"):
        list(ChangelogReader(FakeLog([], partitions=()), TABLE).changes())


def test_confirmations_are_the_tables_first_per_snapshot_in_snapshot_order():
    polls = [{CONTROL: [confirm(0, 2, "b", {0: [1, 1]}, {0: 2}),
                        confirm(1, 1, "a", {0: [0, 0]}, {0: 1}),
                        confirm(2, 2, "b2", {0: [3, 3]}, {0: 4}),
                        confirm(3, 3, "x", {0: [0, 0]}, {0: 1}, table="s.other")]}]
    got = ChangelogReader(FakeLog(polls), TABLE).confirmations()
    assert [(c.snapshot, c.attempt) for c in got] == [(1, "a"), (2, "b")]
