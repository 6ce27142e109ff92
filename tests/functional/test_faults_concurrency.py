"""Exactly-once under failure, part 4: two runs of one model at once, and a broker that stops
answering in the middle of a mirror. A run is held at a protocol step with
LOGSTORE_FAULT_PAUSE (dbt/adapters/logstore/faults.py) while the test acts."""
import json
import time
import uuid

import pytest

from tests.functional.contract import read_topic, replay_confirmed, wait_for_confirmations
from tests.functional.fault_project import (  # noqa: F401
    FaultProject, dbt, subprocess_project, wait_until_paused, write_project,
)
from tests.functional.kills import freeze, thaw



def _check_contract(project: FaultProject, bootstrap: str, topic: str, snapshots: int) -> None:
    confirmations = wait_for_confirmations(bootstrap, topic, snapshots)
    assert [c["snapshot"] for c in confirmations] == list(range(1, snapshots + 1))
    types, table = project.rows("flaky")
    assert replay_confirmed(bootstrap, topic, types, table) == table
    assert project.tables() == {"flaky"}, "no change, staging or lock table left behind"


def _errors(output: str) -> str:
    """A failed run's error lines first (its tail is mostly a Java stack trace)."""
    lines = output.splitlines()
    errors = [line for line in lines if "rror" in line or "Exception" in line]
    return "\n".join(line[:600] for line in errors[:15]) + "\n...\n" + "\n".join(lines[-15:])[-2000:]


def _run(project: FaultProject, step: int, suffix: str, **kwargs):
    return dbt(project.root, "run", "-s", "flaky", "--vars",
               json.dumps({"step": step, "suffix": suffix}), **kwargs)


def test_two_runs_of_one_model_at_once_one_fails_clearly_and_the_log_is_not_mixed(
        subprocess_project, kafka_bootstrap_servers, tmp_path):
    project, suffix = subprocess_project, uuid.uuid4().hex[:8]
    topic = f"faults_{suffix}"
    assert _run(project, 1, suffix).returncode == 0

    # run A commits its table, then is held before writing its log
    first = _run(project, 2, suffix, pause=f"after_table_commit:{tmp_path}", wait=False)
    try:
        wait_until_paused(tmp_path, first)
        log_before = len(read_topic(kafka_bootstrap_servers, topic))
        second = _run(project, 3, suffix)  # run B of the same model meanwhile
        out = " ".join(second.stdout.split())
        assert second.returncode == 1, out[-3000:]
        assert "Model 'flaky' is being run by another dbt run" in out
        assert "changed nothing" in out and "logstore_unlock" in out
        assert len(read_topic(kafka_bootstrap_servers, topic)) == log_before  # B wrote nothing
    finally:
        (tmp_path / "release").touch()
        output, _ = first.communicate(timeout=300)
    assert first.returncode == 0, output[-3000:]

    # the table holds run A's rows only (step 2: four rows 'v2'), and the log agrees
    _, table = project.rows("flaky")
    assert sum(table.values()) == 4 and all('"v2"' in row for row in table)
    _check_contract(project, kafka_bootstrap_servers, topic, snapshots=2)
    # A released its lock: the model runs again
    assert _run(project, 3, suffix).returncode == 0
    _check_contract(project, kafka_bootstrap_servers, topic, snapshots=3)


@pytest.fixture
def read_uncommitted(monkeypatch):
    """The embedded broker, after a producer frozen mid-transaction is fenced, keeps counting
    that transaction as open and holds read_committed readers back, even behind later committed
    transactions (a deviation from Kafka, where the fence aborts it). The contract's consumer
    therefore reads uncommitted records here and relies on the confirmations alone."""
    from tests.functional import contract

    monkeypatch.setitem(contract.ISOLATION, "level", "read_uncommitted")


@pytest.fixture
def own_broker(tmp_path_factory):
    """A broker of this test's own, which it freezes (SIGSTOP) and thaws (SIGCONT)."""
    from dbt.adapters.logstore.cli.broker import EmbeddedBroker, free_port

    broker = EmbeddedBroker(port=free_port(), state_dir=tmp_path_factory.mktemp("frozen_broker"))
    broker.start()
    try:
        yield broker
    finally:
        thaw(broker.pid())
        broker.stop()


