"""A Kafka node down never fails a run (issue 42), on a three-node Apache Kafka cluster of this
module's own (tests/kafka_cluster.py: replication 3, min.insync.replicas 2), the session method:

- the first server in kafka_bootstrap_servers SIGKILLed at each Kafka-touching step of one
  logged `dbt run` (held there by LOGSTORE_FAULT_PAUSE_EACH, dbt/adapters/logstore/faults.py)
  and restarted while the run goes on: each model's identity checks and topic creation, the
  writer's start, its records, the confirmation and the transaction's commit. Freshly
  killed, the node is still in the cluster's metadata for seconds: a kafka-python client that
  asks it fails at once (kafka/retrying.py says why), where the run must ask another node;
- a rolling restart: while a sequence of runs goes on, every node in turn (the first bootstrap
  server and the active controller among them) is SIGKILLed and restarted, in an order and with
  pauses from LOGSTORE_KILL_SEED (printed); LOGSTORE_CLUSTER_ROUNDS rounds (one in `make test`,
  more under `make soak SOAK_TESTS=tests/functional/test_node_restarts.py`).

Every run must complete, and after each the contract holds: every snapshot confirmed once, in
order, and the confirmed records replay to the table.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Dict, List

import pytest

from dbt.adapters.logstore.faults import ENV, LOG_CHECKS_POINT, PAUSE_EACH_ENV, PAUSE_ENV
from tests.functional.contract import replay_confirmed, wait_for_confirmations
from tests.functional.fault_project import FaultProject, write_project
from tests.kafka_cluster import KafkaCluster

FIRST = 1  # the first server in kafka_bootstrap_servers
MODEL = """
{{{{ config(materialized='table', {key}log_system='kafka', log_system_partitions=3,
          log_system_replication=3, kafka_topic='{name}_' ~ var('suffix'){enabled}) }}}}
select id, concat('v', cast({{{{ var('step') }}}} as string)) as version
from range({{{{ var('rows', 3000) }}}}) as r(id)
"""
MODELS = {
    "accounts": MODEL.format(key="unique_key='id', ", name="accounts", enabled=""),
    # first built in run 2, after a kill: its identity checks and its topics' creation
    "fresh": MODEL.format(key="", name="fresh", enabled=", enabled=(var('step') | int) >= 2"),
}
# The steps of a run after which it talks to Kafka next, each held while the first node is
# killed: a model's identity checks and topic creation (each model's: the second's topics are
# new); the writer's start (producer, transaction, partitions); its records; the confirmation
# and the commit. The first model's steps, then the second's checks.
KILL_AT = (LOG_CHECKS_POINT, "after_table_commit", "mid_log_write", "before_log_commit")
KILLS = [*KILL_AT, LOG_CHECKS_POINT]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Three nodes of this module's own: its tests kill them."""
    kafka = KafkaCluster(tmp_path_factory.mktemp("restarted_kafka"), nodes=3)
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.stop()


class Project:
    """A session-method project on the cluster, its runs numbered (each changes every row)."""

    def __init__(self, root: Path, cluster: KafkaCluster) -> None:
        self.root, self.cluster, self.step = root, cluster, 0
        self.confirmed = {model: 0 for model in MODELS}  # snapshots confirmed at the last check
        self.schema, self.suffix = f"restarts_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:8]
        write_project(root, self.schema, cluster.bootstrap_servers, None, models=MODELS,
                      kafka_properties={"delivery.timeout.ms": "60000"})
        self.tables = FaultProject(root, self.schema, None)

    def start(self, env: Dict[str, str]) -> subprocess.Popen:
        self.step += 1
        command = [str(Path(sys.executable).parent / "dbt"), "run", "--vars",
                   json.dumps({"step": self.step, "suffix": self.suffix}),
                   "--project-dir", str(self.root), "--profiles-dir", str(self.root)]
        clean = {k: v for k, v in os.environ.items() if k not in (ENV, PAUSE_ENV, PAUSE_EACH_ENV)}
        return subprocess.Popen(command, cwd=self.root, env={**clean, **env}, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)

    def run(self, context: str) -> str:
        process = self.start({})
        output, _ = process.communicate(timeout=600)
        assert process.returncode == 0, f"{context}: the run failed\n{_errors(output)}"
        return output

    def check(self, context: str) -> None:
        """The contract of every model after a run that built it: a new snapshot (each run
        changes every row; a failed run's may be confirmed too), every snapshot confirmed once,
        in order, and the confirmed records replay to the table."""
        bootstrap = self.cluster.bootstrap_servers
        for model in MODELS:
            if model == "fresh" and self.step < 2:
                continue  # built from run 2 on
            topic = f"{model}_{self.suffix}"
            confirmations = wait_for_confirmations(bootstrap, topic, self.confirmed[model] + 1)
            snapshots = len(confirmations)
            assert snapshots > self.confirmed[model], f"{context}: {model}'s run not confirmed"
            assert [c["snapshot"] for c in confirmations] == list(range(1, snapshots + 1)), \
                f"{context}: {model}'s snapshots are not confirmed once each, in order"
            self.confirmed[model] = snapshots
            types, table = self.tables.rows(model)
            assert sum(table.values()) == 3000, (context, model)
            assert replay_confirmed(bootstrap, topic, types, table) == table, \
                f"{context}: {model}'s confirmed records do not replay to its table"


