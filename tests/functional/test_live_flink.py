"""Apache Flink follows our topics with its own Kafka connector (flink-sql-connector-kafka,
`make jars`): Flink's Kafka source reads each topic from the earliest offset to the latest, with
its own `read_committed` consumer, transaction markers, offsets and tombstones, in the formats
and with the options docs/consumers.md ("Who reads what", "Flink") gives, and the changelog
it makes must end with exactly the table's rows.

- a keyed `table` model, default log (debezium-json): `'connector' = 'kafka'`;
- a keyed `table` model with `log.format: json` (upsert mode): `'connector' = 'upsert-kafka'`;
- a keyless `table` model, default log: `'connector' = 'kafka'`, no primary key;
- the keyed model again from the offsets its table recorded at an earlier snapshot
  (`logstore.snapshot.offsets`, docs/consumers.md, "Reading from a snapshot").

Each topic also holds an aborted transaction of a foreign writer (what a failed attempt leaves):
Flink's read_committed source must skip it; the same topic read `read_uncommitted` shows it, so
the check can fail. One Flink process (tests/peers/flink_decode.py with the connector jar: the
`flink_kafka_decoder` fixture) runs every job; it starts while dbt runs.
"""
from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Dict, List, Tuple

import pytest
from dbt.tests.util import run_dbt
from kafka import KafkaProducer

from tests.functional.contract import Message, canonical, table_properties, table_state
from tests.functional.flink_peer import (
    apply_changelog, canonical_rows, confirmed_log, decoded, differences, errors_of,
    expected_kinds, kafka_case, kafka_options, model_sql, state_and_kinds, upsert_kafka_options,
)

pytestmark = pytest.mark.apache_kafka  # Flink's read_committed source against Apache Kafka's transactions


# --- the models: inserts, updates, deletes, an unchanged rerun, a deleted key back -------------

ORDERS = {"id": "int", "customer": "string", "amount": "decimal(12,2)", "placed_on": "date",
          "updated_at": "timestamp"}
ORDER = {"customer": "ann", "amount": "10.50", "placed_on": "2024-02-29",
         "updated_at": "2024-05-01 10:00:00.123456"}
ORDER_STEPS = {
    1: [dict(ORDER, id=1), dict(ORDER, id=2, customer="bob"), dict(ORDER, id=3, amount="-0.01"),
        dict(ORDER, id=4, customer="Dédé 🚀")],
    # 1 same, 2 and 4 updated, 3 deleted, 5 new
    2: [dict(ORDER, id=1), dict(ORDER, id=2, customer="bob", amount="99.99"),
        dict(ORDER, id=4, customer="Dédé 🚀", updated_at="1969-12-31 23:59:59.999999"), {"id": 5}],
    # 3 unchanged: the same rows again
    # 4: 3 back, 5 deleted, 1 updated
    4: [dict(ORDER, id=1, placed_on="1900-01-01"), dict(ORDER, id=2, customer="bob", amount="99.99"),
        dict(ORDER, id=3, customer="back"),
        dict(ORDER, id=4, customer="Dédé 🚀", updated_at="1969-12-31 23:59:59.999999")],
}

ACCOUNTS = {"region": "string", "id": "int", "balance": "decimal(14,4)", "opened": "date",
            "seen": "timestamp", "note": "string"}
ACCOUNT = {"balance": "100.0001", "opened": "2020-01-01", "seen": "2024-06-01 08:00:00.25", "note": "ok"}
ACCOUNT_STEPS = {
    1: [dict(ACCOUNT, region="eu", id=1), dict(ACCOUNT, region="eu", id=2, note=None),
        dict(ACCOUNT, region="us", id=1, balance="-5")],
    # eu/1 updated, eu/2 deleted, us/1 same, us/2 new
    2: [dict(ACCOUNT, region="eu", id=1, balance="0.0001"), dict(ACCOUNT, region="us", id=1, balance="-5"),
        dict(ACCOUNT, region="us", id=2, seen="1999-12-31 23:59:59.999999")],
    # 3 unchanged; 4: eu/2 back, us/1 deleted, us/2 updated
    4: [dict(ACCOUNT, region="eu", id=1, balance="0.0001"), dict(ACCOUNT, region="eu", id=2, note="back 🔁"),
        dict(ACCOUNT, region="us", id=2, opened="2024-02-29")],
}

