"""Apache Kafka on loopback for the test suite and the benchmark: a KRaft cluster of N nodes, each
broker and controller in one JVM, from the jars `make jars` resolves into .jars/kafka
(jars/kafka/pom.xml pins the version). Three nodes by default, replication factor 3 and
min.insync.replicas 2, as users run it.

    python -m tests.kafka_cluster run -- <command ...>

starts a cluster, runs the command with LOGSTORE_TEST_APACHE_KAFKA set to its bootstrap servers
(tests/conftest.py's `apache_kafka` fixture then shares it among the pytest-xdist workers),
and stops the cluster however the command ends, returning its exit code. Without the variable,
the fixture starts a cluster of its own per worker.

A node can be killed (SIGKILL) and restarted (`kill`, `restart`); a cluster can require
SASL/SCRAM with ACLs (StandardAuthorizer) and turn topic auto-creation off (`sasl_users`,
`config`). `jars` starts another Kafka version's broker: .jars/kafka-3.9 (jars/kafka-3.9/pom.xml)
for tests/functional/test_kafka_versions.py; its KRaft settings are the same (a static quorum,
controller.quorum.voters, and the same `kafka-storage format` arguments), and it logs through
reload4j (LOG4J1) where 4.x logs through log4j 2 (LOG4J2).
"""
from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional

ROOT = Path(__file__).resolve().parents[1]
JARS = ROOT / ".jars" / "kafka"
KAFKA_3_9_JARS = ROOT / ".jars" / "kafka-3.9"  # Apache Kafka 3.9.1 (jars/kafka-3.9/pom.xml)
ENV_VARIABLE = "LOGSTORE_TEST_APACHE_KAFKA"
ADMIN = ("admin", "admin-secret")  # the SCRAM super user of a cluster with sasl_users
# Small and quick to start: a test cluster holds few records, and its JVMs live minutes.
JVM_OPTIONS = ["-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Djava.awt.headless=true"]

