"""Multi-run scenarios: after every run, replaying the topic from the start gives the table."""
from decimal import Decimal

import pytest
from dbt.tests.util import run_dbt

from tests.functional.contract import assert_contract, read_topic, table_properties, new_messages
from tests.functional.contract import changes as logged_changes

pytestmark = pytest.mark.apache_kafka  # proven on Apache Kafka (tests/kafka_cluster.py)

KEYED_TABLE = """
{{ config(materialized='table', unique_key='id',
          **{'log.system': 'kafka', 'log.changelog-mode': 'all'}) }}
{% set step = var('step', 1) %}
select id, name, cast(amount as decimal(12, 2)) as amount, cast(signup as date) as signup,
       cast(updated_at as timestamp) as updated_at, note
from values
{% if step == 1 %}
  (1, 'Ada', '10.50', '2024-01-01', '2024-01-01 10:00:00', null),
  (2, 'Bjørn', '0.01', '2024-02-29', '2024-02-29 23:59:59.123456', 'x'),
  (3, 'Chen 陈', '99999.99', '1999-12-31', '1970-01-01 00:00:00', 'gone soon')
{% elif step in (2, 3) %}
  (1, 'Ada', '10.50', '2024-01-01', '2024-01-01 10:00:00', null),
  (2, 'Bjørn Ø', '-0.01', '2024-02-29', '2024-03-01 00:00:00', null),
  (4, 'Dédé 🚀', null, null, null, 'new')
{% else %}
  (1, 'Ada', '10.50', '2024-01-01', '2024-01-01 10:00:00', null)
{% endif %}
as t(id, name, amount, signup, updated_at, note)
"""


def _run(step, expect_pass=True):
    return run_dbt(["run", "--vars", f"{{step: {step}}}"], expect_pass=expect_pass)



class TestKeyedTable:
    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.sql": KEYED_TABLE}

    def test_keyed_table_runs(self, project, kafka_bootstrap_servers):
        relation = f"{project.test_schema}.customers"
        topic = f"{project.test_schema}.customers"

        results = _run(1)
        log1 = assert_contract(kafka_bootstrap_servers, topic, relation)
        assert [m.envelope["op"] for m in log1] == ["c", "c", "c"]
        assert results[0].adapter_response["rows_mirrored"] == 3

        _run(2)
        log2 = assert_contract(kafka_bootstrap_servers, topic, relation)
        changes = {m.key.decode(): m.envelope for m in logged_changes(new_messages(log2, log1))}
        assert {k: e["op"] for k, e in changes.items()} == {
            '{"id":2}': "u", '{"id":3}': "d", '{"id":4}': "c"}
        assert changes['{"id":2}']["before"]["name"] == "Bjørn"
        assert changes['{"id":2}']["after"]["name"] == "Bjørn Ø"
        assert changes['{"id":3}']["after"] is None

        results = _run(3)  # same rows: nothing to log
        log3 = assert_contract(kafka_bootstrap_servers, topic, relation)
        assert new_messages(log3, log2) == []
        assert results[0].adapter_response["rows_mirrored"] == 0

        _run(4)
        log4 = assert_contract(kafka_bootstrap_servers, topic, relation)
        assert sorted(m.envelope["op"] for m in logged_changes(new_messages(log4, log3))) == ["d", "d"]
        assert sum(m.repeats_delete for m in new_messages(log4, log3)) == 2  # each with its tombstone

        props = table_properties(relation)
        assert props["log.system"] == "kafka"
        assert props["kafka.topic"] == topic
        assert props["log.consistency"] == "transactional"
        assert props["kafka.bootstrap.servers"] == kafka_bootstrap_servers


KEYLESS_TABLE = """
{{ config(materialized='table', log_system='kafka', log_system_partitions=3) }}
{% set step = var('step', 1) %}
select * from values
{% if step == 1 %} ('a', 1), ('a', 1), ('b', 2), ('z', null)
{% else %} ('a', 1), ('b', 2), ('b', 2), ('c', null), ('z', null)
{% endif %} as t(k, v)
"""


