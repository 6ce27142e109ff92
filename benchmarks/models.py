"""Small-models benchmark: what a log costs an ordinary small dbt model, beside plain dbt-spark.

    python benchmarks/models.py [--models 12] [--rows 200] [--rebuilds 1] [--quick] [--client C]
                                [--methods session,thrift,connect] [--broker embedded|apache]
                                [--keep] [--results FILE]

`make bench-models` runs it with the defaults. A throw-away dbt project: --models keyed table
models (`m01`, ..., unique_key id, 200 rows each), a keyed incremental `merge` model (on Delta,
where plain dbt-spark can merge too), a keyless table model and a keyed `downstream` model that
`ref()`s m01 and m02 (logged inputs: its confirmation names their snapshots), every one logged
(transactional).
It runs with plain dbt-spark (`type: spark`, where the log's configs mean nothing) and with
dbt-logstore, into schemas of their own, on the embedded broker (--broker apache: Apache Kafka on
3 nodes, as the suite's cluster, where each Kafka client's first metadata costs more). For each
method (session: one Spark session both profiles share; thrift: a Spark Thrift Server,
tests/functional/thrift_server.py; connect: a Spark Connect server,
tests/functional/connect_server.py, that dbt-logstore's `method: connect` and plain dbt-spark's
session method with SPARK_REMOTE both reach), interleaved so that the machine's load hits both
alike (plain then logged, then logged then plain, ...):

- a warm-up model built and rebuilt by both (not measured: the session's start, first queries);
- the first build: `dbt run` of every model (var v=1): every row is new;
- --rebuilds rebuilds (v=2, 3, ...): every row changes, the merge model merges every row.

Per model: its seconds (run_results.json's execution_time) and its SQL statements (the
`On model.bench.<name>: /* {...} */` lines of the invocation's part of dbt.log); per logged
invocation, its run record's seconds (written once as it ends: its debug line); printed as the
mean a model, plain and logged, and their ratio, for each method and case; written to
benchmarks/results-models.json (--quick: 3 models, results-models-quick.json, which git ignores).
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # run by path: the benchmarks package beside this file
    sys.path.insert(0, str(ROOT))

from benchmarks.harness import add_work_options, git_commit, machine, print_result, run_child  # noqa: E402
from benchmarks.dbt_log import invocations, run_record_seconds, statements  # noqa: E402,F401
from benchmarks.models_results import (  # noqa: E402,F401
    CASES, DOWNSTREAM, INCREMENTAL, KEYLESS, WARMUP, case_of, invocation_lines, invocation_summary,
    markdown, run_record_summary, summarize, table,
)

RESULTS = HERE / "results-models.json"
QUICK_RESULTS = HERE / "results-models-quick.json"
PROJECT = "bench"
VARIANTS = ("plain", "logged")

LOG = ("**{'log.system': 'kafka', 'log.consistency': 'transactional', "
       "'kafka.topic': 'bench_models.' ~ var('method') ~ '.' ~ this.name}")
ROWS = ("select id, concat('name-', id, '-', {{ var('v') }}) as name, id * {{ var('v') }} as amount\n"
        "from range({rows}) as r(id)\n")
KEYED = "{{ config(materialized='table', unique_key='id', " + LOG + ") }}\n" + ROWS
MERGE = ("{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id', "
         "file_format='delta', " + LOG + ") }}\n" + ROWS)
KEYLESS_SQL = "{{ config(materialized='table', " + LOG + ") }}\n" + ROWS
DOWNSTREAM_SQL = ("{{ config(materialized='table', unique_key='id', " + LOG + ") }}\n"
                  "select a.id, a.name, a.amount + b.amount as amount\n"
                  "from {{ ref('m01') }} a join {{ ref('m02') }} b on b.id = a.id\n")

# Delta, for the merge model (plain dbt-spark merges on Delta, Iceberg or Hudi only)
DELTA = {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
         "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
         "spark.databricks.delta.snapshotPartitions": "2"}
SPARK = {"spark.sql.shuffle.partitions": "4", "spark.sql.session.timeZone": "UTC", **DELTA}


def model_names(count: int) -> List[str]:
    return [f"m{i:02d}" for i in range(1, count + 1)]


def models(count: int, rows: int) -> Dict[str, str]:
    """The project's models: name -> SQL."""
    out = {name: KEYED.replace("{rows}", str(rows)) for name in model_names(count)}
    out[INCREMENTAL] = MERGE.replace("{rows}", str(rows))
    out[KEYLESS] = KEYLESS_SQL.replace("{rows}", str(rows))
    out[DOWNSTREAM] = DOWNSTREAM_SQL
    out[WARMUP] = KEYED.replace("{rows}", str(rows))
    return out


