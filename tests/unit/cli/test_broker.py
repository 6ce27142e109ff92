"""The embedded broker manager, without starting a broker."""
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from dbt.adapters.logstore.cli import broker as broker_mod
from dbt.adapters.logstore.cli.broker import BrokerError, EmbeddedBroker, free_port, port_open


def test_paths_use_port(tmp_path):
    broker = EmbeddedBroker(port=19092, state_dir=tmp_path)
    assert broker.pid_file == tmp_path / "broker-19092.pid"
    assert broker.log_file == tmp_path / "broker-19092.log"
    assert broker.bootstrap_servers == "127.0.0.1:19092"


def test_state_dir_as_string(tmp_path):
    broker = EmbeddedBroker(port=1, state_dir=str(tmp_path))
    assert broker.pid_file == Path(tmp_path) / "broker-1.pid"


def test_different_ports_do_not_share_pid_files(tmp_path):
    a = EmbeddedBroker(port=1111, state_dir=tmp_path)
    b = EmbeddedBroker(port=2222, state_dir=tmp_path)
    assert a.pid_file != b.pid_file


def test_pid_missing_file(tmp_path):
    assert EmbeddedBroker(port=1, state_dir=tmp_path / "nowhere").pid() is None


@pytest.mark.parametrize("content", ["", "garbage", "12ab", "1.5", "\n"])
def test_pid_garbage_file(tmp_path, content):
    broker = EmbeddedBroker(port=1, state_dir=tmp_path)
    broker.pid_file.write_text(content)
    assert broker.pid() is None


@pytest.mark.parametrize("content", ["0", "-1"])
def test_pid_non_positive_is_garbage(tmp_path, content):
    # os.kill(0, ...) / os.kill(-1, ...) address a process group / every process of the
    # user: such a pid file must never count as a running broker (stop() would signal them).
    broker = EmbeddedBroker(port=1, state_dir=tmp_path)
    broker.pid_file.write_text(content)
    assert broker.pid() is None


def test_pid_of_dead_process(tmp_path):
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    broker = EmbeddedBroker(port=1, state_dir=tmp_path)
    broker.pid_file.write_text(str(process.pid))
    assert broker.pid() is None


def test_pid_of_live_process(tmp_path):
    broker = EmbeddedBroker(port=1, state_dir=tmp_path)
    broker.pid_file.write_text(f" {os.getpid()}\n")
    assert broker.pid() == os.getpid()  # read only: never stop() this one


def test_running_needs_open_port(tmp_path):
    broker = EmbeddedBroker(port=free_port(), state_dir=tmp_path)
    broker.pid_file.write_text(str(os.getpid()))
    assert not broker.running()


def test_stop_when_nothing_runs(tmp_path):
    assert EmbeddedBroker(port=1, state_dir=tmp_path).stop() is False


def test_stop_removes_stale_pid_file(tmp_path):
    broker = EmbeddedBroker(port=1, state_dir=tmp_path)
    broker.pid_file.write_text("garbage")
    assert broker.stop() is False
    assert not broker.pid_file.exists()


def test_stop_terminates_the_recorded_process(tmp_path):
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        broker = EmbeddedBroker(port=1, state_dir=tmp_path)
        broker.pid_file.write_text(str(process.pid))
        assert broker.pid() == process.pid
        assert broker.stop(timeout=5) is True
        assert not broker.pid_file.exists()
        assert broker.pid() is None
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=5)


def test_start_refuses_busy_port(tmp_path):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        broker = EmbeddedBroker(port=server.getsockname()[1], state_dir=tmp_path / "state")
        with pytest.raises(BrokerError, match="already in use"):
            broker.start()
    assert not broker.pid_file.exists()


def test_start_is_idempotent_when_pid_alive(tmp_path, monkeypatch):
    broker = EmbeddedBroker(port=free_port(), state_dir=tmp_path)
    broker.pid_file.write_text(str(os.getpid()))
    monkeypatch.setattr(broker_mod.subprocess, "Popen",
                        lambda *a, **k: pytest.fail("must not start a second broker"))
    assert broker.start() == os.getpid()


def test_port_open_and_free_port():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert port_open("127.0.0.1", server.getsockname()[1])
    port = free_port()
    assert 0 < port < 65536
    assert not port_open("127.0.0.1", port, timeout=0.2)


def test_tansu_binary_missing_extra(monkeypatch):
    monkeypatch.setattr(broker_mod, "find_spec", lambda name: None)
    with pytest.raises(BrokerError, match=r"dbt-logstore\[broker\]"):
        broker_mod.tansu_binary()
