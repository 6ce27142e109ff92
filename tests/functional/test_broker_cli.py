"""The `dbt-logstore broker` command against the real embedded broker."""
import subprocess
import sys

from kafka import KafkaAdminClient

from dbt.adapters.logstore.cli.broker import free_port, port_open


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "dbt.adapters.logstore.cli.commands", *args],
                          capture_output=True, text=True, timeout=60)


def test_start_status_stop(tmp_path):
    port = str(free_port())
    common = ["--port", port, "--state-dir", str(tmp_path)]
    assert _cli("broker", "status", *common).returncode == 1

    started = _cli("broker", "start", *common)
    assert started.returncode == 0, started.stderr
    try:
        pid = int((tmp_path / f"broker-{port}.pid").read_text())
        assert f"pid {pid}" in started.stdout
        assert _cli("broker", "start", *common).returncode == 0  # idempotent: same broker
        assert int((tmp_path / f"broker-{port}.pid").read_text()) == pid
        status = _cli("broker", "status", *common)
        assert status.returncode == 0 and "running" in status.stdout
        # it speaks the Kafka protocol
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
        assert isinstance(admin.list_topics(), list)
        admin.close()
    finally:
        stopped = _cli("broker", "stop", *common)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert not port_open("127.0.0.1", int(port))
    assert not (tmp_path / f"broker-{port}.pid").exists()
    assert "not running" in _cli("broker", "status", *common).stdout
