"""Kafka Connect's side of the log: Debezium's JDBC sink (in a real Kafka Connect worker,
tests/kafka_connect.py) applies hand-built records, in the shape the encoder is to write for
Kafka Connect (JsonConverter's `{"schema", "payload"}` with schemas.enable=true), to a real
PostgreSQL (tests/postgres.py), and the table ends with exactly the rows the log says.

- `test_debezium_envelope`: change events (`c`, `u` with before and after, `d` followed by a
  tombstone with the same key and the `logstore.tombstone: after-delete` header), written in
  Kafka transactions as the mirror writes them, one aborted (the worker reads read_committed);
  the table is created by the sink from the first record's schema, with the column types the
  Connect schemas name (date, numeric(p,s), timestamptz and timestamp with microseconds).
- `test_flat_rows_with_tombstones`: the `json` upsert format: the value is the row itself
  (`<db>.<table>.Value`), a tombstone (null value) deletes its key.

- `TestDbtModelsIntoPostgres`: end to end, dbt models logged with 'log.format.schema-include'
  (a Debezium log and a `json` upsert log) over three runs of inserts, updates and deletes; the
  sink's PostgreSQL tables equal the models' after every run.

The records of the first two are built here by hand: the target the encoder's Kafka Connect output
must meet; the last one is the encoder's own.
"""
import json
import uuid
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

pytestmark = pytest.mark.apache_kafka  # the worker's sink reads Apache Kafka's transactions

DB = "analytics"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
PARTITIONS = 3  # keys spread by Kafka's default partitioner, as the mirror places them


# -- the Connect schemas of the columns, one per Spark type -----------------------------------
def field(name: str, spark_type: str, optional: bool = True) -> Dict[str, Any]:
    schema: Dict[str, Any] = {"field": name}
    if spark_type == "int":
        schema["type"] = "int32"
    elif spark_type == "bigint":
        schema["type"] = "int64"
    elif spark_type in ("string", "double", "boolean"):
        schema["type"] = spark_type
    elif spark_type.startswith("decimal("):
        precision, scale = spark_type[len("decimal("):-1].split(",")
        schema.update(type="bytes", name="org.apache.kafka.connect.data.Decimal", version=1,
                      parameters={"scale": scale.strip(),
                                  "connect.decimal.precision": precision.strip()})
    elif spark_type == "date":
        schema.update(type="int32", name="org.apache.kafka.connect.data.Date", version=1)
    elif spark_type == "timestamp":
        schema.update(type="string", name="io.debezium.time.ZonedTimestamp", version=1)
    elif spark_type == "timestamp_ntz":
        schema.update(type="int64", name="io.debezium.time.MicroTimestamp", version=1)
    else:
        raise ValueError(spark_type)
    schema["optional"] = optional
    return schema


# The table: every type of the shape, a key column, nulls allowed elsewhere. `rate` holds digits a
# double cannot, and one value written in Java's exponent form (BigDecimal.toString: 1.000E-7).
COLUMNS: Sequence[Tuple[str, str]] = (
    ("id", "int"), ("name", "string"), ("visits", "bigint"), ("score", "double"),
    ("active", "boolean"), ("amount", "decimal(10,2)"), ("rate", "decimal(20,10)"),
    ("birthday", "date"), ("updated_at", "timestamp"), ("local_at", "timestamp_ntz"),
)
KEY = "id"


def row_fields() -> List[Dict[str, Any]]:
    return [field(name, spark_type, optional=name != KEY) for name, spark_type in COLUMNS]


def key_schema(table: str) -> Dict[str, Any]:
    return {"type": "struct", "name": f"{DB}.{table}.Key", "optional": False,
            "fields": [field(KEY, "int", optional=False)]}


def value_schema(table: str, optional: bool) -> Dict[str, Any]:
    return {"type": "struct", "name": f"{DB}.{table}.Value", "optional": optional,
            "fields": row_fields()}


