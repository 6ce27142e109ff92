"""A Flink job bounded by a run record reads each model as its table was at that run (log format
section 9; docs/consumers.md, "Several models at one run"): Flink's own Kafka connector
(flink-sql-connector-kafka, `read_committed`, `debezium-json`) reads each model's topic from
the earliest offset and stops at the `end_offsets` a run record names for the model
(`'scan.bounded.mode' = 'specific-offsets'`, every partition of the topic listed, an absent
one at 0), and the changelog it makes must end with exactly the table's rows at that run.

Two keyed models over two partitions each, two runs (every row changes, keys go and come):
each model bounded by the first run's record is its table after the first run, though the
second run's records follow in the topic; bounded by the second run's record, its table after
the second (so the check can fail: the two differ). One Flink process runs the four jobs.
"""
from __future__ import annotations

from collections import Counter
from typing import Dict, Mapping

import pytest
from dbt.tests.util import run_dbt
from kafka import KafkaConsumer

from dbt.adapters.logstore.reading.runs import run_at, run_records
from tests.functional.contract import table_state
from tests.functional.cut_models import MODELS
from tests.functional.dbt_helpers import last_invocation, project_name
from tests.functional.flink_peer import (
    apply_changelog, canonical_rows, decoded, differences, errors_of, kafka_case, kafka_options,
)

pytestmark = pytest.mark.apache_kafka  # Flink's read_committed source against Apache Kafka's transactions


def partitions_of(bootstrap: str, topic: str):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        return sorted(consumer.partitions_for_topic(topic) or ())
    finally:
        consumer.close()


def specific_offsets(partitions, end_offsets: Mapping) -> str:
    """Flink's `scan.bounded.specific-offsets` of a run record's `end_offsets`: every partition
    of the topic, one absent from end_offsets at 0."""
    ends = {int(p): int(o) for p, o in end_offsets.items()}
    return ";".join(f"partition:{p},offset:{ends.get(p, 0)}" for p in partitions)


class TestFlinkAtRun:
    @pytest.fixture(scope="class")
    def models(self):
        return {f"{name}.sql": text for name, text in MODELS.items()}

    def test_flink_bounded_by_a_run_record_reads_the_tables_at_that_run(
            self, flink_kafka_decoder, project, kafka_bootstrap_servers):
        bootstrap, schema = kafka_bootstrap_servers, project.test_schema
        tables: Dict[int, Dict[str, tuple]] = {}
        records = {}
        for step in (1, 2):
            run_dbt(["run", "--vars", f"{{step: {step}}}"])
            records[step] = run_at(run_records(bootstrap, project_name(project), schema),
                                   last_invocation(project))
            tables[step] = {model: table_state(records[step].model(model).topic) for model in MODELS}

        cases = {}
        for model in MODELS:
            topic = records[1].model(model).topic
            partitions = partitions_of(bootstrap, topic)
            assert partitions == [0, 1], f"{topic}: partitions {partitions}"
            assert (records[1].model(model).snapshot, records[2].model(model).snapshot) == (1, 2)
            assert len(records[1].model(model).end_offsets) == 2, "the first run left a partition empty"
            types = tables[2][model][0]
            for step in (1, 2):
                bounded = dict(kafka_options(topic, bootstrap), **{
                    "scan.bounded.mode": "specific-offsets",
                    "scan.bounded.specific-offsets": specific_offsets(
                        partitions, records[step].model(model).end_offsets)})
                cases[(model, step)] = kafka_case(f"{model}_at_run_{step}", types, bounded, ["id"])
        results = flink_kafka_decoder.decode(list(cases.values()))
        errors = errors_of(results)
        assert not errors, f"Flink's Kafka source failed:\n{errors}"

        for (model, step), case in cases.items():
            types, table = tables[step][model]
            assert table != tables[3 - step][model][1], f"{model}: the two runs left the same rows"
            rows = canonical_rows(decoded(results, case), types)
            state: Counter = apply_changelog(rows)
            assert state == table, (
                f"Flink's changelog of {model} bounded by run {step}'s record "
                f"({case.options['scan.bounded.specific-offsets']}) is not the table after run {step}:"
                + differences(state, table))
