"""Run records and inputs (issue 54; docs/log-format.md, sections 3 and 9), on the suite's
Apache Kafka cluster: each confirmation names the logged models its build read;
one record per dbt invocation that ran nodes, naming every logged model's latest confirmed
snapshot as the invocation ended (the control topic's own) and what the invocation did to it;
a plain model named as not logged; a failed model with its last good snapshot and its
downstream skipped; `--empty` and `compile` write none; each model read up to the snapshot a
record names is its table as of that run."""
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt

from dbt.adapters.logstore.reading.replay import Replica
from dbt.adapters.logstore.reading.runs import changes_at_run, changes_between_runs, run_at, run_records
from tests.functional.contract import Message, canonical, read_topic, replay, table_state

pytestmark = pytest.mark.apache_kafka  # run records and transactions proven on Apache Kafka

CUSTOMERS = """
{{ config(materialized='table', unique_key='id', log_system='kafka') }}
select id, concat('c', cast(id * {{ var('step', 1) }} as string)) as name from range(1, 20) as r(id)
"""
ORDERS = """
{{ config(materialized='table', unique_key='id', log_system='kafka') }}
select id, id % 19 + 1 as customer_id, id * {{ var('step', 1) }} as amount from range(1, 50) as r(id)
"""
GOLD = """
{{ config(materialized='table', unique_key='customer_id', log_system='kafka') }}
select c.id as customer_id, c.name, sum(o.amount) as total
from {{ ref('customers') }} c join {{ ref('orders') }} o on o.customer_id = c.id
{% if var('fail_gold', false) %} where no_such_column > 0 {% endif %}
group by c.id, c.name
"""
GOLD_CHILD = """
{{ config(materialized='table', unique_key='customer_id', log_system='kafka') }}
select customer_id, total from {{ ref('gold') }}
"""
PLAIN = """
{{ config(materialized='table') }}
select 1 as id
"""


def invocation_of(project) -> str:
    return json.loads((Path(project.project_root) / "target" / "run_results.json").read_text()
                      )["metadata"]["invocation_id"]


def last_confirmation(bootstrap, topic):
    return json.loads(read_topic(bootstrap, topic + "__logstore_commits")[-1].value)


def rows_at(bootstrap, record, model, types):
    replica = Replica()
    for change in changes_at_run(bootstrap, record, model):
        replica.apply(change)
    return Counter(canonical(row, types) for row in replica.rows())


