"""Apache Flink reads our logs: the confirmed records of each topic are decoded by Flink's own
`debezium-json` and `json` formats (PyFlink 2.2.1, in .venv-flink, see flink_peer.py), and the
changelog Flink makes of them, applied in order, must end with exactly the table's rows, after
every run.

One Flink process serves the whole module (`flink` fixture): it starts in the background while
the first test runs its dbt steps, and each test sends it one batch of cases. The harness
self-test (hand-written records, no dbt: `-k harness`) comes last, so that the JVM's start
overlaps dbt's work. The tests need LOGSTORE_FLINK_PYTHON (set by `make test` /
`make functional`) and fail without it.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pytest
from dbt.tests.util import run_dbt

from tests.functional.contract import (
    Message, canonical, spark, table_properties, table_state,
)
from tests.functional.flink_peer import (  # noqa: F401
    Case, FlinkDecoder, apply_changelog, apply_upsert, canonical_rows, confirmed_log, debezium_case,
    decoded, differences, expected_kinds, flink_columns, flink_python, model_sql, sql, upsert_cases,
    write_lines,
)

pytestmark = pytest.mark.apache_kafka  # proven on Apache Kafka (tests/kafka_cluster.py)


@pytest.fixture(scope="module")
def flink(tmp_path_factory):
    decoder = FlinkDecoder(tmp_path_factory.mktemp("flink"), flink_python())
    try:
        yield decoder
    finally:
        decoder.close()


# =============================================================================================
# dbt runs, decoded by Flink

@dataclass
class Snapshot:
    step: int
    messages: List[Message]  # the confirmed records of the topic after this step
    types: Dict[str, str]
    table: Counter


def run_steps(project, bootstrap: str, model: str, steps: Sequence[int],
              topic: Optional[str] = None) -> List[Snapshot]:
    """Runs the model once per step. The log is read once, after the last step; the records
    up to a step are those of the snapshots committed by then (`logstore.snapshot` header;
    within a partition they come first)."""
    relation = f"{project.test_schema}.{model}"
    topic = topic or relation
    committed = []
    for step in steps:
        run_dbt(["run", "--select", model, "--vars", f"{{step: {step}}}"])
        snapshot_id = int(table_properties(relation).get("logstore.snapshot.id", 0))
        types, table = table_state(relation)
        assert table, f"{relation} is empty after step {step}: the scenario tests nothing"
        committed.append((step, snapshot_id, types, table))
    log = confirmed_log(bootstrap, topic, committed[-1][1])
    assert all(m.header("logstore.snapshot") for m in log), f"{topic}: a record without its snapshot header"
    return [Snapshot(step, [m for m in log if int(m.header("logstore.snapshot")) <= snapshot_id], types, table)
            for step, snapshot_id, types, table in committed]


def _errors(results: Dict[str, dict]) -> str:
    return "\n".join(f"--- {name}:\n{r['error']}" for name, r in results.items() if "error" in r)


def check_debezium(flink: FlinkDecoder, directory: Path, name: str, snapshots: List[Snapshot],
                   kinds: Sequence[str], options: Optional[Dict[str, str]] = None) -> List[str]:
    """Flink's debezium-json decodes the confirmed log after every step into a changelog that
    ends with the table's rows; its row kinds are those of the records, and over all steps
    exactly `kinds` occur. Returns the row kinds of the last step."""
    cases = [debezium_case(f"{name}.step{s.step}", s.messages, s.types, directory, options)
             for s in snapshots]
    results = flink.decode(cases)
    errors = _errors(results)
    assert not errors, f"Flink's debezium-json ({options or 'no options'}) failed on {name}:\n{errors}"
    for snap, case in zip(snapshots, cases):
        rows = decoded(results, case)
        got = [k for k, _ in rows]
        assert got == expected_kinds(snap.messages), (
            f"{case.name}: Flink's row kinds {got} are not the records' {expected_kinds(snap.messages)}")
        state = apply_changelog(canonical_rows(rows, snap.types))
        assert state == snap.table, (
            f"{case.name}: Flink's changelog does not end with the table's rows:"
            + differences(state, snap.table))
    last = [k for k, _ in decoded(results, cases[-1])]
    assert sorted(set(last)) == sorted(kinds), f"{name}: row kinds {sorted(set(last))}, expected {sorted(kinds)}"
    return last


# --- 1. keyed table, default log options, every type ------------------------------------------

EVERYTHING = {
    "id": "int", "tiny": "tinyint", "small": "smallint", "big": "bigint", "flag": "boolean",
    "dbl": "double", "flt": "float", "dec": "decimal(20,10)", "money": "decimal(12,2)",
    "wide": "decimal(38,10)", "day": "date", "at": "timestamp", "at_ntz": "timestamp_ntz",
    "raw": "binary", "label": "string", "ints": "array<int>", "tags": "map<string,int>",
    "pair": "struct<a:int,b:string>", "pairs": "array<struct<a:int,b:string>>",
}
FULL = {
    "tiny": "1", "small": "300", "big": "10000000000", "flag": "true", "dbl": "NaN", "flt": "0.5",
    "dec": "0.0000001", "money": "10.50", "wide": "12345678901234567890.0123456789",
    "day": "2024-02-29", "at": "2024-01-01 10:00:00.123456", "at_ntz": "2024-01-01 10:00:00.123456",
    "raw": sql("X'00FF10'"), "label": "plain",
    "ints": sql("array(1, null, 3)"), "tags": sql("map('a', 1, 'b', null)"),
    "pair": sql("named_struct('a', 1, 'b', 'x')"),
    "pairs": sql("array(named_struct('a', 1, 'b', 'x'), named_struct('a', 2, 'b', null))"),
}
EDGES = {
    "tiny": "-128", "small": "-32768", "big": "-9223372036854775808", "flag": "false",
    "dbl": "Infinity", "flt": "-1.25E-7", "dec": "-0.0000001", "money": "-0.01",
    "wide": "-0.0000000001", "day": "1900-02-28", "at": "1969-12-31 23:59:59.999999",
    "at_ntz": "9999-12-31 23:59:59.999999", "raw": sql("X''"),
    "label": sql(r"'Dédé 🚀 陈 表 \"q\" \\ back\ttab\nline'"),
    "ints": sql("array()"), "tags": sql("map()"), "pair": sql("named_struct('a', null, 'b', 'ü')"),
    "pairs": sql("array()"),
}
KEYED_STEPS = {
    1: [dict(FULL, id=1), dict(EDGES, id=2), {"id": 3}, dict(FULL, id=4, dbl="-Infinity", label="四")],
    # 1 same, 2 and 4 updated, 3 deleted, 5 and 6 new
    2: [dict(FULL, id=1), dict(EDGES, id=2, dbl="1E300", label="Ünï 🚀"), dict(FULL, id=4, dbl="0.1"),
        {"id": 5}, dict(EDGES, id=6)],
    # 1 and 5 updated, 2 deleted, 4 and 6 same, 7 new
    3: [dict(FULL, id=1, dec="0.0000000001", flag="false", tags=sql("map('c', 3)")),
        dict(FULL, id=4, dbl="0.1"), dict(FULL, id=5, dbl="NaN"), dict(EDGES, id=6),
        dict(EDGES, id=7, dbl="NaN", label=sql("'😀'"))],
}


class TestKeyedTableDefaults:
    """Default options: debezium-json with before and after images, deletes followed by
    tombstones; Flink's debezium-json with no options."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"everything.sql": model_sql(
            "materialized='table', unique_key='id', **{'log.system': 'kafka'}", EVERYTHING, KEYED_STEPS)}

    def test_keyed_table_decodes(self, project, kafka_bootstrap_servers, flink, tmp_path):
        snapshots = run_steps(project, kafka_bootstrap_servers, "everything", [1, 2, 3])
        check_debezium(flink, tmp_path, "keyed", snapshots, ["+I", "-U", "+U", "-D"])
        # every delete is followed by its key's tombstone, which Flink skips
        log = snapshots[-1].messages
        deletes = [i for i, m in enumerate(log) if m.value is not None and json.loads(m.value)["op"] == "d"]
        assert deletes and all(i + 1 < len(log) and log[i + 1].value is None and log[i + 1].key == log[i].key
                               for i in deletes), "a keyed delete is not followed by its tombstone"


