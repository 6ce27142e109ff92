"""Mirror benchmark: how close the mirror gets to the Kafka client's own limit.

    python benchmarks/mirror.py [--rows 100000,1000000] [--rebuild-rows N,...] [--rebuild-client C] [--quick]
                                [--parallelism 2] [--clients kafka-python,confluent]
                                [--brokers embedded,apache] [--profile DIR] [--no-fetch] [--only TEXT]...
                                [--results FILE]
    python benchmarks/mirror.py --check [FILE]

`make bench` runs it with the defaults. It starts the embedded broker (or uses
--bootstrap-servers; `--brokers embedded,apache` measures the raw producer and the mirror on the
embedded broker and on a three-node Apache Kafka cluster (tests/kafka_cluster.py, RF 3,
min.insync.replicas 2, acks=all), one after the other in the same run), writes a throw-away dbt project under a temp directory and runs every
configuration in its own process (its own Spark session, so peak memory is per configuration):

- raw:      the Kafka client alone, one producer sending the same pre-encoded records (same
            keys, values, headers, producer settings, one transaction) - the client's limit;
- mirror:   `dbt run` of a keyed table model whose first build logs every row; throughput is
            records / time from the table commit to the log commit (`log_seconds` in the
            adapter response), in transactional and eventual mode, with one writer and with
            `log.mirror.parallelism` Spark tasks;
- rebuild:  a keyed table of the largest row count, rebuilt with 1% of its rows changed:
            records emitted, and the run time with the log next to the same model without,
            each rebuild in a fresh process (as a user's `dbt run`);
- memory:   peak resident set (VmHWM) of the Python driver and of Spark's JVM, per configuration.

It prints one table at the end and writes every figure to benchmarks/results.json (--quick:
results-quick.json, so a development run keeps the full result; --results to choose),
and its plots, PNG files, to plots/ next to it (benchmarks/plots.py, which draws them again from a
saved result); `--check` reads that file and exits non-zero when a target (TARGETS) is missed, naming it.
A rewrite keeps the file's "cluster" key (benchmarks/cluster.py's result, stored there too).
Numbers depend on the machine and on what else runs on it.
"""
from __future__ import annotations

import argparse
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
from typing import Any, Callable, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.json"
QUICK_RESULTS = HERE / "results-quick.json"  # --quick: a development run keeps the full result

MODEL = """
{{ config(materialized='table', unique_key='id',
          **{'log.system': var('log_system', 'kafka'), 'kafka.topic': var('topic', 'bench') ~ '.' ~ this.name,
             'log.consistency': var('consistency', 'transactional'),
             'log.mirror.parallelism': var('parallelism', 1),
             'log.system.partitions': var('partitions', 1)}) }}
select id, concat('customer-', cast(id as string)) as name,
       cast(id * 1.5 as decimal(12, 2)) as amount,
       date_add(date'2024-01-01', cast(id % 365 as int)) as day,
       {% if var('step', 1) == 2 %} case when id % 100 = 7 then 'changed' else 'same' end
       {% else %} 'same' {% endif %} as note
from range({{ var('rows', 1000) }})
"""

PROFILE = """
bench:
  target: dev
  outputs:
    dev:
      type: logstore
      method: session
      schema: bench
      threads: 1
      kafka_bootstrap_servers: "{{ env_var('BENCH_BOOTSTRAP_SERVERS') }}"
      kafka_client: "{{ env_var('BENCH_KAFKA_CLIENT', 'kafka-python') }}"
      session_dir: "{{ env_var('BENCH_SESSION_DIR') }}"
      server_side_parameters:
        spark.sql.shuffle.partitions: "4"
        spark.sql.session.timeZone: UTC
"""


def _row_image(i: int) -> str:
    """The JSON image Spark's to_json renders for row `i` of MODEL (same bytes, same size)."""
    day = time.strftime("%Y-%m-%d", time.gmtime(1704067200 + (i % 365) * 86400))
    return (f'{{"id":{i},"name":"customer-{i}","amount":{i * 3 // 2}.{"50" if i % 2 else "00"},'
            f'"day":"{day}","note":"same"}}')


