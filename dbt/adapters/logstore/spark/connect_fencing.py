"""A dead run's statements on a Spark Connect server, stopped by the run that takes its lock over.

A Connect server keeps a session, and runs its statements to their end, after the client that
sent them died (reattachable execution: the client may come back). An insert a killed run had
sent could then finish after the next run judged it not done, and change the table behind its
log. So a run's lock records its session (`session_of`), and the run that takes over the lock
of a dead run first interrupts every statement of that session and releases it
(`interrupt_session`, through run_lock.take's `stop_session`)."""
from __future__ import annotations

import time
import warnings
from typing import Any, Callable, Optional

from dbt.adapters.logstore.spark.connect import ConnectTarget, connection_of, logger, release_session


def session_of(handle: Any) -> str:
    """'<user id>/<session id>' of the Connect session behind a dbt connection handle, "" for
    other methods: a run's lock records it (run_lock.LockOwner.spark_session)."""
    connection = connection_of(handle)
    if connection is None:
        return ""
    client = connection.spark._client
    return f"{client._user_id or ''}/{client._session_id}"


def session_stopper(handle: Any) -> Optional[Callable[[str], int]]:
    """For a run on Connect: what interrupts, on the same server, the statements of a session
    recorded by session_of (a dead run's), returning how many it interrupted; None otherwise."""
    connection = connection_of(handle)
    if connection is None:
        return None
    return lambda recorded: interrupt_session(connection.target, recorded)


def interrupt_session(target: ConnectTarget, recorded: str, limit_s: float = 30.0) -> int:
    """Interrupt every statement of the session `recorded` ('<user id>/<session id>') on the
    server at `target` and release that session: a server runs a statement to its end after the
    client that sent it died (reattachable execution). Asked again until none is left running."""
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession

    user_id, _, session_id = recorded.partition("/")
    if not session_id:
        return 0
    url = target.url + ("/;" if ";" not in target.url else ";") + f"session_id={session_id}"
    if user_id and "user_id=" not in url:
        url += f";user_id={user_id}"
    interrupted, deadline = 0, time.monotonic() + limit_s
    try:
        spark = SparkSession.builder.remote(url).create()
    except Exception as exc:  # noqa: BLE001 - nothing of it left to stop
        logger.debug(f"Spark Connect session {session_id}: {exc}")
        return 0
    try:
        spark._client.set_retry_policies([DefaultPolicy(max_retries=3, max_backoff=1000)])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            while time.monotonic() < deadline:
                stopped = spark.interruptAll()
                if not stopped:
                    break
                interrupted += len(stopped)
                time.sleep(0.5)
    except Exception as exc:  # noqa: BLE001 - a session the server closed runs nothing
        logger.debug(f"Spark Connect session {session_id}: {exc}")
    finally:
        release_session(spark)
    return interrupted