# --- 2. keyless table -------------------------------------------------------------------------

PAIRS = {"k": "string", "v": "int", "amount": "decimal(10,3)", "at": "timestamp"}
PAIR_ROWS = {
    "a": {"k": "a", "v": "1", "amount": "1.500", "at": "2024-03-31 01:30:00"},
    "b": {"k": "b", "v": "2", "amount": "-0.001", "at": "2000-01-01 00:00:00.000001"},
    "c": {"k": "c"},
    "z": {"k": "z", "amount": "0"},
}
KEYLESS_STEPS = {
    1: [PAIR_ROWS[k] for k in "aabz"],
    2: [PAIR_ROWS[k] for k in "abbcz"],
    3: [PAIR_ROWS[k] for k in "aaac"] + [dict(PAIR_ROWS["c"], v="3")],
}


class TestKeylessTableDefaults:
    @pytest.fixture(scope="class")
    def models(self):
        return {"pairs.sql": model_sql("materialized='table', log_system='kafka'", PAIRS, KEYLESS_STEPS)}

    def test_keyless_table_decodes(self, project, kafka_bootstrap_servers, flink, tmp_path):
        snapshots = run_steps(project, kafka_bootstrap_servers, "pairs", [1, 2, 3])
        assert any(n > 1 for n in snapshots[0].table.values()), "duplicate rows expected"
        check_debezium(flink, tmp_path, "keyless", snapshots, ["+I", "-D"])
        assert all(m.key is None for m in snapshots[-1].messages)


