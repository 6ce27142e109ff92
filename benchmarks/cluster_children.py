"""The cluster benchmark's configurations (benchmarks/cluster.py), each run in a child process of
its own: the mirror through `dbt run` (session or thrift method), Spark's own Kafka writer from a
DataFrame and from SQL over the Thrift Server; the memory of every JVM a configuration uses, and
the records its topic holds afterwards."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

from benchmarks.harness import BusyClock, child_environment, peak_rss_mb, print_result, time_mirror
from benchmarks.projects import ROWS_SQL, run_dbt

CORES = 2  # executor cores per application: one 1-core executor on each of the two workers (spark_cluster.py)

# The model's rows, as projects.MODEL selects them at its first build.
SOURCE_SQL = ROWS_SQL.format(note="'same'", rows="{rows}")


# --- processes and their memory ---------------------------------------------------------------


def _processes() -> Dict[int, tuple]:
    """pid -> (parent pid, command line) of every process now."""
    table = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            table[int(proc.name)] = (parent, (proc / "cmdline").read_bytes())
        except (OSError, IndexError, ValueError):
            continue
    return table


def _descendants(roots: Iterable[int], table: Dict[int, tuple]) -> List[int]:
    children: Dict[int, List[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def jvm_pids(spec: Dict[str, Any]) -> Dict[str, List[int]]:
    """The JVMs of a configuration: the driver's (Spark's JVM under this process, or the Thrift
    Server's) and the executors' (the workers' CoarseGrainedExecutorBackend children), with the
    executors' Python workers."""
    table = _processes()
    servers = [spec["server_pid"]] if spec.get("server_pid") in table else []  # spark-submit execs java
    drivers = [p for p in servers + _descendants([os.getpid()] + servers, table)
               if b"java" in table[p][1].split(b"\0")[0] and b"CoarseGrainedExecutorBackend" not in table[p][1]]
    executors = [p for p, (parent, cmd) in table.items()
                 if parent in spec["worker_pids"] and b"CoarseGrainedExecutorBackend" in cmd]
    pythons = [p for p in _descendants(executors, table) if b"python" in table[p][1].split(b"\0")[0]]
    return {"driver_jvm": drivers, "executor_jvm": executors, "executor_python": pythons}


def reset_peaks(pids: Iterable[int]) -> None:
    """Reset the peak resident set (VmHWM) of long-lived processes (the Thrift Server's JVMs), so
    their peak is this configuration's (Linux: /proc/PID/clear_refs, 5)."""
    for pid in pids:
        try:
            Path(f"/proc/{pid}/clear_refs").write_text("5")
        except OSError:
            pass


def peaks(spec: Dict[str, Any]) -> Dict[str, Optional[float]]:
    out: Dict[str, Optional[float]] = {}
    for role, pids in jvm_pids(spec).items():
        values = [v for v in (peak_rss_mb(p) for p in pids) if v is not None]
        out[f"{role}_mb"] = max(values) if values else None
    return out


# --- each configuration ------------------------------------------------------------------------


def log_config(topic: str, servers: str, partitions: int = 1) -> Any:
    """The benchmark model's log (keyed on id, upsert), as the mirror benchmark's raw producer has
    it (mirror_children.bench_log)."""
    from dbt.adapters.logstore.config.log_config import LogConfig

    return LogConfig(model="bench_table", system="kafka", topic=topic, unique_key=("id",),
                     bootstrap_servers=servers, changelog_mode="upsert", partitions=partitions)


def first_build_attempt(log: Any) -> Any:
    """An attempt as the mirror makes one for a table's first build (it starts the log's first
    generation): the same encoder and the same headers."""
    from dbt.adapters.logstore.commit.snapshots import Attempt, Snapshot, TableRef

    return Attempt.new(log, TableRef("bench", "bench_table"), Snapshot(), "bench-changeset",
                       snapshot_read=True, generation=1, starts_generation=True)


def kafka_records_sql(attempt: Any, changes: str, topic: Optional[str] = None) -> str:
    """The attempt's records (records_sql over `changes`) as Spark's Kafka sink takes them: key,
    value, headers (array<struct<key:string,value:binary>>), and a topic column when given."""
    headers = ", ".join(f"named_struct('key', '{k}', 'value', X'{v.hex()}')" for k, v in attempt.headers())
    topic_column = f", '{topic}' as topic" if topic else ""
    return (f"select key, value, array({headers}) as headers{topic_column} "
            f"from ({attempt.records_sql(changes)}) records")


def change_table_sql(source: str) -> str:
    """The change set of a keyed table's first build from `source`, shaped as the mirror's
    __logstore_changes relation (changes.CHANGE_COLUMNS: every row an insert)."""
    from dbt.adapters.logstore.changes import diff as changes

    columns = ["id", "name", "amount", "day", "note"]
    types = ["bigint", "string", "decimal(12,2)", "date", "string"]
    return changes.inserts_sql(changes.ChangeInput(source, columns, types), ("id",))


def _read_topic(servers: str, topic: str) -> Iterable[Any]:
    """Every committed record of the topic, read from its start (a transaction's commit markers
    are not records); nothing when the topic does not exist."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"bench-count-{topic}",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "enable.partition.eof": True})
    try:
        partitions = list(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        done: set = set()
        deadline = time.monotonic() + 300
        while len(done) < len(partitions) and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 1.0):
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        done.add(message.partition())
                    continue
                yield message
    finally:
        consumer.close()


def topic_records(servers: str, topic: str) -> Dict[str, int]:
    """The records the topic holds, and how many distinct keys they have."""
    count, keys = 0, set()
    for message in _read_topic(servers, topic):
        count += 1
        keys.add(message.key())
    return {"topic_records": count, "topic_keys": len(keys)}


def confirmed_by(servers: str, topic: str) -> Optional[List[str]]:
    """The writers the log's last confirmation names (its control record's "writers": Spark's
    writer confirms as `spark-kafka.<try>`); [] for a confirmation of a single writer (the
    cursor, or the session's driver); None when none could be read."""
    from dbt.adapters.logstore.config.log_config import control_topic_for

    last = None
    for message in _read_topic(servers, control_topic_for(topic)):
        last = message.value()
    return None if last is None else sorted(json.loads(last).get("writers") or {})


def child_session(spec: Dict[str, Any]) -> Dict[str, Any]:
    """`dbt run` of the model (session or thrift method, per the profile's target)."""
    project = Path(spec["project"])
    variables = {"rows": spec["rows"], "topic": spec["topic"], "consistency": spec.get("consistency", "transactional"),
                 "parallelism": spec["parallelism"], "partitions": spec["partitions"]}
    if spec["target"] == "thrift":  # the server outlives configurations: each measures a first build
        from pyhive import hive

        conn = hive.connect(host="127.0.0.1", port=spec["thrift_port"], username="dbt")
        conn.cursor().execute("drop table if exists bench.bench_table")
        conn.close()
    busy = time_mirror()
    run = run_dbt(project, variables, select="bench_table", profiles_dir=spec["profiles"], target=spec["target"])
    topic = f"{spec['topic']}.bench_table"
    try:  # which writer's records the log confirmed: Spark's writer, or the cursor after it (classify)
        writers = confirmed_by(spec["servers"], topic)
    except Exception as exc:  # classify then judges by the records the topic holds
        print(f"control topic of {topic} not read: {exc}", file=sys.stderr)
        writers = None
    return {"records": run["rows_mirrored"], "seconds": run["log_seconds"], "run_seconds": run["seconds"],
            "cpu_s": busy.seconds, "transactions": run.get("log_transactions"), "topic": topic,
            "confirmed_by": writers}


def child_spark(spec: Dict[str, Any]) -> Dict[str, Any]:
    """Spark's own Kafka writer, from pyspark on the cluster: DataFrame.write.format("kafka")."""
    from pyspark.sql import SparkSession

    from dbt.adapters.logstore.log.log_system import get_log_system

    warehouse = Path(spec["session_dir"]) / "warehouse"
    spark = (SparkSession.builder.master(spec["master"]).appName("bench-spark-kafka-writer")
             .config("spark.jars", ",".join(spec["jars"]))
             .config("spark.executor.memory", "512m").config("spark.cores.max", str(CORES))
             .config("spark.executor.cores", "1")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.warehouse.dir", str(warehouse))
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    topic = spec["topic"]
    log = log_config(topic, spec["servers"], partitions=CORES)
    get_log_system("kafka").prepare(log)
    attempt = first_build_attempt(log)
    spark.sql(f"create table k_source using parquet as {SOURCE_SQL.format(rows=spec['rows'])}")
    spark.sql(f"create table k_changes using parquet as {change_table_sql('k_source')}")
    frame = spark.sql(kafka_records_sql(attempt, "k_changes"))
    busy = BusyClock()
    busy.start()
    started = time.perf_counter()
    from dbt.adapters.logstore.log.kafka.spark_writer import PRODUCER_OPTIONS

    writer = frame.write.format("kafka").option("kafka.bootstrap.servers", spec["servers"])
    for key, value in PRODUCER_OPTIONS.items():  # the producer settings the mirror gives Spark's writer
        writer = writer.option(f"kafka.{key}", value)
    writer.option("topic", topic).save()
    seconds = time.perf_counter() - started
    busy.stop()
    return {"records": spec["rows"], "seconds": seconds, "cpu_s": busy.seconds, "topic": topic,
            "write_tasks": frame.rdd.getNumPartitions(), **peaks(spec), "_spark": spark}


def child_spark_sql(spec: Dict[str, Any]) -> Dict[str, Any]:
    """Spark's own Kafka writer from SQL over the Thrift Server: INSERT INTO a USING kafka table."""
    from pyhive import hive

    from dbt.adapters.logstore.log.log_system import get_log_system

    topic, servers = spec["topic"], spec["servers"]
    log = log_config(topic, servers, partitions=CORES)
    get_log_system("kafka").prepare(log)
    attempt = first_build_attempt(log)
    conn = hive.connect(host="127.0.0.1", port=spec["thrift_port"], username="dbt")
    cursor = conn.cursor()
    db = "bench_sql"
    for sql in (f"create database if not exists {db}",
                f"drop table if exists {db}.k_source", f"drop table if exists {db}.k_changes",
                f"create table {db}.k_source using parquet as {SOURCE_SQL.format(rows=spec['rows'])}",
                f"create table {db}.k_changes using parquet as {change_table_sql(f'{db}.k_source')}",
                "SET spark.sql.sources.useV1SourceList=avro,csv,json,orc,parquet,text",
                f"drop table if exists {db}.k_out",
                f"CREATE TABLE {db}.k_out USING kafka OPTIONS ('kafka.bootstrap.servers' '{servers}', "
                f"'topic' '{topic}', 'subscribe' '{topic}')"):
        cursor.execute(sql)
    from dbt.adapters.logstore.log.kafka.spark_writer import PRODUCER_OPTIONS

    options = "".join(f", 'kafka.{k}' = '{v}'" for k, v in PRODUCER_OPTIONS.items())
    insert = (f"INSERT INTO {db}.k_out WITH ('kafka.bootstrap.servers' = '{servers}'{options}) "
              + kafka_records_sql(attempt, f"{db}.k_changes", topic))
    busy = BusyClock()
    busy.start()
    started = time.perf_counter()
    cursor.execute(insert)
    seconds = time.perf_counter() - started
    busy.stop()
    out = {"records": spec["rows"], "seconds": seconds, "cpu_s": busy.seconds, "topic": topic,
           **peaks(spec)}
    cursor.execute(f"DROP TABLE {db}.k_out")
    conn.close()
    return out


def child_main(spec: Dict[str, Any]) -> None:
    child_environment(spec)
    if spec.get("server_pid"):  # the Thrift Server's JVMs outlive configurations
        reset_peaks([p for pids in jvm_pids(spec).values() for p in pids])
    run = {"session": child_session, "thrift": child_session, "spark": child_spark,
           "spark_sql": child_spark_sql}[spec["kind"]]
    result = run(spec)
    result.pop("_spark", None)
    if "driver_jvm_mb" not in result:
        result.update(peaks(spec))  # before the session's executors go away with this process
    result["driver_mb"] = peak_rss_mb(os.getpid())
    result.update(topic_records(spec["servers"], result.pop("topic")))
    print_result(result)
