"""A re-base's retraction (retraction.py): which logs get one, what is read of the topic, and the
row a plain upsert reader holds per key after each record (formats.held_after)."""
import pytest

from dbt.adapters.logstore.formats import field_text, held_after
from dbt.adapters.logstore.log.lifecycle.generations import GenerationStart
from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.log.log_system import LogRecord
from dbt.adapters.logstore.changes.retraction import held_rows, needed, ranges, retraction_sql

KEYED = LogConfig(model="m", system="kafka", topic="t", unique_key=("id",))
ON_RECORDS = GenerationStart(2, 5, {0: 10, 1: 0})


@pytest.mark.parametrize("log, start, expected", [
    (KEYED, ON_RECORDS, True),
    (KEYED, GenerationStart(2, 5, {0: 0, 1: 0}), False),  # an empty (new) topic: nothing held
    (KEYED, None, False),  # no generation starts
    (LogConfig(model="m", system="kafka", topic="t"), ON_RECORDS, False),  # keyless
    (LogConfig(model="m", system="kafka", topic="t", unique_key=("id",), ignore_delete=True),
     ON_RECORDS, False),  # writes no deletes
    (LogConfig(model="m", system="kafka", topic="t", unique_key=("id",), format="json",
               changelog_mode="upsert"), ON_RECORDS, True),  # tombstones
    (LogConfig(model="m", system="kafka", topic="t", unique_key=("id",), format="json",
               changelog_mode="all"), ON_RECORDS, False),  # a json log of appends has no delete
])
def test_which_generations_retract(log, start, expected):
    assert needed(log, start) is expected


class Reader:
    def __init__(self, records, starts=None):
        self.records, self.starts = records, starts or {}

    def start_offsets(self):
        return self.starts

    def read_range(self, partition, start, end):
        return [r for r in self.records if r.partition == partition and start <= r.offset < end]


def _envelope(op, before, after):
    return (f'{{"before":{before},"after":{after},"op":"{op}","ts_ms":1,'
            f'"source":{{"connector":"dbt-logstore"}}}}').encode()


def test_what_is_read_is_the_topic_before_the_generation_from_what_the_broker_holds():
    reader = Reader([], starts={0: 4, 1: 0})
    assert ranges(reader, GenerationStart(3, 9, {0: 10, 1: 0, 2: 7})) == [(0, 4, 10), (2, 0, 7)]


def test_each_keyed_record_leaves_its_key_holding_a_row_or_nothing():
    records = [
        LogRecord(0, 0, b'{"id":1}', _envelope("c", "null", '{"id":1,"v":1.50}')),
        LogRecord(0, 1, b'{"id":2}', _envelope("r", "null", '{"id":2,"v":2}')),
        LogRecord(0, 2, b'{"id":2}', _envelope("d", '{"id":2,"v":2}', "null")),
        LogRecord(0, 3, b'{"id":2}', None),  # its tombstone
        LogRecord(0, 4, None, b'{"id":9}'),  # keyless: no key to delete by
        LogRecord(1, 0, b'{"id":3}', b'{"id":3,"v":"x"}'),  # a json (upsert) row
    ]
    held = list(held_rows(Reader(records), iter([(0, 0, 5), (1, 0, 1)])))
    assert held == [('{"id":1}', '{"id":1,"v":1.50}', 0, 0), ('{"id":2}', '{"id":2,"v":2}', 0, 1),
                    ('{"id":2}', None, 0, 2), ('{"id":2}', None, 0, 3),
                    ('{"id":3}', '{"id":3,"v":"x"}', 1, 0)]


def test_connects_envelope_is_unwrapped_to_the_texts_the_change_table_holds():
    key = b'{"schema":{"type":"struct","fields":[]},"payload":{"id":1}}'
    value = (b'{"schema":{"type":"struct"},"payload":' + _envelope("u", '{"id":1}', '{"id":1,"d":1E-7}')
             + b'}')
    assert held_after(key, value) == ('{"id":1}', '{"id":1,"d":1E-7}')


def test_a_field_is_taken_as_written():
    text = ' { "a" : [1, {"x": "}"}] , "b":"\\u00e9" }'
    assert (field_text(text, "a"), field_text(text, "b"), field_text(text, "c")) == \
        ('[1, {"x": "}"}]', '"\\u00e9"', None)


def test_the_deletes_are_the_latest_live_row_of_each_key_the_generation_lacks():
    sql = retraction_sql("s.m__logstore_changes", "s.m__logstore_held")
    assert sql.startswith("insert into s.m__logstore_changes select 'd', h.key, h.row, ")
    assert "order by part desc, off desc" in sql and "left anti join s.m__logstore_changes c" in sql
    assert sql.endswith("where h.n = 1 and h.row is not null")
