"""Spark Connect under faults (issue 53), on Apache Kafka. The server lives on while dbt is
killed (SIGKILL, its process group) at random moments, as a cluster outlives its clients; the
server is killed in the middle of a run and started again. Each time the next run recovers: every
topic replays to its table (read back through the server), each snapshot is confirmed once, in
order, and nothing of the protocol is left in the schema.

A Connect server runs a statement to its end after the client that sent it died: the run that
takes a dead run's lock over interrupts that run's session first (run_lock.take, spark/connect.py
interrupt_session), which the random kills exercise whenever they land inside a statement.

LOGSTORE_KILL_SEED replays the random kills (printed with every failure); LOGSTORE_KILL_ROUNDS
sets their number (2 by default)."""
import json
import os
import random
import re
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from dbt.adapters.logstore.faults import LOG_CHECKS_POINT
from tests.functional.connect_server import start_connect_server, stop_connect_server
from tests.functional.contract import replay_confirmed, wait_for_confirmations
from tests.functional.fault_project import FaultProject, dbt, write_project
from tests.functional.kills import kill_group

pytestmark = pytest.mark.apache_kafka

MODELS = {
    # keyed, two partitions: updates and deletes each run
    "keyed": """
{{ config(materialized='table', unique_key='id', log_system='kafka', log_system_partitions=2,
          kafka_topic='keyed_' ~ var('suffix')) }}
select id, concat('v', cast((id * {{ var('step') }}) % 7 as string)) as version
from range({{ var('step') }} % 5, 40 + {{ var('step') }} % 9) as r(id)
""",
    # an incremental insert: the statement a dead client's server would go on with
    "appended": """
{{ config(materialized='incremental', incremental_strategy='append', log_system='kafka',
          kafka_topic='appended_' ~ var('suffix') ~ var('appended_topic', '')) }}
select {{ var('step') }} as step, id from range(20) as r(id)
{% if var('slow_ms', 0) %}  -- an insert the server takes seconds over
where reflect('java.lang.Thread', 'sleep', cast({{ var('slow_ms') }} as bigint)) is null
{% endif %}
""",
    # keyless: a record written twice would leave an extra row in the replay
    "keyless": """
{{ config(materialized='table', log_system='kafka', kafka_topic='keyless_' ~ var('suffix')) }}
select id % 6 as bucket, cast({{ var('step') }} % 3 as int) as phase
from range(30 + {{ var('step') }} % 4) as r(id)
""",
}
# killed among the file renames of an insert's job commit: documented, a new topic goes on
UNDECIDABLE = "whether it happened cannot be told"


class ConnectProject:
    """The project, its runs numbered; its tables read through the server."""

    def __init__(self, root: Path, server, bootstrap: str) -> None:
        self.root, self.server, self.bootstrap = root, server, bootstrap
        self.schema, self.suffix = f"connect_faults_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:8]
        self.step, self.appended_topic = 0, ""
        write_project(root, self.schema, bootstrap, server, models=MODELS,
                      profile={"method": "connect", "host": server.url, "connect_retries": 2,
                               "connect_timeout": 5})
        self.tables = FaultProject(root, self.schema, server)

    def topic(self, model: str) -> str:
        return f"{model}_{self.suffix}" + (self.appended_topic if model == "appended" else "")

    def run(self, wait: bool = True, pause: str = None, **more):
        self.step += 1
        variables = {"step": self.step, "suffix": self.suffix, "appended_topic": self.appended_topic,
                     **more}
        return dbt(self.root, "run", "--vars", json.dumps(variables), wait=wait, pause=pause,
                   new_session=True)

    def check(self, context: str) -> None:
        for model in MODELS:
            topic, where = self.topic(model), f"{context}, model {model}"
            confirmations = wait_for_confirmations(self.bootstrap, topic, 1)
            snapshots = [c["snapshot"] for c in confirmations]
            assert snapshots == list(range(snapshots[0], snapshots[0] + len(snapshots))), \
                f"{where}: each snapshot confirmed once, in order: {snapshots}"
            types, table = self.tables.rows(model)
            replayed = replay_confirmed(self.bootstrap, topic, types, table, timeout_seconds=15)
            assert replayed == table, (f"{where}: replay differs\n only in log: {replayed - table}\n"
                                       f" only in table: {table - replayed}")
        left = sorted(t for t in self.tables.tables() if "__logstore_" in t)
        assert not left, f"{context}: left behind: {left}"


@pytest.fixture(scope="module")
def connect_server():
    with tempfile.TemporaryDirectory(prefix="logstore-connect-faults-") as work_dir:
        server = start_connect_server(Path(work_dir))
        try:
            yield server
        finally:
            stop_connect_server(server)


