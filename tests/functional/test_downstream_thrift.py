"""logstore_changes with the thrift method: there are no Spark tasks of ours on the server, so dbt
reads the upstream range itself and inserts it in batches through the cursor. Over three upstream
runs (inserts, updates, deletes, a row leaving the downstream filter) the downstream table equals
a recomputation from the upstream table, its own log replays to it, and its recorded position
advances. dbt runs as a subprocess against the Spark Thrift Server."""
import json
import uuid

import pytest

from tests.functional.contract import replay_confirmed, rows_state
from tests.functional.fault_project import dbt, write_project
from tests.functional.test_downstream import BIG_ORDERS, ORDERS, RECOMPUTED


@pytest.fixture(scope="module")
def project_root(tmp_path_factory, kafka_bootstrap_servers, spark_thrift_server):
    root = tmp_path_factory.mktemp("downstream_thrift")
    schema = f"downstream_{uuid.uuid4().hex[:8]}"
    write_project(root, schema, kafka_bootstrap_servers, spark_thrift_server,
                  models={"orders": ORDERS, "big_orders": BIG_ORDERS})
    return root, schema


def test_downstream_over_thrift_equals_recomputation(project_root, kafka_bootstrap_servers,
                                                      spark_thrift_server):
    root, schema = project_root
    server = spark_thrift_server
    for step, expected_ids in ((1, [1, 3, 4]), (2, [1, 2, 4]), (3, [2, 5, 6, 7])):
        result = dbt(root, "run", "--vars", json.dumps({"step": step}))
        assert result.returncode == 0, result.stdout[-3000:]
        if step == 1:
            assert "reading orders as of its snapshot 1" in result.stdout
        else:
            assert f"reading orders changes after snapshot {step - 1} up to {step}" in result.stdout

        downstream = sorted(server.query(f"select id, doubled, status, placed from {schema}.big_orders"))
        assert downstream == sorted(server.query(RECOMPUTED.format(orders=f"{schema}.orders")))
        assert [r[0] for r in downstream] == expected_ids

        types, rows = server.table(f"{schema}.big_orders")
        assert "_logstore_op" not in types
        table = rows_state(types, rows)
        assert replay_confirmed(kafka_bootstrap_servers, f"{schema}.big_orders", types, table) == table
        sources = json.loads(server.table_properties(f"{schema}.big_orders")["logstore.sources"])
        assert sources[f"{schema}.orders"]["snapshot"] == step

    # the landed changes and their view are gone (the server's own listing: no session views)
    tables = {row[1] for row in server.query(f"show tables in {schema}")}
    assert tables == {"orders", "big_orders"}, tables