READINGS = {"sensor": "string", "value": "int", "ratio": "decimal(10,3)", "day": "date", "at": "timestamp"}
READING = {"sensor": "a", "value": 1, "ratio": "0.125", "day": "2024-01-01", "at": "2024-01-01 00:00:00"}
READING_STEPS = {
    # equal rows twice: a keyless log changes a multiset
    1: [READING, READING, dict(READING, sensor="b")],
    # one of the two equal rows goes, b changes, c comes
    2: [READING, dict(READING, sensor="b", value=2), dict(READING, sensor="c", at="2024-03-31 02:30:00.5")],
    # 3 unchanged; 4: a twice again, c gone
    4: [READING, READING, dict(READING, sensor="b", value=2)],
}


def _with_unchanged_rerun(steps: Dict[int, List[dict]]) -> Dict[int, List[dict]]:
    return {1: steps[1], 2: steps[2], 3: steps[2], 4: steps[4]}


MODELS = {
    "orders": model_sql("materialized='table', unique_key='id', **{'log.system': 'kafka'}",
                        ORDERS, _with_unchanged_rerun(ORDER_STEPS)),
    "accounts": model_sql("materialized='table', unique_key=['region', 'id'], "
                          "**{'log.system': 'kafka', 'log.format': 'json'}",
                          ACCOUNTS, _with_unchanged_rerun(ACCOUNT_STEPS)),
    "readings": model_sql("materialized='table', **{'log.system': 'kafka'}",
                          READINGS, _with_unchanged_rerun(READING_STEPS)),
}


# --- the foreign aborted transaction -----------------------------------------------------------

def debezium_insert(row: dict) -> bytes:
    return json.dumps({"before": None, "after": row, "op": "c", "ts_ms": 0,
                       "source": {"connector": "foreign"}}).encode()


# (key, value) records that, were they read, would change each table
ABORTED = {
    "orders": [(b'{"id":999}', debezium_insert(
        {"id": 999, "customer": "aborted", "amount": 1, "placed_on": "2024-01-01",
         "updated_at": "2024-01-01 00:00:00.000000Z"}))],
    # a tombstone for a key the table keeps, and a new key
    "accounts": [(b'{"region":"eu","id":1}', None),
                 (b'{"region":"zz","id":999}', json.dumps(
                     {"region": "zz", "id": 999, "balance": 1, "opened": "2024-01-01",
                      "seen": "2024-01-01 00:00:00.000000Z", "note": "aborted"}).encode())],
    "readings": [(None, debezium_insert({"sensor": "aborted", "value": 999, "ratio": 1, "day": "2024-01-01",
                                         "at": "2024-01-01 00:00:00.000000Z"}))],
}


