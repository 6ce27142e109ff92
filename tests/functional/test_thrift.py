"""The thrift method end to end: dbt runs in-process against a real Spark Thrift Server (started
from the pyspark wheel), and after every run replaying the topic from the start gives exactly the
table's rows. The tables live in the Thrift Server's own metastore, so they are read back over
thrift with PyHive, not through the in-process Spark session the other tests use."""
import pytest
from dbt.tests.util import run_dbt
from kafka import KafkaAdminClient

from tests.functional.contract import assert_contract_rows, rows_state, new_messages
from tests.functional.contract import changes as logged_changes

# Own copies of the contract tests' models, so this module does not follow their edits.
KEYED_TABLE = """
{{ config(materialized='table', unique_key='id', **{'log.system': 'kafka'}) }}
{% set step = var('step', 1) %}
select id, name, cast(amount as decimal(12, 2)) as amount, cast(signup as date) as signup,
       cast(updated_at as timestamp) as updated_at, note
from values
{% if step == 1 %}
  (1, 'Ada', '10.50', '2024-01-01', '2024-01-01 10:00:00', null),
  (2, 'Bjørn', '0.01', '2024-02-29', '2024-02-29 23:59:59.123456', 'x'),
  (3, 'Chen 陈', '99999.99', '1999-12-31', '1970-01-01 00:00:00', 'gone soon')
{% elif step == 2 %}
  (1, 'Ada', '10.50', '2024-01-01', '2024-01-01 10:00:00', null),
  (2, 'Bjørn Ø', '-0.01', '2024-02-29', '2024-03-01 00:00:00', null),
  (4, 'Dédé 🚀', null, null, null, 'new')
{% else %}
  (1, 'Ada', '10.50', '2024-01-01', '2024-01-01 10:00:00', null)
{% endif %}
as t(id, name, amount, signup, updated_at, note)
"""

INCREMENTAL_APPEND = """
{{ config(materialized='incremental', incremental_strategy='append',
          **{'log.system': 'kafka', 'kafka.topic': 'events_' ~ this.schema}) }}
{% set step = var('step', 1) %}
select {{ step }} as step, concat('event-', cast(id as string)) as name,
       cast('2024-05-0{{ step }} 12:00:00' as timestamp) as at,
       cast(id as decimal(10, 1)) / 4 as share
from range({{ step * 2 }}) as r(id)
"""

PLAIN_TABLE = """
{{ config(materialized='table') }}
{% set step = var('step', 1) %}
select id, cast(price as decimal(8, 3)) as price, cast(day as date) as day
from values
{% if step == 1 %} (1, '1.250', '2024-01-01'), (2, null, '2024-01-02')
{% else %} (2, '7.000', null), (3, '0.001', '2024-12-31')
{% endif %} as t(id, price, day)
"""

LOG_KEYS = ("log.system", "kafka.topic", "logstore.changeset.committed", "logstore.changeset.mirrored")


def _run(step, *models):
    return run_dbt(["run", "--select", *models, "--vars", f"{{step: {step}}}"])


def _op(message):
    """The change a record carries; a tombstone (null value, upsert mode) is a delete."""
    return "d" if message.value is None else message.envelope["op"]



def _topics(bootstrap_servers):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