# --- measurements, each run in a child process ----------------------------------------------


def peak_rss_mb(pid: int) -> Optional[float]:
    """Peak resident set of a live process (VmHWM), in MiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def machine_busy_s() -> float:
    """CPU seconds this machine's cores have been busy since boot (all processes: the driver,
    Spark's JVM, the broker): a measured interval's share says how much of 2 cores it used."""
    fields = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle and iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class BusyClock:
    """Machine CPU seconds spent between start() and stop()."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def start(self) -> None:
        self._started = machine_busy_s()

    def stop(self) -> None:
        self.seconds += machine_busy_s() - self._started


def jvm_peak_rss_mb() -> Optional[float]:
    """Peak resident set of Spark's JVM, a child of this (driver) process."""
    import psutil

    peaks = [peak_rss_mb(p.pid) for p in psutil.Process().children(recursive=True)
             if "java" in (p.name() or "")]
    peaks = [p for p in peaks if p is not None]
    return max(peaks) if peaks else None


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


def _dbt(project: Path, variables: Dict[str, Any], select: Optional[str] = None) -> Dict[str, Any]:
    from dbt.cli.main import dbtRunner

    args = ["run", "--project-dir", str(project), "--profiles-dir", str(project),
            "--vars", json.dumps(variables), "--quiet"]
    if select:
        args += ["--select", select]
    result = dbtRunner().invoke(args)
    if not result.success:
        messages = [r.message for r in getattr(result.result, "results", None) or [] if r.message]
        raise SystemExit(f"dbt run failed: {result.exception or '; '.join(messages)}")
    node = result.result.results[0]
    return {"seconds": node.execution_time, **dict(node.adapter_response)}


def child_mirror(spec: Dict[str, Any]) -> Dict[str, Any]:
    """The first build of a keyed table: every row is mirrored."""
    project = Path(spec["project"])
    variables = {"rows": spec["rows"], "topic": spec["topic"], "consistency": spec["consistency"],
                 "parallelism": spec["parallelism"], "partitions": spec["partitions"]}
    if spec.get("profile"):
        profile_mirror(Path(spec["profile"]) / f"{spec['name']}.txt")
    busy = time_mirror()
    run = _dbt(project, variables, select="bench_table")
    out = {"records": run["rows_mirrored"], "seconds": run["log_seconds"], "run_seconds": run["seconds"],
           "cpu_s": busy.seconds,
           "transactions": run.get("log_transactions"),
           "longest_transaction_s": run.get("log_longest_transaction_s")}
    if spec.get("fetch"):
        out["fetch_rate"], out["fetch_cpu_s_per_row"] = fetch_rate(bench_log(spec["topic"] + ".bench_table", spec["servers"]))
    return out


def around_mirror(start: Callable[[], None], stop: Callable[[], None]) -> None:
    """Call start() and stop() around every mirror step of this process (in dbt's model thread)."""
    from dbt.adapters.logstore.impl import LogstoreAdapter

    mirror = LogstoreAdapter.logstore_mirror

    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        start()
        try:
            return mirror(self, *args, **kwargs)
        finally:
            stop()

    LogstoreAdapter.logstore_mirror = wrapped  # type: ignore[method-assign]


def time_mirror() -> BusyClock:
    """The machine's CPU seconds during the mirror step."""
    busy = BusyClock()
    around_mirror(busy.start, busy.stop)
    return busy


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
            _dbt(project, {**base, **extra, "step": 1}, select=f"rebuild_{name}")
        return {"records": 0, "seconds": 0.0}
    run = _dbt(project, {**base, **variables[spec["phase"]], "step": 2}, select=f"rebuild_{spec['phase']}")
    return {"records": run.get("rows_mirrored", 0), "seconds": run["seconds"],
            "log_seconds": run.get("log_seconds", 0.0)}


