"""Cluster benchmark: the mirror's ways to Kafka beside Spark's own Kafka writer, on a standalone
Spark cluster, in one run.

    python benchmarks/cluster.py [--rows 200000] [--quick] [--brokers embedded,apache]
                                 [--client confluent] [--only TEXT]... [--keep] [--results FILE]

`make bench-cluster` runs it with the defaults. It starts a standalone Spark cluster (a master and
two workers of one core each: tests/functional/spark_cluster.py) and, per broker (the embedded
broker, tansu; `apache`: three Apache Kafka nodes, tests/kafka_cluster.py), writes the same change
set, a keyed table model's first build (every row one record), to that broker five ways, one after
the other (only one Spark application holds the cluster's two cores at a time):

- session, 1 writer:   `dbt run`, method `session` with `spark.master: spark://...`,
                       `log.mirror.parallelism: 1`: Spark renders the records on the executors
                       (`Attempt.records_sql`), the driver (the dbt process) sends them;
- session, 2 tasks:    the same with `log.mirror.parallelism: 2`: two Spark tasks on the
                       executors send them, each with its own producer;
- thrift, 1 writer:    `dbt run`, method `thrift`, to a Spark Thrift Server that is itself an
                       application of the cluster: the rows come to the dbt process through one
                       HiveServer2 cursor;
- Spark writer:        the same records (the same `records_sql` over a change table of the same
                       shape, `changes.inserts_sql`, with `Attempt.headers()` as a `headers`
                       column), written by `DataFrame.write.format("kafka")` in the executors,
                       at-least-once, no transactions (pyspark on the cluster, spark-sql-kafka jars);
- Spark writer, SQL:   the same DataFrame's SQL written by `INSERT INTO` a `USING kafka` table
                       over the Thrift Server (its spark-sql-kafka jars on the server's class path).

Each is timed as the mirror is timed by benchmarks/mirror.py: the mirror from the table commit to
the log commit (`log_seconds` in the adapter response), Spark's writer over the write (or the
INSERT) alone, the change table already written. Per configuration: records/s, the ratio to
Spark's writer and to the session mirror, the machine's CPU µs per record over that interval
(every process: /proc/stat, `machine_busy_s` of mirror.py), records/s per executor core (two),
peak resident memory (VmHWM) of the Python driver, of the driver JVM (Spark's, or the Thrift
Server's, whose peak is reset before each configuration) and of the executors' JVMs, and the
records the topic holds afterwards. Each configuration runs in its own process.

It prints one table and writes benchmarks/results-cluster.json (--quick: results-cluster-quick.json;
--results to choose), and, with the default file, the same result under "cluster" in
benchmarks/results.json; then its plot, benchmarks/plots/cluster-throughput.png (benchmarks/plots.py;
--quick: quick-cluster-throughput.png). Behind the Thrift Server with Spark's writer, a broker whose
end offsets lag (the embedded one) leaves that writer's records unconfirmed and the adapter writes
the change set again through the cursor: that configuration is recorded as measured with
"fell_back" (the topic then holds more records than the change set), not as failed. Numbers depend
on the machine and on what else runs on it.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results-cluster.json"
QUICK_RESULTS = HERE / "results-cluster-quick.json"
KAFKA_JARS = ROOT / ".jars" / "spark-kafka"  # `make jars`: spark-sql-kafka and its dependencies
CORES = 2  # executor cores per application: one 1-core executor on each of the two workers (spark_cluster.py)
CHILD_TIMEOUT = 900

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # tests.functional.* and tests.kafka_cluster


def _load_mirror_bench() -> Any:
    """benchmarks/mirror.py (not a package): its model, measurements and brokers."""
    spec = importlib.util.spec_from_file_location("bench_mirror", HERE / "mirror.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _load_mirror_bench()

# The model's rows, as benchmarks/mirror.py's MODEL selects them at its first build.
SOURCE_SQL = """select id, concat('customer-', cast(id as string)) as name,
       cast(id * 1.5 as decimal(12, 2)) as amount,
       date_add(date'2024-01-01', cast(id % 365 as int)) as day,
       'same' as note