LOG4J2 = """status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = org.apache.kafka
logger.kafka.level = WARN
"""
# The same for Kafka 3.x, whose slf4j logs through reload4j (log4j 1.x): to the file, not the console.
LOG4J1 = """log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.kafka=WARN
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def classpath(directory: Path = JARS) -> str:
    jars = sorted(Path(directory).glob("*.jar"))
    if not jars:
        raise RuntimeError(f"No Kafka jars in {directory}: run `make jars` (Maven resolves "
                           f"jars/{Path(directory).name}/pom.xml into it).")
    return os.pathsep.join(str(j) for j in jars)


@dataclass
class Node:
    id: int
    port: int
    controller_port: int
    directory: Path
    process: Optional[subprocess.Popen] = None

    @property
    def log(self) -> Path:
        return self.directory / "server.log"


@dataclass
class KafkaCluster:
    """`nodes` brokers that are also the KRaft controllers; `config` overrides server
    properties; `sasl_users` {name: password} makes the client listener SASL_PLAINTEXT with
    SCRAM-SHA-256 and turns ACLs on (StandardAuthorizer; ADMIN is a super user); `jars`: the
    directory of the broker's jars (another Kafka version: KAFKA_3_9_JARS)."""

    base_dir: Path
    nodes: int = 3
    config: Mapping[str, str] = field(default_factory=dict)
    sasl_users: Mapping[str, str] = field(default_factory=dict)
    jvm_options: List[str] = field(default_factory=lambda: list(JVM_OPTIONS))
    jars: Path = JARS
    cluster_id: str = field(default_factory=lambda: base64.urlsafe_b64encode(
        uuid.uuid4().bytes).decode().rstrip("="))

    def __post_init__(self) -> None:
        self.base_dir = Path(self.base_dir)
        self._nodes = [Node(i, free_port(), free_port(), self.base_dir / f"node-{i}")
                       for i in range(1, self.nodes + 1)]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self._nodes)

    @property
    def security(self) -> str:
        return "SASL_PLAINTEXT" if self.sasl_users else "PLAINTEXT"

    def client_properties(self, user: str = ADMIN[0], password: str = ADMIN[1]) -> Dict[str, str]:
        """Java-style client properties for a profile's kafka_properties."""
        if not self.sasl_users:
            return {}
        return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.plain.username": user, "sasl.plain.password": password}

    def admin_client_config(self, user: str = ADMIN[0], password: str = ADMIN[1]) -> Dict[str, str]:
        """kafka-python settings of a client of this cluster."""
        if not self.sasl_users:
            return {}
        return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
                "sasl_plain_username": user, "sasl_plain_password": password}

    def _properties(self, node: Node) -> Dict[str, str]:
        replicas = min(3, self.nodes)
        voters = ",".join(f"{n.id}@127.0.0.1:{n.controller_port}" for n in self._nodes)
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node.id),
            "controller.quorum.voters": voters,
            "listeners": f"{self.security}://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"{self.security}://127.0.0.1:{node.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": self.security,
            "listener.security.protocol.map": f"{self.security}:{self.security},CONTROLLER:PLAINTEXT",
            "log.dirs": str(node.directory / "data"),
            "default.replication.factor": str(replicas),
            "min.insync.replicas": str(min(2, self.nodes)),
            "offsets.topic.replication.factor": str(replicas),
            "offsets.topic.num.partitions": "3",
            "transaction.state.log.replication.factor": str(replicas),
            "transaction.state.log.min.isr": str(min(2, self.nodes)),
            "transaction.state.log.num.partitions": "3",
            "share.coordinator.state.topic.replication.factor": str(replicas),
            "share.coordinator.state.topic.min.isr": str(min(2, self.nodes)),
            "group.initial.rebalance.delay.ms": "0",
            "num.partitions": "1",
        }
        if self.sasl_users:
            user, password = ADMIN
            props.update({
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
                "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
                    "org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="{user}" password="{password}";',
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                # the controllers talk over the PLAINTEXT controller listener, unauthenticated
                "super.users": f"User:{user};User:ANONYMOUS",
            })
        props.update(self.config)
        return props

    def _java(self, main: str, *args: str) -> List[str]:
        return ["java", *self.jvm_options, "-cp", classpath(self.jars), main, *args]

    def start(self, timeout_seconds: float = 120.0) -> "KafkaCluster":
        for node in self._nodes:
            node.directory.mkdir(parents=True, exist_ok=True)
            config = node.directory / "server.properties"
            config.write_text("".join(f"{k}={v}\n" for k, v in self._properties(node).items()))
            (node.directory / "log4j2.properties").write_text(LOG4J2.format(log=node.log))
            (node.directory / "log4j.properties").write_text(LOG4J1.format(log=node.log))
            scram = []
            for name, password in {ADMIN[0]: ADMIN[1], **self.sasl_users}.items() if self.sasl_users else ():
                scram += ["--add-scram", f"SCRAM-SHA-256=[name={name},password={password}]"]
            # `--cluster-id=`: a random id may start with '-', which would read as an option
            subprocess.run(self._java("kafka.tools.StorageTool", "format", f"--cluster-id={self.cluster_id}",
                                      "-c", str(config), "--ignore-formatted", *scram),
                           check=True, capture_output=True, text=True, timeout=120)
        try:
            for node in self._nodes:
                self._launch(node)
            self.wait_until_ready(timeout_seconds)
        except BaseException:  # __exit__ is not called when __enter__ fails: no JVM left behind
            self.stop()
            raise
        return self

    def _launch(self, node: Node) -> None:
        out = open(node.directory / "stdout.log", "ab")
        node.process = subprocess.Popen(
            ["java", f"-Dlog4j2.configurationFile={node.directory / 'log4j2.properties'}",
             f"-Dlog4j.configuration=file:{node.directory / 'log4j.properties'}",
             *self.jvm_options, "-cp", classpath(self.jars), "kafka.Kafka",
             str(node.directory / "server.properties")],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        out.close()

    def wait_until_ready(self, timeout_seconds: float = 120.0, nodes: Optional[int] = None,
                         asking: Optional[int] = None) -> None:
        """Until `nodes` (all by default) brokers are registered, as node `asking` (by
        default any node) answers: a node just restarted is asked itself, since the others may
        still list it from before its kill."""
        from kafka import KafkaAdminClient

        want = self.nodes if nodes is None else nodes
        servers = self.bootstrap_servers if asking is None else f"127.0.0.1:{self.node(asking).port}"
        deadline = time.monotonic() + timeout_seconds
        last: object = None
        while time.monotonic() < deadline:
            for node in self._nodes:
                if node.process is not None and node.process.poll() is not None:
                    raise RuntimeError(f"Kafka node {node.id} exited ({node.process.returncode}); "
                                       f"see {node.log} and {node.directory / 'stdout.log'}")
            try:
                # short backoffs: a node starting refuses connections until it listens
                admin = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=5000,
                                         bootstrap_timeout_ms=3000, reconnect_backoff_max_ms=500,
                                         **self.admin_client_config())
                try:
                    brokers = admin.describe_cluster()["brokers"]
                    ids = {b.get("broker_id") for b in brokers if not b.get("is_fenced")}
                    if len(brokers) >= want and (asking is None or asking in ids):
                        return
                    last = f"{len(brokers)} of {want} brokers registered"
                finally:
                    admin.close()
            except Exception as exc:  # not up yet
                last = exc
            time.sleep(0.5)
        raise RuntimeError(f"Kafka cluster at {self.bootstrap_servers} not ready after "
                           f"{timeout_seconds:.0f} s: {last}")

    def node(self, node_id: int) -> Node:
        return self._nodes[node_id - 1]

    def running(self, node_id: int) -> bool:
        process = self.node(node_id).process
        return process is not None and process.poll() is None

    def kill(self, node_id: int) -> None:
        """SIGKILL: the node dies with whatever it had not flushed. Fails when the node was not
        running, or outlived the kill, or its port still answers (no fault would have happened)."""
        node = self.node(node_id)
        if not self.running(node_id):
            raise AssertionError(f"Kafka node {node_id} is not running: nothing to kill")
        os.killpg(node.process.pid, signal.SIGKILL)
        node.process.wait(timeout=30)
        if node.process.returncode != -signal.SIGKILL:
            raise AssertionError(f"Kafka node {node_id} ended ({node.process.returncode}), "
                                 f"not by the kill")
        with socket.socket() as probe:
            probe.settimeout(2)
            if probe.connect_ex(("127.0.0.1", node.port)) == 0:
                raise AssertionError(f"Kafka node {node_id} killed, but its port {node.port} "
                                     f"still answers")

    def restart(self, node_id: int, timeout_seconds: float = 120.0) -> None:
        """Start node `node_id` again (killing it first if it runs) and wait until it answers
        itself, with every broker registered."""
        if self.running(node_id):
            self.kill(node_id)
        self._launch(self.node(node_id))
        self.wait_until_ready(timeout_seconds, asking=node_id)

    def active_controller(self) -> int:
        """The id of the KRaft quorum's leader (the active controller), as the quorum says."""
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, request_timeout_ms=10000,
                                 **self.admin_client_config())
        try:
            quorum = admin.describe_metadata_quorum()
        finally:
            admin.close()
        return int(_leader_id(quorum))

    def stop(self) -> None:
        for node in self._nodes:
            if node.process is not None and node.process.poll() is None:
                os.killpg(node.process.pid, signal.SIGTERM)
        for node in self._nodes:
            if node.process is None:
                continue
            try:
                node.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(node.process.pid, signal.SIGKILL)
                node.process.wait(timeout=30)

    def __enter__(self) -> "KafkaCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _leader_id(quorum: object) -> object:
    """leader_id of describe_metadata_quorum's answer (a dict of the response, nested by
    topic and partition, or the partition itself)."""
    if isinstance(quorum, dict):
        if "leader_id" in quorum:
            return quorum["leader_id"]
        for value in quorum.values():
            found = _leader_id(value)
            if found is not None:
                return found
    if isinstance(quorum, (list, tuple)):
        for value in quorum:
            found = _leader_id(value)
            if found is not None:
                return found
    return None


def run(command: List[str], nodes: int = 3) -> int:
    """Run `command` with a cluster up (its servers in ENV_VARIABLE); stop it afterwards."""
    base = Path(tempfile.mkdtemp(prefix="logstore-kafka-"))
    try:
        started = time.monotonic()
        with KafkaCluster(base, nodes=nodes) as cluster:
            print(f"Apache Kafka: {nodes} nodes at {cluster.bootstrap_servers} "
                  f"(started in {time.monotonic() - started:.1f} s)", flush=True)
            return subprocess.call(command, env={**os.environ, ENV_VARIABLE: cluster.bootstrap_servers})
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv: List[str]) -> int:
    if len(argv) < 2 or argv[0] != "run" or "--" not in argv:
        print("usage: python -m tests.kafka_cluster run -- COMMAND [ARGS ...]", file=sys.stderr)
        return 2
    return run(argv[argv.index("--") + 1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