def child_environment(spec: Dict[str, Any]) -> None:
    """What a configuration's process reads: the profile's env_var()s, and quiet Spark logs
    (benchmarks/cluster.py's children too)."""
    os.environ["BENCH_SESSION_DIR"] = spec["session_dir"]
    os.environ["BENCH_BOOTSTRAP_SERVERS"] = spec["servers"]
    os.environ["BENCH_KAFKA_CLIENT"] = spec["client"]
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--conf spark.log.level=ERROR "
                          "--conf spark.ui.showConsoleProgress=false pyspark-shell")


def child_main(spec: Dict[str, Any]) -> None:
    child_environment(spec)
    result = {"raw": child_raw, "mirror": child_mirror, "rebuild": child_rebuild}[spec["kind"]](spec)
    result["driver_mb"] = peak_rss_mb(os.getpid())
    result["jvm_mb"] = jvm_peak_rss_mb() if spec["kind"] != "raw" else None
    print("RESULT " + json.dumps(result), flush=True)


# --- the parent: broker, project, configurations, table --------------------------------------


def write_project(root: Path) -> Path:
    project = root / "project"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(
        "name: bench\nversion: '1.0'\nprofile: bench\nmodel-paths: ['models']\n")
    (project / "profiles.yml").write_text(PROFILE)
    for name in ("bench_table", "rebuild_log", "rebuild_nolog"):
        (project / "models" / f"{name}.sql").write_text(MODEL)
    return project


