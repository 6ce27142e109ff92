"""Spark Structured Streaming's half of reading a log, with Spark's own JSON parser: the record
values, parsed by `from_json` with Spark's DEFAULT options (what docs/consumers.md tells a
Spark consumer to write), applied as Debezium events or upserts, equal the table (the ISO-8601
standard is read by the same parser; test_peer_flink.py covers it with Flink). The records
come from our test consumer here, over every column type; tests/functional/test_live_spark.py
has Spark's own Kafka source follow live topics."""
import pytest
from dbt.tests.util import run_dbt

from tests.functional.contract import (
    canonical, changes, confirmed, read_topic, spark, table_state, wait_for_confirmations,
)

pytestmark = pytest.mark.apache_kafka  # proven on Apache Kafka (tests/kafka_cluster.py)

TYPES = """
{{{{ config(materialized='table', unique_key='id', **{config}) }}}}
{{% set step = var('step', 1) %}}
select id, cast(amount as decimal(20, 10)) as amount, cast(at as timestamp) as at,
       cast(at as timestamp_ntz) as wall, cast(day as date) as day, ratio, name,
       array(id, id + 1) as ids, named_struct('a', id, 'b', name) as info
from values
{{% if step == 1 %}}
  (1, '0.0000001', '2024-01-01 10:00:00', '2024-01-01', cast('NaN' as double), 'Ada'),
  (2, '-12.5', '2024-02-29 23:59:59.123456', '2024-02-29', 1.5, 'Bjørn'),
  (3, '0', null, null, null, null)
{{% else %}}
  (1, '0.0000001', '2024-01-01 10:00:00', '2024-01-01', cast('NaN' as double), 'Ada'),
  (2, '99.99', '2024-06-30 12:00:00', '2024-06-30', cast('Infinity' as double), 'Bjørn 🚀'),
  (4, '1', '1970-01-01 00:00:00', '1970-01-01', 0.0, '陈')
{{% endif %}}
as t(id, amount, at, day, ratio, name)
"""


def _run(step):
    return run_dbt(["run", "--vars", f"{{step: {step}}}"])


class TestSparkFromJsonReadsTheLog:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "dbz_sql.sql": TYPES.format(config="{'log.system': 'kafka'}"),
            "upsert_json.sql": TYPES.format(config="{'log.system': 'kafka', 'log.format': 'json'}"),
            "dbz_plain.sql": TYPES.format(
                config="{'log.system': 'kafka', 'log.encode.decimal-as-plain-number': true}"),
        }

    def test_from_json_with_default_options(self, project, kafka_bootstrap_servers):
        session = spark()
        zone = session.conf.get("spark.sql.session.timeZone")
        try:
            # the reader's session zone must not matter either
            for step in (1, 2):
                _run(step)
            session.conf.set("spark.sql.session.timeZone", "Asia/Kolkata")
            for model in ("dbz_sql", "upsert_json", "dbz_plain"):
                self._check(project, kafka_bootstrap_servers, model)
            # decimals as Java writes them, or plain with log.encode.decimal-as-plain-number
            for model, tiny in (("dbz_sql", b'"amount":1.000E-7'), ("dbz_plain", b'"amount":0.0000001000')):
                values = [m.value for m in read_topic(kafka_bootstrap_servers,
                                                      f"{project.test_schema}.{model}") if m.value]
                assert any(tiny in v for v in values), (model, values[:2])
            plain = read_topic(kafka_bootstrap_servers, f"{project.test_schema}.dbz_plain")
            assert not any(b"E-" in m.value for m in plain if m.value)
        finally:
            session.conf.set("spark.sql.session.timeZone", zone)

    @staticmethod
    def _check(project, servers, model):
        relation = topic = f"{project.test_schema}.{model}"
        wait_for_confirmations(servers, topic, 2)
        records = confirmed(servers, topic, read_topic(servers, topic))
        types, table = table_state(relation)
        row = ", ".join(f"`{c}` {t}" for c, t in types.items())
        schema = row if model == "upsert_json" else f"before struct<{row}>, after struct<{row}>, op string"
        values = [(i, m.value.decode()) for i, m in enumerate(records) if m.value is not None]
        parsed = dict(spark().createDataFrame(values, "i int, value string")
                      .selectExpr("i", f"from_json(value, '{schema}') as v").collect())
        state = {}
        for i, m in enumerate(records):
            if m.value is None:  # a tombstone deletes its key (after a `d`: again)
                state.pop(m.key, None)
                continue
            event = parsed[i]
            if model == "upsert_json":
                state[m.key] = canonical(event.asDict(recursive=True), types)
            elif event.op == "d":
                assert event.before is not None, f"{model}: a delete without its row"
                state.pop(m.key, None)
            else:
                if event.op == "u":
                    assert event.before is not None, f"{model}: an update without its before image"
                state[m.key] = canonical(event.after.asDict(recursive=True), types)
        from collections import Counter

        assert Counter(state.values()) == table, f"{model}: Spark's from_json replay differs"
        if model != "upsert_json":
            assert {m.op for m in changes(records)} == {"c", "u", "d"}