class TestThriftMethod:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, kafka_bootstrap_servers, spark_thrift_server):
        return {
            "type": "logstore",
            "method": "thrift",
            "host": spark_thrift_server.host,
            "port": spark_thrift_server.port,
            "threads": 1,
            "kafka_bootstrap_servers": kafka_bootstrap_servers,
            "connect_retries": 3,
            "connect_timeout": 5,
            "poll_interval": 1,
        }

    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.sql": KEYED_TABLE, "events.sql": INCREMENTAL_APPEND,
                "plain.sql": PLAIN_TABLE}

    def _contract(self, server, bootstrap, topic, relation):
        types, rows = server.table(relation)
        return assert_contract_rows(bootstrap, topic, types, rows, relation), rows

    def test_logged_models(self, project, spark_thrift_server, kafka_bootstrap_servers):
        server, schema = spark_thrift_server, project.test_schema
        customers, events = f"{schema}.customers", f"{schema}.events"
        customers_topic, events_topic = customers, f"events_{schema}"

        # run 1: first builds, every row an insert
        results = {r.node.name: r for r in _run(1, "customers", "events")}
        assert results["customers"].adapter_response["rows_mirrored"] == 3
        assert results["events"].adapter_response["rows_mirrored"] == 2
        log1, rows = self._contract(server, kafka_bootstrap_servers, customers_topic, customers)
        assert [_op(m) for m in log1] == ["c", "c", "c"]
        assert sorted(r["id"] for r in rows) == [1, 2, 3]
        ev1, _ = self._contract(server, kafka_bootstrap_servers, events_topic, events)
        assert len(ev1) == 2

        # run 2: id 2 updated, id 3 deleted, id 4 inserted; 4 more events appended
        results = {r.node.name: r for r in _run(2, "customers", "events")}
        assert results["customers"].adapter_response["rows_mirrored"] == 4  # u, d + tombstone, c
        log2, rows = self._contract(server, kafka_bootstrap_servers, customers_topic, customers)
        changes = {m.key.decode(): m for m in logged_changes(new_messages(log2, log1))}
        assert {k: _op(m) for k, m in changes.items()} == {
            '{"id":2}': "u", '{"id":3}': "d", '{"id":4}': "c"}
        assert changes['{"id":2}'].envelope["after"]["name"] == "Bjørn Ø"
        assert changes['{"id":4}'].envelope["after"]["name"] == "Dédé 🚀"
        assert sorted(r["id"] for r in rows) == [1, 2, 4]
        ev2, _ = self._contract(server, kafka_bootstrap_servers, events_topic, events)
        assert len(new_messages(ev2, ev1)) == 4

        # run 3: ids 2 and 4 deleted; 6 more events appended
        _run(3, "customers", "events")
        log3, rows = self._contract(server, kafka_bootstrap_servers, customers_topic, customers)
        assert sorted(_op(m) for m in logged_changes(new_messages(log3, log2))) == ["d", "d"]
        assert [r["id"] for r in rows] == [1]
        ev3, rows = self._contract(server, kafka_bootstrap_servers, events_topic, events)
        assert len(ev3) == len(rows) == 2 + 4 + 6
        assert all(m.envelope["op"] == "c" and m.envelope["before"] is None for m in ev3)

        # the commit protocol finished: tags set, no change table left behind
        for relation, topic in ((customers, customers_topic), (events, events_topic)):
            props = server.table_properties(relation)
            assert props["log.system"] == "kafka" and props["kafka.topic"] == topic
            assert props["kafka.bootstrap.servers"] == kafka_bootstrap_servers
            assert props["logstore.changeset.mirrored"] == props["logstore.changeset.committed"]
        tables = {row[1] for row in server.query(f"show tables in {schema}")}
        assert tables == {"customers", "events"}, tables

    def test_plain_table_behaves_as_dbt_spark(self, project, spark_thrift_server,
                                               kafka_bootstrap_servers):
        server, relation = spark_thrift_server, f"{project.test_schema}.plain"
        for step, expected in (
            (1, [{"id": 1, "price": "1.250", "day": "2024-01-01"},
                 {"id": 2, "price": None, "day": "2024-01-02"}]),
            (2, [{"id": 2, "price": "7.000", "day": None},
                 {"id": 3, "price": "0.001", "day": "2024-12-31"}]),
        ):
            results = _run(step, "plain")
            assert "rows_mirrored" not in (results[0].adapter_response or {})
            types, rows = server.table(relation)
            assert types == {"id": "int", "price": "decimal(8,3)", "day": "date"}
            assert rows_state(types, rows) == rows_state(types, expected)
            props = server.table_properties(relation)
            assert not [k for k in props if k in LOG_KEYS or k.startswith("logstore.")], props
        assert relation not in _topics(kafka_bootstrap_servers)

    def test_row_source_pages_through_the_cursor(self, spark_thrift_server):
        """The mirror streams change rows over thrift with fetchmany: batch boundaries and an
        empty result (a run with no changes) give exactly the query's rows."""
        from dbt.adapters.spark.connections import PyhiveConnectionWrapper

        from dbt.adapters.logstore.spark.row_source import iter_query_rows

        handle = PyhiveConnectionWrapper(spark_thrift_server.connect(), poll_interval=1)
        try:
            sql = "select id, cast(id as string) as s from range(7) as r(id) order by id"
            for batch_size in (1, 3, 7, 100):
                assert list(iter_query_rows(handle, sql, batch_size=batch_size)) == [
                    (i, str(i)) for i in range(7)]
            assert list(iter_query_rows(handle, "select 1 as x where false", batch_size=3)) == []
        finally:
            handle.close()