# --- 3. incremental merge with a unique key ---------------------------------------------------

ORDERS = {"id": "int", "status": "string", "amount": "decimal(12,2)", "placed": "timestamp",
          "lines": "array<struct<sku:string,qty:int>>"}
MERGE_STEPS = {
    1: [{"id": "1", "status": "open", "amount": "10.50", "placed": "2024-05-01 09:00:00",
         "lines": sql("array(named_struct('sku', 'x', 'qty', 1))")},
        {"id": "2", "status": "open", "amount": "20", "placed": "2024-05-01 10:00:00"}],
    2: [{"id": "2", "status": "paid", "amount": "21", "placed": "2024-05-01 10:00:00"},
        {"id": "3", "status": "open", "amount": "0.01", "placed": "2024-05-02 00:00:00.5"},
        {"id": "1", "status": "open", "amount": "10.50", "placed": "2024-05-01 09:00:00",
         "lines": sql("array(named_struct('sku', 'x', 'qty', 1))")}],
    3: [{"id": "4", "status": "new 🚚", "amount": "40"},
        {"id": "1", "status": "paid", "amount": "10.50", "placed": "2024-05-01 09:00:00",
         "lines": sql("array(named_struct('sku', 'x', 'qty', 2), named_struct('sku', 'y', 'qty', null))")}],
}


class TestIncrementalMerge:
    @pytest.fixture(scope="class")
    def models(self):
        return {"orders.sql": model_sql(
            "materialized='incremental', incremental_strategy='merge', unique_key='id', "
            "file_format='parquet', log_system='kafka'", ORDERS, MERGE_STEPS)}

    def test_merge_decodes(self, project, kafka_bootstrap_servers, flink, tmp_path):
        snapshots = run_steps(project, kafka_bootstrap_servers, "orders", [1, 2, 3])
        assert len(snapshots[-1].table) == 4
        check_debezium(flink, tmp_path, "merge", snapshots, ["+I", "-U", "+U"])


# --- 4. incremental append, keyless -----------------------------------------------------------

APPEND = """
{{ config(materialized='incremental', incremental_strategy='append', log_system='kafka') }}
select {{ var('step') }} as step, concat('event-', cast(id % 2 as string)) as name,
       cast('2024-05-0{{ var('step') }} 12:00:00' as timestamp) as at,
       cast(id / 3 as decimal(10, 4)) as share
from range({{ var('step') * 3 }}) as r(id)
"""


class TestIncrementalAppend:
    @pytest.fixture(scope="class")
    def models(self):
        return {"events.sql": APPEND}

    def test_append_decodes(self, project, kafka_bootstrap_servers, flink, tmp_path):
        snapshots = run_steps(project, kafka_bootstrap_servers, "events", [1, 2])
        assert sum(snapshots[-1].table.values()) == 3 + 6
        check_debezium(flink, tmp_path, "append", snapshots, ["+I"])


# --- 5. json values in upsert mode: Flink upsert-kafka's semantics ----------------------------

ACCOUNTS = {"region": "string", "id": "int", "balance": "decimal(14,4)", "seen": "timestamp",
            "seen_local": "timestamp_ntz", "tags": "map<string,string>", "note": "string"}
