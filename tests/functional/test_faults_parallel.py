"""Exactly-once under failure, parallel mirror: the driver is killed after the Spark tasks
committed their shares and the confirmation was sent, before the table's transaction commits.
The tasks' records are committed but never confirmed; the next run fences the table's and the
tasks' transactional ids and writes a new attempt. The confirmed log replays to the table."""
import uuid

import pytest

from tests.functional.fault_project import MODEL, crash_and_recover, subprocess_project  # noqa: F401

PARALLEL_MODEL = MODEL.replace(
    "log_system='kafka',", "log_system='kafka', log_mirror_parallelism=2, log_system_partitions=2,")


@pytest.fixture(scope="module")
def parallel_project(subprocess_project):
    (subprocess_project / "models" / "flaky.sql").write_text(PARALLEL_MODEL)
    return subprocess_project


def test_crash_before_the_log_commit_of_a_parallel_attempt(parallel_project, kafka_bootstrap_servers):
    assert "log_mirror_parallelism=2" in PARALLEL_MODEL
    crash_and_recover(parallel_project, kafka_bootstrap_servers, ("before_log_commit",),
                      suffix=f"parallel_{uuid.uuid4().hex[:8]}")