def envelope_schema(table: str) -> Dict[str, Any]:
    return {"type": "struct", "name": f"{DB}.{table}.Envelope", "optional": False, "fields": [
        {"field": "before", **value_schema(table, True)},
        {"field": "after", **value_schema(table, True)},
        {"field": "op", "type": "string", "optional": False},
        {"field": "ts_ms", "type": "int64", "optional": True},
        {"field": "source", "type": "struct", "name": "dbt_logstore.Source", "optional": False,
         "fields": [
             {"field": "connector", "type": "string", "optional": False},
             {"field": "version", "type": "string", "optional": False},
             {"field": "db", "type": "string", "optional": False},
             {"field": "table", "type": "string", "optional": False},
             {"field": "ts_ms", "type": "int64", "optional": False}]}]}


# -- JSON with exact numbers -------------------------------------------------------------------
def to_json(value: Any) -> str:
    """JSON text as the encoder writes it: a Decimal as a JSON number with exactly its digits
    (12.30 stays 12.30, 1.000E-7 stays in exponent form), no spaces."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{to_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(to_json(v) for v in value) + "]"
    return json.dumps(value)


def days(d: str) -> int:
    """A date as Connect's Date: days since 1970-01-01."""
    return (date.fromisoformat(d) - date(1970, 1, 1)).days


def micros(local: str) -> int:
    """A wall-clock time as Debezium's MicroTimestamp: microseconds since 1970-01-01T00:00."""
    return (datetime.fromisoformat(local) - datetime(1970, 1, 1)) // timedelta(microseconds=1)


def row(id: int, name: Optional[str] = None, visits: Optional[int] = None,
        score: Optional[float] = None, active: Optional[bool] = None,
        amount: Optional[str] = None, rate: Optional[str] = None, birthday: Optional[str] = None,
        updated_at: Optional[str] = None, local_at: Optional[str] = None) -> Dict[str, Any]:
    """A row image in the payload's types (Spark's values as the encoder writes them)."""
    return {"id": id, "name": name, "visits": visits, "score": score, "active": active,
            "amount": None if amount is None else Decimal(amount),
            "rate": None if rate is None else Decimal(rate),
            "birthday": None if birthday is None else days(birthday),
            "updated_at": updated_at,
            "local_at": None if local_at is None else micros(local_at)}


def expected(image: Dict[str, Any]) -> Dict[str, Any]:
    """The row PostgreSQL should hold for an image, as table_rows() reads it: decimals as plain
    text with the column's scale, dates and timestamps as PostgreSQL's JSON writes them."""
    out = {}
    for name, spark_type in COLUMNS:
        v = image[name]
        if v is None:
            out[name] = None
        elif spark_type.startswith("decimal("):
            scale = int(spark_type[:-1].split(",")[1])
            out[name] = format(v.quantize(Decimal(1).scaleb(-scale)), "f")
        elif spark_type == "date":
            out[name] = (date(1970, 1, 1) + timedelta(days=v)).isoformat()
        elif spark_type == "timestamp":  # the instant, in the server's time zone (UTC)
            out[name] = pg_timestamp(datetime.fromisoformat(v).astimezone(timezone.utc))
        elif spark_type == "timestamp_ntz":
            out[name] = pg_timestamp(datetime(1970, 1, 1) + timedelta(microseconds=v))
        else:
            out[name] = v
    return out


def pg_timestamp(t: datetime) -> str:
    """PostgreSQL's JSON text of a timestamp: ISO-8601, the fraction without trailing zeros."""
    text = t.isoformat(timespec="microseconds")
    head, fraction, offset = text[:19], text[20:26], text[26:]
    fraction = fraction.rstrip("0")
    return head + ("." + fraction if fraction else "") + offset


def table_rows(pg, table: str) -> List[Dict[str, Any]]:
    """The table's rows by id: decimals as plain text (scale kept), doubles as floats."""
    types = dict(COLUMNS)
    out = []
    for r in pg.rows(f'select * from "{table}" order by id'):
        out.append({k: (None if v is None else float(v) if types.get(k) == "double"
                        else format(v, "f") if isinstance(v, Decimal) else v)
                    for k, v in r.items()})
    return out


# -- records -----------------------------------------------------------------------------------
TS_MS = 1_700_000_000_000


