"""commit/mirror.py: a write a lost node broke off is written again, once."""
import pytest
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore.commit.mirror import written_once_more_if_interrupted
from dbt.adapters.logstore.commit.snapshots import Snapshot
from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.log.log_system import LogWriteInterrupted

LOG = LogConfig(model="orders_model", system="fake", topic="analytics.orders",
                bootstrap_servers="x:1", unique_key=("id",))
DONE = Snapshot(id=4, attempt="second")


class FakeModelLog:
    config = LOG

    def __init__(self, confirmation=None):
        self.confirmation, self.asked = confirmation, []

    def find_confirmation(self, table_id, changeset):
        self.asked.append((table_id, changeset))
        return self.confirmation


def writes(*outcomes):
    """A write that gives `outcomes` in turn (an exception is raised), counting its calls."""
    calls = []

    def write():
        calls.append(len(calls) + 1)
        outcome = outcomes[len(calls) - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome
    return write, calls


def test_a_write_that_succeeds_is_written_once():
    write, calls = writes(DONE)
    model_log = FakeModelLog()
    assert written_once_more_if_interrupted(write, model_log, "analytics.orders", "run-1") is DONE
    assert calls == [1] and model_log.asked == []


def test_an_interrupted_write_is_written_again_after_asking_for_its_confirmation():
    write, calls = writes(LogWriteInterrupted("a node went down"), DONE)
    model_log = FakeModelLog()
    assert written_once_more_if_interrupted(write, model_log, "analytics.orders", "run-1") is DONE
    assert calls == [1, 2] and model_log.asked == [("analytics.orders", "run-1")]


def test_an_interrupted_write_that_was_confirmed_after_all_is_not_written_again():
    write, calls = writes(LogWriteInterrupted("a node went down"), DONE)
    model_log = FakeModelLog({"snapshot": 3, "attempt": "first", "changeset": "run-1",
                              "end_offsets": {"0": 7}, "records": 7, "offsets": {"0": [0, 6]}})
    snapshot = written_once_more_if_interrupted(write, model_log, "analytics.orders", "run-1")
    assert calls == [1] and snapshot.id == 3 and snapshot.attempt == "first"


def test_a_second_interruption_is_the_runs_failure():
    write, calls = writes(LogWriteInterrupted("first"), LogWriteInterrupted("second"))
    with pytest.raises(LogWriteInterrupted, match="second"):
        written_once_more_if_interrupted(write, FakeModelLog(), "analytics.orders", "run-1")
    assert calls == [1, 2]


def test_other_failures_are_not_written_again():
    write, calls = writes(DbtRuntimeError("authorization failed"), DONE)
    with pytest.raises(DbtRuntimeError, match="authorization"):
        written_once_more_if_interrupted(write, FakeModelLog(), "analytics.orders", "run-1")
    assert calls == [1]
