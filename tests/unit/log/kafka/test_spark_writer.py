"""Spark's own Kafka writer reached from SQL (kafka/spark_writer.py): which logs may take it, the
SQL it runs, and the offset check that confirms a try only when every record is there once.
(That murmur2_sql equals Kafka's murmur2 is checked in Spark: tests/functional/test_codec_sql.py.)"""
import pytest

from dbt.adapters.logstore.log.kafka import spark_writer
from dbt.adapters.logstore.log.kafka.spark_writer import SparkKafkaTasks, insert_sql, refusal
from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.commit.snapshots import Attempt, Snapshot, TableRef
from dbt.adapters.logstore.log.log_system import SqlWriteUnconfirmed

TABLE = TableRef("shop", "orders")


def log(**kw):
    base = dict(model="orders", system="kafka", topic="shop.orders", bootstrap_servers="b:9092",
                unique_key=("id",), parallelism=2)
    return LogConfig(**{**base, **kw})


def attempt(the_log=None):
    return Attempt.new(the_log or log(), TABLE, Snapshot(id=1, end_offsets={0: 5}), "run-2")


def test_secrets_and_properties_the_jvm_producer_does_not_share_keep_the_cursor():
    assert refusal(log()) is None
    assert refusal(log(client_properties={"security.protocol": "SSL", "linger.ms": "5"})) is None
    why = refusal(log(client_properties={"sasl.plain.password": "s3cret", "ssl.cafile": "/ca.pem"}))
    assert "sasl.plain.password, ssl.cafile" in why and "s3cret" not in why


def test_the_insert_writes_the_attempts_records_headers_and_partitions():
    a = attempt()
    sql = insert_sql(a, "shop.orders__logstore_changes", "shop.orders__logstore_kafka", "shop.orders",
                     [0, 1, 2], "spark-kafka.0", 2, {"bootstrap.servers": "b:9092", "acks": "all"})
    assert sql.startswith("insert into shop.orders__logstore_kafka with ('kafka.bootstrap.servers' = 'b:9092', "
                          "'kafka.acks' = 'all') select")
    assert "/*+ COALESCE(2) */" in sql
    assert a.records_sql("shop.orders__logstore_changes") in sql
    for name, value in a.headers("spark-kafka.0"):  # the attempt's headers, writer included
        assert f"named_struct('key', '{name}', 'value', X'{value.hex()}')" in sql
    assert "cast(null as int) as _p" in sql  # a keyed record: the producer's murmur2 of its key
    assert "'shop.orders' as topic" in sql
    # the keyed log's delete is followed by its tombstone, in the same row (so the same task)
    assert "where not (op = 'd' and key is not null) union all" in sql and "lateral view inline(array(" in sql
    assert "X'" + b"after-delete".hex() + "'" in sql
    keyless = insert_sql(attempt(log(unique_key=())), "c", "k", "t", [0, 1], "spark-kafka.0", 2, {})
    assert "logstore.tombstone" not in keyless and "union all" not in keyless
    assert "element_at(array(0, 1)" in keyless  # placed by its row image (route), as every writer's


class FakeServer:
    """A Thrift session: runs statements. Each INSERT of `writes` adds records per partition
    (offsets) of which `mine` carry the try's headers: more than the change set when a task was
    retried, fewer than the offsets grew when transaction markers or another write are among them."""

    def __init__(self, counted, writes, has_kafka=True):
        self.counted, self.writes, self.has_kafka = counted, list(writes), has_kafka
        self.ends = {0: 10, 1: 20}
        self.statements = []
        self.mine = 0
        self.v1 = "avro,csv,json,kafka,orc,parquet,text"

    def query(self, sql):
        self.statements.append(sql)
        if sql.startswith("create table") and not self.has_kafka:
            raise RuntimeError("AnalysisException: Failed to find data source: kafka. Please deploy")
        if sql.startswith("select count(*)") and sql.endswith("from shop.orders__logstore_changes"):
            return [(self.counted,)]
        if sql.startswith("create or replace temporary view logstore_kafka_read using kafka"):
            assert "'startingOffsets' '{\"shop.orders\": {\"0\": " in sql and "'includeHeaders' 'true'" in sql
        if sql.startswith("select count(*) from logstore_kafka_read where exists(headers"):
            return [(self.mine,)]
        if sql == f"set {spark_writer.V1_SOURCES}":
            return [(spark_writer.V1_SOURCES, self.v1)]
        if sql.startswith(f"set {spark_writer.V1_SOURCES}="):
            self.v1 = sql.split("=", 1)[1]
        if sql.startswith("insert into"):
            assert "kafka" not in self.v1.split(","), "the V2 Kafka table needs kafka out of the V1 list"
            grown, self.mine = self.writes.pop(0)
            for p, n in grown.items():
                self.ends[p] += n
        return []

    def end_offsets(self):
        return dict(self.ends)