ACCOUNT = {"balance": "100.0001", "seen": "2024-06-01 08:00:00.250", "seen_local": "2024-06-01 08:00:00",
           "tags": sql("map('tier', 'gold')"), "note": "ok"}
UPSERT_STEPS = {
    1: [dict(ACCOUNT, region="eu", id="1"), dict(ACCOUNT, region="eu", id="2", note=None),
        dict(ACCOUNT, region="us", id="1", balance="-5")],
    # eu/1 updated, eu/2 deleted, us/1 same, us/2 new
    2: [dict(ACCOUNT, region="eu", id="1", balance="0.0001"), dict(ACCOUNT, region="us", id="1", balance="-5"),
        dict(ACCOUNT, region="us", id="2", seen="1999-12-31 23:59:59.999999")],
    # eu/2 back, us/1 deleted, us/2 updated
    3: [dict(ACCOUNT, region="eu", id="1", balance="0.0001"), dict(ACCOUNT, region="eu", id="2", note="back 🔁"),
        dict(ACCOUNT, region="us", id="2", tags=sql("map('tier', 'silver', 'x', null)"))],
}


class TestJsonUpsert:
    @pytest.fixture(scope="class")
    def models(self):
        return {"accounts.sql": model_sql(
            "materialized='table', unique_key=['region', 'id'], "
            "**{'log.system': 'kafka', 'log.format': 'json', 'log.changelog-mode': 'upsert'}",
            ACCOUNTS, UPSERT_STEPS)}

    def test_json_upsert_decodes(self, project, kafka_bootstrap_servers, flink, tmp_path):
        snapshots = run_steps(project, kafka_bootstrap_servers, "accounts", [1, 2, 3])
        cases = {s.step: upsert_cases(f"upsert.step{s.step}", s.messages, s.types, ["region", "id"], tmp_path)
                 for s in snapshots}
        results = flink.decode([c for pair in cases.values() for c in pair])
        errors = _errors(results)
        assert not errors, f"Flink's json failed on the upsert log:\n{errors}"
        for snap in snapshots:
            keys, values = cases[snap.step]
            state = apply_upsert(snap.messages, decoded(results, keys), decoded(results, values),
                                 ["region", "id"], snap.types)
            assert state == snap.table, (
                f"step {snap.step}: upsert-kafka over Flink's json does not end with the table's rows:"
                + differences(state, snap.table))
        log = snapshots[-1].messages
        assert sum(m.value is None for m in log) == 2  # eu/2 and us/1 deleted
        assert len({m.key for m in log}) == 4


# --- 6. ISO-8601 timestamps -------------------------------------------------------------------

STAMPS = {"id": "int", "at": "timestamp", "at_ntz": "timestamp_ntz", "day": "date",
          "history": "array<timestamp>", "span": "struct<start_at:timestamp,wall:timestamp_ntz>"}
STAMP = {"at": "2024-03-31 01:30:00.000001", "at_ntz": "2024-03-31 02:30:00", "day": "2024-03-31",
         "history": sql("array(timestamp'2020-01-01 00:00:00', null)"),
         "span": sql("named_struct('start_at', timestamp'2024-01-01 00:00:00.5', "
                       "'wall', timestamp_ntz'2024-01-01 00:00:00.5')")}
STAMP_STEPS = {
    1: [dict(STAMP, id="1"), dict(STAMP, id="2", at="1970-01-01 00:00:00"), {"id": "3"}],
    2: [dict(STAMP, id="1", at="2018-11-04 00:30:00", at_ntz="2018-11-04 00:30:00"), {"id": "3"},
        dict(STAMP, id="4", history=sql("array()"))],
}


class TestIsoTimestamps:
    @pytest.fixture(scope="class")
    def models(self):
        return {"stamps.sql": model_sql(
            "materialized='table', unique_key='id', "
            "**{'log.system': 'kafka', 'log.timestamp-format.standard': 'ISO-8601'}", STAMPS, STAMP_STEPS)}

    def test_iso_timestamps_decode(self, project, kafka_bootstrap_servers, flink, tmp_path):
        snapshots = run_steps(project, kafka_bootstrap_servers, "stamps", [1, 2])
        first = json.loads(snapshots[0].messages[0].value)["after"]
        assert "T" in first["at"] and first["at"].endswith("Z")
        check_debezium(flink, tmp_path, "iso", snapshots, ["+I", "-U", "+U", "-D"],
                       {"debezium-json.timestamp-format.standard": "ISO-8601"})


