"""What every benchmark's parent and children share: a configuration measured in a process of its
own (its own Spark session, so peak memory is per configuration), the line it reports its result
on, the broker it measures on, and the machine's figures (peak memory, busy CPU, the commit
measured, the machine)."""
from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
RESULT = "RESULT "  # a child's last stdout line starting so is its result, as JSON


# --- memory and CPU ----------------------------------------------------------------------------


def peak_rss_mb(pid: int) -> Optional[float]:
    """Peak resident set of a live process (VmHWM), in MiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def children_peak_rss_mb(name: str) -> Optional[float]:
    """The highest peak resident set of this process's descendants whose name holds `name`
    ("java": Spark's JVM; "python": Spark's Python workers)."""
    import psutil

    peaks = [peak_rss_mb(p.pid) for p in psutil.Process().children(recursive=True)
             if name in (p.name() or "")]
    peaks = [p for p in peaks if p is not None]
    return max(peaks) if peaks else None


def jvm_peak_rss_mb() -> Optional[float]:
    """Peak resident set of Spark's JVM, a child of this (driver) process."""
    return children_peak_rss_mb("java")


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


# --- child processes ---------------------------------------------------------------------------


def child_environment(spec: Dict[str, Any]) -> None:
    """What a configuration's process reads: the profile's env_var()s (projects.PROFILE), and
    quiet Spark logs."""
    os.environ["BENCH_SESSION_DIR"] = spec["session_dir"]
    os.environ["BENCH_BOOTSTRAP_SERVERS"] = spec["servers"]
    os.environ["BENCH_KAFKA_CLIENT"] = spec["client"]
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--conf spark.log.level=ERROR "
                          "--conf spark.ui.showConsoleProgress=false pyspark-shell")


def add_work_options(parser: Any, results: Path, quick_results: Path) -> None:
    """The options a benchmark whose configurations run as children takes: --keep, --results
    and the hidden --child (a child's own configuration, as JSON)."""
    import argparse

    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--results", help=f"where to write the results (default {results.name}, "
                                          f"with --quick {quick_results.name})")
    parser.add_argument("--child", help=argparse.SUPPRESS)


def print_result(result: Dict[str, Any]) -> None:
    """A child's result, as its parent's run_child reads it."""
    print(RESULT + json.dumps(result), flush=True)


class ChildFailed(RuntimeError):
    """A configuration's process failed: recorded in the results, and the run goes on with the
    other configurations."""


def run_child(script: str, spec: Dict[str, Any], log_file: Path, label: str, cwd: Optional[str] = None,
              timeout: Optional[float] = None) -> Dict[str, Any]:
    """`script --child SPEC` in a process of its own, its stderr in `log_file`: its RESULT line.
    ChildFailed (naming `label`, with the output's last lines) when it exits non-zero or
    reports nothing."""
    with open(log_file, "w") as log:
        done = subprocess.run([sys.executable, script, "--child", json.dumps(spec)], cwd=cwd,
                              stdout=subprocess.PIPE, stderr=log, text=True, timeout=timeout)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT)]
    if done.returncode != 0 or not lines:
        tail = "\n".join((done.stdout + log_file.read_text()).splitlines()[-30:])
        raise ChildFailed(f"{label} failed (exit {done.returncode}):\n{tail}")
    return json.loads(lines[-1][len(RESULT):])


def failure_cause(text: str) -> str:
    """What a failed child's output says went wrong: its last line naming an exception or an
    error (else its last line), as a results file records it."""
    cause = [line for line in text.splitlines() if "Exception" in line or "Error" in line]
    return (cause or text.splitlines() or [""])[-1][:500]


def safe_name(name: str) -> str:
    """A configuration's name as a topic's or a file's: runs of other characters as one "_"."""
    return re.sub(r"[^a-zA-Z0-9]+", "_", name).strip("_")


# --- brokers -----------------------------------------------------------------------------------


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
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
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


# --- provenance --------------------------------------------------------------------------------


def git_commit() -> Optional[str]:
    """The measured code's commit (short hash, "-dirty" with uncommitted changes), None outside git."""
    try:
        done = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=7", "--exclude=*"],
                              cwd=ROOT / "benchmarks", capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def memory_gib() -> int:
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return round(pages / 2**30)


def machine() -> str:
    """The machine, as a results file records it: cores, memory, platform."""
    return f"{os.cpu_count()} cores, {memory_gib()} GiB, {platform.platform()}"
