"""Spark renders the records (Attempt.records_sql) byte for byte as the Python reference encoder
(Attempt.encode_rows) does, for every format and changelog mode; and the Arrow row source hands
them to the driver intact. Real Spark, no dbt, no broker."""
import pytest

from dbt.adapters.logstore.changes import diff as changes
from dbt.adapters.logstore.commit.snapshots import Attempt, Snapshot, TableRef
from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.spark.row_source import iter_column_batches
from tests.functional.contract import spark

ROWS = [
    ("c", '{"id":1}', None, '{"id":1,"v":"a\\"b","u":"\u00e9\u6f22"}'),
    ("u", '{"id":2}', '{"id":2,"v":null}', '{"id":2,"v":"it\'s"}'),
    ("d", '{"id":3}', '{"id":3,"v":"c"}', None),
    ("d", '{"id":4}', None, None),
]
KEYLESS_ROWS = [(op, None, before, after) for op, _, before, after in ROWS]
# a schema name that needs escaping in the envelope's literal tail
TABLE = TableRef("s'ch\\ema", "orders")


@pytest.fixture(autouse=True)
def generated_code():
    """Spark's code generation on, as users' Spark runs these queries (the tests' Spark
    JVMs run without it, tests/spark-conf/spark-defaults.conf)."""
    session = spark()
    settings = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "CODEGEN_ONLY"}
    before = {key: session.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        session.conf.set(key, value)
    yield
    for key, value in before.items():
        session.conf.unset(key) if value is None else session.conf.set(key, value)


def _changes_view(rows, name="codec_changes"):
    frame = spark().createDataFrame(rows, ", ".join(f"{c} string" for c in changes.CHANGE_COLUMNS))
    frame.createOrReplaceTempView(name)
    return name


CONNECT = {"log.format.schema-include": "true"}
TRANSACTIONS = {"log.transaction-metadata": "true"}
COLUMNS = (("id", "int"), ("v", "string"), ("u", "string"))


def _attempt(snapshot_read=False, **options):
    log = LogConfig(model="m", system="kafka", topic="t", bootstrap_servers="x:1", **options)
    return Attempt.new(log, TABLE, Snapshot(), "cs-1", columns=COLUMNS, snapshot_read=snapshot_read)


@pytest.mark.parametrize("options, rows", [
    ({"unique_key": ("id",)}, ROWS),
    ({"unique_key": ("id",), "changelog_mode": "upsert"}, ROWS),
    ({"unique_key": ("id",), "changelog_mode": "upsert", "format": "json"}, ROWS),
    ({}, KEYLESS_ROWS),
    ({"format": "json"}, [r for r in KEYLESS_ROWS if r[0] == "c"]),
    ({"unique_key": ("id",), "format_options": CONNECT}, ROWS),
    ({"unique_key": ("id",), "changelog_mode": "upsert", "format": "json", "format_options": CONNECT}, ROWS),
    ({"format_options": CONNECT}, KEYLESS_ROWS),
    ({"unique_key": ("id",), "format_options": {**CONNECT, **TRANSACTIONS}, "snapshot_read": True},
     [r for r in ROWS if r[0] == "c"]),
], ids=["debezium-all-keyed", "debezium-upsert", "json-upsert", "debezium-all-keyless", "json-all",
        "connect-debezium", "connect-json-upsert", "connect-keyless", "connect-snapshot-read"])
def test_spark_renders_the_reference_records(options, rows):
    attempt = _attempt(**options)
    rendered = spark().sql(attempt.records_sql(_changes_view(rows))).collect()
    keys, values, routes, ops = attempt.encode_rows(rows)
    assert [bytes(r.key) if r.key is not None else None for r in rendered] == keys
    assert [bytes(r.value) if r.value is not None else None for r in rendered] == values
    assert [bytes(r.route) if r.route is not None else None for r in rendered] == routes
    assert [r.op for r in rendered] == ops


def test_spark_refuses_what_the_reference_refuses():
    attempt = _attempt(format="json")
    with pytest.raises(ValueError, match="cannot express op"):
        attempt.encode_rows(KEYLESS_ROWS[1:2])
    with pytest.raises(Exception, match="cannot express an update or delete"):
        spark().sql(attempt.records_sql(_changes_view(KEYLESS_ROWS[1:2]))).collect()
    with pytest.raises(Exception, match="unknown change op x"):
        spark().sql(_attempt().records_sql(_changes_view([("x", None, None, "{}")]))).collect()


def test_the_row_source_streams_every_batch_intact(monkeypatch):
    """A table of several files (as the mirror's change tables are written) crosses whole, in
    bounded batches, each value once."""
    from dbt.adapters.logstore.spark import row_source
    from dbt.adapters.spark.session import SessionConnectionWrapper

    handle = SessionConnectionWrapper.__new__(SessionConnectionWrapper)  # only its type is read
    monkeypatch.setattr(row_source, "ROWS_PER_FILE", 4000)
    session = spark()
    session.sql("create database if not exists codec")
    session.sql("drop table if exists codec.streamed")
    session.sql(f"create table codec.streamed using parquet {row_source.table_options()} as "
                "select id, cast(id as string) as k, cast(repeat('x', cast(id % 7 as int)) as binary) as v "
                "from range(0, 25000, 1, 3)")
    assert len(session.table("codec.streamed").inputFiles()) >= 7
    session.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
    try:
        batches = list(iter_column_batches(handle, "codec.streamed", lambda table: f"select k, v from {table}",
                                           batch_size=1000))
    finally:
        session.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
        session.sql("drop table codec.streamed")
    assert len(batches) >= 25  # bounded batches, not one result
    assert all(len(keys) <= 1000 for keys, _ in batches)
    got = sorted((int(k), v) for keys, values in batches for k, v in zip(keys, values))
    assert got == [(i, b"x" * (i % 7)) for i in range(25000)]
    assert all(type(v) is bytes for _, values in batches for v in values)  # what clients take


def test_an_empty_table_crosses_as_no_batch():
    from dbt.adapters.spark.session import SessionConnectionWrapper

    handle = SessionConnectionWrapper.__new__(SessionConnectionWrapper)
    session = spark()
    session.sql("create database if not exists codec")
    session.sql("drop table if exists codec.empty")
    session.sql("create table codec.empty using parquet as select 1 as k where false")
    try:
        assert list(iter_column_batches(handle, "codec.empty", lambda table: f"select k from {table}")) == []
    finally:
        session.sql("drop table codec.empty")


def test_a_table_the_mirror_reads_crosses_one_small_file_at_a_time(monkeypatch, tmp_path):
    """The driver's JVM holds one partition at a time: a table written with table_options() is
    in files of at most ROWS_PER_FILE rows, each read as its own partition, and the session's
    settings are as they were afterwards."""
    from dbt.adapters.logstore.spark import row_source

    monkeypatch.setattr(row_source, "ROWS_PER_FILE", 1000)
    session = spark()
    session.sql("create database if not exists codec")
    session.sql("drop table if exists codec.readable")
    session.sql(f"create table codec.readable using parquet {row_source.table_options()} "
                f"as select /*+ coalesce(1) */ id from range(5500)")
    before = session.conf.get("spark.sql.files.openCostInBytes", None)
    with row_source._planned_one_partition_per_file(session):
        planned = session.table("codec.readable").rdd.getNumPartitions()
    assert planned == 6  # 5 full files and one of 500 rows
    assert session.table("codec.readable").rdd.getNumPartitions() < planned  # packed otherwise
    assert session.conf.get("spark.sql.files.openCostInBytes", None) == before
    session.sql("drop table codec.readable")


def test_connect_images_carry_connect_temporals():
    """With Kafka Connect's envelope a top-level date is its epoch day and a timestamp_ntz its
    epoch microseconds, whatever the session time zone; timestamps are ISO-8601 instants."""
    from dbt.adapters.logstore.spark.json_images import JsonImages

    session = spark()
    images = JsonImages("ISO-8601", epoch_temporals=True)
    columns = ["d", "ntz", "ts", "n", "nested"]
    types = ["date", "timestamp_ntz", "timestamp", "decimal(5,2)", "struct<d:date>"]
    sql = images.object_sql(columns, types=types)
    before = session.conf.get("spark.sql.session.timeZone")
    session.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        rows = session.sql(
            f"select {sql} from (select date'1969-12-31' as d, "
            f"timestamp_ntz'2024-03-10 02:30:00.123456' as ntz, "
            f"timestamp'2024-05-01 10:00:00.5 UTC' as ts, cast(-1.5 as decimal(5,2)) as n, "
            f"named_struct('d', date'2024-01-02') as nested union all "
            f"select null, null, null, null, null)").collect()
    finally:
        session.conf.set("spark.sql.session.timeZone", before)
    import json
    first, second = (json.loads(r[0]) for r in rows)
    assert first == {"d": -1, "ntz": 1710037800123456, "ts": "2024-05-01T10:00:00.500000Z",
                     "n": -1.5, "nested": {"d": "2024-01-02"}}
    assert second == {c: None for c in columns}


def test_spark_places_records_as_kafkas_partitioner_does():
    """kafka/spark_writer.py's murmur2 in SQL (the partition Spark's Kafka writer is given)
    equals Kafka's murmur2 (kafka-python's, the Java client's) for every tail length."""
    import random

    from kafka.partitioner.default import murmur2

    from dbt.adapters.logstore.log.kafka.spark_writer import murmur2_sql, partition_sql
    from dbt.adapters.logstore.log.kafka.writer import partition_for

    rng = random.Random(20261127)
    data = [bytes(rng.randrange(256) for _ in range(n)) for n in [*range(13), 37, 100, 255]]
    data += ['{"id":1,"v":"\u00e9"}'.encode()]
    frame = spark().createDataFrame([(d,) for d in data], "d binary")
    frame.createOrReplaceTempView("murmur_input")
    rows = spark().sql(f"select d, {murmur2_sql('d')} as h, {partition_sql('d', [0, 1, 2, 5])} as p "
                       f"from murmur_input").collect()
    assert len(rows) == len(data)
    for row in rows:
        value = bytes(row.d)
        assert row.h == murmur2(value) & 0xFFFFFFFF, value
        assert row.p == partition_for(value, [0, 1, 2, 5]), value
