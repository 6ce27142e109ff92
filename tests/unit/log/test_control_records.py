"""Control records: what the commit protocol writes (confirmation_record) is what the readers
read (parse_control_record, Confirmation), field for field."""
import json

from dbt.adapters.logstore.commit.snapshots import Snapshot, TableRef
from dbt.adapters.logstore.log.control_records import (
    DELIVER, DROP, HOLD, Confirmation, ConfirmedAttempts, RecordTags, confirmation_record,
    parse_control_record,
)
from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.log.log_system import WriteResult

LOG = LogConfig(model="orders_model", system="fake", topic="analytics.orders",
                bootstrap_servers="x:1", unique_key=("id",))
TABLE = TableRef("analytics", "orders")


def test_parse_control_record_reads_what_confirmation_record_wrote():
    previous = Snapshot(id=3, end_offsets={0: 10, 1: 20})
    result = WriteResult(topic="t", records=4, offsets={0: (10, 13), 2: (0, 1)})
    _, value = confirmation_record(LOG, TABLE, 4, "run-4", "att", previous, result)
    assert parse_control_record(value) == json.loads(value)


def test_a_written_record_read_as_a_confirmation():
    previous = Snapshot(id=3, end_offsets={0: 10, 1: 20})
    result = WriteResult(topic="t", records=4, offsets={0: (10, 13), 2: (0, 1)})
    _, value = confirmation_record(LOG, TABLE, 4, "run-4", "att", previous, result)
    c = Confirmation.from_record(value)
    assert (c.table, c.snapshot, c.attempt, c.records, c.writers) == (
        "analytics.orders", 4, "att", 4, None)
    assert c.offsets == {0: (10, 12), 2: (0, 0)}  # inclusive
    assert c.end_offsets == {0: 13, 1: 20, 2: 1}
    assert c.ranges() == {("att", None): {0: (10, 12), 2: (0, 0)}}
    assert c.confirms(0, 12, None) and not c.confirms(0, 13, None) and not c.confirms(1, 0, None)


def test_a_parallel_attempt_confirms_each_writer_within_its_own_ranges():
    total = WriteResult(topic="t", records=3, offsets={0: (0, 3)})
    writers = {"w0": WriteResult(topic="t", records=2, offsets={0: (0, 2)}),
               "w1": WriteResult(topic="t", records=1, offsets={0: (2, 3)})}
    _, value = confirmation_record(LOG, TABLE, 1, "run-1", "att", Snapshot(), total, writers)
    c = Confirmation.from_record(value)
    assert c.ranges() == {("att", "w0"): {0: (0, 1)}, ("att", "w1"): {0: (2, 2)}}
    assert c.confirms(0, 1, "w0") and not c.confirms(0, 2, "w0") and c.confirms(0, 2, "w1")
    assert not c.confirms(0, 0, None)  # a record without its writer header is not this attempt's


def tags(table="analytics.orders", snapshot=4, attempt="att", writer=None):
    headers = [("logstore.table", table.encode()), ("logstore.snapshot", str(snapshot).encode()),
               ("logstore.attempt", attempt.encode())]
    return RecordTags.of(headers + ([("logstore.writer", writer.encode())] if writer else []))


def test_record_tags_read_the_headers_once():
    assert tags(writer="task-0.1") == RecordTags("analytics.orders", 4, "att", "task-0.1")
    assert RecordTags.of(None) == RecordTags(None, 0, "", None)


def test_confirmed_attempts_deliver_drop_or_hold_a_record():
    c = Confirmation("analytics.orders", 4, "att", {0: (10, 12)}, {0: 13}, ts_ms=0)
    confirmed = ConfirmedAttempts("analytics.orders", [c])
    assert confirmed.verdict(tags(), 0, 11) == DELIVER
    assert confirmed.verdict(tags(), 0, 13) == DROP  # outside its range: its attempt is known
    assert confirmed.verdict(tags(table="analytics.other"), 0, 11) == DROP  # another table's
    assert confirmed.verdict(tags(attempt="lost"), 0, 9) == DROP  # its snapshot has a winner
    assert confirmed.verdict(tags(attempt="next", snapshot=5), 0, 13) == HOLD  # not confirmed yet
    assert confirmed.verdict(tags(writer="task-0.0"), 0, 11) == DROP  # not a parallel attempt


def test_the_first_confirmation_of_an_attempt_counts_and_other_tables_are_ignored():
    first = Confirmation("analytics.orders", 4, "att", {0: (10, 12)}, {0: 13}, ts_ms=0)
    again = Confirmation("analytics.orders", 4, "att", {0: (20, 22)}, {0: 23}, ts_ms=0)
    other = Confirmation("analytics.other", 9, "x", {0: (0, 0)}, {0: 1}, ts_ms=0)
    confirmed = ConfirmedAttempts("analytics.orders", [first, again, other])
    assert confirmed.attempts == {"att": first} and confirmed.newest == 4
    everyone = ConfirmedAttempts(None, [first, other])  # a topic read without its model
    assert set(everyone.attempts) == {"att", "x"} and everyone.newest == 9