class TestKeylessTable:
    @pytest.fixture(scope="class")
    def models(self):
        return {"pairs.sql": KEYLESS_TABLE}

    def test_keyless_table_runs(self, project, kafka_bootstrap_servers):
        relation = topic = f"{project.test_schema}.pairs"
        _run(1)
        log1 = assert_contract(kafka_bootstrap_servers, topic, relation)
        assert len(log1) == 4 and all(m.key is None for m in log1)
        _run(2)
        log2 = assert_contract(kafka_bootstrap_servers, topic, relation)
        new = new_messages(log2, log1)
        assert sorted((m.envelope["op"], str(m.envelope["before"] or m.envelope["after"])) for m in new) == [
            ("c", "{'k': 'b', 'v': 2}"), ("c", "{'k': 'c', 'v': None}"), ("d", "{'k': 'a', 'v': 1}")]
        # equal rows share a partition, so a delete never overtakes the insert of its row
        placement = {}
        for m in log2:
            image = str(m.envelope["before"] or m.envelope["after"])
            assert placement.setdefault(image, m.partition) == m.partition
        _run(2)
        assert new_messages(assert_contract(kafka_bootstrap_servers, topic, relation), log2) == []


INCREMENTAL_APPEND = """
{{ config(materialized='incremental', incremental_strategy='append',
          **{'log.system': 'kafka', 'kafka.topic': 'events_' ~ this.schema}) }}
{% set step = var('step', 1) %}
select {{ step }} as step, concat('event-', cast(id as string)) as name,
       cast('2024-05-0{{ step }} 12:00:00' as timestamp) as at
from range({{ step * 2 }}) as r(id)
"""


class TestIncrementalAppend:
    @pytest.fixture(scope="class")
    def models(self):
        return {"events.sql": INCREMENTAL_APPEND}

    def test_append_runs(self, project, kafka_bootstrap_servers):
        relation = f"{project.test_schema}.events"
        topic = f"events_{project.test_schema}"
        counts = []
        for step in (1, 2, 3):
            _run(step)
            log = assert_contract(kafka_bootstrap_servers, topic, relation)
            counts.append(len(log))
            assert all(m.envelope["op"] == "c" and m.envelope["before"] is None for m in log)
        assert counts == [2, 6, 12]
        # a full refresh replaces the rows: the log carries the difference
        run_dbt(["run", "--full-refresh", "--vars", "{step: 1}"])
        log = assert_contract(kafka_bootstrap_servers, topic, relation)
        assert len(log) == 12 + 10  # the 10 rows of steps 2 and 3 leave


INSERT_OVERWRITE = """
{{ config(materialized='incremental', incremental_strategy='insert_overwrite',
          partition_by=['day'], file_format='parquet', log_system='kafka'{{ key }}) }}
{% set step = var('step', 1) %}
select * from values
{% if step == 1 %} (1, 'a', 1), (2, 'b', 1), (3, 'c', 2), (4, 'd', 2)
{% elif step == 2 %} (3, 'c2', 2), (5, 'e', 2), (6, 'f', 3)
{% else %} (7, 'g', 1)
{% endif %} as t(id, name, day)
"""


class TestInsertOverwrite:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "by_day.sql": INSERT_OVERWRITE.replace("{{ key }}", ""),
            "by_day_keyed.sql": INSERT_OVERWRITE.replace("{{ key }}", ", unique_key='id'"),
        }

    def test_insert_overwrite_runs(self, project, kafka_bootstrap_servers):
        for step in (1, 2, 3):
            _run(step)
            for model in ("by_day", "by_day_keyed"):
                name = f"{project.test_schema}.{model}"
                assert_contract(kafka_bootstrap_servers, name, name)
        keyed = read_topic(kafka_bootstrap_servers, f"{project.test_schema}.by_day_keyed")
        ops = [(m.key.decode(), m.op) for m in logged_changes(keyed)]
        # step 2 rewrote day 2: id 3 updated, id 4 gone, id 5 new; day 1 untouched until step 3
        assert ('{"id":3}', "u") in ops and ('{"id":4}', "d") in ops
        assert ('{"id":1}', "d") in ops and ('{"id":7}', "c") in ops
        assert ('{"id":1}', "u") not in ops