@pytest.fixture
def project(connect_server, kafka_bootstrap_servers, tmp_path):
    made = ConnectProject(tmp_path, connect_server, kafka_bootstrap_servers)
    first = made.run()
    assert first.returncode == 0, first.stdout[-3000:]
    made.check("after the first run")
    return made


def test_random_kills_of_dbt_while_the_server_lives_on(project):
    rounds = int(os.environ.get("LOGSTORE_KILL_ROUNDS") or 2)
    seed = int(os.environ.get("LOGSTORE_KILL_SEED") or random.SystemRandom().randrange(1 << 30))
    print(f"random kills of dbt on Spark Connect: seed {seed}, {rounds} rounds "
          f"(LOGSTORE_KILL_SEED={seed} replays them)")
    chance = random.Random(seed)
    started = time.monotonic()
    normal = project.run()
    assert normal.returncode == 0, normal.stdout[-3000:]
    took = time.monotonic() - started
    project.check("after a normal run")
    for number in range(1, rounds + 1):
        delay = chance.uniform(took * 0.4, took * 0.95)  # past dbt's start-up, before its end
        line = f"round {number}: dbt killed at {delay:.1f} s (seed {seed})"
        running = project.run(wait=False)
        try:
            running.wait(timeout=delay)
            line += " (it had finished)"
        except subprocess.TimeoutExpired:
            kill_group(running, "the dbt run")
        recovered = project.run()
        if recovered.returncode != 0 and UNDECIDABLE in recovered.stdout:
            project.appended_topic = f"_{number}"  # the documented remedy: a new topic
            recovered = project.run()
        assert recovered.returncode == 0, f"{line}: recovery failed\n{recovered.stdout[-4000:]}"
        print(line + "; recovery: " + ", ".join(
            a for a in ("taking over the lock", "interrupted", "re-sending change set", "removing")
            if a in recovered.stdout))
        project.check(line)


def test_the_server_killed_in_a_run_and_started_again(project, tmp_path):
    """The server dies between the table commit and the log write: the run fails within about
    half a minute, saying the server stopped answering (not after the client's ten minutes of
    retries); with the server back (same warehouse, metastore and port), the next run writes
    the committed change set to the log."""
    server = project.server
    pause = tmp_path / "pause"
    pause.mkdir()
    running = project.run(wait=False, pause=f"after_table_commit:{pause}")
    _wait_for(pause / "reached", running, "its table commit")
    server.close_session()  # the tests' own: it would not outlive the server
    os.killpg(server.process.pid, signal.SIGKILL)  # spark-submit and the server's JVM
    server.process.wait(timeout=60)
    try:
        (pause / "release").touch()
        output, _ = running.communicate(timeout=240)
    finally:  # the server back, where it was, whatever the run did
        server.process = start_connect_server(server.work_dir, port=server.port).process
    assert running.returncode != 0, output[-3000:]
    assert f"the Spark Connect server at sc://{server.host}:{server.port} stopped answering" in \
        " ".join(output.split()), output[-3000:]
    recovered = project.run()
    assert recovered.returncode == 0, recovered.stdout[-4000:]
    assert "re-sending change set" in recovered.stdout, recovered.stdout[-4000:]
    project.check("the server killed after a table commit, started again")


def _wait_for(path: Path, running, what: str) -> None:
    deadline = time.monotonic() + 300
    while not path.exists():
        assert running.poll() is None, running.stdout.read()[-3000:]
        assert time.monotonic() < deadline, f"the run never reached {what}"
        time.sleep(0.2)


def test_a_dead_runs_statement_is_interrupted_by_the_run_that_takes_over(project, tmp_path):
    """dbt killed while the server runs its staging `create table ... as` (seconds long): the
    server would run it to its end, and the table it creates would appear in the middle of the
    next run (or after it). The next run takes the lock over and interrupts it first; seconds
    later, after it would have ended, nothing of it is there and every table equals its log."""
    pause = tmp_path / "pause"
    pause.mkdir()
    running = project.run(wait=False, pause=f"{LOG_CHECKS_POINT}:{pause}", slow_ms=2000)
    _wait_for(pause / "reached", running, "its log checks")
    (pause / "release").touch()
    # its staging under way on the server (20 rows, 2 seconds each, 2 tasks: 20 s, longer than
    # the next run takes to start and take the lock over): its job's output directory is there
    _wait_for(project.tables.table_dir("appended__logstore_new"), running, "its staging")
    time.sleep(1)
    kill_group(running, "the dbt run")
    recovered = project.run()
    assert recovered.returncode == 0, recovered.stdout[-4000:]
    assert re.search(r"interrupted [1-9]\d* statement\(s\) that run still had on the Spark Connect "
                     r"server", " ".join(recovered.stdout.split())), recovered.stdout[-4000:]
    project.check("a run killed in its staging, interrupted by the next")
    time.sleep(20)  # when the dead run's statement would have ended
    project.check("seconds later")
