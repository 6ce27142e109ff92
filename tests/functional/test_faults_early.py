"""Exactly-once under failure, part 1: the dbt process is killed at the early steps of the
commit protocol (LOGSTORE_FAULT_INJECT, see dbt/adapters/logstore/faults.py), then a normal run
follows; after it the confirmed log (docs/log-format.md) replays to the table and every snapshot
is confirmed once. The steps are split over files so parallel test workers share the load."""
import uuid

from dbt.adapters.logstore.faults import POINTS
from tests.functional.fault_project import crash_and_recover, subprocess_project  # noqa: F401


def test_crash_before_the_table_commit_after_it_and_mid_log_write(subprocess_project, kafka_bootstrap_servers):
    assert POINTS[:3] == ("before_table_commit", "after_table_commit", "mid_log_write")
    crash_and_recover(subprocess_project, kafka_bootstrap_servers, POINTS[:3], suffix=f"early_{uuid.uuid4().hex[:8]}")