# --- 7. a Spark session time zone other than UTC ----------------------------------------------

ZONE = "America/Sao_Paulo"


class TestSessionTimeZone:
    """Timestamps are instants: written in a São Paulo session (with the DST Brazil had in 2018),
    Flink (no options) must read the same instants as the table holds."""

    @pytest.fixture(scope="class")
    def dbt_profile_target(self, kafka_bootstrap_servers, spark_session_dir):
        # dbt-spark sets the profile's parameters on the shared session before every statement
        return {
            "type": "logstore", "method": "session", "host": "localhost", "threads": 1,
            "kafka_bootstrap_servers": kafka_bootstrap_servers, "session_dir": spark_session_dir,
            "server_side_parameters": {"spark.sql.shuffle.partitions": "2",
                                       "spark.sql.session.timeZone": ZONE},
        }

    @pytest.fixture(scope="class", autouse=True)
    def session_zone(self):
        session = spark()
        session.conf.set("spark.sql.session.timeZone", ZONE)
        try:
            yield
        finally:
            session.conf.set("spark.sql.session.timeZone", "UTC")

    @pytest.fixture(scope="class")
    def models(self):
        return {"zoned.sql": model_sql(
            "materialized='table', unique_key='id', **{'log.system': 'kafka'}", STAMPS, {
                1: [dict(STAMP, id="1", at="2018-12-01 10:00:00"), dict(STAMP, id="2"), {"id": "3"}],
                2: [dict(STAMP, id="1", at="2018-12-01 10:00:00.000001"), {"id": "3"},
                    dict(STAMP, id="4", at="2018-02-17 23:30:00")],
            })}

    def test_session_zone_decodes(self, project, kafka_bootstrap_servers, flink, tmp_path):
        assert spark().conf.get("spark.sql.session.timeZone") == ZONE
        snapshots = run_steps(project, kafka_bootstrap_servers, "zoned", [1, 2])
        # 10:00 in São Paulo on 2018-12-01 (summer time, UTC-2) is 12:00 UTC
        at = spark().sql(f"select cast(at as string) as s, unix_timestamp(at) as u "
                         f"from {project.test_schema}.zoned where id = 1").collect()[0]
        assert at.u == int(datetime(2018, 12, 1, 12, 0, 0, 1, tzinfo=timezone.utc).timestamp())
        check_debezium(flink, tmp_path, "zone", snapshots, ["+I", "-U", "+U", "-D"])


# --- 8. Kafka Connect's schema envelope (log.format.schema-include) ---------------------------

CONNECTED = {"id": "int", "name": "string", "amount": "decimal(12,3)", "day": "date",
             "at": "timestamp", "at_ntz": "timestamp_ntz", "flag": "boolean", "big": "bigint",
             "tags": "array<string>", "pair": "struct<a:int,seen:date>"}
CONNECTED_ROW = {"name": "ä 🚀", "amount": "-12.500", "day": "1969-12-31", "at": "2024-03-31 01:30:00.000001",
                 "at_ntz": "2024-03-10 02:30:00.123456", "flag": "true", "big": "-9000000000",
                 "tags": sql("array('x', null)"), "pair": sql("named_struct('a', 1, 'seen', date'2024-01-02')")}
CONNECTED_STEPS = {
    1: [dict(CONNECTED_ROW, id="1"), dict(CONNECTED_ROW, id="2", day="2000-02-29"), {"id": "3"}],
    # 1 updated, 2 deleted, 3 same, 4 new
    2: [dict(CONNECTED_ROW, id="1", amount="0.001", at_ntz="1900-01-01 00:00:00"), {"id": "3"},
        dict(CONNECTED_ROW, id="4", name=None)],
}
# Connect's temporal types are numbers in the payload: Flink reads them as such
EPOCH_TYPES = {"date": "INT", "timestamp_ntz": "BIGINT"}


def _connect_columns(types: Dict[str, str]):
    return [(name, EPOCH_TYPES.get(t, flink_columns({name: t})[0][1])) for name, t in types.items()]


def _from_epochs(row: dict, types: Dict[str, str]) -> dict:
    """Connect's epoch day and Debezium's epoch microseconds back as a date and a wall clock."""
    from datetime import timedelta

    out = dict(row)
    for name, t in types.items():
        if out.get(name) is not None and t == "date":
            out[name] = date(1970, 1, 1) + timedelta(days=int(out[name]))
        elif out.get(name) is not None and t == "timestamp_ntz":
            out[name] = datetime(1970, 1, 1) + timedelta(microseconds=int(out[name]))
    return out