ALL_TYPES = """
{{ config(materialized='table', unique_key='id', **{'log.system': 'kafka', 'log.changelog-mode': 'all'}) }}
{% set step = var('step', 1) %}
select id,
       cast(flag as boolean) as flag, cast(small as tinyint) as tiny, cast(small as smallint) as small,
       cast(id * 10000000000 as bigint) as big, cast(ratio as double) as dbl, cast(ratio as float) as flt,
       cast(amount as decimal(38, 10)) as big_decimal, cast(day as date) as day,
       cast(at as timestamp) as at, cast(at as timestamp_ntz) as at_ntz,
       cast(label as binary) as raw, label,
       array(cast(amount as decimal(12, 2)), null) as amounts,
       map(coalesce(label, 'none'), id, 'other', null) as tags,
       named_struct('n', id, 's', label, 'd', cast(day as date), 'inner', named_struct('x', ratio)) as nested,
       array(named_struct('k', label)) as list_of_structs
from values
{% if step == 1 %}
  (1, true, 1, 0.5, '12345678901234567890.0123456789', '2024-01-01', '2024-01-01 00:00:00', 'plain'),
  (2, false, -128, -1.25e-7, '-0.0000000001', '1900-02-28', '2038-01-19 03:14:07.999999', 'ünï "quoted" \\\\ back'),
  (3, null, null, null, null, null, null, null)
{% else %}
  (1, true, 1, 0.5, '12345678901234567890.0123456789', '2024-01-01', '2024-01-01 00:00:00', 'plain'),
  (2, true, 127, 1e300, '0.0000000001', '9999-12-31', '1969-12-31 23:59:59.000001', '表 \\t tab'),
  (4, false, 0, -0.0, '0', '2000-02-29', '2000-02-29 12:00:00', '')
{% endif %}
as t(id, flag, small, ratio, amount, day, at, label)
"""


class TestEveryTypeRoundTrips:
    @pytest.fixture(scope="class")
    def models(self):
        return {"typed.sql": ALL_TYPES}

    def test_types(self, project, kafka_bootstrap_servers):
        relation = f"{project.test_schema}.typed"
        _run(1)
        log = assert_contract(kafka_bootstrap_servers, relation, relation)
        first = next(m.envelope["after"] for m in log if m.key == b'{"id":1}')
        # the documented encodings, on the wire
        assert first["big_decimal"] == Decimal("12345678901234567890.0123456789")  # exact
        assert first["at"] == "2024-01-01 00:00:00.000000Z"  # SQL standard, UTC
        assert first["at_ntz"] == "2024-01-01 00:00:00.000000"
        assert first["day"] == "2024-01-01"
        assert first["raw"] == "cGxhaW4="  # base64 of 'plain'
        assert first["tags"] == {"plain": 1, "other": None}
        assert first["nested"] == {"n": 1, "s": "plain", "d": "2024-01-01", "inner": {"x": Decimal("0.5")}}
        null_row = next(m.envelope["after"] for m in log if m.key == b'{"id":3}')
        assert null_row["flag"] is None and null_row["amounts"] == [None, None]
        _run(2)
        assert_contract(kafka_bootstrap_servers, relation, relation)


RESHAPED = """
{{ config(materialized='table', unique_key='id', **{'log.system': 'kafka', 'log.changelog-mode': 'all'}) }}
{% if var('step', 1) == 1 %}
select id, cast(id * 10 as int) as amount, cast(0.0 as double) as ratio from range(3) as r(id)
{% else %}
select id, cast(id * 10 as bigint) as amount,
       -- built from text: Spark folds `case ... then -0.0d else 0.0d end` to 0.0
       cast(concat(case when id = 0 and {{ var('step') }} = 3 then '-' else '' end, '0.0') as double) as ratio,
       'new' as extra from range(2) as r(id)
{% endif %}
"""


class TestColumnsOrTypesChange:
    """A rebuild that changes columns or types is diffed by JSON images (typed rows cannot be
    compared): every row a consumer would see differently is an update."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"reshaped.sql": RESHAPED}

    def test_reshaped_rows_are_updates(self, project, kafka_bootstrap_servers):
        relation = topic = f"{project.test_schema}.reshaped"
        _run(1)
        first = assert_contract(kafka_bootstrap_servers, topic, relation)
        results = _run(2)
        second = new_messages(assert_contract(kafka_bootstrap_servers, topic, relation), first)
        assert sorted((m.key.decode(), m.envelope["op"]) for m in logged_changes(second)) == [
            ('{"id":0}', "u"), ('{"id":1}', "u"), ('{"id":2}', "d")]
        assert results[0].adapter_response["rows_mirrored"] == 4  # and the delete's tombstone
        # the same shape again: typed comparison, nothing changed, nothing logged
        results = _run(2)
        assert results[0].adapter_response["rows_mirrored"] == 0
        third = assert_contract(kafka_bootstrap_servers, topic, relation)
        # 0.0 -> -0.0: equal as Spark values, not as JSON, so it is logged
        results = _run(3)
        changed = new_messages(assert_contract(kafka_bootstrap_servers, topic, relation), third)
        assert [(m.key.decode(), m.envelope["op"]) for m in changed] == [('{"id":0}', "u")]
        assert b'"ratio":-0.0' in changed[0].value
