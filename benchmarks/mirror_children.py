"""The mirror benchmark's measurements (benchmarks/mirror.py), each run in a child process of its
own: the raw producer (the Kafka client alone), the mirror's first build of the keyed table, the
keyed rebuild with and without the log; and, beside them, the Spark -> driver read rate and a
profile of the mirror step."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

from benchmarks.harness import (BusyClock, around_mirror, child_environment, jvm_peak_rss_mb, peak_rss_mb,
                                print_result, time_mirror)
from benchmarks.projects import run_dbt

# The models of the mirror benchmark's project: the first build of one, the keyed rebuild with
# the log and without it
MODELS = ("bench_table", "rebuild_log", "rebuild_nolog")


def _row_image(i: int) -> str:
    """The JSON image Spark's to_json renders for row `i` of projects.MODEL (same bytes, same size)."""
    day = time.strftime("%Y-%m-%d", time.gmtime(1704067200 + (i % 365) * 86400))
    return (f'{{"id":{i},"name":"customer-{i}","amount":{i * 3 // 2}.{"50" if i % 2 else "00"},'
            f'"day":"{day}","note":"same"}}')


def bench_log(topic: str, servers: str) -> Any:
    """The log of the benchmark's model, as the raw producer and the Spark-side read render it."""
    from dbt.adapters.logstore.config.log_config import LogConfig

    return LogConfig(model="raw", system="kafka", topic=topic, unique_key=("id",),
                     bootstrap_servers=servers, changelog_mode="upsert")


def child_raw(spec: Dict[str, Any]) -> Dict[str, Any]:
    """The client alone: one transactional producer, the pre-encoded records of the mirror."""
    from dbt.adapters.logstore.commit.snapshots import Attempt, Snapshot, TableRef
    from dbt.adapters.logstore.config.log_config import LogConfig
    from dbt.adapters.logstore.log.log_system import get_log_system

    rows, topic = spec["rows"], spec["topic"]
    log = bench_log(topic, spec["servers"])
    get_log_system("kafka").prepare(log)
    attempt = Attempt.new(log, TableRef("bench", "raw"), Snapshot(), "raw")
    encoder, headers = attempt.encoder(), list(attempt.headers())
    records = [(f'{{"id":{i}}}'.encode(), encoder.value("c", None, _row_image(i))) for i in range(rows)]
    busy = BusyClock()
    if spec["client"] == "confluent":
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": spec["servers"], "transactional.id": f"raw-{topic}",
                             "linger.ms": 20, "enable.idempotence": True})
        producer.init_transactions()
        producer.begin_transaction()
        busy.start()
        started = time.perf_counter()
        for key, value in records:
            while True:
                try:
                    producer.produce(topic, value=value, key=key, headers=headers)
                    break
                except BufferError:
                    producer.poll(0.005)
        producer.flush()
        producer.commit_transaction()
    else:
        from kafka import KafkaProducer

        from dbt.adapters.logstore.log.kafka.config import PRODUCER_DEFAULTS, client_config

        config = client_config(LogConfig(model="raw", bootstrap_servers=spec["servers"]), PRODUCER_DEFAULTS)
        producer = KafkaProducer(enable_idempotence=True, transactional_id=f"raw-{topic}", **config)
        producer.init_transactions()
        producer.begin_transaction()
        busy.start()
        started = time.perf_counter()
        for key, value in records:
            producer.send(topic, value=value, key=key, headers=headers)
        producer.flush()
        producer.commit_transaction()
    seconds = time.perf_counter() - started
    busy.stop()
    producer.close() if hasattr(producer, "close") else None
    return {"records": rows, "seconds": seconds, "cpu_s": busy.seconds}