class Records:
    """The records of one table's topic, in the encoder's shapes."""

    def __init__(self, table: str) -> None:
        self.table = table

    def key(self, id: int) -> bytes:
        return to_json({"schema": key_schema(self.table), "payload": {"id": id}}).encode()

    def change(self, op: str, before: Optional[Dict[str, Any]], after: Optional[Dict[str, Any]]) -> bytes:
        payload = {"before": before, "after": after, "op": op, "ts_ms": TS_MS,
                   "source": {"connector": "dbt-logstore", "version": "0.x", "db": DB,
                              "table": self.table, "ts_ms": TS_MS}}
        return to_json({"schema": envelope_schema(self.table), "payload": payload}).encode()

    def flat(self, image: Dict[str, Any]) -> bytes:
        return to_json({"schema": value_schema(self.table, False), "payload": image}).encode()

    def headers(self, snapshot: int, extra: Sequence[Tuple[str, bytes]] = ()) -> List[Tuple[str, bytes]]:
        """The mirror's four headers (docs/log-format.md, Headers), plus `extra`."""
        return [("logstore.table", f"{DB}.{self.table}".encode()),
                ("logstore.snapshot", str(snapshot).encode()), ("logstore.changeset", b"inv-1"),
                ("logstore.attempt", uuid.uuid4().hex.encode()), *extra]


TOMBSTONE_AFTER_DELETE = [("logstore.tombstone", b"after-delete")]


@pytest.fixture
def topic(kafka_bootstrap_servers):
    name = f"connect_sink_{uuid.uuid4().hex[:10]}"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap_servers)
    try:
        brokers = len(admin.describe_cluster()["brokers"])
        admin.create_topics([NewTopic(name, PARTITIONS, min(3, brokers))])
    finally:
        admin.close()
    return name


@pytest.fixture
def producer(kafka_bootstrap_servers):
    """A transactional producer, as the mirror's (acks=all, idempotent)."""
    p = KafkaProducer(bootstrap_servers=kafka_bootstrap_servers,
                      transactional_id=f"connect-sink-test-{uuid.uuid4().hex}")
    p.init_transactions()
    try:
        yield p
    finally:
        p.close()


def send_transaction(producer, topic: str, records, commit: bool = True) -> None:
    """records: (key, value, headers); one Kafka transaction, committed or aborted."""
    producer.begin_transaction()
    for key, value, hdrs in records:
        producer.send(topic, key=key, value=value, headers=hdrs)
    producer.flush()
    if commit:
        producer.commit_transaction()
    else:
        producer.abort_transaction()


def sink_config(topic: str, table: str, pg) -> Dict[str, str]:
    return {
        "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
        "tasks.max": "1",
        "topics": topic,
        "connection.url": pg.jdbc_url(),
        "connection.username": pg.user,
        "connection.pool.min_size": "1",
        "connection.pool.max_size": "2",
        "connection.pool.acquire_increment": "1",
        "insert.mode": "upsert",
        "delete.enabled": "true",
        "primary.key.mode": "record_key",
        "schema.evolution": "basic",
        "collection.name.format": table,  # the sink's table, whatever the topic
        "key.converter": JSON_CONVERTER,
        "key.converter.schemas.enable": "true",
        "value.converter": JSON_CONVERTER,
        "value.converter.schemas.enable": "true",
    }


def assert_table(pg, connect, name: str, table: str, images: Sequence[Dict[str, Any]]) -> None:
    want = [expected(i) for i in sorted(images, key=lambda i: i["id"])]
    got = table_rows(pg, table)
    assert got == want, f"table {table}:\n got {got}\nwant {want}\n{connect.diagnostics(name)}"


ADA = row(1, "Ada", 10, 1.5, True, "12.30", "1.000E-7", "1990-12-10",
          "2024-05-01T10:00:00.123456Z", "2024-05-01T10:00:00.654321")
BOB = row(2, "Bob", 20, 2.25, False, "5", "1234567890.1234567891", "1985-01-31",
          "2024-05-01T23:59:59.000001Z", "1969-12-31T23:59:59.999999")
NULLS = row(3)  # every column but the key null
ABORTED = row(99, "never")


