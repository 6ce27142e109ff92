"""Where a command's CPU time goes, by kind of process: the suite's JVMs (Spark drivers, Thrift
Servers, executors, Kafka brokers, Flink), dbt's processes, the pytest workers.

    .venv/bin/python -m tests.cpu_by_process -- make test

runs the command and reads every process's CPU time (psutil) every two seconds; every process
that starts meanwhile is counted with the CPU time it had when last seen (the last two seconds
of a process that ends between two reads are missed). Processes that ran before the command are left out. On a
2-core machine the suite keeps both cores busy, so its time is its CPU work: this says which
work (docs/contributing.md, Timings, quotes it).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from typing import Dict, Iterator, Tuple

import psutil

# (what a process's command line holds, its kind): the first that matches
KINDS = (
    ("kafka.Kafka", "Kafka broker"),
    ("HiveThriftServer2", "Spark Thrift Server"),
    ("CoarseGrainedExecutorBackend", "Spark executor"),
    ("deploy.master.Master", "Spark master and workers"),
    ("deploy.worker.Worker", "Spark master and workers"),
    ("SparkSubmit", "Spark driver"),
    ("flink", "Flink"),
    ("pyspark.daemon", "Spark's Python workers"),
    ("dbt-logstore", "dbt-logstore command"),
    ("dbtRunner", "dbt (long-lived process)"),
    ("/bin/dbt ", "dbt command"),
    ("exec(eval(", "pytest worker"),
    ("pytest", "pytest"),
    ("postgres", "PostgreSQL"),
    ("java", "other JVM"),
)


def kind_of(command_line: str) -> str:
    for mark, kind in KINDS:
        if mark in command_line:
            return kind
    return "other: " + os.path.basename(command_line.split(" ", 1)[0] or "?")


def _processes() -> Iterator[Tuple[Tuple[int, float], psutil.Process, float]]:
    """Every process now: (pid, creation time), the process, and its CPU seconds."""
    for process in psutil.process_iter(["cpu_times", "create_time"]):
        times = process.info["cpu_times"]
        if times is not None:  # else it ended, or is not ours to read
            yield (process.pid, process.info["create_time"]), process, times.user + times.system


def _command_line(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:  # ended since
        return ""


def main(command: list, every: float = 2.0) -> int:
    before = {key for key, _, _ in _processes()}
    seen: Dict[Tuple[int, float], list] = {}  # (pid, creation time) -> [kind, CPU seconds]
    started = time.monotonic()
    child = subprocess.Popen(command)
    while child.poll() is None:
        for key, process, cpu in _processes():
            if key in before:
                continue
            if key not in seen:  # its command line read once
                seen[key] = [kind_of(_command_line(process)), cpu]
            seen[key][1] = cpu
        time.sleep(every)
    wall = time.monotonic() - started
    total, count = Counter(), Counter()
    for kind, cpu in seen.values():
        total[kind] += cpu
        count[kind] += 1
    everything = sum(total.values()) or 1.0
    print(f"\n{everything:.0f} CPU-seconds in {wall:.0f} s ({everything / wall:.2f} cores busy), by kind:")
    for kind, cpu in total.most_common():
        print(f"{cpu:8.0f} s {100 * cpu / everything:5.1f}%  {count[kind]:5d} processes  {kind}")
    return child.returncode


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if arguments[:1] == ["--"]:
        arguments = arguments[1:]
    if not arguments:
        sys.exit(__doc__)
    sys.exit(main(arguments))