def child_mirror(spec: Dict[str, Any]) -> Dict[str, Any]:
    """The first build of a keyed table: every row is mirrored."""
    project = Path(spec["project"])
    variables = {"rows": spec["rows"], "topic": spec["topic"], "consistency": spec["consistency"],
                 "parallelism": spec["parallelism"], "partitions": spec["partitions"]}
    if spec.get("profile"):
        profile_mirror(Path(spec["profile"]) / f"{spec['name']}.txt")
    busy = time_mirror()
    run = run_dbt(project, variables, select="bench_table")
    out = {"records": run["rows_mirrored"], "seconds": run["log_seconds"], "run_seconds": run["seconds"],
           "cpu_s": busy.seconds,
           "transactions": run.get("log_transactions"),
           "longest_transaction_s": run.get("log_longest_transaction_s")}
    if spec.get("fetch"):
        out["fetch_rate"], out["fetch_cpu_s_per_row"] = fetch_rate(bench_log(spec["topic"] + ".bench_table", spec["servers"]))
    return out


def fetch_rate(log: Any) -> Tuple[float, float]:
    """Records per second the driver reads of a change set like the mirror's (all inserts of
    the table just built), rendered by Spark as the mirror's records are, through the same row
    source, without sending them anywhere; and the machine's CPU seconds per record for it."""
    from pyspark.sql import SparkSession

    from dbt.adapters.logstore.changes import diff as changes
    from dbt.adapters.logstore.commit.snapshots import Attempt, Snapshot, TableRef
    from dbt.adapters.logstore.spark.row_source import iter_column_batches, table_options
    from dbt.adapters.spark.session import SessionConnectionWrapper

    spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
    columns = [f.name for f in spark.table("bench.bench_table").schema.fields]
    spark.sql(f"create table bench.fetch_probe using parquet {table_options()} as "
              + changes.inserts_sql(changes.ChangeInput("bench.bench_table", columns), ("id",)))
    handle = SessionConnectionWrapper.__new__(SessionConnectionWrapper)  # only its type is used
    attempt = Attempt.new(log, TableRef("bench", "bench_table"), Snapshot(), "fetch")
    busy = BusyClock()
    busy.start()
    started, count = time.perf_counter(), 0
    for columns in iter_column_batches(handle, "bench.fetch_probe", attempt.records_sql):
        count += len(columns[0])
    seconds = time.perf_counter() - started
    busy.stop()
    return count / seconds, busy.seconds / count


def profile_mirror(out: Path) -> None:
    """Profile the mirror step (in dbt's model thread) with pyinstrument, written to `out`."""
    from pyinstrument import Profiler

    profilers: List[Any] = []  # one per mirror step; the file keeps the last

    def start() -> None:
        profilers.append(Profiler(interval=0.001))
        profilers[-1].start()

    def stop() -> None:
        profilers[-1].stop()
        out.write_text(profilers[-1].output_text(unicode=False, color=False, show_all=False))

    around_mirror(start, stop)


def child_rebuild(spec: Dict[str, Any]) -> Dict[str, Any]:
    """A keyed table rebuilt with 1% of its rows changed, with and without the log. Phase
    "build": both tables' first builds. Phases "nolog" and "log": the measured rebuild alone in
    a fresh process, as a user's `dbt run` is (a JVM whose first join is the diff's, on both
    sides of the ratio)."""
    project = Path(spec["project"])
    base = {"rows": spec["rows"], "partitions": spec["partitions"]}
    variables = {"nolog": {"log_system": "none"}, "log": {"topic": spec["topic"]}}
    if spec["phase"] == "build":
        for name, extra in variables.items():
            run_dbt(project, {**base, **extra, "step": 1}, select=f"rebuild_{name}")
        return {"records": 0, "seconds": 0.0}
    run = run_dbt(project, {**base, **variables[spec["phase"]], "step": 2}, select=f"rebuild_{spec['phase']}")
    return {"records": run.get("rows_mirrored", 0), "seconds": run["seconds"],
            "log_seconds": run.get("log_seconds", 0.0)}



def child_main(spec: Dict[str, Any]) -> None:
    child_environment(spec)
    result = {"raw": child_raw, "mirror": child_mirror, "rebuild": child_rebuild}[spec["kind"]](spec)
    result["driver_mb"] = peak_rss_mb(os.getpid())
    result["jvm_mb"] = jvm_peak_rss_mb() if spec["kind"] != "raw" else None
    print_result(result)