def write_aborted(bootstrap: str, topics: Dict[str, str]) -> None:
    """One transaction over the models' topics, aborted: data records and abort markers that a
    read_committed consumer must skip."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"foreign-{uuid.uuid4()}")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        sent = [producer.send(topics[model], key=key, value=value, partition=0)
                for model, records in ABORTED.items() for key, value in records]
        producer.flush()
        assert all(future.get(timeout=30).offset >= 0 for future in sent), "the broker took no aborted record"
        producer.abort_transaction()
    finally:
        producer.close()


class TestFlinkFollowsTopics:
    @pytest.fixture(scope="class")
    def models(self):
        return {f"{name}.sql": text for name, text in MODELS.items()}

    def test_flink_kafka_source_ends_with_the_tables(self, flink_kafka_decoder, project,
                                                      kafka_bootstrap_servers):
        bootstrap = kafka_bootstrap_servers
        topics = {model: f"{project.test_schema}.{model}" for model in MODELS}
        for step in (1, 2, 3, 4):
            run_dbt(["run", "--vars", f"{{step: {step}}}"])
            if step == 2:
                # a consumer that loaded orders at this snapshot goes on from here
                orders_at_step_2 = table_state(topics["orders"])[1]
                offsets_at_step_2 = json.loads(table_properties(topics["orders"])["logstore.snapshot.offsets"])
                # mid-log, as a failed attempt between two runs leaves it
                write_aborted(bootstrap, topics)

        tables: Dict[str, Tuple[Dict[str, str], Counter]] = {}
        logs: Dict[str, List[Message]] = {}
        for model, topic in topics.items():
            tables[model] = table_state(topic)
            snapshot = int(table_properties(topic).get("logstore.snapshot.id", 0))
            # every run's records readable (commit markers land after a run), so that Flink's
            # latest offsets are past them
            logs[model] = confirmed_log(bootstrap, topic, snapshot)

        orders_types, accounts_types, readings_types = (tables[m][0] for m in ("orders", "accounts", "readings"))
        cases = {
            "orders": kafka_case("orders", orders_types, kafka_options(topics["orders"], bootstrap), ["id"]),
            "accounts": kafka_case("accounts", accounts_types, upsert_kafka_options(topics["accounts"], bootstrap),
                                   ["region", "id"]),
            "readings": kafka_case("readings", readings_types, kafka_options(topics["readings"], bootstrap)),
            # docs/consumers.md, "Reading from a snapshot": from the offsets the table recorded at step 2
            "orders_from_step_2": kafka_case("orders_from_step_2", orders_types, dict(
                kafka_options(topics["orders"], bootstrap), **{
                    "scan.startup.mode": "specific-offsets",
                    "scan.startup.specific-offsets": ";".join(
                        f"partition:{p},offset:{o}" for p, o in sorted(offsets_at_step_2.items()))}), ["id"]),
            # the control: the aborted records are there for a consumer that does not skip them
            "orders_uncommitted": kafka_case(
                "orders_uncommitted", orders_types,
                kafka_options(topics["orders"], bootstrap, "read_uncommitted"), ["id"]),
        }
        results = flink_kafka_decoder.decode(list(cases.values()))
        errors = errors_of(results)
        assert not errors, f"Flink's Kafka source failed:\n{errors}"

        # keyed, debezium-json: the records' row kinds, tombstones skipped, the table's rows
        types, table = tables["orders"]
        state, kinds = state_and_kinds(results, cases["orders"], types)
        assert kinds == expected_kinds(logs["orders"]), (
            f"Flink's row kinds {kinds} are not those of the committed records {expected_kinds(logs['orders'])}")
        assert {"+I", "-U", "+U", "-D"} <= set(kinds), f"the scenario lacks a kind of change: {kinds}"
        assert any(m.value is None for m in logs["orders"]), "no tombstone in the keyed log"
        assert state == table, "Flink's changelog of orders does not end with the table:" + differences(state, table)

        # keyed, json upsert: upsert-kafka's changelog of the records
        types, table = tables["accounts"]
        state, kinds = state_and_kinds(results, cases["accounts"], types)
        assert "-D" in kinds and "+U" in kinds, f"upsert-kafka saw no delete or no update: {kinds}"
        assert state == table, "upsert-kafka's changelog of accounts does not end with the table:" + differences(
            state, table)

        # keyless, debezium-json: a multiset with equal rows
        types, table = tables["readings"]
        state, kinds = state_and_kinds(results, cases["readings"], types)
        assert kinds == expected_kinds(logs["readings"])
        assert max(table.values()) > 1, "the keyless table has no equal rows"
        assert state == table, "Flink's changelog of readings does not end with the table:" + differences(
            state, table)

        # the table at step 2 plus Flink's changelog from its recorded offsets is the table now
        types, table = tables["orders"]
        later = canonical_rows(decoded(results, cases["orders_from_step_2"]), types)
        assert later and len(later) < len(decoded(results, cases["orders"])), (
            f"reading from {offsets_at_step_2} gave {len(later)} changes: not a later start")
        state = apply_changelog([("+I", row) for row in orders_at_step_2.elements()] + later)
        assert state == table, (f"orders at step 2 plus Flink's changelog from {offsets_at_step_2} "
                                "is not the table:" + differences(state, table))

        # read_uncommitted sees the aborted insert, so read_committed above really skipped it
        types, table = tables["orders"]
        uncommitted = Counter(row for kind, row in canonical_rows(decoded(results, cases["orders_uncommitted"]), types)
                              if kind == "+I")
        aborted_row = canonical(json.loads(ABORTED["orders"][0][1])["after"], types)
        assert uncommitted[aborted_row] == 1, "Flink read_uncommitted did not see the aborted insert"
