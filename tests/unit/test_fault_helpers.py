"""The suite's kill and freeze helpers fail when their target is missing (no fault happened)."""
from __future__ import annotations

import random
import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests.functional import kills
from tests.functional.spark_cluster import StandaloneCluster, is_thrift_application
from tests.kafka_cluster import KafkaCluster


def sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True)


def ended() -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    process.wait()
    return process


def test_kill_group_kills_a_running_group_and_fails_on_an_ended_one():
    process = sleeper()
    kills.kill_group(process)
    assert process.returncode == -signal.SIGKILL
    with pytest.raises(AssertionError, match="had already ended"):
        kills.kill_group(ended(), "the run")


def test_kill_pid_fails_without_its_process():
    process = sleeper()
    kills.kill_pid(process.pid, "a sleeper")
    assert not kills.alive(process.pid)
    process.wait()
    with pytest.raises(AssertionError, match="no such process"):
        kills.kill_pid(process.pid, "the executor")
    with pytest.raises(AssertionError, match="no such process"):
        kills.kill_pid(None, "the executor")


def test_freeze_stops_every_thread_and_fails_without_its_process():
    process = sleeper()
    try:
        kills.freeze(process.pid, "a sleeper")
        assert kills.state(process.pid) in ("T", "t")
        kills.thaw(process.pid)
    finally:
        process.kill()
        process.wait()
    with pytest.raises(AssertionError, match="nothing was frozen"):
        kills.freeze(process.pid, "the broker")
    kills.thaw(process.pid)  # a cleanup never fails


def test_the_thrift_servers_executors_are_found_by_the_name_it_registers():
    assert is_thrift_application("SparkSQL::worker-host")
    assert not is_thrift_application("dbt-logstore") and not is_thrift_application(None)


def test_an_executor_kill_that_finds_no_executor_fails():
    cluster = SimpleNamespace(executor_pids=lambda thrift=None: [],
                              state=lambda: {"activeapps": [{"name": "SparkSQL::host"}]})
    with pytest.raises(AssertionError, match="no executor of the Thrift Server's application"):
        StandaloneCluster.kill_executor(cluster, random.Random(1), thrift=True)


def test_an_executor_kill_kills_the_one_chosen():
    process = sleeper()
    cluster = SimpleNamespace(executor_pids=lambda thrift=None: [process.pid],
                              state=lambda: {"activeapps": []})
    assert StandaloneCluster.kill_executor(cluster, random.Random(1), thrift=False) == process.pid
    assert process.wait(timeout=10) == -signal.SIGKILL


def test_a_kafka_node_kill_fails_when_the_node_is_not_running(tmp_path):
    cluster = KafkaCluster(tmp_path)
    with pytest.raises(AssertionError, match="node 1 is not running"):
        cluster.kill(1)
    cluster.node(2).process = sleeper()  # stands in for the node's JVM
    cluster.kill(2)
    assert not cluster.running(2)
    with pytest.raises(AssertionError, match="node 2 is not running"):
        cluster.kill(2)