class TestConnectEnvelope:
    """Key and value wrapped in Kafka Connect's {"schema", "payload"} envelope: Flink's
    debezium-json with 'debezium-json.schema-include' reads the Debezium log, Flink's json over
    the payload reads the upsert log; both end with the table's rows. Each record's schema is
    the table's, by JsonConverter's rules."""

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "connected.sql": model_sql(
                "materialized='table', unique_key='id', "
                "**{'log.system': 'kafka', 'log.format.schema-include': true}", CONNECTED, CONNECTED_STEPS),
            "connected_upsert.sql": model_sql(
                "materialized='table', unique_key='id', **{'log.system': 'kafka', 'log.format': 'json', "
                "'log.changelog-mode': 'upsert', 'log.format.schema-include': true}", CONNECTED, CONNECTED_STEPS),
        }

    def test_connect_envelope_decodes(self, project, kafka_bootstrap_servers, flink, tmp_path):
        debezium = run_steps(project, kafka_bootstrap_servers, "connected", [1, 2])
        upsert = run_steps(project, kafka_bootstrap_servers, "connected_upsert", [1, 2])
        first = json.loads(debezium[0].messages[0].value)
        assert set(first) == {"schema", "payload"} and first["payload"]["op"] == "c"
        after = {f["field"]: f for f in first["schema"]["fields"][1]["fields"]}
        assert after["day"]["name"] == "org.apache.kafka.connect.data.Date"
        assert after["amount"]["parameters"] == {"scale": "3", "connect.decimal.precision": "12"}
        assert json.loads(debezium[0].messages[0].key)["schema"]["name"].endswith(".Key")
        options = {"debezium-json.schema-include": "true", "debezium-json.timestamp-format.standard": "ISO-8601"}
        cases = []
        for snap in debezium:
            path = write_lines(tmp_path / f"connect.step{snap.step}.jsonl", (m.value for m in snap.messages))
            cases.append(Case(f"connect.step{snap.step}", "debezium-json", _connect_columns(CONNECTED), path, options))
        payload_row = "ROW<" + ", ".join(f"`{n}` {t}" for n, t in _connect_columns(CONNECTED)) + ">"
        for snap in upsert:
            path = write_lines(tmp_path / f"connect-upsert.step{snap.step}.jsonl",
                               (m.value for m in snap.messages if m.value is not None))
            cases.append(Case(f"connect-upsert.step{snap.step}", "json", [("payload", payload_row)], path,
                              {"json.timestamp-format.standard": "ISO-8601"}))
        results = flink.decode(cases)
        assert not _errors(results), f"Flink failed on the Connect envelope:\n{_errors(results)}"
        for snap, case in zip(debezium, cases):
            rows = [(kind, _from_epochs(row, CONNECTED)) for kind, row in decoded(results, case)]
            assert [k for k, _ in rows] == expected_kinds(
                [Message(m.partition, m.offset, m.key, json.dumps(json.loads(m.value)["payload"]).encode()
                         if m.value else None, m.headers) for m in snap.messages])
            state = apply_changelog(canonical_rows(rows, snap.types))
            assert state == snap.table, f"{case.name}:" + differences(state, snap.table)
        for snap, case in zip(upsert, cases[len(debezium):]):
            state: Dict[str, str] = {}
            rows = iter(decoded(results, case))
            for m in snap.messages:
                key = json.loads(m.key)["payload"]["id"]
                if m.value is None:
                    del state[key]
                else:
                    state[key] = canonical(_from_epochs(next(rows)[1]["payload"], CONNECTED), snap.types)
            assert Counter(state.values()) == snap.table, (
                f"{case.name}:" + differences(Counter(state.values()), snap.table))


# =============================================================================================
# The harness itself, on hand-written records: what Flink makes of each record shape and type
# (last in the module only so that Flink starts while the dbt tests run)

TYPES = {
    "id": "int", "tiny": "tinyint", "small": "smallint", "big": "bigint", "flag": "boolean",
    "dbl": "double", "flt": "float", "dec": "decimal(20,10)", "wide": "decimal(38,10)",
    "day": "date", "at": "timestamp", "at_ntz": "timestamp_ntz", "raw": "binary",
    "label": "string", "ints": "array<int>", "tags": "map<string,int>",
    "pair": "struct<a:int,b:string>", "pairs": "array<struct<a:int,b:string>>",
}