from range({rows})"""

CONFIGURATIONS = [  # (name, kind)
    ("session, 1 writer", "session"),
    ("session, 2 tasks", "session"),
    ("Spark writer (DataFrame)", "spark"),
    ("thrift, 1 writer", "thrift"),
    # the thrift method's parallel mirror: Spark's own Kafka writer from SQL (kafka/spark_writer.py)
    ("thrift, 2 tasks (Spark's writer)", "thrift"),
    ("Spark writer (SQL, thrift)", "spark_sql"),
]
SPARK_WRITER = "Spark writer (DataFrame)"
SESSION_MIRROR = "session, 1 writer"


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
        values = [v for v in (bench.peak_rss_mb(p) for p in pids) if v is not None]
        out[f"{role}_mb"] = max(values) if values else None
    return out


# --- each configuration, in a child process ---------------------------------------------------


def log_config(topic: str, servers: str, partitions: int = 1) -> Any:
    """The benchmark model's log (keyed on id, upsert), as benchmarks/mirror.py's raw producer has it."""
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
    busy = bench.time_mirror()
    from dbt.cli.main import dbtRunner

    result = dbtRunner().invoke(["run", "--project-dir", str(project), "--profiles-dir", spec["profiles"],
                                 "--target", spec["target"], "--vars", json.dumps(variables),
                                 "--select", "bench_table", "--quiet"])
    if not result.success:
        messages = [r.message for r in getattr(result.result, "results", None) or [] if r.message]
        raise SystemExit(f"dbt run failed: {result.exception or '; '.join(messages)}")
    node = result.result.results[0]
    run = dict(node.adapter_response)
    topic = f"{spec['topic']}.bench_table"
    try:  # which writer's records the log confirmed: Spark's writer, or the cursor after it (classify)
        writers = confirmed_by(spec["servers"], topic)
    except Exception as exc:  # classify then judges by the records the topic holds
        print(f"control topic of {topic} not read: {exc}", file=sys.stderr)
        writers = None
    return {"records": run["rows_mirrored"], "seconds": run["log_seconds"], "run_seconds": node.execution_time,
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
    busy = bench.BusyClock()
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
    busy = bench.BusyClock()
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
    bench.child_environment(spec)
    if spec.get("server_pid"):  # the Thrift Server's JVMs outlive configurations
        reset_peaks([p for pids in jvm_pids(spec).values() for p in pids])
    run = {"session": child_session, "thrift": child_session, "spark": child_spark,
           "spark_sql": child_spark_sql}[spec["kind"]]
    result = run(spec)
    result.pop("_spark", None)
    if "driver_jvm_mb" not in result:
        result.update(peaks(spec))  # before the session's executors go away with this process
    result["driver_mb"] = bench.peak_rss_mb(os.getpid())
    result.update(topic_records(spec["servers"], result.pop("topic")))
    print("RESULT " + json.dumps(result), flush=True)


# --- the parent: cluster, brokers, Thrift Server, table ---------------------------------------


PROFILE = """
bench:
  target: session
  outputs:
    session:
      type: logstore
      method: session
      schema: bench
      threads: 1
      kafka_bootstrap_servers: "{{{{ env_var('BENCH_BOOTSTRAP_SERVERS') }}}}"
      kafka_client: "{{{{ env_var('BENCH_KAFKA_CLIENT') }}}}"
      session_dir: "{{{{ env_var('BENCH_SESSION_DIR') }}}}"
      server_side_parameters:
        spark.master: "{master}"
        spark.executor.memory: 512m
        spark.cores.max: "{cores}"
        spark.executor.cores: "1"
        spark.driver.host: 127.0.0.1
        spark.driver.bindAddress: 127.0.0.1
        spark.sql.shuffle.partitions: "2"
        spark.sql.session.timeZone: UTC
        spark.jars: "{jars}"
    thrift:
      type: logstore
      method: thrift
      host: 127.0.0.1
      port: {thrift_port}
      schema: bench
      threads: 1
      connect_retries: 5
      connect_timeout: 10
      poll_interval: 1
      kafka_bootstrap_servers: "{{{{ env_var('BENCH_BOOTSTRAP_SERVERS') }}}}"
      kafka_client: "{{{{ env_var('BENCH_KAFKA_CLIENT') }}}}"
