"""The Spark Connect method (profile `method: connect`, `host: sc://host:port`): dbt's
statements, the mirror's reads and the Python tasks go to a Spark Connect server over gRPC.

The session is pyspark's Connect session (`SparkSession.builder.remote(url)`), one per server
URL and process, shared by dbt's threads as the session method shares its local session. dbt-spark's
session cursor and connection wrapper (dbt/adapters/spark/session.py) carry it: the wrapper
is dbt-spark's own, the cursor runs its statements on this session instead of building a local
one. There is no JVM in the dbt process: no local settings (Hive support, warehouse, driver
options: the server has its own), no engine log; the profile's `server_side_parameters` are
the session's runtime settings, and one the server cannot set for a session (a static one)
is an error naming it.

The URL's token never leaves this module in text: what is shown (dbt debug, errors) is the
URL with `token=***` (`ConnectTarget.shown`)."""
from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
import urllib.parse
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, Optional

from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.session import Connection, Cursor
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore.credentials import masked_host as _mask

logger = AdapterLogger("Spark")
# gRPC's own log lines (a failed TLS handshake's, ...) stay off the console: the error says it
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

METHOD = "connect"
DEFAULT_PORT = 15002
USE_SSL = "use_ssl"
TOKEN = "token"
EXAMPLE = "sc://localhost:15002"


class ConnectUnreachable(DbtRuntimeError):
    """No Spark Connect server answered at the profile's URL, or it refused the session."""


class ConnectSettingRefused(DbtRuntimeError):
    """The server refused one of the profile's server_side_parameters for a session."""


@dataclass(frozen=True)
class ConnectTarget:
    url: str  # what the client connects with, token included
    shown: str  # the same with the token masked: for messages

    @property
    def address(self) -> str:
        """sc://host:port, no parameters."""
        return self.shown.split(";", 1)[0].rstrip("/")


def connect_target(host: Any, token: Optional[str] = None, use_ssl: bool = False) -> ConnectTarget:
    """The URL the client connects with, from the profile's `host` (sc://host[:port] with
    optional ;name=value parameters) and its `token` and `use_ssl` fields. ValueError saying
    what is wrong (the token masked) and what is allowed."""
    text = "" if host is None else str(host).strip()
    shown = repr(_mask(text))
    allowed = (f"give a Spark Connect URL, sc://host:port (e.g. {EXAMPLE}; the port is "
               f"{DEFAULT_PORT} when left out), with ;token=...;use_ssl=true when the server "
               f"needs them")
    if not text.startswith("sc://"):
        raise ValueError(f"{shown} is not a Spark Connect URL: {allowed}")
    parsed = urllib.parse.urlparse("http" + text[2:])
    if parsed.path not in ("", "/"):
        raise ValueError(f"{shown} has a path ({parsed.path!r}), which a Spark Connect URL "
                         f"does not: {allowed}")
    try:
        port = parsed.port
    except ValueError:
        raise ValueError(f"{shown} has no valid port: {allowed}") from None
    if not parsed.hostname:
        raise ValueError(f"{shown} names no host: {allowed}")
    params: Dict[str, str] = {}
    for part in filter(None, parsed.params.split(";")):
        name, eq, value = part.partition("=")
        if not eq or not name or "=" in value:
            raise ValueError(f"{shown} has a parameter that is not name=value "
                             f"({_mask(';' + part)[1:]!r}): {allowed}")
        params[name] = value
    if USE_SSL in params and params[USE_SSL].lower() not in ("true", "false"):
        raise ValueError(f"{shown} has use_ssl={params[USE_SSL]!r}: give use_ssl=true or "
                         f"use_ssl=false")
    if token:
        if TOKEN in params and urllib.parse.unquote(params[TOKEN]) != str(token):
            raise ValueError(f"{shown} has a token, and the profile's token field another: "
                             f"give the token once, in either")
        params[TOKEN] = urllib.parse.quote(str(token), safe="")
    if use_ssl:
        if params.get(USE_SSL, "true").lower() != "true":
            raise ValueError(f"{shown} has use_ssl=false, and the profile's use_ssl field is "
                             f"true: give one of them")
        params[USE_SSL] = "true"
    base = f"sc://{parsed.netloc}" + ("" if port is not None else f":{DEFAULT_PORT}")
    url = base + ("/;" + ";".join(f"{k}={v}" for k, v in params.items()) if params else "")
    return ConnectTarget(url=url, shown=_mask(url))