class TestRunRecords:
    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.sql": CUSTOMERS, "orders.sql": ORDERS, "gold.sql": GOLD,
                "gold_child.sql": GOLD_CHILD, "plain.sql": PLAIN}

    def test_a_record_per_run_names_every_model(self, project, kafka_bootstrap_servers):
        bootstrap, schema = kafka_bootstrap_servers, project.test_schema
        run_dbt(["run"])
        first_invocation = invocation_of(project)
        records = run_records(bootstrap, _project_name(project), schema)
        assert [r.invocation_id for r in records] == [first_invocation]
        first = run_at(records)
        assert first.command == "run"
        assert {m.name: m.did for m in first.models} == {
            "customers": "changed", "orders": "changed", "gold": "changed",
            "gold_child": "changed", "plain": "not logged"}
        for model in ("customers", "orders", "gold", "gold_child"):
            at, confirmation = first.model(model), last_confirmation(bootstrap, f"{schema}.{model}")
            assert at.topic == f"{schema}.{model}"
            assert (at.snapshot, at.changeset) == (confirmation["snapshot"], first_invocation)
            assert {str(p): o for p, o in at.end_offsets.items()} == confirmation["end_offsets"]
        gold_types, gold_after_first = table_state(f"{schema}.gold")
        # each confirmation names the logged models its build read, at the snapshots it read
        gold = last_confirmation(bootstrap, f"{schema}.gold")
        assert gold["inputs"] == [
            {"name": "customers", "topic": f"{schema}.customers", "snapshot": 1},
            {"name": "orders", "topic": f"{schema}.orders", "snapshot": 1}]
        assert [i["name"] for i in last_confirmation(bootstrap, f"{schema}.gold_child")["inputs"]] == ["gold"]
        assert last_confirmation(bootstrap, f"{schema}.customers")["inputs"] == []  # reads no log

        # a run of one model: it changed, the others keep their snapshots, named as not selected
        run_dbt(["run", "--select", "customers", "--vars", json.dumps({"step": 2})])
        second = run_at(run_records(bootstrap, _project_name(project), schema))
        assert second.invocation_id == invocation_of(project) != first_invocation
        assert second.selection.get("select") == ["customers"]
        assert (second.model("customers").did, second.model("customers").snapshot) == ("changed", 2)
        assert (second.model("orders").did, second.model("orders").snapshot) == ("not selected", 1)
        assert second.model("gold").end_offsets == first.model("gold").end_offsets

        # a failed model: its last good snapshot, and its downstream skipped
        run_dbt(["run", "--vars", json.dumps({"step": 3, "fail_gold": True})], expect_pass=False)
        third = run_at(run_records(bootstrap, _project_name(project), schema))
        assert third.invocation_id == invocation_of(project)
        assert (third.model("gold").did, third.model("gold").snapshot) == ("failed", 1)
        assert (third.model("gold_child").did, third.model("gold_child").snapshot) == ("skipped", 1)
        assert (third.model("orders").did, third.model("orders").snapshot) == ("changed", 2)

        # runs that change no logged table write no record
        count = len(run_records(bootstrap, _project_name(project), schema))
        run_dbt(["run", "--empty"])
        run_dbt(["compile"])
        assert len(run_records(bootstrap, _project_name(project), schema)) == count

        # read at a run: each model as its table was then (gold as of the first run, though its
        # inputs changed since; customers as of the third)
        assert rows_at(bootstrap, first, "gold", gold_types) == gold_after_first
        types, customers_now = table_state(f"{schema}.customers")
        assert rows_at(bootstrap, third, "customers", types) == customers_now
        between = dict(changes_between_runs(bootstrap, first, third, ["customers", "orders", "gold"]))
        assert {c.snapshot for c in between["customers"]} == {2, 3}
        assert {c.snapshot for c in between["orders"]} == {2}
        assert between["gold"] == []  # failed in the third run: no change since the first

        # a plain consumer with its own client (confluent-kafka, read_committed), as the
        # Consumers page says: gold's topic from its start to the first record's end offsets
        assert replay(bounded_read(bootstrap, first.model("gold")), gold_types) == gold_after_first

        # the CLI: gold as the first run left it; a run that is not there, in one line
        def tail(*args):
            return subprocess.run(
                [str(Path(sys.executable).parent / "dbt-logstore"), "tail", *args, "--project-dir",
                 str(project.project_root), "--profiles-dir", str(project.profiles_dir)],
                capture_output=True, text=True, timeout=300)

        shown = tail("gold", "--at-run", first_invocation, "--json")
        assert shown.returncode == 0, shown.stderr[-3000:]
        records = [json.loads(line) for line in shown.stdout.splitlines()]
        assert {r["snapshot"] for r in records} == {1} and len(records) == sum(gold_after_first.values())
        missing = tail("gold", "--at-run", "no-such-run")
        assert missing.returncode == 2 and "no run record of invocation 'no-such-run'" in missing.stderr


def bounded_read(bootstrap, at):
    """Every committed record of a model's topic from its start up to the end offsets a run
    record names for it, with confluent-kafka's consumer (no group: partitions assigned)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        partitions = sorted(consumer.list_topics(at.topic, timeout=30).topics[at.topic].partitions)
        stops = {p: at.end_offsets.get(p, 0) for p in partitions}
        consumer.assign([TopicPartition(at.topic, p, 0) for p in partitions if stops[p] > 0])
        messages, left = [], {p for p in partitions if stops[p] > 0}
        while left:
            msg = consumer.poll(10)
            assert msg is not None, f"no record within 10 s; still to read: {left}"
            if msg.error() or msg.partition() not in left:
                continue
            if msg.offset() < stops[msg.partition()]:
                messages.append(Message(msg.partition(), msg.offset(), msg.key(), msg.value(),
                                        tuple(msg.headers() or ())))
            if msg.offset() + 1 >= stops[msg.partition()]:
                left.discard(msg.partition())
        return messages
    finally:
        consumer.close()


def _project_name(project) -> str:
    import yaml

    return yaml.safe_load((Path(project.project_root) / "dbt_project.yml").read_text())["name"]