def run_child(spec: Dict[str, Any], logs: Path, script: str = __file__) -> Dict[str, Any]:
    """`script --child SPEC` in a process of its own (its own Spark session): its RESULT line."""
    log_file = logs / f"{spec['name']}.log"
    with open(log_file, "w") as log:
        done = subprocess.run([sys.executable, script, "--child", json.dumps(spec)],
                              stdout=subprocess.PIPE, stderr=log, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        tail = "\n".join((done.stdout + log_file.read_text()).splitlines()[-30:])
        raise ConfigurationFailed(f"configuration {spec['name']} failed (exit {done.returncode}):\n{tail}")
    return json.loads(lines[-1][len("RESULT "):])


class ConfigurationFailed(Exception):
    """A configuration's process failed: recorded in the results (and failing --check), and the
    run goes on with the other configurations."""


def _rate(result: Dict[str, Any]) -> float:
    return result["records"] / result["seconds"] if result["seconds"] else float("nan")


def _ratio(a: Dict[str, Any], b: Dict[str, Any]) -> str:
    return f"{_rate(a) / _rate(b):.2f}" if a["seconds"] and b["seconds"] else "-"


def _transactions(result: Dict[str, Any]) -> str:
    if not result.get("longest_transaction_s"):  # eventual: no transactions
        return "-"
    return str(result["transactions"])


def _seconds(value: Optional[float]) -> str:
    return "-" if not value else f"{value:.1f}"


def _mb(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:,.0f}"


# --- the results file and the targets (issue: performance) -----------------------------------

def _mirrors(results: Dict[str, Any], **match: Any) -> List[Dict[str, Any]]:
    return [c for c in results["configurations"] if c["kind"] == "mirror"
            and all(c.get(k) == v for k, v in match.items())]


def _lowest_ratio(**match: Any) -> Callable[[Dict[str, Any]], Optional[float]]:
    """The target's figure: the lowest mirror / raw ratio of the matching configurations."""
    def measure(results: Dict[str, Any]) -> Optional[float]:
        ratios = [c["ratio_to_raw"] for c in _mirrors(results, writers=1, **match)
                  if c.get("ratio_to_raw") is not None]
        return min(ratios) if ratios else None
    return measure


def _rebuild_ratio(rows: int) -> Callable[[Dict[str, Any]], Optional[float]]:
    def measure(results: Dict[str, Any]) -> Optional[float]:
        ratios = [r["ratio"] for r in results["rebuilds"] if r["rows"] == rows]
        return max(ratios) if ratios else None
    return measure


def _driver_memory_growth(results: Dict[str, Any]) -> Optional[float]:
    """Per client and path, the driver's peak from its smallest to its largest row count, when
    those span 100k to 10M rows; the largest growth."""
    growth = []
    for client in {c["client"] for c in results["configurations"]}:
        for writers in {c["writers"] for c in _mirrors(results, client=client)}:
            runs = sorted(_mirrors(results, client=client, writers=writers,
                                   consistency="transactional"), key=lambda c: c["rows"])
            if runs and runs[0]["rows"] <= 100_000 and runs[-1]["rows"] >= 10_000_000:
                growth.append(runs[-1]["driver_mb"] / runs[0]["driver_mb"] - 1)
    return max(growth) if growth else None


# (name, the figure measured from results.json, comparison, target)
TARGETS = [
    ("mirror / raw, kafka-python, 1 writer, 1M rows",
     _lowest_ratio(client="kafka-python", rows=1_000_000), ">=", 0.9),
    ("mirror / raw, confluent, 1 writer, 1M rows, transactional",
     _lowest_ratio(client="confluent", rows=1_000_000, consistency="transactional"), ">=", 0.8),
    ("mirror / raw, confluent, 1 writer, 1M rows, eventual",
     _lowest_ratio(client="confluent", rows=1_000_000, consistency="eventual"), ">=", 0.8),
    ("mirror / raw at 100k rows (fixed costs)", _lowest_ratio(rows=100_000), ">=", 0.6),
    ("keyed rebuild 1M rows 1% changed, with log / without", _rebuild_ratio(1_000_000), "<", 2.0),
    ("keyed rebuild 10M rows 1% changed, with log / without", _rebuild_ratio(10_000_000), "<", 2.0),
    ("driver peak RSS, 100k -> 10M rows", _driver_memory_growth, "<", 0.20),
]


def check(results: Dict[str, Any]) -> int:
    """Print each target with its measured figure; non-zero when one is missed or missing."""
    missed = 0
    print(f"targets, from {results.get('date')} on {results.get('machine')}:")
    for name, measure, comparison, target in TARGETS:
        value = measure(results)
        if value is None:
            verdict, shown = "NOT MEASURED", "-"
        else:
            met = value >= target if comparison == ">=" else value < target
            verdict, shown = ("met" if met else "MISSED"), f"{value:.2f}"
        missed += verdict != "met"
        print(f"  {verdict:<12} {name}: {shown} (target {comparison} {target})")
    for failure in results.get("failures", []):
        missed += 1
        print(f"  {'FAILED':<12} {failure['configuration']}: {failure['error']}")
    return 1 if missed else 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="100000,1000000", help="row counts, comma-separated")
    parser.add_argument("--quick", action="store_true", help="100,000 rows only (a few minutes), for development")
    parser.add_argument("--parallelism", type=int, default=2, help="Spark tasks of the parallel mirror")
    parser.add_argument("--clients", default="kafka-python,confluent",
                        help="Kafka clients to measure (confluent is skipped when not installed)")
    parser.add_argument("--bootstrap-servers", help="a running broker (default: start the embedded one)")
    parser.add_argument("--brokers", default="embedded",
                        help="brokers to start and measure on, comma-separated: embedded (tansu), apache "
                        "(three Apache Kafka nodes, make jars); the keyed rebuild runs on the last")
    parser.add_argument("--profile", metavar="DIR", help="write a pyinstrument profile of each mirror run here")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--only", action="append", metavar="TEXT",
                        help="run only the configurations whose name contains this text (repeatable: "
                        "any of them; names hold commas, so one text each)")
    parser.add_argument("--no-fetch", action="store_true",
                        help="skip the Spark -> driver read rate (a second read of the table)")
    parser.add_argument("--rebuild-rows", help="row counts of the keyed rebuild (default: the largest of --rows)")
    parser.add_argument("--rebuild-client", help="the keyed rebuild's Kafka client (default: confluent if "
                        "measured, else kafka-python); its first build mirrors every row")
    parser.add_argument("--results", help=f"where to write the results (JSON; default {RESULTS.name}, "
                                          f"with --quick {QUICK_RESULTS.name})")
    parser.add_argument("--check", nargs="?", const=str(RESULTS), metavar="FILE",
                        help="check the targets against a results file, exit 1 if one is missed")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child_main(json.loads(args.child))
        return 0
    if args.check:
        return check(json.loads(Path(args.check).read_text()))

    sizes = [100000] if args.quick else [int(n) for n in args.rows.split(",")]
    rebuild_sizes = [int(n) for n in args.rebuild_rows.split(",")] if args.rebuild_rows else [max(sizes)]
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    if "confluent" in clients:
        try:
            import confluent_kafka  # noqa: F401
        except ImportError:
            print("confluent-kafka is not installed (pip install 'dbt-logstore[confluent]'): skipped")
            clients.remove("confluent")
    if not args.rebuild_client:
        args.rebuild_client = "confluent" if "confluent" in clients else "kafka-python"
    commit = git_commit()
    work = Path(tempfile.mkdtemp(prefix="logstore-bench-"))
    logs = work / "logs"
    logs.mkdir()
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    project = write_project(work)
    brokers = ["given"] if args.bootstrap_servers else [b.strip() for b in args.brokers.split(",") if b.strip()]
    print(f"brokers {brokers}; work directory {work}; rows {sizes}; clients {clients}", flush=True)
    rows_out: List[List[str]] = []
    results: Dict[str, Dict[str, Any]] = {}
    configurations: List[Dict[str, Any]] = []
    rebuilds: List[Dict[str, Any]] = []
    failures: List[Dict[str, str]] = []
    broker: Any = None
    try:
        counter = 0
        servers, on = "", ""

        def measure(name: str, kind: str, rows: int, client: str = "kafka-python", **extra: Any) -> Dict[str, Any]:
            nonlocal counter
            counter += 1
            name += on
            if args.only and not any(text in name for text in args.only):
                return {"records": 0, "seconds": 0.0, "driver_mb": None, "jvm_mb": None,
                        "nolog_seconds": 0.0, "log_seconds": 0.0, "skipped": True}
            spec = {"name": name, "kind": kind, "rows": rows, "client": client, "servers": servers,
                    "project": str(project), "session_dir": str(work / f"spark-{counter}"),
                    "topic": f"bench.{counter}." + re.sub(r"[^a-zA-Z0-9]+", "_", name).strip("_"),
                    "consistency": "transactional", "parallelism": 1, "partitions": 1,
                    "profile": args.profile}
            spec.update(extra)
            started = time.monotonic()
            try:
                result = run_child(spec, logs)
            except ConfigurationFailed as exc:
                text = str(exc)
                print(f"  {name}: FAILED\n{text}", flush=True)
                cause = [line for line in text.splitlines() if "Exception" in line or "Error" in line]
                failures.append({"configuration": name, "error": (cause or text.splitlines())[-1][:500]})
                return {"records": 0, "seconds": 0.0, "driver_mb": None, "jvm_mb": None,
                        "nolog_seconds": 0.0, "log_seconds": 0.0, "skipped": True, "failed": True}
            results[name] = result
            print(f"  {name}: {result} ({time.monotonic() - started:.0f} s)", flush=True)
            return result

        for broker_name in brokers:
            broker, servers = start_broker(broker_name, args.bootstrap_servers, work / f"broker-{broker_name}")
            on = f" @{broker_name}" if broker_name not in ("embedded", "given") else ""
            print(f"broker {broker_name}: {servers}", flush=True)
            measure_mirrors(args, sizes, clients, measure, broker_name, configurations, rows_out)
            if broker_name == brokers[-1]:  # the rebuild measures the diff: the last broker is enough
                break
            stop_broker(broker)
            broker = None
        for rows in rebuild_sizes:
            session = str(work / f"spark-rebuild-{rows}")  # one metastore for the three phases
            topic = f"bench.rebuild.{rows}"
            phases: Dict[str, Dict[str, Any]] = {}
            for phase in ("build", "nolog", "log"):
                phases[phase] = measure(f"rebuild {rows} {phase}", "rebuild", rows, args.rebuild_client,
                                        phase=phase, session_dir=session, topic=topic)
                if phases[phase].get("failed"):
                    break
            if len(phases) == 3 and not any(p.get("skipped") for p in phases.values()):
                log, nolog = phases["log"], phases["nolog"]
                rebuilds.append({"rows": rows, "client": args.rebuild_client, "records": log["records"],
                                 "with_log_s": log["seconds"], "without_log_s": nolog["seconds"],
                                 "mirror_s": log["log_seconds"], "ratio": log["seconds"] / nolog["seconds"]})
    finally:
        stop_broker(broker)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    # Kafka transactions: how many the records took, and the longest (begin to commit); the
    # broker aborts one open past transaction.timeout.ms (60 s, the default, here)
    header = ["configuration", "rows", "records/s", "x raw", "driver MiB", "JVM MiB", "Kafka txns",
              "longest txn s"]
    widths = [max(len(r[i]) for r in rows_out + [header]) for i in range(len(header))]
    print()
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for row in rows_out:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
    print()
    fetches, spark_to_driver = {}, []
    for rows in sizes:
        for client in clients:
            tag = "" if client == "kafka-python" else f" [{client}]"
            fetched = results.get(f"mirror {rows} transactional, 1 writer{tag}", {})
            if fetched.get("fetch_rate"):
                fetches[rows] = fetched["fetch_cpu_s_per_row"] * 1e6
                spark_to_driver.append({"rows": rows, "rows_per_s": fetched["fetch_rate"],
                                        "cpu_us_per_row": fetches[rows]})
                print(f"Spark -> driver rows alone (Arrow batches, no Kafka), {rows:,} rows: "
                      f"{fetched['fetch_rate']:,.0f} rows/s, {fetches[rows]:.1f} CPU us/row")
    for line in cpu_budget(configurations, fetches):
        print(line)
    for rebuild in rebuilds:
        print(f"keyed rebuild of {rebuild['rows']:,} rows, 1% changed: {rebuild['records']:,} records "
              f"emitted; run {rebuild['with_log_s']:.1f} s with log vs {rebuild['without_log_s']:.1f} s "
              f"without, each in a fresh process (x{rebuild['ratio']:.2f}; mirror {rebuild['mirror_s']:.1f} s, "
              f"{rebuild['client']})")
    small, big = min(sizes), max(sizes)
    for label in ("transactional, 1 writer", f"transactional, {args.parallelism} tasks"):
        a, b = results.get(f"mirror {small} {label}"), results.get(f"mirror {big} {label}")
        if a and b and small != big and a["driver_mb"] and b["driver_mb"]:
            print(f"driver peak memory, mirror {label}: {a['driver_mb']:,.0f} MiB at {small:,} rows, "
                  f"{b['driver_mb']:,.0f} MiB at {big:,} rows ({(b['driver_mb'] / a['driver_mb'] - 1) * 100:+.0f}%); "
                  f"JVM {_mb(a['jvm_mb'])} -> {_mb(b['jvm_mb'])} MiB")
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": f"{os.cpu_count()} cores, {_memory_gib()} GiB, {platform.platform()}",
           "command": " ".join(["python", "benchmarks/mirror.py"] + list(argv if argv is not None else sys.argv[1:])),
           "commit": commit, "configurations": configurations, "rebuilds": rebuilds,
           "spark_to_driver": spark_to_driver,
           "cpu_bounds": [{k: v for k, v in b.items() if k != "mirrors"} for b in cpu_bounds(configurations, fetches)],
           "failures": failures}
    results = Path(args.results or (QUICK_RESULTS if args.quick else RESULTS))
    out.update(kept(results))
    results.write_text(json.dumps(out, indent=1) + "\n")
    print(f"\nresults written to {results}")
    write_plots(results)
    for failure in failures:
        print(f"FAILED: {failure['configuration']}: {failure['error']}")
    print()
    check(out)
    return 1 if failures else 0  # a configuration that failed is a failed run; a missed target is --check's