def tasks(server, **kw):
    return SparkKafkaTasks(log(**kw), server.query, "shop.orders__logstore_changes",
                           "shop.orders__logstore_kafka", server.end_offsets)


def test_a_try_whose_records_count_the_change_set_is_confirmed_with_its_ranges():
    server = FakeServer(counted=7, writes=[({0: 3, 1: 4}, 7)])
    t = tasks(server)
    assert t.available()
    [(writer, result)] = t(attempt())
    assert writer == "spark-kafka.0" and result.records == 7
    assert result.offsets == {0: (10, 13), 1: (20, 24)} and result.transactions == 0
    assert server.v1 == "avro,csv,json,kafka,orc,parquet,text"  # the session's setting restored
    t.close()
    assert server.statements[-2:] == ["drop view if exists logstore_kafka_read",
                                      "drop table if exists shop.orders__logstore_kafka"]


def test_offsets_that_are_not_the_trys_records_do_not_count():
    # a transaction marker of the last snapshot landed after `before` was read: 8 offsets, 7 records
    server = FakeServer(counted=7, writes=[({0: 4, 1: 4}, 7)])
    [(writer, result)] = tasks(server)(attempt())
    assert writer == "spark-kafka.0" and result.offsets == {0: (10, 14), 1: (20, 24)}


def test_a_try_with_records_written_twice_is_not_confirmed_and_the_next_try_is():
    server = FakeServer(counted=7, writes=[({0: 5, 1: 4}, 9), ({0: 3, 1: 4}, 7)])
    [(writer, result)] = tasks(server)(attempt())
    assert writer == "spark-kafka.1"  # its own writer name: the first try's records are not its
    assert result.offsets == {0: (15, 18), 1: (24, 28)}


def test_every_try_written_twice_fails_and_confirms_nothing():
    server = FakeServer(counted=2, writes=[({0: 3}, 3)] * spark_writer.TRIES)
    with pytest.raises(SqlWriteUnconfirmed, match="more than once in each of 3 tries"):
        tasks(server)(attempt())
    assert server.v1 == "avro,csv,json,kafka,orc,parquet,text"


def test_end_offsets_that_lag_are_read_again(monkeypatch):
    server = FakeServer(counted=4, writes=[({0: 2}, 4)])
    reads = iter([{0: 10, 1: 20}, {0: 11, 1: 20}, {0: 12, 1: 22}])  # before, lagging, settled
    monkeypatch.setattr(server, "end_offsets", lambda: next(reads))
    monkeypatch.setattr(spark_writer.time, "sleep", lambda s: None)
    [(_, result)] = tasks(server)(attempt())
    assert result.offsets == {0: (10, 12), 1: (20, 22)}
    # neither read was counted by Spark: too few offsets, then exactly the change set's
    assert not any(q.startswith("select count(*) from logstore_kafka_read") for q in server.statements)


def test_with_fewer_acks_offsets_that_count_the_change_set_are_still_counted(monkeypatch):
    # acks=1: the end offsets may lag the try's records while an earlier run's INSERT, still
    # going on, makes up the count: Spark counts, finds 3 of 4, and the end offsets are read again
    server = FakeServer(counted=4, writes=[({0: 4}, 3)])
    reads = iter([{0: 10, 1: 20}, {0: 14, 1: 20}, {0: 15, 1: 20}])  # before, 1 foreign + 3, settled
    counts = iter([3, 4])
    monkeypatch.setattr(server, "end_offsets", lambda: next(reads))
    monkeypatch.setattr(spark_writer.time, "sleep", lambda s: None)
    original = server.query

    def query(sql):
        rows = original(sql)
        return [(next(counts),)] if sql.startswith("select count(*) from logstore_kafka_read") else rows
    server.query = query
    [(_, result)] = tasks(server, client_properties={"acks": "1"})(attempt())
    assert result.offsets == {0: (10, 15)}
    assert sum(q.startswith("select count(*) from logstore_kafka_read") for q in server.statements) == 2


def test_a_server_without_the_kafka_source_is_told_apart():
    assert not tasks(FakeServer(0, [], has_kafka=False)).available()


def test_records_the_broker_does_not_show_are_not_confirmed_and_not_tried_again(monkeypatch):
    server = FakeServer(counted=7, writes=[({0: 3, 1: 2}, 5)])  # the offsets show 5 of them
    monkeypatch.setattr(spark_writer, "SETTLE_SECONDS", 0.0)
    with pytest.raises(SqlWriteUnconfirmed, match="showed 5 of the 7 records"):
        tasks(server)(attempt())
    assert sum(q.startswith("insert into") for q in server.statements) == 1