def test_debezium_envelope(kafka_connect, postgres_server, producer, topic):
    pg, connect = postgres_server, kafka_connect
    table, name = f"{topic}_envelope", f"{topic}-envelope"
    records = Records(table)
    c = lambda image: (records.key(image["id"]), records.change("c", None, image), records.headers(1))

    connect.create_connector(name, sink_config(topic, table, pg))

    # inserts, and an aborted attempt the sink must never see
    send_transaction(producer, topic, [c(ADA), c(BOB), c(NULLS)])
    send_transaction(producer, topic, [c(ABORTED)], commit=False)
    connect.wait_for_sink(name, [topic])
    assert_table(pg, connect, name, table, [ADA, BOB, NULLS])

    # the sink made the table from the first record's schemas
    assert pg.column_types(table) == {
        "id": "integer", "name": "text", "visits": "bigint", "score": "double precision",
        "active": "boolean", "amount": "numeric(10,2)", "rate": "numeric(20,10)",
        "birthday": "date", "updated_at": "timestamp(6) with time zone",
        "local_at": "timestamp(6) without time zone",
    }, connect.diagnostics(name)
    assert pg.primary_key(table) == ["id"]

    # an update (before and after), a delete followed by its tombstone, an insert
    bob2 = {**BOB, "name": "Bobby", "amount": Decimal("7.5"), "updated_at": "2024-06-01T00:00:00.5Z"}
    dave = row(4, "Dave", 40, 0.5, True, "0.01", "-3.25", "2000-02-29",
               "1970-01-01T00:00:00Z", "2024-02-29T12:00:00")
    send_transaction(producer, topic, [
        (records.key(2), records.change("u", BOB, bob2), records.headers(2)),
        (records.key(3), records.change("d", NULLS, None), records.headers(2)),
        (records.key(3), None, records.headers(2, TOMBSTONE_AFTER_DELETE)),
        c(dave),
    ])
    connect.wait_for_sink(name, [topic])
    assert_table(pg, connect, name, table, [ADA, bob2, dave])

    # a second batch: an update of the first row, the deleted key back, a delete of the new one
    ada2 = {**ADA, "visits": 11, "active": None, "rate": Decimal("2E+1")}
    again = row(3, "Back", local_at="2024-05-01T00:00:00")
    send_transaction(producer, topic, [
        (records.key(1), records.change("u", ADA, ada2), records.headers(3)),
        (records.key(3), records.change("c", None, again), records.headers(3)),
        (records.key(4), records.change("d", dave, None), records.headers(3)),
        (records.key(4), None, records.headers(3, TOMBSTONE_AFTER_DELETE)),
    ])
    connect.wait_for_sink(name, [topic])
    assert_table(pg, connect, name, table, [ada2, bob2, again])
    assert connect.check_running(name)


def test_flat_rows_with_tombstones(kafka_connect, postgres_server, producer, topic):
    """The `json` upsert format: the row as the value (a `<db>.<table>.Value` struct), a
    tombstone as the delete of its key."""
    pg, connect = postgres_server, kafka_connect
    table, name = f"{topic}_flat", f"{topic}-flat"
    records = Records(table)
    upsert = lambda image: (records.key(image["id"]), records.flat(image), records.headers(1))
    delete = lambda id: (records.key(id), None, records.headers(1))

    connect.create_connector(name, sink_config(topic, table, pg))
    send_transaction(producer, topic, [upsert(ADA), upsert(BOB), upsert(NULLS)])
    connect.wait_for_sink(name, [topic])
    assert_table(pg, connect, name, table, [ADA, BOB, NULLS])
    assert pg.column_types(table)["updated_at"] == "timestamp(6) with time zone"

    bob2 = {**BOB, "score": 9.75}
    send_transaction(producer, topic, [upsert(bob2), delete(3), delete(1), upsert(row(1, "Ada again"))])
    connect.wait_for_sink(name, [topic])
    assert_table(pg, connect, name, table, [row(1, "Ada again"), bob2])
    assert connect.check_running(name)
# -- end to end: dbt models logged with Kafka Connect's envelope, sunk into PostgreSQL ----------

MODEL_COLUMNS = {"id": "int", "name": "string", "visits": "bigint", "score": "double",
                 "active": "boolean", "amount": "decimal(10,2)", "rate": "decimal(20,10)",
                 "birthday": "date", "updated_at": "timestamp", "local_at": "timestamp_ntz"}