def measure_mirrors(args: Any, sizes: List[int], clients: List[str], measure: Callable[..., Dict[str, Any]],
                    broker: str, configurations: List[Dict[str, Any]], rows_out: List[List[str]]) -> None:
    """The raw producer and the mirror's configurations at each size and client, on one broker."""
    on = f" @{broker}" if broker not in ("embedded", "given") else ""
    partitions = max(2, args.parallelism)
    for rows in sizes:
        for client in clients:
            tag = "" if client == "kafka-python" else f" [{client}]"
            raw = measure(f"raw {rows}{tag}", "raw", rows, client)
            if raw.get("failed"):
                continue
            configurations.append(_entry("raw", client, rows, "transactional", 1, raw, None, broker))
            rows_out.append([f"raw producer{tag}{on}", f"{rows:,}", f"{_rate(raw):,.0f}", "1.00", "-", "-",
                             "-", "-"])
            configs = [("transactional, 1 writer", {"consistency": "transactional",
                                                    "fetch": client == clients[0]
                                                    and not args.no_fetch}),
                       ("eventual, 1 writer", {"consistency": "eventual"})]
            if args.parallelism > 1:
                configs.append((f"transactional, {args.parallelism} tasks",
                                {"parallelism": args.parallelism, "partitions": partitions}))
            for label, extra in configs:
                result = measure(f"mirror {rows} {label}{tag}", "mirror", rows, client, **extra)
                if result.get("failed"):
                    rows_out.append([f"mirror {label}{tag}{on}", f"{rows:,}", "FAILED", "-", "-", "-", "-", "-"])
                    continue
                configurations.append(_entry(
                    "mirror", client, rows, extra.get("consistency", "transactional"),
                    extra.get("parallelism", 1), result, raw, broker))
                rows_out.append([f"mirror {label}{tag}{on}", f"{rows:,}", f"{_rate(result):,.0f}",
                                 _ratio(result, raw), _mb(result["driver_mb"]),
                                 _mb(result["jvm_mb"]), _transactions(result),
                                 _seconds(result.get("longest_transaction_s"))])