ROW_1 = {
    "id": 1, "tiny": -128, "small": 32767, "big": -9223372036854775808, "flag": True,
    "dbl": "NaN", "flt": 0.5, "dec": Decimal("1.000E-7"), "wide": Decimal("12345678901234567890.0123456789"),
    "day": "2024-02-29", "at": "2024-01-01 10:00:00.123456Z",
    "at_ntz": "9999-12-31 23:59:59.999999", "raw": "AP8Q", "label": "Dédé 🚀 陈 \"q\" \\ \t\n",
    "ints": [1, None, 3], "tags": {"a": 1, "b": None}, "pair": {"a": 1, "b": "x"},
    "pairs": [{"a": 2, "b": None}],
}
# dec: a Python float, written as -1e-07
ROW_1_UPDATED = dict(ROW_1, dbl="Infinity", flt="-Infinity", dec=-1E-7, flag=False,
                     at="1969-12-31 23:59:59.999999Z", ints=[], tags={}, pairs=[])
ROW_2 = {column: None for column in TYPES}
ROW_2["id"] = 2

# What the Spark table holds for ROW_1_UPDATED, as pyspark hands it out.
SPARK_ROW_1_UPDATED = {
    "id": 1, "tiny": -128, "small": 32767, "big": -9223372036854775808, "flag": False,
    "dbl": float("inf"), "flt": float("-inf"), "dec": Decimal("-1.000E-7"),
    "wide": Decimal("12345678901234567890.0123456789"), "day": date(2024, 2, 29),
    "at": datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc),
    "at_ntz": datetime(9999, 12, 31, 23, 59, 59, 999999), "raw": bytearray(b"\x00\xff\x10"),
    "label": "Dédé 🚀 陈 \"q\" \\ \t\n", "ints": [], "tags": {}, "pair": {"a": 1, "b": "x"},
    "pairs": [],
}


def _json(value) -> bytes:
    """JSON with Decimals as numbers in their own digits (1.000E-7, as Spark writes them)."""
    text = json.dumps(value, ensure_ascii=False, default=lambda d: f"@decimal:{d}@")
    return re.sub(r'"@decimal:([^@]+)@"', r"\1", text).encode()


def _event(op: str, before: Optional[dict], after: Optional[dict]) -> bytes:
    return _json({"before": before, "after": after, "op": op, "ts_ms": 1767225600000,
                  "source": {"connector": "dbt-logstore", "db": "s", "table": "t"}})


def _iso(row: dict) -> dict:
    return {k: v.replace(" ", "T") if k in ("at", "at_ntz") and v else v for k, v in row.items()}