def profile(method: str, session_dir: str, servers: str, port: Optional[int],
            client: str = "kafka-python") -> str:
    """Both targets of a method: plain (type spark) and logged (type logstore), each in a schema
    of its own; the session targets share one Spark session (its warehouse and metastore)."""
    lines = ["bench:", "  target: logged", "  outputs:"]
    for variant in VARIANTS:
        # dbt-spark has no Connect method: its session method goes to the server named by
        # SPARK_REMOTE (set in the child); dbt-logstore's own method names it in the profile
        shown = "session" if method == "connect" and variant == "plain" else method
        lines += [f"    {variant}:", f"      type: {'spark' if variant == 'plain' else 'logstore'}",
                  f"      method: {shown}", f"      schema: bench_{variant}", "      threads: 1"]
        if method == "thrift":
            lines += ["      host: 127.0.0.1", f"      port: {port}", "      connect_retries: 5",
                      "      connect_timeout: 10"]
        elif method == "connect":
            lines += ["      host: localhost" if variant == "plain" else f"      host: sc://127.0.0.1:{port}"]
        else:  # dbt-spark asks a host of every method
            from dbt.adapters.logstore.connections import session_defaults

            lines += ["      host: localhost"]

            settings = {**session_defaults(session_dir), **SPARK}
            lines += ["      server_side_parameters:"]
            lines += [f"        {key}: {json.dumps(value)}" for key, value in settings.items()]
        if variant == "logged":
            lines += [f"      kafka_bootstrap_servers: {json.dumps(servers)}", f"      kafka_client: {client}"]
    return "\n".join(lines) + "\n"


# --- a method's process ---------------------------------------------------------------------------


def dbt_run(spec: Dict[str, Any], variant: str, v: int, select: Optional[str], label: str) -> Dict[str, Any]:
    """One `dbt run` in this process; each model's seconds and statements."""
    from dbt.cli.main import dbtRunner

    work = Path(spec["work"])
    target_path = work / f"target-{spec['method']}-{variant}-{label}"
    log_path = work / f"dbt-logs-{spec['method']}-{variant}"
    variables = {"v": v, "method": spec["method"]}  # the method: a topic of its own for each
    args = ["run", "--project-dir", spec["project"], "--profiles-dir", spec["profiles"], "--target", variant,
            "--vars", json.dumps(variables), "--target-path", str(target_path), "--log-path", str(log_path),
            "--quiet"]
    args += ["--select", select] if select else ["--exclude", WARMUP]
    result = dbtRunner().invoke(args)
    if not result.success:
        messages = [r.message for r in getattr(result.result, "results", None) or [] if r.message]
        raise SystemExit(f"dbt run ({spec['method']}, {variant}, {label}) failed: "
                         f"{result.exception or '; '.join(messages)}")
    run_results = json.loads((target_path / "run_results.json").read_text())
    invocation = run_results["metadata"]["invocation_id"]
    logged = invocations((log_path / "dbt.log").read_text()).get(invocation, "")
    counts = statements(logged)
    nodes = {}
    for node in run_results["results"]:
        name = node["unique_id"].split(".")[-1]
        nodes[name] = {"seconds": node["execution_time"], "statements": counts.get(name, 0)}
    return {"invocation": invocation, "nodes": nodes, "run_record_s": run_record_seconds(logged)}


def child_main(spec: Dict[str, Any]) -> None:
    os.environ.setdefault("DO_NOT_TRACK", "1")
    if spec["method"] == "session":
        os.environ["PYSPARK_SUBMIT_ARGS"] = (f"--driver-class-path {spec['class_path']} "
                                             "--conf spark.ui.showConsoleProgress=false pyspark-shell")
    if spec["method"] == "connect":  # plain dbt-spark's session method, through Connect
        os.environ["SPARK_REMOTE"] = spec["remote"]
    for variant in VARIANTS:  # the session's start and first queries, a first build and a rebuild
        for v in (1, 2):
            dbt_run(spec, variant, v, WARMUP, f"warmup{v}")
    runs = []
    for run in range(spec["rebuilds"] + 1):
        order = VARIANTS if run % 2 == 0 else VARIANTS[::-1]
        for variant in order:
            started = time.monotonic()
            measured = dbt_run(spec, variant, run + 1, None, f"run{run}")
            took = time.monotonic() - started
            print(f"  {spec['method']} {variant} run {run}: {took:.0f} s", file=sys.stderr, flush=True)
            runs.append({"method": spec["method"], "variant": variant, "run": run,
                         "invocation_s": round(took, 2), **measured})
    print_result({"runs": runs})


# --- the parent -----------------------------------------------------------------------------------


def start_broker(state_dir: Path) -> tuple:
    from dbt.adapters.logstore.cli.broker import free_port

    port = free_port()
    cli = Path(sys.executable).parent / "dbt-logstore"
    subprocess.run([str(cli), "broker", "start", "--port", str(port), "--state-dir", str(state_dir)], check=True)
    pid = int((state_dir / f"broker-{port}.pid").read_text().strip())
    return pid, f"127.0.0.1:{port}"


def stop_pid(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # raised once the process is gone
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            os.kill(pid, 0)
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)