def start_broker(name: str, given: Optional[str], directory: Path) -> Tuple[Any, str]:
    """The broker to measure on, started here (none for --bootstrap-servers), and its servers."""
    if name == "given":
        return None, str(given)
    if name == "embedded":
        from dbt.adapters.logstore.cli.broker import EmbeddedBroker, free_port

        broker = EmbeddedBroker(port=free_port(), state_dir=directory)
        broker.start()
        return broker, broker.bootstrap_servers
    if name == "apache":
        sys.path.insert(0, str(HERE.parent))
        from tests.kafka_cluster import JVM_OPTIONS, KafkaCluster

        # the brokers' JIT compiles fully here: they carry the load being measured
        options = [o for o in JVM_OPTIONS if not o.startswith("-XX:TieredStopAtLevel")
                   and not o.startswith("-Xmx")] + ["-Xmx1g"]
        cluster = KafkaCluster(directory, nodes=3, jvm_options=options).start()
        return cluster, cluster.bootstrap_servers
    raise SystemExit(f"--brokers: unknown broker {name!r}; allowed: embedded, apache")


def stop_broker(broker: Any) -> None:
    if broker is not None:
        broker.stop()


def cpu_bounds(configurations: List[Dict[str, Any]], fetch_us: Dict[int, float]) -> List[Dict[str, Any]]:
    """What the machine's cores allow: the mirror does the raw producer's work (the client and
    the broker) plus Spark's (rendering the records, sending them to the driver), so with every
    core busy it sends at most cores / (raw's + Spark's CPU us per record) records a second.
    One bound per raw producer (client, rows, broker) whose mirrors were measured, as
    results.json holds them ("cpu_bounds"; benchmarks/plots.py draws them)."""
    bounds, cores = [], os.cpu_count() or 1
    for raw in (c for c in configurations if c["kind"] == "raw" and c.get("cpu_us_per_record")):
        spark_us = fetch_us.get(raw["rows"])
        mirrors = [c for c in configurations if c["kind"] == "mirror" and c["client"] == raw["client"]
                   and c["rows"] == raw["rows"] and c.get("broker") == raw.get("broker")
                   and c.get("cpu_us_per_record")]
        if not spark_us or not mirrors:
            continue
        bound = cores / ((raw["cpu_us_per_record"] + spark_us) / 1e6)
        bounds.append({"client": raw["client"], "rows": raw["rows"], "broker": raw.get("broker", "embedded"),
                       "cores": cores, "raw_cpu_us_per_record": raw["cpu_us_per_record"],
                       "spark_cpu_us_per_record": spark_us, "records_per_s": bound,
                       "ratio_to_raw": bound / raw["records_per_s"] if raw.get("records_per_s") else None,
                       "mirrors": mirrors})
    return bounds


