"""Retraction benchmark: what a re-base costs when its topic still holds the table's earlier log.

    python benchmarks/retraction.py [--rows 1000000] [--keep-share 0.9] [--quick]
                                    [--brokers embedded|apache] [--client confluent]
                                    [--bootstrap-servers HOST:PORT] [--keep] [--results FILE]

`make bench-retraction` runs it with the defaults. It starts the embedded broker (`--brokers
apache`: three Apache Kafka nodes, tests/kafka_cluster.py, through benchmarks/harness.py's
start_broker), writes a throw-away dbt project with one keyed table model (unique_key id,
`log.on-lost: restart`) and measures, side by side in one run, each step in its own process
(its own Spark session, so peak memory is the step's own):

- retract:  the model's first build of --rows rows (its log starts: generation 1), then its
            table dropped by hand (Spark SQL in that process); then, measured in a fresh process,
            `dbt run` with the first 90% of the rows (`--keep-share`): the run finds the table
            rebuilt while the topic kept its log and, with `log.on-lost: restart`, starts
            generation 2, whose change set also deletes the 10% of keys the topic still holds
            (dbt/adapters/logstore/changes/retraction.py: Spark tasks read the topic's records up to the
            generation's start, one anti join adds the deletes);
- fresh:    the same run (the same rows, a table built from nothing, its log's first snapshot)
            on a topic of its own that holds nothing: no records to read, nothing to retract.

Per step: the dbt run's seconds (the model's execution time) and the log's (`log_seconds`), the
retraction's keys, offsets read and seconds (parsed from the run's line in its logs/dbt.log:
"<model>: generation N retracts K keys that '<topic>' still holds ... (read R offsets in S s)"),
the peak resident set (VmHWM) of the dbt process (the driver), of Spark's JVM and of Spark's
Python workers (which run the reader), and the machine's CPU seconds over the run. It prints a
table and the ratios (retract / fresh: run seconds, driver and JVM peak; retraction seconds per
million records read) and writes benchmarks/results-retraction.json and .txt (--quick: 100,000
rows, into results-retraction-quick.*, which git ignores; --results to choose). The driver's peak
is the point: it holds one batch of records at a time, never the topic's keys, so it should not
grow with them. Numbers depend on the machine and on what else runs on it.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # run by path: the benchmarks package beside this file
    sys.path.insert(0, str(HERE.parent))

from benchmarks.harness import (BusyClock, child_environment, children_peak_rss_mb, git_commit,  # noqa: E402
                                jvm_peak_rss_mb, peak_rss_mb, print_result, run_child, start_broker,
                                stop_broker)
from benchmarks.projects import run_dbt, write_project  # noqa: E402
from benchmarks.tables import mb, ratio, seconds, text_table  # noqa: E402

RESULTS = HERE / "results-retraction.json"
QUICK_RESULTS = HERE / "results-retraction-quick.json"
MODEL_NAME = "customers"

MODEL = """
{{ config(materialized='table', unique_key='id',
          **{'log.system': 'kafka', 'kafka.topic': var('topic'), 'log.on-lost': 'restart',
             'log.system.partitions': var('partitions', 1)}) }}
select id, concat('customer-', cast(id as string)) as name,
       cast(id * 1.5 as decimal(12, 2)) as amount,
       date_add(date'2024-01-01', cast(id % 365 as int)) as day
