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
(every process: /proc/stat, `machine_busy_s` of harness.py), records/s per executor core (two),
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
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results-cluster.json"
QUICK_RESULTS = HERE / "results-cluster-quick.json"
MIRROR_RESULTS = HERE / "results.json"  # benchmarks/mirror.py's: it keeps this result under "cluster"
KAFKA_JARS = ROOT / ".jars" / "spark-kafka"  # `make jars`: spark-sql-kafka and its dependencies
CHILD_TIMEOUT = 900

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the benchmarks package, tests.functional.* and tests.kafka_cluster

from benchmarks.cluster_children import CORES, child_main  # noqa: E402
from benchmarks.harness import (add_work_options, failure_cause, machine, run_child,  # noqa: E402
                                safe_name, start_broker, stop_broker)
from benchmarks.projects import MODEL, write_project  # noqa: E402
from benchmarks.tables import number, rate, store_in, text_table, write_plots  # noqa: E402

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


def write_profile(work: Path, master: str, thrift_port: int) -> Path:
    profiles = work / "profiles"
    profiles.mkdir(exist_ok=True)
    (profiles / "profiles.yml").write_text(PROFILE.format(master=master, cores=CORES, thrift_port=thrift_port,
                                                              jars=",".join(str(j) for j in sorted(KAFKA_JARS.glob("*.jar")))))
    return profiles


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
                     number(e["records_per_s"]), number(e.get("ratio_to_spark_writer"), "{:.2f}"),
                     number(e.get("ratio_to_session_mirror"), "{:.2f}"), number(e.get("cpu_us_per_record"), "{:.1f}"),
                     number(e.get("records_per_s_per_executor_core")), number(e.get("driver_mb")),
                     number(e.get("driver_jvm_mb")), number(e.get("executor_jvm_mb")),
                     number(e.get("topic_records")) + (" *" if e.get("fell_back") else "")])
    lines = text_table(header, rows, left=2)
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
    add_work_options(parser, RESULTS, QUICK_RESULTS)
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
    project = write_project(work, {"bench_table": MODEL}, profile=None)
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
            broker, servers = start_broker(broker_name, None, work / f"broker-{broker_name}")
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
                        "topic": f"bench.{counter}.{safe_name(name)}",
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
                    result = run_child(__file__, spec, logs / f"{safe_name(spec['name'])}.log", spec["name"],
                                       cwd=spec["session_dir"], timeout=CHILD_TIMEOUT)
                except Exception as exc:  # recorded, and the run goes on
                    print(f"  {name} @{broker_name}: FAILED\n{exc}", flush=True)
                    entries.append({**entry, "failed": True, "error": failure_cause(str(exc))})
                    continue
                verdict = classify(result, rows, name)
                if verdict.get("failed"):
                    print(f"  {name} @{broker_name}: FAILED: {verdict['error']}", flush=True)
                    entries.append({**entry, **result, **verdict})
                    continue
                records_per_s = rate(result)
                entry.update(result)
                entry.update(verdict)
                entry.update({"records_per_s": records_per_s,
                              "cpu_us_per_record": result["cpu_s"] / result["records"] * 1e6 if result["records"] else None,
                              "records_per_s_per_executor_core": records_per_s / CORES if records_per_s else None})
                entries.append(entry)
                print(f"  {name} @{broker_name}: {result['records']:,} records in {result['seconds']:.2f} s, "
                      f"{number(records_per_s)} records/s ({time.monotonic() - began:.0f} s; "
                      f"load {entry['load_before']:.1f} before)",
                      flush=True)
                if verdict.get("fell_back"):
                    print(f"  {name} @{broker_name}: FELL BACK to the cursor: {verdict['note']}", flush=True)
            stop_broker(broker)
            broker = None
    finally:
        if server is not None:
            _stop(server.process)
        stop_broker(broker)
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
           "machine": machine(),
           "cluster": "standalone: master + 2 workers of 1 core, executors 512m",
           "command": " ".join(["python", "benchmarks/cluster.py"] + list(argv if argv is not None else sys.argv[1:])),
           "rows": rows, "executor_cores": CORES, "configurations": entries, "table": lines}
    results = Path(args.results or (QUICK_RESULTS if args.quick else RESULTS))
    results.write_text(json.dumps(out, indent=1) + "\n")
    print(f"\nresults written to {results}")
    if results.resolve() == RESULTS:  # the benchmark's rows beside the mirror's, in results.json too
        store_in(MIRROR_RESULTS, "cluster", out)
        print(f"and under \"cluster\" in {MIRROR_RESULTS}")
    write_plots(results)  # plots.py: a cluster result (its executor_cores) is cluster-throughput.png
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
