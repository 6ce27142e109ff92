"""Where the Spark engine's own output goes under the session method: Spark's, Hive's and
Derby's logging, the JVM's warnings and the stage progress bars. By default (profile field
`engine_output: file`) into <log-path>/dbt-logstore-engine.log, the file the `dbt-logstore`
commands use, so that the console shows dbt's lines only; `engine_output: console` leaves them
on the console, progress bars included, as plain dbt-spark does."""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, Optional

ENGINE_OUTPUTS = ("file", "console")
ENGINE_LOG_NAME = "dbt-logstore-engine.log"


def engine_log_path(profile: Any) -> Path:
    """<log-path>/dbt-logstore-engine.log: dbt's log directory (--log-path, log-path), else
    <project>/logs, as the `dbt-logstore` commands use."""
    root = getattr(profile, "project_root", None) or os.getcwd()
    log_path = getattr(profile, "log_path", None)
    if not log_path or str(log_path) == "None":
        log_path = "logs"
    return Path(root, log_path).resolve() / ENGINE_LOG_NAME


def derby_options(engine_log: Path) -> str:
    """JVM options that append Derby's log to the engine log (instead of a derby.log beside
    the metastore)."""
    return f"-Dderby.stream.error.file={engine_log} -Dderby.infolog.append=true"


@contextmanager
def stderr_to(path: Optional[Path]) -> Iterator[None]:
    """The process's standard error (file descriptor 2) into `path` meanwhile: a Spark JVM
    started meanwhile inherits it, so its log, Derby's and pyspark's go there for good."""
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved, target = os.dup(2), os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(target, 2)
    os.close(target)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def spark_running() -> bool:
    try:
        from pyspark import SparkContext
    except ImportError:
        return False
    return SparkContext._active_spark_context is not None


def start_session_quietly(settings: Dict[str, str], engine_log: Path) -> None:
    """Start this process's Spark session as dbt-spark's first statement would (Hive support,
    the profile's server_side_parameters), with the JVM's standard error in `engine_log`. Once
    a JVM runs, nothing: dbt-spark's later getOrCreate() finds its session."""
    if spark_running():
        return
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.enableHiveSupport()
    for key, value in settings.items():
        builder = builder.config(key, value)
    with stderr_to(engine_log):
        builder.getOrCreate()
    _python_loggers_to(engine_log)


# pyspark's own Python loggers, which log a failed statement's query context on stderr
PYSPARK_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def _python_loggers_to(engine_log: Path) -> None:
    """pyspark's query-context loggers write to the engine log instead of the console."""
    import logging

    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # a pyspark without them
        return
    for name in PYSPARK_LOGGERS:
        logger = PySparkLogger.getLogger(name)
        if any(getattr(h, "baseFilename", None) == str(engine_log) for h in logger.handlers):
            continue
        for handler in list(logger.handlers):
            if type(handler) is logging.StreamHandler:
                logger.removeHandler(handler)
        logger.addHandler(logging.FileHandler(engine_log))
