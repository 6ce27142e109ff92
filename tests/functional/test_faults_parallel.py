"""Exactly-once under failure, parallel mirror: the driver is killed after the Spark tasks
committed their shares and the confirmation was sent, before the table's transaction commits.
The tasks' records are committed but never confirmed; the next run fences the table's and the
tasks' transactional ids and writes a new attempt. The confirmed log replays to the table.
The parallel mirror needs the session method (tasks run in dbt's own Spark), so these dbt
subprocesses each start Spark, with a metastore of this module's own."""
import uuid

import pytest

from tests.functional.fault_project import MODEL, FaultProject, crash_and_recover, write_project

PARALLEL_MODEL = MODEL.replace(
    "log_system='kafka',", "log_system='kafka', log_mirror_parallelism=2, log_system_partitions=2,")


@pytest.fixture(scope="module")
def parallel_project(tmp_path_factory, kafka_bootstrap_servers):
    root = tmp_path_factory.mktemp("parallel_faults_project")
    write_project(root, "faults", kafka_bootstrap_servers, None, models={"flaky": PARALLEL_MODEL})
    return FaultProject(root, "faults", None)


def test_crash_before_the_log_commit_of_a_parallel_attempt(parallel_project, kafka_bootstrap_servers):
    assert "log_mirror_parallelism=2" in PARALLEL_MODEL
    crash_and_recover(parallel_project, kafka_bootstrap_servers, ("before_log_commit",),
                      suffix=f"parallel_{uuid.uuid4().hex[:8]}")