def delta_jars() -> List[Path]:
    return sorted((ROOT / ".jars" / "delta").glob("*.jar"))


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=12, help="keyed table models")
    parser.add_argument("--rows", type=int, default=200, help="rows a model")
    parser.add_argument("--rebuilds", type=int, default=1, help="rebuilds after the first build")
    parser.add_argument("--methods", default="session,thrift,connect", help="session, thrift, connect")
    parser.add_argument("--quick", action="store_true", help="3 models, for development")
    parser.add_argument("--client", default="kafka-python", help="kafka_client of the logged profile")
    parser.add_argument("--broker", default="embedded", choices=("embedded", "apache"),
                        help="the embedded broker, or Apache Kafka on 3 nodes (tests/kafka_cluster.py)")
    add_work_options(parser, RESULTS, QUICK_RESULTS)
    args = parser.parse_args(argv)
    if args.child:
        child_main(json.loads(args.child))
        return 0
    count = 3 if args.quick else args.models
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    results_path = Path(args.results) if args.results else (QUICK_RESULTS if args.quick else RESULTS)
    jars = delta_jars()
    if not jars:
        raise SystemExit("no Delta jars in .jars/delta: make jars")
    work = Path(tempfile.mkdtemp(prefix="logstore-bench-models-"))
    from benchmarks.projects import write_project

    project = write_project(work, models(count, args.rows), profile=None)
    print(f"work directory {work}; {count} keyed table models of {args.rows} rows, an incremental merge "
          f"model and a keyless one; methods {', '.join(methods)}", flush=True)
    began = time.monotonic()
    commit = git_commit()  # the code measured: at the start (others may commit while it runs)
    broker_pid = None
    cluster = None
    server = None
    runs: List[Dict[str, Any]] = []
    failures: List[str] = []
    try:
        (work / "broker").mkdir()
        if args.broker == "apache":
            from tests.kafka_cluster import KafkaCluster

            cluster = KafkaCluster(work / "broker").start()
            servers = cluster.bootstrap_servers
            print(f"Apache Kafka: 3 nodes at {servers}", flush=True)
        else:
            broker_pid, servers = start_broker(work / "broker")
        for method in methods:
            port = None
            if method == "thrift":
                from tests.functional.thrift_server import start_thrift_server

                (work / "thrift").mkdir()
                server = start_thrift_server(work / "thrift", extra_conf=SPARK, jars=jars)
                port = server.port
                print(f"Thrift Server on port {port}", flush=True)
            elif method == "connect":
                from tests.functional.connect_server import start_connect_server

                (work / "connect").mkdir()
                server = start_connect_server(work / "connect", extra_conf=SPARK, jars=jars)
                port = server.port
                print(f"Spark Connect server on port {port}", flush=True)
            profiles = work / f"profiles-{method}"
            profiles.mkdir()
            (profiles / "profiles.yml").write_text(profile(method, str(work / "spark-session"), servers, port,
                                                           args.client))
            spec = {"method": method, "work": str(work), "project": str(project), "profiles": str(profiles),
                    "rebuilds": args.rebuilds, "class_path": os.pathsep.join(map(str, jars)),
                    "remote": f"sc://127.0.0.1:{port}"}
            started = time.monotonic()
            try:
                result = run_child(__file__, spec, work / f"{method}.log", f"method {method}", cwd=str(work))
                runs += result["runs"]
            except Exception as exc:  # noqa: BLE001 - recorded, the other method goes on
                failures.append(str(exc)[-2000:])
                print(f"  {method} FAILED: {exc}", flush=True)
            print(f"  {method}: {time.monotonic() - started:.0f} s", flush=True)
            if server is not None:
                from tests.functional.thrift_server import _stop

                _stop(server.process)
                server = None
    finally:
        if server is not None:
            from tests.functional.thrift_server import _stop

            _stop(server.process)
        if broker_pid is not None:
            stop_pid(broker_pid)
        if cluster is not None:
            cluster.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    rows = summarize(runs)
    command = "python benchmarks/models.py " + " ".join(argv if argv is not None else sys.argv[1:])
    summary = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               "machine": machine(), "commit": commit, "command": command.strip(),
               "broker": args.broker, "models": count, "rows": args.rows, "rebuilds": args.rebuilds,
               "methods": methods,
               "duration_s": round(time.monotonic() - began), "table": rows,
               "run_record": run_record_summary(runs), "invocations": invocation_summary(runs),
               "runs": runs, "failures": failures}
    results_path.write_text(json.dumps(summary, indent=1) + "\n")
    print("\nseconds and SQL statements a model (mean), plain dbt-spark and dbt-logstore logged:\n")
    print(table(rows))
    for method, written in summary["run_record"].items():  # once an invocation, after its models
        print(f"  {method}: the run record, once a logged invocation: {written['mean_s']:.3f} s (mean of "
              f"{len(written['each_s'])})")
    for line in invocation_lines(summary["invocations"], count + 3):
        print(line)
    print(f"\n{time.monotonic() - began:.0f} s; wrote {results_path}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
