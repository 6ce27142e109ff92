"""Logged snapshots (SCD type 2) on parquet, through the adapter's own rewrite: `dbt snapshot`
logs new versions as inserts and closed versions as updates (their dbt_valid_to), keyed by
dbt_scd_id; a hard delete (`hard_deletes: invalidate`) closes the deleted key's version. After
every run: the independent replay, `status --verify` and Flink's `debezium-json` agree."""
import json
from collections import Counter

import pytest
from dbt.tests.util import run_dbt

from tests.functional.contract import changes, confirmed, read_topic, replay, table_state, new_messages
from tests.functional.dbt_helpers import logstore_statuses
from tests.functional.flink_peer import (
    apply_changelog, canonical_rows, debezium_case, decoded, differences,
)

SOURCE = """
{{ config(materialized='table') }}
select id, name, cast(updated_at as timestamp) as updated_at from values
{% if var('step', 1) == 1 %}
  (1, 'Ada', '2024-01-01 00:00:00'), (2, 'Bo', '2024-01-01 00:00:00'), (3, 'Cy', '2024-01-01 00:00:00')
{% else %}
  (1, 'Ada', '2024-01-01 00:00:00'), (2, 'Bo B', '2024-02-01 00:00:00'), (4, 'Di', '2024-02-01 00:00:00')
{% endif %}
as t(id, name, updated_at)
"""
SNAPSHOT = """
{% snapshot customers_history %}
{{ config(strategy='timestamp', unique_key='id', updated_at='updated_at',
          hard_deletes='invalidate', file_format='parquet', log_system='kafka') }}
select * from {{ ref('customers') }}
{% endsnapshot %}
"""



class TestLoggedSnapshot:
    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.sql": SOURCE}

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"customers_history.sql": SNAPSHOT}

    def _step(self, project, servers, step, flink_decoder, tmp_path):
        run_dbt(["run", "--vars", json.dumps({"step": step})])
        (result,) = run_dbt(["snapshot", "--vars", json.dumps({"step": step})])
        topic = relation = f"{project.test_schema}.customers_history"
        messages = confirmed(servers, topic, read_topic(servers, topic))
        types, table = table_state(relation)
        assert replay(messages, types) == table
        status = logstore_statuses(project)["customers_history"]
        assert status.agree, status.problems
        tmp_path.mkdir(parents=True, exist_ok=True)
        case = debezium_case("history", messages, types, tmp_path)
        decoded_rows = apply_changelog(canonical_rows(decoded(flink_decoder.decode([case]), case), types))
        assert decoded_rows == table, differences(decoded_rows, table)
        return result.adapter_response, messages

    def test_dbt_snapshot_logs_new_and_closed_versions(self, project, kafka_bootstrap_servers,
                                                       flink_decoder, tmp_path):
        servers = kafka_bootstrap_servers
        response, log1 = self._step(project, servers, 1, flink_decoder, tmp_path / "1")
        assert Counter(m.op for m in changes(log1)) == Counter(c=3)
        assert {json.loads(m.key)["dbt_scd_id"] for m in log1} == \
            {m.envelope["after"]["dbt_scd_id"] for m in log1}  # keyed by the version's scd id

        response, log2 = self._step(project, servers, 2, flink_decoder, tmp_path / "2")
        new = changes(new_messages(log2, log1))
        # id 2 changed: its version closed (u) and a new one (c); id 3 deleted: its version
        # closed (u); id 4 new (c); id 1 untouched
        ops = Counter((m.op, (m.envelope["after"] or m.envelope["before"])["id"]) for m in new)
        assert ops == Counter({("u", 2): 1, ("c", 2): 1, ("u", 3): 1, ("c", 4): 1}), ops
        closed = [m.envelope for m in new if m.op == "u"]
        assert all(e["before"]["dbt_valid_to"] is None and e["after"]["dbt_valid_to"] for e in closed)

        response, log3 = self._step(project, servers, 2, flink_decoder, tmp_path / "3")  # nothing new
        assert response["rows_mirrored"] == 0 and new_messages(log3, log2) == []