def cpu_budget(configurations: List[Dict[str, Any]], fetch_us: Dict[int, float]) -> List[str]:
    """cpu_bounds() as the lines the run prints."""
    lines = []
    for b in cpu_bounds(configurations, fetch_us):
        used = ", ".join(f"{m['consistency']} {m['writers']} writer(s) {m['cpu_us_per_record']:.1f}"
                         for m in b["mirrors"])
        ratio = f" = x{b['ratio_to_raw']:.2f} the raw producer" if b["ratio_to_raw"] is not None else ""
        lines.append(f"CPU us/record, {b['rows']:,} rows [{b['client']}] on {b['broker']}: raw producer "
                     f"{b['raw_cpu_us_per_record']:.1f} + Spark -> driver {b['spark_cpu_us_per_record']:.1f}; "
                     f"mirror {used}. On {b['cores']} cores the mirror can send at most "
                     f"{b['records_per_s']:,.0f} records/s{ratio}")
    return lines


def _entry(kind: str, client: str, rows: int, consistency: str, writers: int,
           result: Dict[str, Any], raw: Optional[Dict[str, Any]], broker: str = "embedded") -> Dict[str, Any]:
    """One configuration's figures, as results.json holds them."""
    rate = _rate(result) if result["seconds"] else None
    ratio = rate / _rate(raw) if raw is not None and rate and raw["seconds"] else None
    return {"kind": kind, "client": client, "rows": rows, "consistency": consistency,
            "writers": writers, "broker": broker, "records": result["records"], "seconds": result["seconds"],
            "records_per_s": rate, "ratio_to_raw": ratio, "driver_mb": result.get("driver_mb"),
            "jvm_mb": result.get("jvm_mb"), "transactions": result.get("transactions"),
            "longest_transaction_s": result.get("longest_transaction_s"),
            "cpu_us_per_record": result["cpu_s"] / result["records"] * 1e6
            if result.get("cpu_s") and result["records"] else None}