def _errors(output: str) -> str:
    lines = output.splitlines()
    return "\n".join([l for l in lines if "rror" in l][:20])[:3000] + "\n...\n" + output[-2500:]


@pytest.fixture(scope="module")
def project(cluster, tmp_path_factory):
    made = Project(tmp_path_factory.mktemp("restarts_project"), cluster)
    made.run("run 1")
    made.check("run 1")
    return made


def _restarting(cluster: KafkaCluster, node: int) -> threading.Thread:
    """Node `node` started again in the background (the held run goes on meanwhile)."""
    failures: List[BaseException] = []

    def restart() -> None:
        try:
            cluster.restart(node)
        except BaseException as exc:  # re-raised by the test when it joins
            failures.append(exc)

    thread = threading.Thread(target=restart, name=f"restart-node-{node}", daemon=True)
    thread.failures = failures  # type: ignore[attr-defined]
    thread.start()
    return thread


def _joined(thread: threading.Thread) -> None:
    thread.join(timeout=180)
    assert not thread.is_alive(), f"{thread.name}: the node did not come back within 180 s"
    if thread.failures:  # type: ignore[attr-defined]
        raise thread.failures[0]  # type: ignore[attr-defined]


def test_the_first_bootstrap_server_killed_at_each_kafka_step_of_a_run(project, cluster, tmp_path):
    held = project.start({PAUSE_EACH_ENV: f"{','.join(KILL_AT)}:{tmp_path}"})
    killed: List[str] = []
    restart = None
    try:
        count = 0
        while True:
            count += 1
            reached, deadline = tmp_path / f"reached-{count}", time.monotonic() + 300
            while not reached.exists() and held.poll() is None:
                assert time.monotonic() < deadline, f"the run never reached pause {count}"
                time.sleep(0.1)
            if not reached.exists():
                break  # the run ended
            point = reached.read_text()
            if killed.count(point) < KILLS.count(point):  # the second model's checks too
                if restart is not None:
                    _joined(restart)  # the node is back before it is killed again
                cluster.kill(FIRST)
                killed.append(point)
                print(f"node {FIRST} (the first bootstrap server) killed at {point}")
                restart = _restarting(cluster, FIRST)
            (tmp_path / f"release-{count}").touch()
        output, _ = held.communicate(timeout=300)
    finally:
        for n in range(1, 50):
            (tmp_path / f"release-{n}").touch()
        if held.poll() is None:
            held.kill()
            held.communicate()
        if restart is not None:
            _joined(restart)
    assert held.returncode == 0, f"the run failed with node {FIRST} killed\n{_errors(output)}"
    assert killed == KILLS, f"the run passed {killed}, not every step held"
    project.check(f"run {project.step}, node {FIRST} killed at {', '.join(killed)}")


def test_a_rolling_restart_during_runs(project, cluster):
    rounds = int(os.environ.get("LOGSTORE_CLUSTER_ROUNDS") or 1)
    seed = int(os.environ.get("LOGSTORE_KILL_SEED") or random.SystemRandom().randrange(1 << 30))
    print(f"rolling restarts of the Kafka cluster: seed {seed}, {rounds} rounds "
          f"(LOGSTORE_KILL_SEED={seed} replays them)")
    rng = random.Random(f"{seed}-rolling")
    for n in range(rounds):
        order = rng.sample(range(1, cluster.nodes + 1), cluster.nodes)
        pauses = [(rng.uniform(2.0, 8.0), rng.uniform(0.0, 3.0)) for _ in order]
        context = f"round {n + 1}: nodes killed in the order {order} (seed {seed})"
        print(context)
        quiet = threading.Lock()  # held while a node is down: the checks read a whole cluster
        controllers, failures = [], []  # type: List[int], List[BaseException]

        def roll() -> None:
            try:
                for node, (before, down) in zip(order, pauses):
                    time.sleep(before)
                    with quiet:
                        controllers.append(cluster.active_controller())
                        cluster.kill(node)
                        time.sleep(down)
                        cluster.restart(node)
                    print(f"{context}: node {node} killed (active controller: "
                          f"{controllers[-1]}) and back")
            except BaseException as exc:  # re-raised by the test
                failures.append(exc)

        roller = threading.Thread(target=roll, name="rolling-restart", daemon=True)
        roller.start()
        runs = 0
        while roller.is_alive() or runs == 0:
            project.run(f"{context}, run {project.step + 1}")
            runs += 1
            with quiet:
                project.check(f"{context}, run {project.step}")
        roller.join(timeout=300)
        assert not failures, failures
        killed_controller = [node for node, controller in zip(order, controllers) if node == controller]
        assert FIRST in order and killed_controller, (context, controllers)
        print(f"{context}: {runs} runs completed; the active controller was node "
              f"{killed_controller[0]} when killed")
