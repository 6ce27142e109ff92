"""A Kafka Connect worker for the tests: Apache Kafka Connect (the jars `make jars` resolves into
.jars/connect, jars/connect/pom.xml, the same Kafka version as the brokers) in standalone mode,
one JVM on a free loopback port, its plugin.path .jars/connect-plugins (Debezium's JDBC sink:
jars/connect-plugins/debezium-jdbc/pom.xml).

Standalone: no internal topics, the (source) offsets in a file, connectors registered through
the REST API. A sink connector's consumer group (`connect-<name>`) commits its offsets to the
Kafka cluster every second: the offset after the last record it wrote, which stops short of the
end offset when transaction markers follow (wait_for_sink knows). The worker's consumers read with isolation.level=read_committed, as
any consumer of a transactional log must (aborted attempts never reach the sink).

    with KafkaConnectWorker(bootstrap_servers) as connect:
        connect.create_connector("sink", {...})     # PUT /connectors/sink/config, then RUNNING
        connect.wait_for_sink("sink", [topic])      # it has committed every readable record
        connect.wait_until(lambda: ..., "sink")     # a condition, failing fast if a task FAILED

or, from a test, the `kafka_connect` fixture (tests/functional/conftest.py): a worker for the
test module, on its `kafka_bootstrap_servers`.

Everything the worker writes (worker.properties, log4j2.properties, connect.log, stdout.log) is
in a temporary directory. Every failure (the worker exits, the REST API does not answer, a
connector's config is refused, a task FAILED, a wait times out) raises ConnectError with the
connector's status (its task's stack trace) and the tail of connect.log; the directory is then
kept, and its path printed, when the worker stops.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional

from tests import kafka_cluster
from tests.kafka_cluster import free_port

ROOT = Path(__file__).resolve().parents[1]
JARS = ROOT / ".jars" / "connect"
PLUGIN_PATH = ROOT / ".jars" / "connect-plugins"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
# A worker holds few records; Debezium's JDBC sink loads Hibernate, hence more heap than a broker.
JVM_OPTIONS = ["-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Djava.awt.headless=true"]

# the brokers' logging (tests/kafka_cluster.py), with the worker's own loggers
LOG4J2 = kafka_cluster.LOG4J2 + """logger.connect.name = org.apache.kafka.connect
logger.connect.level = INFO
logger.connectconfig.name = org.apache.kafka.connect.runtime.ConnectorConfig
logger.connectconfig.level = WARN
logger.hibernate.name = org.hibernate
logger.hibernate.level = WARN
logger.c3p0.name = com.mchange
logger.c3p0.level = WARN
logger.jetty.name = org.eclipse.jetty
logger.jetty.level = WARN
logger.jersey.name = org.glassfish
logger.jersey.level = WARN
logger.rest.name = org.apache.kafka.connect.runtime.rest.RestServer
logger.rest.level = WARN
"""


class ConnectError(RuntimeError):
    """The worker or a connector failed; the message holds what the worker said."""


def classpath() -> str:
    jars = sorted(JARS.glob("*.jar"))
    if not jars:
        raise RuntimeError(f"No Kafka Connect jars in {JARS}: run `make jars` (Maven resolves "
                           f"jars/connect/pom.xml into it).")
    return os.pathsep.join(str(j) for j in jars)


def _group_offsets(admin: Any, group: str) -> Dict[Any, Any]:
    """{TopicPartition: OffsetAndMetadata} a consumer group has committed (kafka-python 3's
    list_group_offsets, or 2's list_consumer_group_offsets)."""
    if hasattr(admin, "list_group_offsets"):
        return admin.list_group_offsets({group: None}).get(group, {})
    return admin.list_consumer_group_offsets(group)


class KafkaConnectWorker:
    """A standalone Connect worker on `bootstrap_servers`. `config` overrides or adds worker
    properties (e.g. `consumer.security.protocol` for a SASL cluster)."""

    def __init__(self, bootstrap_servers: str, base_dir: Optional[Path] = None,
                 port: Optional[int] = None, config: Optional[Mapping[str, str]] = None,
                 jvm_options: Optional[List[str]] = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self._own_dir = base_dir is None
        self.base_dir = Path(base_dir) if base_dir is not None else Path(
            tempfile.mkdtemp(prefix="logstore-connect-"))
        self.port = port or free_port()
        self.config = dict(config or {})
        self.jvm_options = list(jvm_options or JVM_OPTIONS)
        self.process: Optional[subprocess.Popen] = None
        self.failed = False  # something went wrong: keep base_dir
        self.connectors: List[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.base_dir / "connect.log"

    def worker_properties(self) -> Dict[str, str]:
        props = {
            "bootstrap.servers": self.bootstrap_servers,
            "listeners": self.url,
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(self.port),
            "plugin.path": str(PLUGIN_PATH),
            # Plugins found through their ServiceLoader manifests (every plugin here has them):
            # no reflective scan of the plugin's ~30 jars and the worker's class path at start.
            "plugin.discovery": "service_load",
            "key.converter": JSON_CONVERTER,
            "value.converter": JSON_CONVERTER,
            "key.converter.schemas.enable": "true",
            "value.converter.schemas.enable": "true",
            "offset.storage.file.filename": str(self.base_dir / "connect.offsets"),
            "offset.flush.interval.ms": "1000",  # sink offsets committed every second
            "consumer.isolation.level": "read_committed",
            "task.shutdown.graceful.timeout.ms": "5000",
        }
        props.update(self.config)
        return props

    # -- life -------------------------------------------------------------------------------
    def start(self, timeout_seconds: float = 120.0) -> "KafkaConnectWorker":
        self.base_dir.mkdir(parents=True, exist_ok=True)
        properties = self.base_dir / "worker.properties"
        properties.write_text("".join(f"{k}={v}\n" for k, v in self.worker_properties().items()))
        log4j = self.base_dir / "log4j2.properties"
        log4j.write_text(LOG4J2.format(log=self.log))
        out = open(self.base_dir / "stdout.log", "ab")
        try:
            self.process = subprocess.Popen(
                ["java", f"-Dlog4j2.configurationFile={log4j}", *self.jvm_options,
                 "-cp", classpath(), "org.apache.kafka.connect.cli.ConnectStandalone",
                 str(properties)],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            out.close()
        self._wait_until_ready(timeout_seconds)
        return self

    def _wait_until_ready(self, timeout_seconds: float) -> None:
        """Until the REST API answers and lists Debezium's JDBC sink among the plugins."""
        deadline = time.monotonic() + timeout_seconds
        last: object = None
        while time.monotonic() < deadline:
            self._check_alive("at start")
            try:
                plugins = self.request("GET", "/connector-plugins", quiet=True)
                names = {p["class"] for p in plugins}
                if not any("JdbcSinkConnector" in n for n in names):
                    self._fail(f"The Connect worker started without Debezium's JDBC sink in "
                               f"plugin.path {PLUGIN_PATH} (run `make jars`); its plugins: "
                               f"{sorted(names)}")
                return
            except (urllib.error.URLError, ConnectionError, OSError) as exc:  # not up yet
                last = exc
            time.sleep(0.5)
        self._fail(f"Kafka Connect REST API at {self.url} not ready after "
                   f"{timeout_seconds:.0f} s: {last}")

    def _check_alive(self, when: str) -> None:
        if self.process is not None and self.process.poll() is not None:
            self._fail(f"The Kafka Connect worker exited ({self.process.returncode}) {when}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        if self.failed:
            print(f"Kafka Connect worker's files kept in {self.base_dir}", file=sys.stderr)
        elif self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> "KafkaConnectWorker":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is not None:
            self.failed = True
        self.stop()

    # -- diagnostics --------------------------------------------------------------------------
    def log_tail(self, lines: int = 60) -> str:
        parts = []
        for path in (self.log, self.base_dir / "stdout.log"):
            try:
                text = path.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            if text:
                parts.append(f"--- last {len(text)} lines of {path} ---\n" + "\n".join(text))
        return "\n".join(parts) or "(the worker logged nothing)"

    def diagnostics(self, name: Optional[str] = None) -> str:
        """The connector's status (every task's trace) and the tail of the worker's log."""
        text = []
        for connector in ([name] if name else self.connectors):
            try:
                text.append(f"status of {connector}: "
                            f"{json.dumps(self.status(connector), indent=2)}")
            except Exception as exc:  # the worker may be gone
                text.append(f"status of {connector}: unavailable ({exc})")
        text.append(self.log_tail())
        return "\n".join(text)

    def _fail(self, message: str, name: Optional[str] = None) -> None:
        self.failed = True
        raise ConnectError(f"{message}\n{self.diagnostics(name)}")

    # -- REST -------------------------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None, quiet: bool = False) -> Any:
        """One REST call; its JSON answer (None if empty). An HTTP error raises ConnectError
        with the worker's message (or, `quiet`, urllib's HTTPError)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json",
                                              "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
            if quiet:
                raise
            detail = exc.read().decode(errors="replace")
            self._fail(f"Kafka Connect {method} {path}: HTTP {exc.code}: {detail}")
        return json.loads(text) if text.strip() else None

    def put_connector(self, name: str, config: Mapping[str, Any]) -> Dict[str, Any]:
        """Create or reconfigure `name` (PUT /connectors/<name>/config); values become strings."""
        if name not in self.connectors:
            self.connectors.append(name)
        return self.request("PUT", f"/connectors/{name}/config",
                            {k: str(v).lower() if isinstance(v, bool) else str(v)
                             for k, v in config.items()})

    def status(self, name: str) -> Dict[str, Any]:
        return self.request("GET", f"/connectors/{name}/status", quiet=True)

    def delete_connector(self, name: str) -> None:
        self.request("DELETE", f"/connectors/{name}")
        if name in self.connectors:
            self.connectors.remove(name)

    def check_running(self, name: str) -> bool:
        """True when the connector and all its tasks (at least one) are RUNNING, False while
        they start; ConnectError when the connector or a task FAILED (with its trace)."""
        try:
            status = self.status(name)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:  # not created yet
                return False
            raise
        states = [status["connector"]] + status.get("tasks", [])
        failed = [s for s in states if s.get("state") == "FAILED"]
        if failed:
            traces = "\n".join(f"{'task ' + str(s['id']) if 'id' in s else 'connector'} FAILED "
                               f"on {s.get('worker_id')}:\n{s.get('trace', '(no trace)')}"
                               for s in failed)
            self._fail(f"Connector {name} failed:\n{traces}", name)
        return bool(status.get("tasks")) and all(s.get("state") == "RUNNING" for s in states)

    def create_connector(self, name: str, config: Mapping[str, Any],
                         timeout_seconds: float = 60.0) -> Dict[str, Any]:
        """PUT the config, then wait until the connector and its tasks are RUNNING."""
        created = self.put_connector(name, config)
        self.wait_until(lambda: self.check_running(name), name, timeout_seconds,
                        f"connector {name} RUNNING")
        return created

    # -- waiting ------------------------------------------------------------------------------
    def wait_until(self, condition: Callable[[], Any], name: Optional[str] = None,
                   timeout_seconds: float = 60.0, what: str = "the condition",
                   interval: float = 0.25, progress: Optional[Callable[[], Any]] = None) -> Any:
        """Poll `condition` until it returns a true value (returned). Between polls, the worker
        must be alive and, with `name`, the connector's tasks not FAILED. On a timeout the
        message says `progress()` (or the condition's last value)."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            self._check_alive(f"while waiting for {what}")
            if name is not None:
                self.check_running(name)
            last = condition()
            if last:
                return last
            if time.monotonic() >= deadline:
                self._fail(f"Timed out after {timeout_seconds:.0f} s waiting for {what} "
                           f"(last: {progress() if progress else last!r})", name)
            time.sleep(interval)

    def readable_ends(self, topics: Iterable[str], client_config: Optional[Mapping[str, Any]] = None
                      ) -> Dict[Any, int]:
        """{TopicPartition: the offset after its last record a read_committed consumer gets}
        of every partition of `topics` (records of open transactions excluded), 0 where there
        is none. A sink's consumer group commits the offset after the last record it processed,
        so that is where a caught-up sink's committed offset stands: the end offset itself lies
        further when transaction markers (or aborted records) follow the last record."""
        from kafka import KafkaConsumer, TopicPartition

        config = dict(client_config or {})
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap_servers,
                                 isolation_level="read_committed", enable_auto_commit=False, **config)
        uncommitted = KafkaConsumer(bootstrap_servers=self.bootstrap_servers,
                                    enable_auto_commit=False, **config)
        try:
            partitions = [TopicPartition(t, p) for t in topics
                          for p in sorted(consumer.partitions_for_topic(t) or ())]
            consumer.assign(partitions)
            # A committed transaction's markers are written after its commit returned: until
            # they are, its records are past the last stable offset. Wait (up to 30 s) for
            # every partition's last stable offset to reach its high watermark.
            deadline = time.monotonic() + 30
            while True:
                ends = consumer.end_offsets(partitions)  # read_committed: last stable offsets
                if ends == uncommitted.end_offsets(partitions) or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            starts = consumer.beginning_offsets(partitions)
            last = {tp: -1 for tp in partitions}
            window = 10_000
            while True:
                todo = [tp for tp in partitions if last[tp] < 0 and ends[tp] > starts[tp]]
                if not todo:
                    break
                for tp in todo:  # the tail first; the whole partition if its tail has no record
                    consumer.seek(tp, max(starts[tp], ends[tp] - window))
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and any(consumer.position(tp) < ends[tp] for tp in todo):
                    for tp, messages in consumer.poll(timeout_ms=500).items():
                        for m in messages:
                            if m.offset < ends[tp]:
                                last[tp] = max(last[tp], m.offset)
                if window >= max(ends[tp] - starts[tp] for tp in todo):
                    break
                window = max(ends[tp] - starts[tp] for tp in todo)
            return {tp: last[tp] + 1 for tp in partitions}
        finally:
            consumer.close()
            uncommitted.close()

    def sink_lag(self, name: str, targets: Mapping[Any, int],
                 client_config: Optional[Mapping[str, Any]] = None) -> Dict[str, int]:
        """{"topic-partition": how far the committed offset of the sink `name` (its consumer
        group `connect-<name>`) is short of `targets` ({TopicPartition: offset})}, for the
        partitions where it is short."""
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, **dict(client_config or {}))
        try:
            committed = _group_offsets(admin, f"connect-{name}")
        finally:
            admin.close()
        lag = {}
        for tp, target in targets.items():
            done = committed.get(tp)
            position = done.offset if done is not None and done.offset >= 0 else 0
            if target > position:
                lag[f"{tp.topic}-{tp.partition}"] = target - position
        return lag

    def wait_for_sink(self, name: str, topics: Iterable[str], timeout_seconds: float = 60.0,
                      client_config: Optional[Mapping[str, Any]] = None) -> None:
        """Until the sink `name` has committed every record of `topics` a read_committed
        consumer reads now (readable_ends); its tasks must not fail meanwhile. A sink commits
        offsets after its put() returned, so the records before them are written. Call it once
        the records are produced (and their transactions committed)."""
        targets = self.readable_ends(list(topics), client_config)
        lag: Dict[str, int] = {}

        def caught_up() -> bool:
            lag.clear()
            lag.update(self.sink_lag(name, targets, client_config))
            return not lag

        self.wait_until(caught_up, name, timeout_seconds,
                        f"sink {name} to commit {len(targets)} partitions of {list(topics)}",
                        interval=0.5, progress=lambda: f"records not committed per partition: {lag}")