def git_commit() -> Optional[str]:
    """The measured code's commit (short hash, "-dirty" with uncommitted changes), None outside git."""
    try:
        done = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=7", "--exclude=*"], cwd=HERE,
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def kept(results: Path) -> Dict[str, Any]:
    """What a rewrite of the results file keeps of it: benchmarks/cluster.py's result ("cluster"),
    which this benchmark does not measure."""
    try:
        old = json.loads(results.read_text())
    except (OSError, ValueError):
        return {}
    return {key: old[key] for key in ("cluster",) if isinstance(old, dict) and key in old}


def write_plots(results: Path) -> None:
    """The PNG plots of a results file (benchmarks/plots.py), next to it under plots/."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_plots", HERE / "plots.py")
    plots = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(plots)
    except ImportError as exc:  # matplotlib: the bench extra
        print(f"plots skipped ({exc}; pip install 'dbt-logstore[bench]')")
        return
    try:
        for path in plots.write_plots(results):
            print(f"plot written to {path}")
    except Exception as exc:  # the run's figures are saved: draw them again with benchmarks/plots.py
        print(f"plots FAILED ({type(exc).__name__}: {exc}); python benchmarks/plots.py {results}")


def _memory_gib() -> int:
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return round(pages / 2**30)


if __name__ == "__main__":
    sys.exit(main())
