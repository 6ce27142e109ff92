"""Errors at the Kafka boundary: one line naming the model, the cause in plain words and the
setting to check, raised before the table changes; kafka-python's own lines stay out of the
console; the password appears nowhere (console, dbt's log file, target/ artifacts)."""
import shutil
import socket
import ssl
import subprocess
import threading
from pathlib import Path

import pytest

from dbt.adapters.logstore.cli.broker import free_port, tansu_binary
from tests.functional.contract import spark
from tests.functional.dbt_helpers import failure_text

SECRET = "S3cr3t-never-printed"
MODEL = {"t.sql": "{{ config(materialized='table', log_system='kafka') }} select 1 as id"}


def _everything_written(root: Path) -> str:
    """dbt's log file and artifacts: where a leaked secret would land."""
    texts = []
    for folder in ("logs", "target"):
        for path in (Path(root) / folder).rglob("*"):
            if path.is_file() and path.suffix in (".log", ".json", ".txt", ".sql"):
                texts.append(path.read_text(errors="replace"))
    return "\n".join(texts)


@pytest.fixture(scope="module")
def authenticating_broker(tmp_path_factory):
    """tansu requiring client authentication (SASL), with no user: every login is refused."""
    port = free_port()
    process = subprocess.Popen(
        [str(tansu_binary()), "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
         "--advertised-listener-url", f"tcp://127.0.0.1:{port}", "--storage-engine",
         "memory://tansu/", "--authentication"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        process.kill()
        process.wait()


class TestAuthenticationFailure:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, dbt_profile_target, authenticating_broker):
        return {**dbt_profile_target, "kafka_bootstrap_servers": authenticating_broker,
                "kafka_properties": {"security.protocol": "SASL_PLAINTEXT",
                                     "sasl.mechanism": "SCRAM-SHA-256",
                                     "sasl.plain.username": "dbt", "sasl.plain.password": SECRET}}

    @pytest.fixture(scope="class")
    def models(self):
        return MODEL

    def test_bad_credentials(self, project):
        out = failure_text(["run"])
        assert "Model 't'" in out and "authentication failed" in out, out[-2000:]
        assert "sasl.plain.password" in out and "Nothing was changed" in out
        assert "ERROR:kafka" not in out and "WARNING:kafka" not in out
        assert SECRET not in out and SECRET not in _everything_written(project.project_root)
        assert not spark().catalog.tableExists(f"{project.test_schema}.t")


@pytest.fixture(scope="module")
def tls_listener(tmp_path_factory):
    """A TLS listener whose certificate no default CA signed (self-signed, for another name):
    the client's handshake fails on verification, as against a broker with a private CA."""
    folder = tmp_path_factory.mktemp("tls")
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run([shutil.which("openssl") or "openssl", "req", "-x509", "-newkey", "rsa:2048",
                    "-nodes", "-subj", "/CN=kafka.example", "-keyout", str(key), "-out", str(cert),
                    "-days", "2"], check=True, capture_output=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert), str(key))
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    stop = threading.Event()

    def handshake(conn: socket.socket) -> None:
        # a connection the client opened and left idle must not hold up the others (a kafka-python
        # client's bootstrap then waited forever on one queued behind it: CI hung 18 minutes)
        conn.settimeout(5)
        try:
            context.wrap_socket(conn, server_side=True).close()
        except (ssl.SSLError, OSError):
            conn.close()

    def serve():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            threading.Thread(target=handshake, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}", cert
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()


class TestUntrustedCertificate:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, dbt_profile_target, tls_listener):
        servers, _ = tls_listener
        return {**dbt_profile_target, "kafka_bootstrap_servers": servers,
                "kafka_properties": {"security.protocol": "SSL"}}

    @pytest.fixture(scope="class")
    def models(self):
        return MODEL

    def test_unknown_ca(self, project):
        out = failure_text(["run"])
        assert "Model 't'" in out and "certificate could not be verified" in out, out[-2000:]
        assert "ssl.cafile" in out and "Nothing was changed" in out
        assert "ERROR:kafka" not in out
        assert not spark().catalog.tableExists(f"{project.test_schema}.t")


class TestCertificateForAnotherName:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, dbt_profile_target, tls_listener):
        servers, cert = tls_listener  # the CA is known, but the certificate names kafka.example
        return {**dbt_profile_target, "kafka_bootstrap_servers": servers,
                "kafka_properties": {"security.protocol": "SSL", "ssl.cafile": str(cert)}}

    @pytest.fixture(scope="class")
    def models(self):
        return MODEL

    def test_hostname_mismatch(self, project):
        out = failure_text(["run"])
        assert "Model 't'" in out and "does not match the server" in out, out[-2000:]
        assert "ssl.check.hostname" in out


@pytest.fixture(scope="module")
def silent_listener():
    """A port that accepts connections and never says a word (a proxy or load balancer with
    nothing behind it): a TLS client's handshake waits for an answer that never comes."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in held:
            conn.close()
        server.close()


class TestTlsListenerThatNeverAnswers:
    """kafka-python 3.0.12 alone waits for such a handshake without end (retrying.start_client)."""

    @pytest.fixture(scope="class")
    def dbt_profile_target(self, dbt_profile_target, silent_listener):
        return {**dbt_profile_target, "kafka_bootstrap_servers": silent_listener,
                "kafka_properties": {"security.protocol": "SSL", "bootstrap.timeout.ms": "2000",
                                     "request.timeout.ms": "2000"}}

    @pytest.fixture(scope="class")
    def models(self):
        return MODEL

    def test_the_run_fails_within_the_window_saying_so(self, project):
        outcome = {}
        run = threading.Thread(target=lambda: outcome.update(out=failure_text(["run"])), daemon=True)
        run.start()
        run.join(timeout=180)  # two tries of a 4 s window, and dbt's own time
        assert "out" in outcome, "dbt run still waiting for the TLS handshake after 180 s"
        out = outcome["out"]
        assert "Model 't'" in out and "TLS handshake with the broker did not complete" in out, out[-2000:]
        assert "security.protocol" in out and "Nothing was changed" in out
        assert "ERROR:kafka" not in out
        assert not spark().catalog.tableExists(f"{project.test_schema}.t")