def missing_client() -> Optional[str]:
    """What of Spark Connect's Python client is not installed (None: all of it)."""
    try:
        from pyspark.sql.connect.utils import check_dependencies

        check_dependencies("pyspark.sql.connect.session")
    except ImportError as exc:
        return str(exc).splitlines()[0]
    return None


# A server that stops answering in a run is asked again for about half a minute (backoffs of
# 50, 200, 800, 3200, then 10000 ms three times), not the client's own ten minutes.
RUN_RETRIES, RUN_MAX_BACKOFF_MS = 7, 10000


@contextlib.contextmanager
def answering(spark: Any, target: Optional["ConnectTarget"]) -> Iterator[None]:
    """A server that stopped answering (past the run's retries) said in one sentence; then what
    the failed run still asks (its clean-up, its lock's release: the next run settles them)
    fails at once."""
    try:
        yield
    except Exception as exc:
        if target is None or not _is_unavailable(exc):
            raise
        from pyspark.sql.connect.client.retries import DefaultPolicy

        spark._client.set_retry_policies([DefaultPolicy(max_retries=0)])
        raise DbtRuntimeError(
            f"the Spark Connect server at {target.address} stopped answering "
            f"({_unavailable_reason(_reason(exc))}); the run stopped there, and the model's next "
            f"run settles what it left.") from None


def connection_of(handle: Any) -> Optional["ConnectConnection"]:
    """The Connect connection behind a dbt connection handle, None for other methods."""
    inner = getattr(handle, "handle", None)
    return inner if isinstance(inner, ConnectConnection) else None


def answering_for(handle: Any) -> Any:
    """`answering` for the Connect session behind a dbt connection handle (else nothing)."""
    connection = connection_of(handle)
    return contextlib.nullcontext() if connection is None else answering(connection.spark, connection.target)


class ConnectCursor(Cursor):
    """dbt-spark's session cursor on a Spark Connect session (its execute builds a local
    SparkSession with Hive support; this one runs the statement on the session it is given)."""

    def __init__(self, spark: Any, target: Optional["ConnectTarget"] = None) -> None:
        super().__init__()
        self.spark = spark
        self.target = target

    def execute(self, sql: str, *parameters: Any) -> None:
        from pyspark.errors import AnalysisException

        if len(parameters) > 0:
            sql = sql % parameters
        try:
            with answering(self.spark, self.target):
                self._df = self.spark.sql(sql)
        except AnalysisException as exc:  # as dbt-spark's cursor reports it
            raise DbtRuntimeError(str(exc)) from exc

    def fetchall(self) -> Any:
        with answering(self.spark, self.target):
            return super().fetchall()

    def fetchone(self) -> Any:
        with answering(self.spark, self.target):
            return super().fetchone()


class ConnectConnection(Connection):
    """dbt-spark's session connection whose cursors run on `spark`, a Connect session
    (row_source.active_spark finds it here)."""

    def __init__(self, spark: Any, target: ConnectTarget) -> None:
        super().__init__()
        self.spark = spark
        self.target = target

    def cursor(self) -> Cursor:
        return ConnectCursor(self.spark, self.target)


_sessions: Dict[str, Any] = {}
_lock = threading.Lock()


def _is_unavailable(exc: BaseException) -> bool:
    code = getattr(exc, "getGrpcStatusCode", lambda: None)()
    name = getattr(code, "name", None)
    if name is not None and name != "UNKNOWN":
        return name in ("UNAVAILABLE", "DEADLINE_EXCEEDED")
    return "StatusCode.UNAVAILABLE" in str(exc) or "failed to connect" in str(exc)


def _reason(exc: BaseException) -> str:
    """The server's or gRPC's one-line reason."""
    text = str(exc)
    for marker in ("details = \"", "details=\""):
        if marker in text:
            return text.split(marker, 1)[1].split("\"", 1)[0]
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def _unavailable_reason(details: str) -> str:
    """gRPC's reason for reaching no server, in a few words."""
    if "handshake" in details.lower() or "SSL_ERROR" in details:
        return ("its TLS handshake failed: with a token or use_ssl=true the client speaks TLS, "
                "except to localhost without use_ssl")
    words = [w for w in details.split(": ") if w.strip() and w.strip() != "OK"]
    return words[-1] if words else details  # "Connection refused", "DNS resolution failed", ...


