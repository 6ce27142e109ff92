"""Exactly-once under failure, parallel mirror: the driver is killed after the Spark tasks
committed their shares and the confirmation was sent, before the table's transaction commits.
The tasks' records are committed but never confirmed; the next run fences the table's and the
tasks' transactional ids and writes a new attempt. The confirmed log replays to the table.
The parallel mirror needs the session method (tasks run in dbt's own Spark), so these dbt
subprocesses each start Spark, with a metastore of this module's own. The crash lands in the
model's first build (two dbt runs, each a Spark start, instead of a normal run first: the
first build's change set is the table's rows, mirrored by the same tasks as any other)."""
import json
import uuid

import pytest

from tests.functional.contract import replay_confirmed, wait_for_confirmations
from tests.functional.fault_project import MODEL, FaultProject, dbt, write_project

PARALLEL_MODEL = MODEL.replace(
    "log_system='kafka',", "log_system='kafka', log_mirror_parallelism=2, log_system_partitions=2,")


@pytest.fixture(scope="module")
def parallel_project(tmp_path_factory, kafka_bootstrap_servers):
    root = tmp_path_factory.mktemp("parallel_faults_project")
    write_project(root, "faults", kafka_bootstrap_servers, None, models={"flaky": PARALLEL_MODEL})
    return FaultProject(root, "faults", None)


def test_crash_before_the_log_commit_of_a_parallel_attempt(parallel_project, kafka_bootstrap_servers):
    assert "log_mirror_parallelism=2" in PARALLEL_MODEL
    project, suffix = parallel_project, f"parallel_{uuid.uuid4().hex[:8]}"
    topic = f"faults_{suffix}"

    def run(step, fault=None):
        return dbt(project.root, "run", "--vars", json.dumps({"step": step, "suffix": suffix}), fault=fault)

    crashed = run(1, fault="before_log_commit")
    assert crashed.returncode == 75, f"expected the injected crash\n{crashed.stdout[-2000:]}"
    recovered = run(2)
    assert recovered.returncode == 0, recovered.stdout[-3000:]
    assert "taking over the lock of dbt invocation" in recovered.stdout
    assert "re-sending change set" in recovered.stdout  # the crashed build's, by a new attempt
    # both snapshots confirmed once, in order; the first by the recovery's new attempt, whose
    # writers are the two tasks (the crashed attempt's records are never confirmed)
    confirmations = wait_for_confirmations(kafka_bootstrap_servers, topic, 2)
    assert [c["snapshot"] for c in confirmations] == [1, 2]
    assert all(sorted(c["writers"]) == ["task-0.0", "task-1.0"] for c in confirmations)
    assert len({c["attempt"] for c in confirmations}) == 2
    types, table = project.rows("flaky")
    assert sum(table.values()) == 2 % 4 + 2  # step 2's rows
    assert replay_confirmed(kafka_bootstrap_servers, topic, types, table) == table
    assert project.tables() == {"flaky"}
