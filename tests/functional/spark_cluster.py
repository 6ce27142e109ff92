"""A standalone Spark cluster for the tests and the benchmark, from pyspark's own launcher: a
master and two workers (`spark-class org.apache.spark.deploy.master.Master` / `...worker.Worker`);
an application that asks two one-core executors gets one on each worker, each its own JVM
process, as on a real cluster. The Thrift Server (thrift_server.py) and the session method both
run against it (`--master spark://...`, `spark.master`).

Its executors run the Python of this environment (PYSPARK_PYTHON): nothing is installed by hand.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, List, Optional

import pytest

from tests.functional.thrift_server import _free_port, _stop

STARTUP_TIMEOUT = 120.0
WORKERS = 2
# two cores each (more than this machine has): the Thrift Server and a dbt run's session can
# both hold an executor on every worker (each application asks spark.cores.max 2, one per executor)
WORKER_CORES = 2
WORKER_MEMORY = "1200m"
EXECUTOR_MEMORY = "512m"  # what each application asks of a worker
# The Spark Thrift Server registers with the master as `SparkSQL::<host>` (HiveThriftServer2's
# default name); "Thrift JDBC/ODBC Server" is only its UI's title.
THRIFT_APP_PREFIX = "SparkSQL::"


def is_thrift_application(name: Optional[str]) -> bool:
    return bool(name) and str(name).startswith(THRIFT_APP_PREFIX)


@dataclass
class StandaloneCluster:
    master_url: str
    ui_port: int
    work_dir: Path
    processes: List[subprocess.Popen] = field(default_factory=list)

    def state(self) -> dict:
        """The master's own view (its web UI's JSON): workers, applications, cores in use."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as answer:
            return json.load(answer)

    def alive_workers(self) -> int:
        return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")

    def executor_pids(self, thrift: Optional[bool] = None) -> List[int]:
        """The executor JVMs running now: the workers' children (spark-class execs the
        worker's JVM, which launches each executor as its own process). `thrift`: only the
        Thrift Server's (True) or only the other applications' (False)."""
        apps = {a["id"] for a in self.state().get("activeapps", [])
                if thrift is None or is_thrift_application(a.get("name")) == thrift}
        workers = {p.pid for p in self.processes[1:]}
        pids = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                stat = (proc / "stat").read_text()
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            args = cmdline.split(b"\0")
            app = args[args.index(b"--app-id") + 1].decode() if b"--app-id" in args else None
            if parent in workers and b"CoarseGrainedExecutorBackend" in cmdline and app in apps:
                pids.append(int(proc.name))
        return sorted(pids)

    def kill_executor(self, rng: Any, thrift: Optional[bool] = None) -> int:
        """SIGKILL one executor JVM of the Thrift Server (`thrift` True) or of the other
        applications (False), chosen by `rng`; asserts one was found and that it is gone."""
        from tests.functional.kills import kill_pid

        executors = self.executor_pids(thrift=thrift)
        apps = [a.get("name") for a in self.state().get("activeapps", [])]
        assert executors, (f"no executor of the {'Thrift Server' if thrift else 'run'}'s "
                           f"application to kill (applications: {apps})")
        victim = rng.choice(executors)
        kill_pid(victim, f"executor JVM (applications: {apps})")
        return victim

    def executor_logs(self) -> List[str]:
        """Every executor's stderr so far (the workers' work folders: app-*/<n>/stderr)."""
        return [p.read_text(errors="replace") for p in self.work_dir.glob("worker-*/app-*/*/stderr")]

    def stop(self) -> None:
        for process in reversed(self.processes):
            _stop(process)


def _spark_class(spark_home: str, main: str, *args: str) -> List[str]:
    return [os.path.join(spark_home, "bin", "spark-class"), main, *args]


def start_standalone_cluster(work_dir: Path, workers: int = WORKERS) -> StandaloneCluster:
    import pyspark

    spark_home = os.path.dirname(pyspark.__file__)
    port, ui_port = _free_port(), _free_port()
    env = dict(os.environ, SPARK_HOME=spark_home, SPARK_LOCAL_IP="127.0.0.1",
               PYSPARK_PYTHON=os.environ.get("PYSPARK_PYTHON", sys.executable),
               # the daemons' own heap (the executors get EXECUTOR_MEMORY from the application)
               SPARK_DAEMON_MEMORY="256m")
    cluster = StandaloneCluster(f"spark://127.0.0.1:{port}", ui_port, work_dir)

    def launch(name: str, command: List[str]) -> None:
        log = open(work_dir / f"{name}.log", "wb")
        cluster.processes.append(subprocess.Popen(
            command, cwd=work_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True))
        log.close()

    launch("master", _spark_class(spark_home, "org.apache.spark.deploy.master.Master",
                                  "--host", "127.0.0.1", "--port", str(port),
                                  "--webui-port", str(ui_port)))
    for n in range(workers):
        worker_dir = work_dir / f"worker-{n}"
        worker_dir.mkdir()
        launch(f"worker-{n}", _spark_class(
            spark_home, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
            "--cores", str(WORKER_CORES), "--memory", WORKER_MEMORY, "--work-dir", str(worker_dir),
            "--webui-port", str(_free_port()), cluster.master_url))
    deadline = time.monotonic() + STARTUP_TIMEOUT
    try:
        while True:
            for process in cluster.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited with {process.returncode}: "
                                       f"{_tails(work_dir)}")
            try:
                if cluster.alive_workers() == workers:
                    return cluster
            except OSError:
                pass  # the master's web UI is not up yet
            if time.monotonic() > deadline:
                raise RuntimeError(f"the standalone cluster had not {workers} workers after "
                                   f"{STARTUP_TIMEOUT:.0f} s: {_tails(work_dir)}")
            time.sleep(1)
    except BaseException:
        cluster.stop()
        raise


def _tails(work_dir: Path) -> str:
    return "\n".join(f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:])
                     for p in sorted(work_dir.glob("*.log")))


@pytest.fixture(scope="module")  # its daemons stop with the module that used them
def standalone_cluster() -> Iterator[StandaloneCluster]:
    with tempfile.TemporaryDirectory(prefix="logstore-cluster-") as work_dir:
        cluster = start_standalone_cluster(Path(work_dir))
        try:
            yield cluster
        finally:
            cluster.stop()
