"""Logged `microbatch` models: each batch is a committed change set of its own (its own snapshot,
one confirmation, its own change-set id), the change of its insert_overwrite of the batch's
partitions; a rerun of a window logs only what changed; a failed batch re-run by `dbt retry` is
logged once. Checked after every run with the independent replay, `status --verify` and Flink's
`debezium-json`."""
import json
import os
from collections import Counter

import pytest
from dbt.adapters.capability import Capability
from dbt.tests.util import run_dbt

from tests.functional.contract import (
    new_messages,
    changes, confirmed, read_topic, replay, table_state, wait_for_confirmations,
)
from tests.functional.dbt_helpers import logstore_statuses
from tests.functional.flink_peer import (
    apply_changelog, canonical_rows, debezium_case, decoded, differences,
)

FAIL_DAY = "LOGSTORE_TEST_FAIL_DAY"  # read by the model through env_var: `dbt retry` re-reads it

EVENTS = """
{{ config(materialized='table', event_time='event_at') }}
select id, cast(event_at as timestamp) as event_at, amount from values
{% if var('step', 1) == 1 %}
  (1, '2024-01-01 08:00:00', 10), (2, '2024-01-01 09:00:00', 20),
  (3, '2024-01-02 08:00:00', 30), (4, '2024-01-02 09:00:00', 40),
  (5, '2024-01-03 08:00:00', 50), (6, '2024-01-03 09:00:00', 60)
{% elif var('step', 1) == 2 %}
  (1, '2024-01-01 08:00:00', 10), (2, '2024-01-01 09:00:00', 20),
  (3, '2024-01-02 08:00:00', 30), (4, '2024-01-02 09:00:00', 41),
  (5, '2024-01-03 08:00:00', 50), (7, '2024-01-03 10:00:00', 70)
{% else %}
  (1, '2024-01-01 08:00:00', 11), (2, '2024-01-01 09:00:00', 20),
  (3, '2024-01-02 08:00:00', 30), (4, '2024-01-02 09:00:00', 42),
  (5, '2024-01-03 08:00:00', 50), (7, '2024-01-03 10:00:00', 71)
{% endif %}
as t(id, event_at, amount)
"""
# dbt-spark runs microbatch as insert_overwrite of each batch's partitions: partition by day
DAILY = """
{{ config(materialized='incremental', incremental_strategy='microbatch', event_time='event_at',
          begin='2024-01-01', batch_size='day', partition_by=['day'], unique_key='id',
          concurrent_batches=true, log_system='kafka', log_system_partitions=2) }}
{% set fail_day = env_var('LOGSTORE_TEST_FAIL_DAY', '') %}
select id, event_at, amount, cast(event_at as date) as day from {{ ref('events') }}
{% if fail_day and model.batch and model.batch.event_time_start.strftime('%Y-%m-%d') == fail_day %}
where raise_error('this batch fails on purpose') is null
{% endif %}
"""
WINDOW = ["--event-time-start", "2024-01-01", "--event-time-end", "2024-01-04"]


def _run(step, *extra, expect_pass=True):
    return run_dbt(["run", "--vars", json.dumps({"step": step}), *WINDOW, *extra], expect_pass=expect_pass)


def _check(project, servers, snapshots, tmp_path, flink_decoder):
    """The log replays to the table three ways: the independent replay, status --verify, Flink."""
    topic = relation = f"{project.test_schema}.daily"
    confirmations = wait_for_confirmations(servers, topic, snapshots)
    assert [c["snapshot"] for c in confirmations] == list(range(1, snapshots + 1)), confirmations
    assert len({c["attempt"] for c in confirmations}) == snapshots
    messages = confirmed(servers, topic, read_topic(servers, topic))
    types, table = table_state(relation)
    assert replay(messages, types) == table
    status = logstore_statuses(project)["daily"]
    assert status.agree and status.log_snapshot == snapshots, status.problems
    tmp_path.mkdir(parents=True, exist_ok=True)
    case = debezium_case("daily", messages, types, tmp_path)
    results = flink_decoder.decode([case])
    flink = apply_changelog(canonical_rows(decoded(results, case), types))
    assert flink == table, differences(flink, table)
    return confirmations, messages



def _ops_by_changeset(messages):
    by = {}
    for m in changes(messages):
        by.setdefault(m.header("logstore.changeset"), Counter())[m.op] += 1
    return by


class TestLoggedMicrobatch:
    @pytest.fixture(scope="class")
    def models(self):
        return {"events.sql": EVENTS, "daily.sql": DAILY}

    def test_each_batch_is_one_change_set_and_a_retried_batch_logs_once(
            self, project, kafka_bootstrap_servers, tmp_path, flink_decoder):
        servers = kafka_bootstrap_servers
        # dbt-spark declares no microbatch concurrency: dbt runs a Spark model's batches one after
        # another even with concurrent_batches=true, each under the model's run lock in turn
        assert not project.adapter.supports(Capability.MicrobatchConcurrency)

        # first run: three daily batches, three snapshots, each batch's rows as inserts
        _run(1)
        confirmations, log = _check(project, servers, 3, tmp_path, flink_decoder)
        per_batch = _ops_by_changeset(log)
        assert len(per_batch) == 3 and all(ops == Counter(c=2) for ops in per_batch.values()), per_batch
        assert all("-batch-" in changeset for changeset in per_batch)

        # the same window again with day 2 and day 3 changed: only what changed is logged
        _run(2)
        confirmations, log2 = _check(project, servers, 6, tmp_path / "2", flink_decoder)
        new = _ops_by_changeset(new_messages(log2, log))
        assert sorted(new.values(), key=sorted) == sorted([Counter(u=1), Counter(d=1, c=1)], key=sorted), new

        # day 2's batch fails (days 1 and 3 commit); dbt retry runs day 2 again and it logs once
        os.environ[FAIL_DAY] = "2024-01-02"
        try:
            _run(3, expect_pass=False)
        finally:
            del os.environ[FAIL_DAY]
        _check(project, servers, 8, tmp_path / "3", flink_decoder)
        run_dbt(["retry"])
        confirmations, log3 = _check(project, servers, 9, tmp_path / "4", flink_decoder)
        new = _ops_by_changeset(new_messages(log3, log2))
        assert sorted(new.values(), key=sorted) == sorted([Counter(u=1)] * 3, key=sorted), new
        assert len({c["changeset"] for c in confirmations}) == 9  # no change set confirmed twice
