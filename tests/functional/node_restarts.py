"""Helpers of test_node_restarts.py: a logged dbt project on a Kafka cluster of the module's own
(the session method, or behind a Spark Thrift Server), a run held at chosen steps while a node is
SIGKILLed and restarted, and a rolling restart of every node while runs go on."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from dbt.adapters.logstore.faults import ENV, PAUSE_ENV, PAUSE_EACH_ENV
from dbt.adapters.logstore.reading.reader import StartPoint, read_changelog
from dbt.adapters.logstore.reading.replay import Replica
from tests.functional.contract import canonical, read_topic, replay_confirmed, wait_for_confirmations
from tests.functional.fault_project import FaultProject, write_project
from tests.functional.thrift_server import ThriftServer
from tests.kafka_cluster import KafkaCluster

FIRST = 1  # the first server in kafka_bootstrap_servers
ROWS = 3000  # every model's rows; each run changes every one


class Project:
    """A logged project on the cluster, its runs numbered (each changes every row). `first_step`:
    the run from which each model is built (a model first built after a kill: its checks and its
    topics' creation happen with a node down)."""

    def __init__(self, root: Path, cluster: KafkaCluster, models: Dict[str, str],
                 first_step: Dict[str, int], server: Optional[ThriftServer] = None,
                 profile: Optional[Dict[str, str]] = None) -> None:
        self.root, self.cluster, self.models, self.first_step = root, cluster, models, first_step
        self.step = 0
        self.confirmed = {model: 0 for model in models}  # snapshots confirmed at the last check
        self.schema, self.suffix = f"restarts_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:8]
        write_project(root, self.schema, cluster.bootstrap_servers, server, models=models,
                      kafka_properties={"delivery.timeout.ms": "60000"}, profile=profile)
        self.tables = FaultProject(root, self.schema, server)
        self.method = "thrift" if server else "session"

    def topic(self, model: str) -> str:
        return f"{model}_{self.suffix}"

    def start(self, env: Dict[str, str], *args: str) -> subprocess.Popen:
        """`dbt run` (or `dbt <args>`: a run is of the next step, anything else of this one), in
        a process group of its own."""
        args = args or ("run",)
        if args[0] == "run":
            self.step += 1
        command = [str(Path(sys.executable).parent / "dbt"), *args, "--vars",
                   json.dumps({"step": self.step, "suffix": self.suffix}),
                   "--project-dir", str(self.root), "--profiles-dir", str(self.root)]
        clean = {k: v for k, v in os.environ.items() if k not in (ENV, PAUSE_ENV, PAUSE_EACH_ENV)}
        return subprocess.Popen(command, cwd=self.root, env={**clean, **env}, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)

    def run(self, context: str) -> str:
        process = self.start({})
        output, _ = process.communicate(timeout=600)
        assert process.returncode == 0, f"{context}: the run failed\n{errors(output)}"
        return output

    def built(self) -> List[str]:
        return [m for m in self.models if self.step >= self.first_step.get(m, 1)]

    def check(self, context: str, models: Optional[Sequence[str]] = None) -> None:
        """The contract of each model (by default every one the last run built): a new snapshot
        (a failed run's may be confirmed too), every snapshot confirmed once, in order, and the
        confirmed records replay to the table."""
        bootstrap = self.cluster.bootstrap_servers
        for model in models or self.built():
            topic = self.topic(model)
            confirmations = wait_for_confirmations(bootstrap, topic, self.confirmed[model] + 1)
            snapshots = len(confirmations)
            assert snapshots > self.confirmed[model], f"{context}: {model}'s run not confirmed"
            assert [c["snapshot"] for c in confirmations] == list(range(1, snapshots + 1)), \
                f"{context}: {model}'s snapshots are not confirmed once each, in order"
            self.confirmed[model] = snapshots
            types, table = self.tables.rows(model)
            assert sum(table.values()) == ROWS, (context, model)
            assert replay_confirmed(bootstrap, topic, types, table) == table, \
                f"{context}: {model}'s confirmed records do not replay to its table"

    def check_generations(self, context: str, model: str) -> List[int]:
        """The package's reader from the earliest offset and from the latest generation each
        give the table, and no generation number starts twice: the numbers, in snapshot order."""
        bootstrap, topic = self.cluster.bootstrap_servers, self.topic(model)
        types, table = self.tables.rows(model)
        for start in ("earliest", StartPoint("latest-generation")):
            deadline = time.monotonic() + 15  # the last commit's markers land after the run
            while (got := _read(bootstrap, topic, start, types)) != table and time.monotonic() < deadline:
                time.sleep(0.5)
            assert got == table, (f"{context}: {model} read from {start} differs\n only in the log: "
                                  f"{sorted((got - table).elements())[:5]}\n only in the table: "
                                  f"{sorted((table - got).elements())[:5]}")
        confirmations = [json.loads(m.value) for m in read_topic(bootstrap, topic + "__logstore_commits")]
        starts = sorted((c["snapshot"], c["generation"]) for c in confirmations if "generation_start" in c)
        numbers = [number for _, number in starts]
        assert numbers == sorted(set(numbers)), f"{context}: {model}'s generations (snapshot, number): {starts}"
        return numbers


def _read(bootstrap: str, topic: str, start: object, types: Dict[str, str]) -> Counter:
    replica = Replica()
    for change in read_changelog(bootstrap, topic, start=start):
        replica.apply(change)
    return Counter(canonical(row, types) for row in replica.rows())


def errors(output: str) -> str:
    lines = output.splitlines()
    return "\n".join([l for l in lines if "rror" in l][:20])[:3000] + "\n...\n" + output[-2500:]


def restarting(cluster: KafkaCluster, node: int) -> threading.Thread:
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


def joined(thread: threading.Thread) -> None:
    thread.join(timeout=180)
    assert not thread.is_alive(), f"{thread.name}: the node did not come back within 180 s"
    if thread.failures:  # type: ignore[attr-defined]
        raise thread.failures[0]  # type: ignore[attr-defined]


def held_run(project: Project, folder: Path, kills: Sequence[str], *args: str,
             node: int = FIRST) -> Tuple[str, List[str]]:
    """`dbt run` (or `dbt <args>`) held at each of `kills`' points (faults.py's
    LOGSTORE_FAULT_PAUSE_EACH), node `node` SIGKILLed there (in the order given; a point named
    twice: at its first two passes) and restarted in the background while the run goes on. Asserts
    that the run completed and passed every kill point: its output and the points it was killed at."""
    held = project.start({PAUSE_EACH_ENV: f"{','.join(sorted(set(kills)))}:{folder}"}, *args)
    killed: List[str] = []
    restart, output = None, ""
    try:
        count = 0
        while True:
            count += 1
            reached, deadline = folder / f"reached-{count}", time.monotonic() + 300
            while not reached.exists() and held.poll() is None:
                assert time.monotonic() < deadline, f"the run never reached pause {count}"
                time.sleep(0.1)
            if not reached.exists():
                break  # the run ended
            point = reached.read_text()
            if killed.count(point) < list(kills).count(point):
                if restart is not None:
                    joined(restart)  # the node is back before it is killed again
                project.cluster.kill(node)
                killed.append(point)
                print(f"{project.method}, dbt {' '.join(args) or 'run'}: node {node} killed at {point}")
                restart = restarting(project.cluster, node)
            (folder / f"release-{count}").touch()
        output, _ = held.communicate(timeout=300)
    finally:
        for n in range(1, 50):
            (folder / f"release-{n}").touch()
        if held.poll() is None:
            held.kill()
            held.communicate()
        if restart is not None:
            joined(restart)
    assert held.returncode == 0, \
        f"{project.method}: the run failed with node {node} killed at {killed}\n{errors(output)}"
    assert killed == list(kills), f"the run passed {killed}, not every point of {list(kills)}"
    return output, killed


def rolling_restart(projects: Sequence[Project], rounds: int, seed: int) -> None:
    """Each round: every node in turn, in an order and with pauses from the seed, SIGKILLed and
    restarted while each project runs (side by side: every one meets kills), run after run; every
    run must complete, the contract is checked after each (no node down then). The first
    bootstrap server and the active controller are among the killed."""
    cluster = projects[0].cluster
    rng = random.Random(f"{seed}-rolling")
    for n in range(rounds):
        order = rng.sample(range(1, cluster.nodes + 1), cluster.nodes)
        # 2-8 s between a node's return and the next kill: with 1-5 s (tried, seed 101) a
        # partition's leader was dead twice in a row, longer than a reader's window; an
        # operator's rolling restart waits for in-sync replicas before the next node
        pauses = [(rng.uniform(2.0, 8.0), rng.uniform(0.0, 3.0)) for _ in order]
        context = f"round {n + 1}: nodes killed in the order {order} (seed {seed})"
        print(context)
        quiet = threading.Lock()  # held while a node is down: the checks read a whole cluster
        controllers, failures = [], []  # type: List[int], List[BaseException]
        running = {p.method: "none yet" for p in projects}
        done = {p.method: [] for p in projects}  # type: Dict[str, List[int]]

        def roll() -> None:
            for node, (before, down) in zip(order, pauses):
                time.sleep(before)
                with quiet:
                    controllers.append(cluster.active_controller())
                    cluster.kill(node)
                    print(f"{context}: node {node} killed (active controller: {controllers[-1]}) "
                          f"during {', '.join(f'{m} run {r}' for m, r in running.items())}")
                    time.sleep(down)
                    cluster.restart(node)
                print(f"{context}: node {node} back")

        def keep_running(project: Project) -> None:
            while roller.is_alive() or not done[project.method]:
                running[project.method] = str(project.step + 1)
                where = f"{context}, the {project.method} method's run {project.step + 1}"
                project.run(where)
                with quiet:
                    project.check(where)
                done[project.method].append(project.step)
                running[project.method] = "none"

        roller = _thread(roll, "rolling-restart", failures)
        runners = [_thread(lambda p=p: keep_running(p), f"runs-{p.method}", failures) for p in projects]
        for thread in (roller, *runners):
            thread.join(timeout=900)
            assert not thread.is_alive(), f"{context}: {thread.name} still going after 900 s"
        if failures:
            raise failures[0]
        killed_controller = [node for node, controller in zip(order, controllers) if node == controller]
        assert FIRST in order and killed_controller, (context, controllers)
        line = (f"{context}: runs completed: {done}; the active controller was node "
                f"{killed_controller[0]} when killed")
        print(line)
        report = os.environ.get("LOGSTORE_KILL_REPORT")  # make soak's, round by round
        if report:
            with open(report, "a") as out:
                out.write(f"node restarts: {line}\n")


def _thread(target, name: str, failures: List[BaseException]) -> threading.Thread:
    """`target` started in a thread; what it raises goes to `failures`."""
    def guarded() -> None:
        try:
            target()
        except BaseException as exc:  # re-raised by the test
            failures.append(exc)

    thread = threading.Thread(target=guarded, name=name, daemon=True)
    thread.start()
    return thread
