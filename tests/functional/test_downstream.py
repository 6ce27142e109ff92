"""Downstream models read an upstream logged model's changes (logstore_changes), with the Spark
session: Spark tasks read the upstream topic's partitions. Over three upstream runs (inserts,
updates, deletes), a downstream failure and its rerun, the downstream table always equals a
full recomputation from the upstream table, and each downstream log replays to its table."""
import pytest
from dbt.tests.util import run_dbt

from tests.functional.contract import assert_contract, spark, table_properties

ORDERS = """
{{ config(materialized='table', unique_key='id', log_system='kafka', log_system_partitions=3) }}
{% set step = var('step', 1) %}
select id, cast(amount as decimal(10, 2)) as amount, status,
       cast(placed as timestamp) as placed
from values
{% if step == 1 %}
  (1, '12.50', 'open', '2024-05-01 10:00:00'), (2, '5.00', 'open', '2024-05-01 11:00:00'),
  (3, '99.99', 'open', '2024-05-02 09:30:00'), (4, '20.00', 'open', '2024-05-02 12:00:00')
{% elif step == 2 %}
  (1, '12.50', 'open', '2024-05-01 10:00:00'), (2, '55.00', 'paid', '2024-05-01 11:00:00'),
  (4, '20.00', 'paid', '2024-05-02 12:00:00'), (5, '7.25', 'open', '2024-05-03 08:00:00')
{% else %}
  (2, '55.00', 'paid', '2024-05-01 11:00:00'), (4, '1.00', 'refunded', '2024-05-02 12:00:00'),
  (5, '70.25', 'open', '2024-05-03 08:00:00'), (6, '10.00', 'open', '2024-05-04 08:00:00'),
  (7, '33.30', 'open', '2024-05-04 09:00:00')
{% endif %}
as t(id, amount, status, placed)
"""

# Orders of at least 10, doubled. A change that takes an order below 10 must delete it
# downstream: the model turns it into a delete by its op column.
BIG_ORDERS = """
{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id',
          log_system='kafka') }}
select id, amount * 2 as doubled, upper(status) as status, placed,
       case when _logstore_op = 'd' or amount < 10 then 'd' else _logstore_op end as _logstore_op
from {{ logstore_changes(ref('orders'), normalize=true) }}
{% if var('fail', false) %} where raise_error('planned downstream failure') is null {% endif %}
"""

RECOMPUTED = """select id, amount * 2 as doubled, upper(status) as status, placed
                from {orders} where amount >= 10"""


def _rows(sql):
    return sorted(tuple(r) for r in spark().sql(sql).collect())


class TestDownstreamChain:
    @pytest.fixture(scope="class")
    def models(self):
        return {"orders.sql": ORDERS, "big_orders.sql": BIG_ORDERS}

    def _check(self, project, kafka_bootstrap_servers):
        schema = project.test_schema
        downstream = _rows(f"select id, doubled, status, placed from {schema}.big_orders")
        assert downstream == _rows(RECOMPUTED.format(orders=f"{schema}.orders"))
        assert_contract(kafka_bootstrap_servers, f"{schema}.big_orders", f"{schema}.big_orders")
        assert "_logstore_op" not in [f.name for f in spark().table(f"{schema}.big_orders").schema]
        return downstream

    def _sources(self, project):
        import json

        props = table_properties(f"{project.test_schema}.big_orders")
        return json.loads(props["logstore.sources"])[f"{project.test_schema}.orders"]

    def test_chain_equals_full_recomputation(self, project, kafka_bootstrap_servers):
        run = lambda *args, **kw: run_dbt(["run", *args], **kw)  # noqa: E731

        # first runs: the downstream has no position, so it reads the upstream table (hybrid)
        run("--vars", "{step: 1}")
        assert [r[0] for r in self._check(project, kafka_bootstrap_servers)] == [1, 3, 4]
        assert self._sources(project)["snapshot"] == 1

        # upstream: 2 updated (now >= 10), 3 deleted, 4 updated, 5 inserted (< 10)
        run("--vars", "{step: 2}", "-s", "orders")
        before = _rows(f"select * from {project.test_schema}.big_orders")
        # a downstream run that fails after reading the range commits nothing ...
        run("--vars", "{step: 2, fail: true}", "-s", "big_orders", expect_pass=False)
        assert _rows(f"select * from {project.test_schema}.big_orders") == before
        assert self._sources(project)["snapshot"] == 1
        # ... and its rerun reads the same range
        results = run("--vars", "{step: 2}", "-s", "big_orders")
        assert [r[0] for r in self._check(project, kafka_bootstrap_servers)] == [1, 2, 4]
        assert self._sources(project)["snapshot"] == 2
        assert results[0].adapter_response["rows_mirrored"] == 4  # 2 new, 3 gone (+ its tombstone), 4 changed

        # upstream: 1 deleted, 4 refunded (below 10), 5 grown past 10, 6 and 7 new
        run("--vars", "{step: 3}", "-s", "orders")
        run("--vars", "{step: 3}", "-s", "big_orders")
        assert [r[0] for r in self._check(project, kafka_bootstrap_servers)] == [2, 5, 6, 7]
        assert self._sources(project)["snapshot"] == 3

        # nothing new upstream: nothing changes downstream
        results = run("--vars", "{step: 3}", "-s", "big_orders")
        assert results[0].adapter_response["rows_mirrored"] == 0
        self._check(project, kafka_bootstrap_servers)
        # landed changes and their view dropped. SHOW TABLES also lists the session's temporary
        # views, among them other tests' dbt-spark `*__dbt_tmp` views, so look at ours only.
        listed = spark().sql(f"show tables in {project.test_schema}").collect()
        tables = {r.tableName for r in listed if not r.isTemporary}
        assert tables == {"orders", "big_orders"}, tables
        leftovers = [r.tableName for r in listed if "__logstore" in r.tableName]
        assert leftovers == [], leftovers
