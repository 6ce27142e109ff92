"""Exactly-once under failure, part 2: killed after the confirmation and before the Kafka
commit, after the Kafka commit before the table records the snapshot, and in the middle of the
table swap (old table dropped, new one not yet renamed into its place)."""
import uuid

from dbt.adapters.logstore.faults import POINTS, SWAP_POINT
from tests.functional.fault_project import crash_and_recover, subprocess_project  # noqa: F401


def test_crash_before_and_after_the_log_commit_and_mid_swap(subprocess_project, kafka_bootstrap_servers):
    assert POINTS[3:] == ("before_log_commit", "after_log_commit")
    crash_and_recover(subprocess_project, kafka_bootstrap_servers, POINTS[3:] + (SWAP_POINT,),
                      suffix=f"late_{uuid.uuid4().hex[:8]}")