from range({{ var('rows') }})
"""

RETRACTION_LINE = re.compile(
    r"(?P<model>\S+): generation (?P<generation>\d+) retracts (?P<keys>\d+) keys that '(?P<topic>[^']*)' "
    r"still holds and the table no longer has \(read (?P<offsets>\d+) offsets in (?P<seconds>[\d.]+) s\)")


def retraction_line(text: str, model: str) -> Optional[Dict[str, Any]]:
    """The last retraction line of `model` in a dbt log's text: generation, keys, offsets read,
    seconds (None when the run retracted nothing: its topic held no earlier records)."""
    found = [m for m in RETRACTION_LINE.finditer(text) if m.group("model") == model]
    if not found:
        return None
    last = found[-1]
    return {"generation": int(last.group("generation")), "keys": int(last.group("keys")),
            "offsets": int(last.group("offsets")), "seconds": float(last.group("seconds"))}


# --- a step's process ---------------------------------------------------------------------------


def _dbt(spec: Dict[str, Any], rows: int, topic: str) -> Dict[str, Any]:
    return run_dbt(Path(spec["project"]), {"rows": rows, "topic": topic, "partitions": spec["partitions"]},
                   log_path=spec["log_path"])


def child_main(spec: Dict[str, Any]) -> None:
    child_environment(spec)
    if spec["phase"] == "build":  # the log starts, then the table goes: the topic keeps its log
        _dbt(spec, spec["rows"], spec["topic"])
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
        spark.sql(f"drop table bench.{MODEL_NAME}")
        result: Dict[str, Any] = {}
    else:
        busy = BusyClock()
        busy.start()
        started = time.perf_counter()
        run = _dbt(spec, spec["kept_rows"], spec["topic"])
        wall = time.perf_counter() - started
        busy.stop()
        line = retraction_line((Path(spec["log_path"]) / "dbt.log").read_text(), MODEL_NAME)
        result = {"run_seconds": run["seconds"], "wall_seconds": wall, "cpu_s": busy.seconds,
                  "log_seconds": run.get("log_seconds"), "records": run.get("rows_mirrored"),
                  "retraction": line,
                  "workers_mb": children_peak_rss_mb("python")}  # Spark's Python workers: the reader
    result["driver_mb"] = peak_rss_mb(os.getpid())
    result["jvm_mb"] = jvm_peak_rss_mb()
    print_result(result)


# --- the parent -------------------------------------------------------------------------------


def table(results: Dict[str, Any]) -> str:
    retract, fresh = results["retract"], results["fresh"]
    line = retract.get("retraction") or {}
    per_million = (line["seconds"] / line["offsets"] * 1e6) if line.get("offsets") else None
    header = ("step", "run s", "log s", "records", "retracted", "read", "retraction s",
             "driver MB", "JVM MB", "workers MB", "CPU s")
    rows = []
    for name, r in (("retract", retract), ("fresh", fresh)):
        found = r.get("retraction") or {}
        rows.append((name, seconds(r["run_seconds"]), seconds(r.get("log_seconds")),
                     f"{r.get('records') or 0:,}", f"{found.get('keys', 0):,}", f"{found.get('offsets', 0):,}",
                     seconds(found.get("seconds")), mb(r["driver_mb"]), mb(r["jvm_mb"]),
                     mb(r.get("workers_mb")), seconds(r.get("cpu_s"))))
    out = text_table(header, rows, left=0)
    out += ["",
            f"retract / fresh: run seconds {ratio(retract['run_seconds'], fresh['run_seconds'])}, "
            f"driver peak {ratio(retract['driver_mb'], fresh['driver_mb'])}, "
            f"JVM peak {ratio(retract['jvm_mb'], fresh['jvm_mb'])}",
            f"retraction: {seconds(per_million)} s per million records read "
            f"({line.get('keys', 0):,} keys retracted of {line.get('offsets', 0):,} records read), "
            f"{ratio(line.get('seconds'), retract['run_seconds'])} of the run"]
    return "\n".join(out)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1000000, help="the first build's rows (keys)")
    parser.add_argument("--keep-share", type=float, default=0.9, help="share of the rows the re-based table keeps")
    parser.add_argument("--quick", action="store_true", help="100,000 rows, for development")
    parser.add_argument("--partitions", type=int, default=1, help="the topic's partitions (Spark tasks that read it)")
    parser.add_argument("--client", default="confluent",
                        help="the profile's kafka_client (kafka-python when confluent-kafka is not installed)")
    parser.add_argument("--brokers", default="embedded", help="embedded (tansu) or apache (three Apache Kafka nodes)")
    parser.add_argument("--bootstrap-servers", help="a running broker (default: start one)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--results", help=f"where to write the results (JSON, and .txt beside it; default "
                                          f"{RESULTS.name}, with --quick {QUICK_RESULTS.name})")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child_main(json.loads(args.child))
        return 0
    rows = 100000 if args.quick else args.rows
    kept = int(rows * args.keep_share)
    if args.client == "confluent":
        try:
            import confluent_kafka  # noqa: F401
        except ImportError:
            print("confluent-kafka is not installed (pip install 'dbt-logstore[confluent]'): kafka-python")
            args.client = "kafka-python"
    results_path = Path(args.results) if args.results else (QUICK_RESULTS if args.quick else RESULTS)
    work = Path(tempfile.mkdtemp(prefix="logstore-bench-retraction-"))
    logs = work / "logs"
    logs.mkdir()
    project = write_project(work, {MODEL_NAME: MODEL})
    broker_name = "given" if args.bootstrap_servers else args.brokers
    print(f"broker {broker_name}; work directory {work}; rows {rows:,}, kept {kept:,}; client {args.client}",
          flush=True)
    broker = None
    results: Dict[str, Any] = {}
    try:
        broker, servers = start_broker(broker_name, args.bootstrap_servers, work / "broker")
        base = {"client": args.client, "servers": servers, "project": str(project), "rows": rows,
                "kept_rows": kept, "partitions": args.partitions}
        steps = [("retract", "build", "bench.retraction.kept"), ("retract", "rebase", "bench.retraction.kept"),
                 ("fresh", "rebase", "bench.retraction.fresh")]
        for configuration, phase, topic in steps:
            name = f"{configuration}-{phase}"
            spec = {**base, "name": name, "phase": phase, "topic": topic,
                    "session_dir": str(work / f"spark-{configuration}"),  # one metastore per configuration
                    "log_path": str(work / f"dbt-logs-{name}")}
            started = time.monotonic()
            result = run_child(__file__, spec, logs / f"{name}.log", f"configuration {name}")
            print(f"  {name}: {result} ({time.monotonic() - started:.0f} s)", flush=True)
            if phase == "rebase":
                results[configuration] = result
    finally:
        stop_broker(broker)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    command = "python benchmarks/retraction.py " + " ".join(argv if argv is not None else sys.argv[1:])
    summary = {"rows": rows, "kept_rows": kept, "client": args.client, "broker": broker_name,
               "partitions": args.partitions, "command": command.strip(), "commit": git_commit(),
               "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                           "python": platform.python_version()},
               **results}
    results_path.write_text(json.dumps(summary, indent=2) + "\n")
    text = table(results)
    print("\n" + text)
    results_path.with_suffix(".txt").write_text(f"{command.strip()}\n\n{text}\n")
    print(f"wrote {results_path} and {results_path.with_suffix('.txt').name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