def test_broker_lost_in_the_middle_of_a_mirror_fails_clearly_and_the_next_run_completes_the_log(
        tmp_path_factory, spark_thrift_server, own_broker, tmp_path, read_uncommitted):
    root = tmp_path_factory.mktemp("frozen_broker_project")
    project = FaultProject(root, f"faults_{uuid.uuid4().hex[:8]}", spark_thrift_server)
    # bounded waits, so the lost broker is noticed in seconds, not minutes
    write_project(root, project.schema, own_broker.bootstrap_servers, spark_thrift_server,
                  kafka_properties={"delivery.timeout.ms": "8000", "request.timeout.ms": "5000"})
    suffix = uuid.uuid4().hex[:8]
    topic, bootstrap = f"faults_{suffix}", own_broker.bootstrap_servers
    assert _run(project, 1, suffix).returncode == 0

    # run 2 is held after its first records; the broker stops answering; the run goes on
    held = _run(project, 2, suffix, pause=f"mid_log_write:{tmp_path}", wait=False)
    pid = own_broker.pid()
    try:
        wait_until_paused(tmp_path, held)
        freeze(pid, "the test's broker")
        (tmp_path / "release").touch()
        output, _ = held.communicate(timeout=300)
    finally:
        thaw(pid)
    out = " ".join(output.split())
    assert held.returncode == 1, out[-3000:]
    assert "writing to Kafka topic" in out and "failed" in out
    assert "The table's change is committed" in out and "logstore_recover" in out

    # the broker is back: the explicit recovery completes the log of run 2 ...
    recovered = dbt(root, "run-operation", "logstore_recover", "--args", "{model: flaky}",
                    "--vars", json.dumps({"step": 2, "suffix": suffix}))
    assert recovered.returncode == 0, recovered.stdout[-3000:]
    assert "re-sending change set" in recovered.stdout
    props = spark_thrift_server.table_properties(f"{project.schema}.flaky")
    assert props["logstore.snapshot.id"] == "2"
    assert props["logstore.changeset.mirrored"] == props["logstore.changeset.committed"]
    _check_contract(project, bootstrap, topic, snapshots=2)
    # ... and the next run goes on from there
    third = _run(project, 3, suffix)
    assert third.returncode == 0, _errors(third.stdout)
    _check_contract(project, bootstrap, topic, snapshots=3)


LEASE_SECONDS = 6


@pytest.fixture
def leased_project(tmp_path_factory, kafka_bootstrap_servers, spark_thrift_server) -> FaultProject:
    """A fault project of its own (snapshot ids from 1) with a short lease, so a paused owner
    loses its lock within the test."""
    root = tmp_path_factory.mktemp("lease_project")
    schema = f"lease_{uuid.uuid4().hex[:8]}"
    write_project(root, schema, kafka_bootstrap_servers, spark_thrift_server,
                  profile={"lock_lease_seconds": LEASE_SECONDS})
    return FaultProject(root, schema, spark_thrift_server)


@pytest.mark.parametrize("point", ["before_table_commit", "after_table_commit", "after_log_commit"])
def test_a_paused_owner_loses_its_lease_and_is_fenced(leased_project, kafka_bootstrap_servers,
                                                       tmp_path, point):
    """Run A is frozen (SIGSTOP) at a protocol step past its lease; run B takes the lock over
    without logstore_unlock and finishes (settling what A left); A, thawed, stops at its next
    step without changing the table or the log (after its log commit: without recording its
    snapshot over B's newer one)."""
    project, suffix = leased_project, uuid.uuid4().hex[:8]
    topic = f"faults_{suffix}"
    assert _run(project, 1, suffix).returncode == 0
    first = _run(project, 2, suffix, pause=f"{point}:{tmp_path}", wait=False)
    try:
        wait_until_paused(tmp_path, first)
        freeze(first.pid, "run A")
        (tmp_path / "release").touch()  # it goes on only when thawed
        time.sleep(LEASE_SECONDS + 2)
        second = _run(project, 3, suffix)
        out = " ".join(second.stdout.split())
        assert second.returncode == 0, out[-3000:]
        assert "whose lease expired" in out
    finally:
        thaw(first.pid)
        output, _ = first.communicate(timeout=300)
    text = " ".join(output.split())
    assert first.returncode == 1 and "lost its lock" in text, _errors(output)
    # A's change reached the table only if it had committed before the pause; B settled it
    snapshots = 2 if point == "before_table_commit" else 3
    _check_contract(project, kafka_bootstrap_servers, topic, snapshots)
    props = project.server.table_properties(f"{project.schema}.flaky")
    assert props["logstore.snapshot.id"] == str(snapshots)  # B's record of the log stands
