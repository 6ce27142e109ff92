"""A real Spark Connect server for the connect-method tests, started from the pyspark wheel.

The wheel ships Spark Connect's server jar (jars/spark-connect_2.13-*.jar) but not
`sbin/start-connect-server.sh`, so the server is started with `spark-submit --class
...SparkConnectServer`, as thrift_server.py starts the Thrift Server. It runs in its own
temporary directory (cwd, warehouse, Derby metastore, derby.log) with the Hive catalog, on a
free port on loopback, and its Python workers (the parallel mirror's tasks, a downstream
model's reads of Kafka) run this venv's interpreter, which has the package. With a `token`, the
server asks every client for it (spark.connect.authenticate.token); the client sends it over
gRPC's local credentials to `localhost` (pyspark asks for TLS elsewhere).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest

from tests.functional.thrift_server import ServerFiles, _free_port, _stop, server_conf, wait_until_ready
from tests.spark_jvm import SPARK_DEFAULTS

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


@dataclass
class ConnectServer(ServerFiles):
    LOG_NAME = "connectserver.log"

    host: str = "localhost"  # the client sends a token without TLS only to localhost
    token: Optional[str] = field(default=None, repr=False)
    _session: Any = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """The URL a client connects with, the token included."""
        return f"sc://{self.host}:{self.port}" + (f"/;token={self.token}" if self.token else "")

    @property
    def session(self) -> Any:
        """The tests' own Spark Connect session on the server (not the one dbt's runs use)."""
        if self._session is None or self._session.is_stopped:
            from pyspark.sql.connect.session import SparkSession

            self._session = SparkSession.builder.remote(self.url).create()
        return self._session

    def query(self, sql: str) -> List[tuple]:
        return [tuple(row) for row in self.session.sql(sql).collect()]

    def column_types(self, relation: str) -> Dict[str, str]:
        """column -> Spark type name, from the table's schema."""
        return {f.name: f.dataType.simpleString() for f in self.session.table(relation).schema.fields}

    def table(self, relation: str) -> Tuple[Dict[str, str], List[Dict[str, Any]]]:
        """The table's column types and its rows (as dicts), as the table is now: this
        session outlives the dbt runs that replace the table's files, so its cached listing
        of them is refreshed first."""
        self.session.sql(f"refresh table {relation}")
        frame = self.session.table(relation)
        types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
        return types, [row.asDict(recursive=True) for row in frame.collect()]


    def close_session(self) -> None:
        if self._session is not None:
            from pyspark.sql.connect.client.retries import DefaultPolicy

            # without the client's ten minutes of retries, should the server be gone
            self._session._client.set_retry_policies([DefaultPolicy(max_retries=0)])
            try:
                self._session.stop()
            except Exception:
                pass
            self._session = None


def _command(spark_home: str, port: int, work_dir: Path, master: str = "local[2]",
             extra_conf: Optional[Dict[str, str]] = None, jars: Sequence[Path] = ()) -> List[str]:
    conf = {
        **server_conf(work_dir),
        "spark.sql.catalogImplementation": "hive",
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        # the server's Python workers: this venv's interpreter, which imports the package
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        **(extra_conf or {}),
    }
    cmd = [os.path.join(spark_home, "bin", "spark-submit"),
           "--class", SERVER_CLASS,
           "--master", master,
           "--properties-file", str(SPARK_DEFAULTS)]  # the tests' Spark defaults (tests/spark_jvm.py)
    if jars:  # on the server's class path (catalogs, data sources) and shipped to executors
        cmd += ["--driver-class-path", os.pathsep.join(map(str, jars)),
                "--jars", ",".join(map(str, jars))]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    return cmd + ["spark-internal"]


def _select_one(url: str) -> bool:
    """Whether the server answers a query (a throwaway session, released after)."""
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession

    try:
        session = SparkSession.builder.remote(url).create()
    except Exception:
        return False
    try:
        session._client.set_retry_policies([DefaultPolicy(max_retries=0)])
        return session.sql("select 1").collect()[0][0] == 1
    except Exception:
        return False
    finally:
        try:
            session.stop()
        except Exception:
            pass


def start_connect_server(work_dir: Path, master: str = "local[2]",
                         extra_conf: Optional[Dict[str, str]] = None,
                         jars: Sequence[Path] = (), token: Optional[str] = None,
                         port: Optional[int] = None) -> ConnectServer:
    """A Spark Connect server in `work_dir`: Spark in local mode (or an application of the
    cluster at `master`), with `extra_conf` on top of the tests' own, `jars` on its class path,
    asking clients for `token` if given."""
    import pyspark

    spark_home = os.path.dirname(pyspark.__file__)
    port = port or _free_port()  # a port given: a server started again where the last one was
    env = dict(os.environ, SPARK_HOME=spark_home, SPARK_LOCAL_IP="127.0.0.1",
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    log = open(work_dir / "connectserver.log", "ab")  # a server started again goes on with it
    if token:
        extra_conf = {**(extra_conf or {}), "spark.connect.authenticate.token": token}
    process = subprocess.Popen(_command(spark_home, port, work_dir, master, extra_conf, jars),
                               cwd=work_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    server = ConnectServer(port=port, work_dir=work_dir, process=process, token=token)
    wait_until_ready(server, process, lambda: _select_one(server.url), "Spark Connect server", 0.5)
    return server


def stop_connect_server(server: ConnectServer) -> None:
    try:
        server.close_session()
    except Exception:
        pass
    _stop(server.process)


@pytest.fixture(scope="module")
def spark_connect_server() -> Iterator[ConnectServer]:
    """A Spark Connect server for the module, which asks its clients for a token."""
    with tempfile.TemporaryDirectory(prefix="logstore-connect-") as work_dir:
        server = start_connect_server(Path(work_dir), token=f"t0ken-{uuid.uuid4().hex[:12]}")
        try:
            yield server
        finally:
            stop_connect_server(server)