"""


def warm_up(server: Any, servers: str) -> None:
    """A long-lived Thrift Server has its executors' Kafka producers and their JIT-compiled code
    warm: one small write through Spark's Kafka writer first, so that neither Thrift
    configuration pays the first one (about 4 s here) and the order of configurations does not
    decide the ratios."""
    from dbt.adapters.logstore.log.kafka.spark_writer import PRODUCER_OPTIONS

    options = "".join(f", 'kafka.{k}' = '{v}'" for k, v in PRODUCER_OPTIONS.items())
    conn = server.connect()  # one session: the SET holds for its statements
    cursor = conn.cursor()
    for sql in ("set spark.sql.sources.useV1SourceList=avro,csv,json,orc,parquet,text",
                "drop table if exists default.warm_up",
                f"create table default.warm_up using kafka options ('kafka.bootstrap.servers' "
                f"'{servers}', 'topic' 'bench.warm-up', 'subscribe' 'bench.warm-up')",
                f"insert into default.warm_up with ('kafka.bootstrap.servers' = '{servers}'{options}) "
                f"select cast(id as string) as key, cast(id as string) as value, 'bench.warm-up' as topic "
                f"from range(20000)",
                "drop table default.warm_up",
                "set spark.sql.sources.useV1SourceList=avro,csv,json,kafka,orc,parquet,text"):
        cursor.execute(sql)
    conn.close()


def write_project(work: Path) -> Path:
    project = work / "project"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(
        "name: bench\nversion: '1.0'\nprofile: bench\nmodel-paths: ['models']\n")
    (project / "models" / "bench_table.sql").write_text(bench.MODEL)
    return project


def write_profile(work: Path, master: str, thrift_port: int) -> Path:
    profiles = work / "profiles"
    profiles.mkdir(exist_ok=True)
    (profiles / "profiles.yml").write_text(PROFILE.format(master=master, cores=CORES, thrift_port=thrift_port,
                                                              jars=",".join(str(j) for j in sorted(KAFKA_JARS.glob("*.jar")))))
    return profiles


def run_child(spec: Dict[str, Any], logs: Path) -> Dict[str, Any]:
    log_file = logs / f"{re.sub(r'[^a-zA-Z0-9]+', '_', spec['name'])}.log"
    with open(log_file, "w") as log:
        done = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], cwd=spec["session_dir"],
                              stdout=subprocess.PIPE, stderr=log, text=True, timeout=CHILD_TIMEOUT)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        tail = "\n".join((done.stdout + log_file.read_text()).splitlines()[-30:])
        raise RuntimeError(f"{spec['name']} failed (exit {done.returncode}):\n{tail}")
    return json.loads(lines[-1][len("RESULT "):])


def parallelism(name: str) -> int:
    return 2 if "2 tasks" in name else 1


def classify(result: Dict[str, Any], rows: int, name: str) -> Dict[str, Any]:
    """What a configuration's result is, as fields of its entry: {} measured; "failed" and
    "error" when its records are not the change set's; "fell_back" and "note" when Spark's
    writer was to write them from SQL (thrift, parallelism > 1) but the cursor did: its
    records stay in the topic unconfirmed (the embedded broker's end offsets lag), so the topic
    holds more records than the mirror confirmed, and that is the adapter working, not a failure."""
    records, in_topic, writers = result["records"], result.get("topic_records"), result.get("confirmed_by")
    spark_writer = dict(CONFIGURATIONS).get(name) == "thrift" and parallelism(name) > 1
    if writers is not None:  # the control record says who wrote the confirmed records
        fell_back = spark_writer and not any(w.startswith("spark-kafka") for w in writers)
    else:  # not read: the records Spark's writer left unconfirmed are the sign
        fell_back = spark_writer and in_topic is not None and in_topic > rows
    if records != rows or in_topic is None or in_topic < rows or (in_topic != rows and not fell_back):
        return {"failed": True, "error": f"{records:,} records written, {in_topic} read back from the topic; "
                                         f"{rows:,} expected (confirmed by {writers})"}
    if not fell_back:
        return {}
    why = ("Spark's writer's records could not be confirmed (the broker's end offsets lag) and the cursor "
           "wrote the change set again" if in_topic > rows else "the cursor wrote the change set, not Spark's writer")
    return {"fell_back": True, "note": f"{why}: the topic holds {in_topic:,} records, of which {rows:,} confirmed"}


def _rate(entry: Dict[str, Any]) -> Optional[float]:
    return entry["records"] / entry["seconds"] if entry.get("seconds") else None


def _fmt(value: Optional[float], pattern: str = "{:,.0f}") -> str:
    return "-" if value is None else pattern.format(value)


def table(entries: List[Dict[str, Any]]) -> List[str]:
    """The printed table: one row per configuration and broker, ratios on the same broker; a
    configuration whose records the cursor wrote after Spark's writer is marked * (its note below)."""
    header = ["configuration", "broker", "records", "seconds", "records/s", "x Spark writer", "x session",
              "CPU us/rec", "rec/s/core", "driver MiB", "driver JVM MiB", "executor JVM MiB", "in topic"]
    rows = []
    for e in entries:
        if e.get("failed"):
            rows.append([e["configuration"], e["broker"], "FAILED"] + ["-"] * (len(header) - 3))
            continue
        rows.append([e["configuration"], e["broker"], f"{e['records']:,}", f"{e['seconds']:.2f}",
                     _fmt(e["records_per_s"]), _fmt(e.get("ratio_to_spark_writer"), "{:.2f}"),
                     _fmt(e.get("ratio_to_session_mirror"), "{:.2f}"), _fmt(e.get("cpu_us_per_record"), "{:.1f}"),
                     _fmt(e.get("records_per_s_per_executor_core")), _fmt(e.get("driver_mb")),
                     _fmt(e.get("driver_jvm_mb")), _fmt(e.get("executor_jvm_mb")),
                     _fmt(e.get("topic_records")) + (" *" if e.get("fell_back") else "")])
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) if i < 2 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths)))]
    for row in rows:
        lines.append("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
    return lines + [f"* {e['configuration']} @{e['broker']}: fell back to the cursor: {e['note']}"
                    for e in entries if e.get("fell_back")]


def with_ratios(entries: List[Dict[str, Any]]) -> None:
    for e in entries:
        if e.get("failed"):
            continue
        same = {o["configuration"]: o for o in entries if o["broker"] == e["broker"] and not o.get("failed")}
        for key, name in (("ratio_to_spark_writer", SPARK_WRITER), ("ratio_to_session_mirror", SESSION_MIRROR)):
            other = same.get(name)
            e[key] = e["records_per_s"] / other["records_per_s"] if other and other["records_per_s"] else None


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows of the model (records of the change set)")
    parser.add_argument("--quick", action="store_true", help="50,000 rows, for development")
    parser.add_argument("--brokers", default="embedded",
                        help="brokers, comma-separated, one after the other: embedded (tansu), apache "
                        "(three Apache Kafka nodes, make jars)")
    parser.add_argument("--client", default="confluent", help="the mirror's Kafka client: confluent or kafka-python")
    parser.add_argument("--only", action="append", metavar="TEXT",
                        help="only the configurations whose name contains this text (repeatable)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--results", help=f"where to write the results (default {RESULTS.name}, "
                                          f"with --quick {QUICK_RESULTS.name})")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child_main(json.loads(args.child))
        return 0
    rows = 50_000 if args.quick else args.rows
    brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    jars = sorted(str(j) for j in KAFKA_JARS.glob("*.jar"))
    if not any("spark-sql-kafka" in j for j in jars):
        raise SystemExit(f"Spark's Kafka source is not in {KAFKA_JARS}: run `make jars`")

    from tests.functional.spark_cluster import start_standalone_cluster
    from tests.functional.thrift_server import _stop, start_thrift_server

    os.environ["PYSPARK_PYTHON"] = sys.executable  # the executors' Python: this environment
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    work = Path(tempfile.mkdtemp(prefix="logstore-bench-cluster-"))
    logs = work / "logs"
    logs.mkdir()
    project = write_project(work)
    print(f"brokers {brokers}; rows {rows:,}; client {args.client}; work directory {work}", flush=True)
    entries: List[Dict[str, Any]] = []
    started_at = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    wall = time.monotonic()
    cluster = server = broker = None
    counter = servers_started = 0
    try:
        (work / "cluster").mkdir()
        cluster = start_standalone_cluster(work / "cluster")
        worker_pids = [p.pid for p in cluster.processes[1:]]
        print(f"cluster {cluster.master_url}: 2 workers of 1 core", flush=True)
        for broker_name in brokers:
            broker, servers = bench.start_broker(broker_name, None, work / f"broker-{broker_name}")
            print(f"broker {broker_name}: {servers}", flush=True)
            for name, kind in CONFIGURATIONS:
                if args.only and not any(text in name for text in args.only):
                    continue
                if kind in ("thrift", "spark_sql") and server is None:
                    servers_started += 1  # a fresh warehouse and metastore: the model's first build
                    (work / f"thrift-{servers_started}").mkdir()
                    server = start_thrift_server(
                        work / f"thrift-{servers_started}", master=cluster.master_url,
                        extra_conf={"spark.executor.memory": "512m", "spark.cores.max": str(CORES),
                                    "spark.executor.cores": "1"},
                        jars=[Path(j) for j in jars])
                    print(f"Thrift Server on the cluster: port {server.port}", flush=True)
                    warm_up(server, servers)
                if kind in ("session", "spark") and server is not None:
                    _stop(server.process)  # its executors hold the cluster's cores
                    server = None
                counter += 1
                session_dir = work / f"run-{counter}"
                session_dir.mkdir()
                profiles = write_profile(work, cluster.master_url, server.port if server else 0)
                writers = parallelism(name)
                consistency = "eventual" if "eventual" in name else "transactional"
                spec = {"name": f"{name} @{broker_name}", "kind": kind, "rows": rows, "client": args.client,
                        "servers": servers, "project": str(project), "profiles": str(profiles),
                        "target": "thrift" if kind == "thrift" else "session",
                        "session_dir": str(session_dir), "master": cluster.master_url, "jars": jars,
                        "topic": f"bench.{counter}.{re.sub(r'[^a-zA-Z0-9]+', '_', name).strip('_')}",
                        "parallelism": writers, "partitions": writers,
                        "consistency": consistency,
                        "worker_pids": worker_pids, "server_pid": server.process.pid if server else None,
                        "thrift_port": server.port if server else None}
                began = time.monotonic()
                entry = {"configuration": name, "broker": broker_name, "kind": kind, "rows": rows,
                         "client": args.client if kind in ("session", "thrift") else "spark (JVM producer)",
                         "writers": writers if kind in ("session", "thrift") else CORES,
                         "load_before": os.getloadavg()[0]}
                try:
                    result = run_child(spec, logs)
                except Exception as exc:  # recorded, and the run goes on
                    text = str(exc)
                    print(f"  {name} @{broker_name}: FAILED\n{text}", flush=True)
                    cause = [ln for ln in text.splitlines() if "Exception" in ln or "Error" in ln]
                    entries.append({**entry, "failed": True, "error": (cause or text.splitlines() or [""])[-1][:500]})
                    continue
                verdict = classify(result, rows, name)
                if verdict.get("failed"):
                    print(f"  {name} @{broker_name}: FAILED: {verdict['error']}", flush=True)
                    entries.append({**entry, **result, **verdict})
                    continue
                rate = _rate(result)
                entry.update(result)
                entry.update(verdict)
                entry.update({"records_per_s": rate,
                              "cpu_us_per_record": result["cpu_s"] / result["records"] * 1e6 if result["records"] else None,
                              "records_per_s_per_executor_core": rate / CORES if rate else None})
                entries.append(entry)
                print(f"  {name} @{broker_name}: {result['records']:,} records in {result['seconds']:.2f} s, "
                      f"{_fmt(rate)} records/s ({time.monotonic() - began:.0f} s; load {entry['load_before']:.1f} before)",
                      flush=True)
                if verdict.get("fell_back"):
                    print(f"  {name} @{broker_name}: FELL BACK to the cursor: {verdict['note']}", flush=True)
            bench.stop_broker(broker)
            broker = None
    finally:
        if server is not None:
            _stop(server.process)
        bench.stop_broker(broker)
        if cluster is not None:
            cluster.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    with_ratios(entries)
    lines = table(entries)
    print()
    print("\n".join(lines))
    failures = [e for e in entries if e.get("failed")]
    for failure in failures:
        print(f"FAILED: {failure['configuration']} @{failure['broker']}: {failure['error']}")
    out = {"date": started_at, "minutes": round((time.monotonic() - wall) / 60, 1),
           "machine": f"{os.cpu_count()} cores, {bench._memory_gib()} GiB, {platform.platform()}",
           "cluster": "standalone: master + 2 workers of 1 core, executors 512m",
           "command": " ".join(["python", "benchmarks/cluster.py"] + list(argv if argv is not None else sys.argv[1:])),
           "rows": rows, "executor_cores": CORES, "configurations": entries, "table": lines}
    results = Path(args.results or (QUICK_RESULTS if args.quick else RESULTS))
    results.write_text(json.dumps(out, indent=1) + "\n")
    print(f"\nresults written to {results}")
    if results.resolve() == RESULTS:  # the benchmark's rows beside the mirror's, in results.json too
        store_in(bench.RESULTS, "cluster", out)
        print(f"and under \"cluster\" in {bench.RESULTS}")
    bench.write_plots(results)  # plots.py: a cluster result (its executor_cores) is cluster-throughput.png
    return 1 if failures else 0


def store_in(path: Path, key: str, value: Any) -> None:
    """Set one key of a results file (mirror.py rewrites the file, keeping this key), its other
    keys and its formatting as they were."""
    data = json.loads(path.read_text()) if path.is_file() else {}
    data[key] = value
    path.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
