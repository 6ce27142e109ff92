"""Connection manager: dbt-spark's, with safe defaults for the local session method, the
Spark Connect method (`method: connect`, spark/connect.py), the
Spark engine's own output kept off dbt's console (engine_output.py), every profile field
checked when a connection opens (profile_checks.py), and a failed statement reported by
Spark's one-line cause (its Java stack trace only in dbt's debug log)."""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.connections import SparkConnectionManager, SparkConnectionMethod
from dbt.adapters.contracts.connection import ConnectionState
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore.credentials import LogstoreConnectionMethod
from dbt.adapters.logstore.spark import engine_output
from dbt.adapters.logstore.config.profile_checks import check_profile

logger = AdapterLogger("Spark")


def session_defaults(session_dir: str, engine_log: Optional[Path] = None) -> Dict[str, str]:
    """Spark settings for a local session that binds to loopback only, shows no UI and keeps
    its warehouse, metastore and derby.log under `session_dir` instead of the current directory
    (with `engine_log`: Derby's log there, and no progress bars)."""
    session_dir = os.path.abspath(session_dir)
    java_options = f"-Dderby.system.home={session_dir}"
    quiet = {}
    if engine_log is not None:
        java_options += " " + engine_output.derby_options(engine_log)
        quiet = {"spark.ui.showConsoleProgress": "false"}
    return {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.warehouse.dir": os.path.join(session_dir, "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={os.path.join(session_dir, 'metastore_db')};create=true",
        "spark.driver.extraJavaOptions": java_options,
        **quiet,
    }


def spark_cause(exc: BaseException) -> str:
    """The first line of what Spark said: its error class and message, without the Java stack
    trace, the query plan or py4j's 'An error occurred while calling o42.sql.'"""
    response = exc.args[0] if exc.args else None  # a Thrift Server's answer (dbt-spark's case)
    text = str(getattr(getattr(response, "status", None), "errorMessage", None)
               or getattr(exc, "desc", None) or getattr(exc, "msg", None) or exc)
    if "Traceback (most recent call last):" in text:  # a Python worker's: its exception line
        after = text.split("Traceback (most recent call last):", 1)[1].splitlines()
        raised = [line for line in after if line.strip() and not line[0].isspace()]
        if raised:
            return raised[-1].strip()
    for line in text.splitlines():
        line = line.strip().lstrip(":").strip()
        if line and not line.startswith(("An error occurred while calling", "Runtime Error")):
            return line
    return type(exc).__name__


class LogstoreConnectionManager(SparkConnectionManager):
    TYPE = "logstore"

    def __init__(self, profile: Any, mp_context: Any) -> None:
        super().__init__(profile, mp_context)
        creds = profile.credentials
        # the profile's checks name it (profile_checks.py)
        self.profile_name = (getattr(profile, "profile_name", None),
                             getattr(profile, "target_name", None))
        self.engine_log: Optional[Path] = None
        if creds.method == SparkConnectionMethod.SESSION:
            if not creds.session_dir:
                root = getattr(profile, "project_root", None) or os.getcwd()
                target = getattr(profile, "target_path", None) or "target"
                creds.session_dir = os.path.join(root, target, "logstore_spark")
            if getattr(creds, "engine_output", "file") != "console":
                self.engine_log = engine_output.engine_log_path(profile)
            for key, value in session_defaults(creds.session_dir, self.engine_log).items():
                creds.server_side_parameters.setdefault(key, value)
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            # Spark's Python workers (parallel mirror, reading upstream changes) run dbt's own
            # interpreter, which has this package and kafka-python, not the first `python3`.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    def open(self, connection: Any) -> Any:  # type: ignore[override]
        """Every profile field checked first (one sentence naming the field and the profile,
        before Spark or Kafka is reached); the session method's JVM started with its output in
        the engine log."""
        check_profile(connection.credentials, *self.profile_name)
        if connection.credentials.method == LogstoreConnectionMethod.CONNECT:
            return self._open_connect(connection)
        connection = super().open(connection)
        creds = connection.credentials
        if creds.method == SparkConnectionMethod.SESSION and self.engine_log is not None:
            engine_output.start_session_quietly(dict(creds.server_side_parameters), self.engine_log)
        return connection

    def _open_connect(self, connection: Any) -> Any:
        """A Spark Connect session (spark/connect.py) in dbt-spark's session wrapper: no JVM
        here, so no local settings and no engine log."""
        from dbt.adapters.logstore.config.profile_checks import where_in
        from dbt.adapters.logstore.spark.connect import open_handle

        if connection.state == ConnectionState.OPEN:
            return connection
        connection.handle = open_handle(connection.credentials, where_in(*self.profile_name))
        connection.state = ConnectionState.OPEN
        return connection

    @contextmanager
    def exception_handler(self, sql: str) -> Iterator[None]:
        """A failed statement: dbt's error with Spark's one-line cause; the whole of it (Java
        stack trace, query plan) in dbt's debug log (logs/dbt.log, or the console with --debug)."""
        try:
            yield
        except Exception as exc:
            logger.debug(f"Error while running:\n{sql}")
            response = exc.args[0] if exc.args else None
            logger.debug(str(getattr(getattr(response, "status", None), "errorMessage", None)
                             or getattr(exc, "msg", None) or exc))
            raise DbtRuntimeError(spark_cause(exc)) from None


def debug_lines(credentials: Any) -> List[str]:
    """`dbt debug`'s lines of the profile's log: reachable, topics creatable (one sentence on
    failure, worded as dbt debug's check, not a model's)."""
    from dbt.adapters.logstore.config.address import profile_log

    log = profile_log(credentials)
    if log is None:
        return ["Kafka: no kafka_bootstrap_servers in the profile (each logged model must set "
                "kafka.bootstrap.servers)"]
    try:
        from dbt.adapters.logstore.log.log_system import open_model_log

        return open_model_log(log).check()
    except DbtRuntimeError as exc:
        from dbt.adapters.logstore.cli.error_wording import own_text, reworded
        raise DbtRuntimeError(reworded(own_text(exc), "dbt debug", "dbt debug")) from None