def test_harness_decodes_hand_written_records(flink, tmp_path):
    """Runs without dbt: proves the harness (types, files, canonical forms, error reporting) and
    the Flink behaviour the dbt-driven tests rely on."""
    changelog = [
        Message(0, 0, b'{"id":1}', _event("c", None, ROW_1)),
        Message(0, 1, b'{"id":2}', _event("c", None, ROW_2)),
        Message(0, 2, b'{"id":1}', _event("u", ROW_1, ROW_1_UPDATED)),
        Message(0, 3, b'{"id":2}', _event("d", ROW_2, None)),
        Message(0, 4, b'{"id":2}', None),  # the tombstone after a delete: an empty line
        Message(0, 5, b'{"id":3}', _event("c", None, dict(ROW_2, id=3))),
        Message(0, 6, b'{"id":3}', _event("d", dict(ROW_2, id=3), None)),
        Message(0, 7, b'{"id":3}', None),
        Message(0, 8, b'{"id":4}', None),  # two empty lines in a row, and one at the very end
    ]
    iso = [Message(0, 0, b'{"id":1}', _event("c", None, _iso(ROW_1))),
           Message(0, 1, b'{"id":1}', _event("u", _iso(ROW_1), _iso(ROW_1_UPDATED)))]
    upsert = [Message(0, 0, b'{"id":1}', _json(ROW_1)), Message(0, 1, b'{"id":2}', _json(ROW_2)),
              Message(0, 2, b'{"id":1}', _json(ROW_1_UPDATED)), Message(0, 3, b'{"id":2}', None)]
    columns = flink_columns(TYPES)
    upsert_keys, upsert_values = upsert_cases("upsert", upsert, TYPES, ["id"], tmp_path)
    cases = [
        debezium_case("debezium", changelog, TYPES, tmp_path),
        debezium_case("iso", iso, TYPES, tmp_path,
                      {"debezium-json.timestamp-format.standard": "ISO-8601"}),
        upsert_keys, upsert_values,
        # an update without its before image (the old upsert mode of debezium-json)
        Case("no_before", "debezium-json", columns, write_lines(
            tmp_path / "no_before.jsonl", [_event("c", None, ROW_1), _event("u", None, ROW_1_UPDATED)])),
        # an instant with an offset instead of Z (what logs written in a session zone held)
        Case("offset", "debezium-json", columns, write_lines(
            tmp_path / "offset.jsonl", [_event("c", None, dict(ROW_1, at="2024-01-01 12:00:00.000000+02:00"))])),
        # the ISO form read with the default (SQL) standard
        Case("iso_as_sql", "debezium-json", columns, write_lines(
            tmp_path / "iso_as_sql.jsonl", [_event("c", None, _iso(ROW_1))])),
    ]
    assert columns[-3:] == [("tags", "MAP<STRING, INT>"), ("pair", "ROW<`a` INT, `b` STRING>"),
                            ("pairs", "ARRAY<ROW<`a` INT, `b` STRING>>")]
    results = flink.decode(cases)

    rows = decoded(results, cases[0])
    assert [k for k, _ in rows] == ["+I", "+I", "-U", "+U", "-D", "+I", "-D"] == expected_kinds(changelog)
    # Flink's values, in the decoder's JSON form
    assert rows[0][1] == {
        "id": 1, "tiny": -128, "small": 32767, "big": -9223372036854775808, "flag": True,
        "dbl": "NaN", "flt": 0.5, "dec": "0.0000001000", "wide": "12345678901234567890.0123456789",
        "day": "2024-02-29", "at": "2024-01-01T10:00:00.123456Z",
        "at_ntz": "9999-12-31T23:59:59.999999", "raw": "AP8Q", "label": "Dédé 🚀 陈 \"q\" \\ \t\n",
        "ints": [1, None, 3], "tags": {"a": 1, "b": None}, "pair": {"a": 1, "b": "x"},
        "pairs": [{"a": 2, "b": None}],
    }
    assert rows[1][1] == ROW_2
    assert rows[2][1] == rows[0][1]  # -U carries the before image
    assert {k: rows[3][1][k] for k in ("dbl", "flt", "dec", "flag", "at", "ints", "tags", "pairs")} == {
        "dbl": "Infinity", "flt": "-Infinity", "dec": "-0.0000001000", "flag": False,
        "at": "1969-12-31T23:59:59.999999Z", "ints": [], "tags": {}, "pairs": []}
    # the final state, compared with the table's row as pyspark gives it
    state = apply_changelog(canonical_rows(rows, TYPES))
    assert state == Counter([canonical(SPARK_ROW_1_UPDATED, TYPES)]), differences(
        state, Counter([canonical(SPARK_ROW_1_UPDATED, TYPES)]))

    iso_rows = decoded(results, cases[1])
    assert [k for k, _ in iso_rows] == ["+I", "-U", "+U"]
    assert canonical_rows(iso_rows, TYPES) == canonical_rows(rows[:1] + rows[2:4], TYPES)

    upserted = apply_upsert(upsert, decoded(results, upsert_keys), decoded(results, upsert_values),
                            ["id"], TYPES)
    assert upserted == state
    assert [k for k, _ in decoded(results, upsert_values)] == ["+I"] * 3
    assert decoded(results, upsert_keys)[3][1] == {"id": 2}

    for name, text in [("no_before", 'The "before" field of UPDATE message is null'),
                       ("offset", "Text '2024-01-01 12:00:00.000000+02:00' could not be parsed"),
                       ("iso_as_sql", "Text '2024-01-01T10:00:00.123456Z' could not be parsed")]:
        assert "error" in results[name], f"{name}: Flink accepted it: {results[name]}"
        assert text in results[name]["error"], results[name]["error"]
    with pytest.raises(AssertionError, match='"before" field of UPDATE message is null'):
        decoded(results, cases[4])  # Flink's own text reaches the assertion message
