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
saved result); `--check` reads that file and exits non-zero when a target (TARGETS) is missed,
naming it. A rewrite keeps the file's "cluster" key (benchmarks/cluster.py's result, stored there
too). Numbers depend on the machine and on what else runs on it.

This file is the parent (arguments, the configurations in order, the printed table);
mirror_children.py measures each configuration in its process, mirror_results.py makes the
results' entries, the CPU bound and the targets.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # run by path: the benchmarks package beside this file
    sys.path.insert(0, str(HERE.parent))

from benchmarks.harness import (ChildFailed, failure_cause, git_commit, machine, run_child, safe_name,  # noqa: E402
                                start_broker, stop_broker)
from benchmarks.mirror_children import MODELS, child_main  # noqa: E402
from benchmarks.mirror_results import check, cpu_bounds, cpu_budget, entry  # noqa: E402
from benchmarks.projects import MODEL, write_project  # noqa: E402
from benchmarks.tables import kept, mb, rate, rate_ratio, seconds, text_table, write_plots  # noqa: E402

RESULTS = HERE / "results.json"
QUICK_RESULTS = HERE / "results-quick.json"  # --quick: a development run keeps the full result


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
    project = write_project(work, {name: MODEL for name in MODELS})
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
                    "topic": f"bench.{counter}." + safe_name(name),
                    "consistency": "transactional", "parallelism": 1, "partitions": 1,
                    "profile": args.profile}
            spec.update(extra)
            started = time.monotonic()
            try:
                result = run_child(__file__, spec, logs / f"{name}.log", f"configuration {name}")
            except ChildFailed as exc:
                print(f"  {name}: FAILED\n{exc}", flush=True)
                failures.append({"configuration": name, "error": failure_cause(str(exc))})
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
    print()
    print("\n".join(text_table(header, rows_out, left=1, header_left=len(header))))
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
                  f"JVM {mb(a['jvm_mb'])} -> {mb(b['jvm_mb'])} MiB")
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": machine(),
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
            configurations.append(entry("raw", client, rows, "transactional", 1, raw, None, broker))
            rows_out.append([f"raw producer{tag}{on}", f"{rows:,}", f"{rate(raw, float('nan')):,.0f}", "1.00", "-", "-",
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
                configurations.append(entry(
                    "mirror", client, rows, extra.get("consistency", "transactional"),
                    extra.get("parallelism", 1), result, raw, broker))
                rows_out.append([f"mirror {label}{tag}{on}", f"{rows:,}", f"{rate(result, float('nan')):,.0f}",
                                 rate_ratio(result, raw), mb(result["driver_mb"]),
                                 mb(result["jvm_mb"]), transactions(result),
                                 seconds(result.get("longest_transaction_s"))])


def transactions(result: Dict[str, Any]) -> str:
    """The Kafka transactions a mirror's records took, as a cell."""
    if not result.get("longest_transaction_s"):  # eventual: no transactions
        return "-"
    return str(result["transactions"])


if __name__ == "__main__":
    sys.exit(main())
