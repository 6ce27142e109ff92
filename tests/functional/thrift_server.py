"""A real Spark Thrift Server for the thrift-method tests, started from the pyspark wheel.

The wheel ships the hive-thriftserver jars but not `sbin/start-thriftserver.sh`, so the server is
started with `spark-submit --class ...HiveThriftServer2`. It runs in its own temporary directory
(cwd, warehouse, Derby metastore, derby.log): Derby allows one process per metastore, and the
in-process Spark session of the other tests has its own.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest

from tests.spark_jvm import SPARK_DEFAULTS
from tests.table_formats import JARS

STARTUP_TIMEOUT = 180.0
LLAP_JARS = JARS / "hive-llap"  # `make jars`


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _select_one(port: int) -> bool:
    from pyhive import hive

    try:
        conn = hive.connect(host="127.0.0.1", port=port, username="dbt")
    except Exception:
        return False
    try:
        cursor = conn.cursor()
        cursor.execute("select 1")
        return cursor.fetchall() == [(1,)]
    except Exception:
        return False
    finally:
        conn.close()


@dataclass
class ServerFiles:
    """A server of the tests' own (its process started in `work_dir`, listening at `port`),
    and what they read of it: its tables' properties, its log's end."""

    LOG_NAME = ""
    port: int
    work_dir: Path
    process: subprocess.Popen
    host: str = "127.0.0.1"

    def query(self, sql: str) -> List[tuple]:
        raise NotImplementedError

    def table_properties(self, relation: str) -> Dict[str, str]:
        return {str(k): str(v) for k, v in self.query(f"show tblproperties {relation}")}

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join((self.work_dir / self.LOG_NAME).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass
class ThriftServer(ServerFiles):
    LOG_NAME = "thriftserver.log"

    def connect(self):
        from pyhive import hive

        return hive.connect(host=self.host, port=self.port, username="dbt")

    def query(self, sql: str) -> List[tuple]:
        conn = self.connect()
        try:
            cursor = conn.cursor()
            cursor.execute(sql)
            return cursor.fetchall() if cursor.description else []
        finally:
            conn.close()

    def column_types(self, relation: str) -> Dict[str, str]:
        """column -> Spark type name, from `describe` (up to the partition section, if any)."""
        types: Dict[str, str] = {}
        for name, kind, *_ in self.query(f"describe {relation}"):
            if not name or name.startswith("#"):
                break
            types[name] = kind
        return types

    def table(self, relation: str) -> Tuple[Dict[str, str], List[Dict[str, Any]]]:
        """The table's column types and its rows (as dicts), read over thrift with PyHive."""
        types = self.column_types(relation)
        columns = ", ".join(f"`{c}`" for c in types)
        rows = [dict(zip(types, row)) for row in self.query(f"select {columns} from {relation}")]
        return types, rows



def server_conf(work_dir: Path) -> Dict[str, str]:
    """The settings every server of the tests starts with (the Thrift Server, the Spark Connect
    server): on loopback, no UI, its own warehouse and Derby metastore in `work_dir`."""
    return {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.warehouse.dir": str(work_dir / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={work_dir / 'metastore_db'};create=true",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={work_dir}",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
    }


def wait_until_ready(server: Any, process: subprocess.Popen, answers: Callable[[], bool],
                     what: str, poll_s: float = 1.0) -> None:
    """Until `answers()` (its port open and a query answered), or fail with the end of the
    server's log (it exited, or did not answer within STARTUP_TIMEOUT); stopped on failure."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{what} exited with {process.returncode}:\n{server.log_tail()}")
            if _port_open(server.port) and answers():
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} not ready on port {server.port} after "
                                   f"{STARTUP_TIMEOUT:.0f}s:\n{server.log_tail()}")
            time.sleep(poll_s)
    except BaseException:
        _stop(process)
        raise


def _command(spark_home: str, port: int, work_dir: Path, master: str = "local[2]",
             extra_conf: Optional[Dict[str, str]] = None, jars: Sequence[Path] = ()) -> List[str]:
    conf = {**server_conf(work_dir), **(extra_conf or {})}
    cmd = [os.path.join(spark_home, "bin", "spark-submit"),
           "--class", "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2",
           "--master", master,
           "--properties-file", str(SPARK_DEFAULTS),  # the tests' Spark defaults (tests/spark_jvm.py)
           # Hive's LLAP classes, which Spark 4 no longer ships: closing a session can initialize
           # Hive's function registry, which needs them (jars/hive-llap/pom.xml)
           "--driver-class-path", os.pathsep.join([str(LLAP_JARS / "*"), *map(str, jars)])]
    if jars:  # on the server's class path (data sources are found there) and shipped to executors
        cmd += ["--jars", ",".join(map(str, jars))]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd += ["--hiveconf", "hive.server2.thrift.bind.host=127.0.0.1",
            "--hiveconf", f"hive.server2.thrift.port={port}",
            "spark-internal"]
    return cmd


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _stop(process: subprocess.Popen) -> None:
    """Kill the server's process group (spark-submit and its JVM) and wait until it is gone.
    The server was started with start_new_session=True, so its group id is its pid."""
    pgid = process.pid
    for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            process.poll()  # reap the direct child, else its zombie keeps the group "alive"
            if not _group_alive(pgid):
                return
            time.sleep(0.2)
    process.poll()
    raise AssertionError(f"process group {pgid} still runs after SIGTERM and SIGKILL")


def start_thrift_server(work_dir: Path, master: str = "local[2]",
                        extra_conf: Optional[Dict[str, str]] = None,
                        jars: Sequence[Path] = ()) -> ThriftServer:
    """A Thrift Server in `work_dir`: Spark in local mode, or an application of the cluster
    at `master` (spark://...: spark_cluster.py), with `extra_conf` on top of the tests' own."""
    import pyspark

    spark_home = os.path.dirname(pyspark.__file__)
    port = _free_port()
    env = dict(os.environ, SPARK_HOME=spark_home, SPARK_LOCAL_IP="127.0.0.1")
    log = open(work_dir / "thriftserver.log", "wb")
    process = subprocess.Popen(_command(spark_home, port, work_dir, master, extra_conf, jars), cwd=work_dir, env=env,
                               stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True)
    log.close()
    server = ThriftServer(port=port, work_dir=work_dir, process=process)
    wait_until_ready(server, process, lambda: _select_one(port), "Spark Thrift Server")
    return server


@pytest.fixture(scope="session")
def spark_thrift_server() -> Iterator[ThriftServer]:
    with tempfile.TemporaryDirectory(prefix="logstore-thrift-") as work_dir:
        server = start_thrift_server(Path(work_dir))
        try:
            yield server
        finally:
            _stop(server.process)