MODEL_ROW = {"name": "Ada 🚀", "visits": "10", "score": "1.5", "active": "true", "amount": "12.30",
             "rate": "0.0000001", "birthday": "1969-12-31", "updated_at": "2024-05-01 10:00:00.123456",
             "local_at": "2024-03-10 02:30:00.654321"}
MODEL_STEPS = {
    1: [dict(MODEL_ROW, id="1"), dict(MODEL_ROW, id="2", name="Bob", amount="-5"), {"id": "3"}],
    # 1 updated, 2 deleted, 3 same, 4 new
    2: [dict(MODEL_ROW, id="1", visits="11", rate="1234567890.1234567891", updated_at="1970-01-01 00:00:00"),
        {"id": "3"}, dict(MODEL_ROW, id="4", name=None, birthday="2000-02-29")],
    # 2 back, 3 deleted, 4 updated
    3: [dict(MODEL_ROW, id="1", visits="11", rate="1234567890.1234567891", updated_at="1970-01-01 00:00:00"),
        dict(MODEL_ROW, id="2", name="Bob again"), dict(MODEL_ROW, id="4", name="Dave", active="false")],
}


def _canonical_rows(rows, types) -> "Counter":
    from collections import Counter

    from tests.functional.contract import canonical

    return Counter(canonical(r, types) for r in rows)


class TestDbtModelsIntoPostgres:
    """A keyed `table` model logged as Debezium events and one as `json` upserts, both with
    'log.format.schema-include': Debezium's JDBC sink (read_committed) upserts each topic into
    PostgreSQL, deletes included, and after every run the database table equals the model's."""

    @pytest.fixture(scope="class")
    def models(self):
        from tests.functional.flink_peer import model_sql

        return {
            "customers.sql": model_sql(
                "materialized='table', unique_key='id', "
                "**{'log.system': 'kafka', 'log.format.schema-include': true, 'log.system.partitions': 3}",
                MODEL_COLUMNS, MODEL_STEPS),
            "customers_upsert.sql": model_sql(
                "materialized='table', unique_key='id', **{'log.system': 'kafka', 'log.format': 'json', "
                "'log.changelog-mode': 'upsert', 'log.format.schema-include': true}",
                MODEL_COLUMNS, MODEL_STEPS),
        }

    def test_the_sink_keeps_postgres_equal_to_the_model(self, project, kafka_connect, postgres_server):
        from dbt.tests.util import run_dbt

        from tests.functional.contract import table_state

        pg, connect = postgres_server, kafka_connect
        sinks = {model: (f"{project.test_schema}.{model}", f"{model}_{uuid.uuid4().hex[:6]}")
                 for model in ("customers", "customers_upsert")}
        for step in (1, 2, 3):
            run_dbt(["run", "--vars", f"{{step: {step}}}"])
            for model, (topic, table) in sinks.items():
                if step == 1:  # the topic exists once the model has run
                    connect.create_connector(f"sink-{table}", {
                        **sink_config(topic, table, pg), "quote.identifiers": "true"})
                connect.wait_for_sink(f"sink-{table}", [topic])
                types, expected_rows = table_state(topic)
                got = _canonical_rows(pg.rows(f'select * from "{table}"'), types)
                assert got == expected_rows, (
                    f"step {step}, {model}: PostgreSQL's {table} differs from the model\n"
                    f" only in PostgreSQL: {sorted((got - expected_rows).elements())}\n"
                    f" only in the model:  {sorted((expected_rows - got).elements())}\n"
                    + connect.diagnostics(f"sink-{table}"))
        # the sink made the tables from the records' Connect schemas
        for _, table in sinks.values():
            assert pg.column_types(table) == {
                "id": "integer", "name": "text", "visits": "bigint", "score": "double precision",
                "active": "boolean", "amount": "numeric(10,2)", "rate": "numeric(20,10)",
                "birthday": "date", "updated_at": "timestamp(6) with time zone",
                "local_at": "timestamp(6) without time zone"}
            assert pg.primary_key(table) == ["id"]