def _probe(spark: Any, target: ConnectTarget, retries: int, wait: float) -> None:
    """One question to the server (its Spark version), without the client's own retries (ten
    minutes of them by default): `retries` more tries `wait` seconds apart, as dbt-spark's
    connect_retries and connect_timeout; then the client's retries again for the run."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    client = spark._client
    policies = client.get_retry_policies()
    client.set_retry_policies([DefaultPolicy(max_retries=0)])
    last: BaseException = RuntimeError("no answer")
    try:
        for attempt in range(1 + max(0, retries)):
            try:
                with warnings.catch_warnings():  # the client's RETRIES_EXCEEDED UserWarning
                    warnings.simplefilter("ignore")
                    version = spark.version
                logger.debug(f"Spark Connect server at {target.shown}: Spark {version}")
                return
            except Exception as exc:
                last = exc
                logger.debug(f"Spark Connect server at {target.shown}: {exc}")
                if not _is_unavailable(exc):
                    reason = _reason(exc)
                    hint = (" (the profile's token field, or ;token=... in its host)"
                            if "token" in reason.lower() else "")
                    raise ConnectUnreachable(
                        f"The Spark Connect server at {target.address} refused the session: "
                        f"{reason}{hint}.") from None
                if attempt < retries:
                    logger.warning(f"no Spark Connect server answered at {target.address}; "
                                   f"trying again in {wait:g} seconds ({attempt + 1} of {retries})")
                    time.sleep(wait)
        why = _unavailable_reason(_reason(last))
        raise ConnectUnreachable(
            f"no Spark Connect server answered at {target.address} ({why}): start the "
            f"server (Spark's sbin/start-connect-server.sh), or give the profile's host the "
            f"URL it listens at.") from None
    finally:
        client.set_retry_policies(policies)


def _apply_settings(spark: Any, settings: Dict[str, str], where: str = "the profile") -> None:
    """The profile's server_side_parameters as the session's settings, one at a time, so that a
    refused one is named. What the server warns about goes to dbt's debug log."""
    for key, value in settings.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                spark.conf.set(key, value)
            except Exception as exc:
                reason = _reason(exc)
                if "CANNOT_MODIFY" in reason or "Cannot modify" in reason:
                    raise ConnectSettingRefused(
                        f"Field server_side_parameters of {where}: {key} is a setting a "
                        f"Spark Connect session cannot change ({reason.split('SQLSTATE')[0].strip()}): "
                        f"set it where the server starts (spark-submit --conf, "
                        f"spark-defaults.conf), and leave it out of the profile.") from None
                raise
        for warning in caught:
            logger.debug(f"Spark Connect: setting {key}: {warning.message}")


def session_for(target: ConnectTarget, settings: Dict[str, str], retries: int = 0,
                wait: float = 10.0, where: str = "the profile") -> Any:
    """This process's Connect session at `target` (made, checked and configured the first
    time: ConnectUnreachable when no server answers, ConnectSettingRefused for a setting the
    session cannot take)."""
    from pyspark.sql.connect.session import SparkSession

    with _lock:
        spark = _sessions.get(target.url)
        if spark is not None and not spark.is_stopped:
            return spark
        # create(), not getOrCreate(): that would hand back a session of another URL
        spark = SparkSession.builder.remote(target.url).create()
        try:
            _probe(spark, target, retries, wait)
            _apply_settings(spark, settings, where)
        except BaseException:
            release_session(spark)
            raise
        from pyspark.sql.connect.client.retries import DefaultPolicy

        spark._client.set_retry_policies([DefaultPolicy(max_retries=RUN_RETRIES,
                                                        max_backoff=RUN_MAX_BACKOFF_MS)])
        # the client warns on the console when it gives up; the run's error says it instead
        warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")
        _sessions[target.url] = spark
        # Released as the process ends, before the client's own exit hook (atexit runs the
        # last registered first), which asks the server to clean its ML cache with ten
        # minutes of retries when the server has gone; a released client asks nothing.
        atexit.register(_release_at_exit, target.url, spark)
        return spark


def release_session(spark: Any) -> None:
    """Release the session on the server, quietly and without the client's retries (the
    server may be gone)."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    try:
        spark._client.set_retry_policies([DefaultPolicy(max_retries=0)])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spark.stop()
    except Exception:
        pass


def _release_at_exit(url: str, spark: Any) -> None:
    with _lock:
        if _sessions.get(url) is spark:
            del _sessions[url]
    release_session(spark)


def open_handle(creds: Any, where: str = "the profile") -> Any:
    """dbt-spark's session connection wrapper on this process's Connect session for `creds`
    (`where`: the profile, as its errors name it)."""
    from dbt.adapters.spark.session import SessionConnectionWrapper

    target = connect_target(creds.host, creds.token, creds.use_ssl)
    spark = session_for(target, dict(creds.server_side_parameters),
                        retries=creds.connect_retries, wait=creds.connect_timeout, where=where)
    return SessionConnectionWrapper(ConnectConnection(spark, target))
