"""logstore_changes(..., at_run=...) (reading/source_changes.bound_by_run, source_landing):
the range ends at the snapshot a run record names for the upstream; its table is read as of
that run only where a version holds it; bad `at_run` values and records refused in words."""
import pytest
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore.log.control_records import Confirmation
from dbt.adapters.logstore.log.run_records import NOT_LOGGED, ModelAtRun
from dbt.adapters.logstore.reading.reader import ReaderError
from dbt.adapters.logstore.reading.source_changes import SourcePosition, bound_by_run, plan_read
from dbt.adapters.logstore.reading.source_landing import checked_at_run
from types import SimpleNamespace


def confirmation(snapshot, end):
    return Confirmation.from_json({"table": "s.up", "snapshot": snapshot, "attempt": f"a{snapshot}",
                                   "offsets": {}, "end_offsets": end})


CONFIRMED = [confirmation(1, {"0": 3}), confirmation(2, {"0": 5}), confirmation(3, {"0": 9})]


def at(snapshot, did="changed", topic="s.up", version=None):
    return ModelAtRun(model="model.p.up", name="up", did=did, topic=topic, snapshot=snapshot,
                      end_offsets={0: 5}, table_version=version)


def test_the_range_ends_at_the_runs_snapshot_not_the_latest():
    bounded, snapshot, version = bound_by_run("s.up", "s.up", CONFIRMED, at(2), "r2", 3, None)
    assert ([c.snapshot for c in bounded], snapshot, version) == ([1, 2], 2, None)
    plan, end = plan_read("s.up", "s.up", bounded, SourcePosition("s.up", 1, {"0": 3}), snapshot)
    assert (plan.from_snapshot, plan.to_snapshot, plan.ranges, end) == (1, 2, ((0, 3, 5),), {0: 5})
    # read past the cut already: nothing to read, the position stays
    plan, end = plan_read("s.up", "s.up", bounded, SourcePosition("s.up", 3, {"0": 9}), snapshot)
    assert (plan.to_snapshot, plan.ranges, end) == (3, (), {0: 9})


def test_a_first_read_at_a_run_takes_the_version_that_holds_its_snapshot():
    # the table is at snapshot 3 (version 30); the run names snapshot 2 at version 20
    assert bound_by_run("s.up", "s.up", CONFIRMED, at(2, version="20"), "r2", 3, "30")[1:] == (2, "20")
    assert bound_by_run("s.up", "s.up", CONFIRMED, at(3, version="30"), "r3", 3, "30")[1:] == (3, "30")
    plan, end = plan_read("s.up", "s.up", CONFIRMED[:2], None, 2)
    assert (plan.hybrid, plan.to_snapshot, end) == (True, 2, {0: 5})


def test_a_run_that_names_the_upstream_unlogged_or_elsewhere_is_refused():
    with pytest.raises(ReaderError, match="names upstream s.up as not logged"):
        bound_by_run("s.up", "s.up", CONFIRMED, at(None, did=NOT_LOGGED), "r1", 3, None)
    with pytest.raises(ReaderError, match="log in 's.old'; it logs to 's.up' now"):
        bound_by_run("s.up", "s.up", CONFIRMED, at(2, topic="s.old"), "r1", 3, None)


def test_at_run_is_latest_or_an_invocation_id():
    log, up = SimpleNamespace(model="gold"), SimpleNamespace(model="up")
    assert checked_at_run(log, up, None) is None
    assert checked_at_run(log, up, " latest ") == "latest"
    for bad in ("", 7, ["latest"]):
        with pytest.raises(DbtRuntimeError, match="Model 'gold'.*at_run=.*Allowed: 'latest' or a dbt invocation id"):
            checked_at_run(log, up, bad)
