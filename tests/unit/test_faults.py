"""Crash injection: maybe_crash exits the process only at the configured point. os._exit is
monkeypatched everywhere here; a test never really exits."""
import os

import pytest

from dbt.adapters.logstore import faults


class Exited(BaseException):
    """Stands in for os._exit: stops the code under test where the process would die."""


@pytest.fixture
def exits(monkeypatch):
    codes = []

    def fake_exit(code):
        codes.append(code)
        raise Exited(code)

    monkeypatch.setattr(os, "_exit", fake_exit)
    monkeypatch.delenv(faults.ENV, raising=False)
    return codes


def test_env_name_and_points():
    assert faults.ENV == "LOGSTORE_FAULT_INJECT"
    assert faults.POINTS == ("before_table_commit", "after_table_commit", "mid_log_write",
                             "before_log_commit", "after_log_commit")


@pytest.mark.parametrize("point", faults.POINTS)
def test_no_crash_without_the_env_variable(exits, point):
    faults.maybe_crash(point)
    assert exits == []


@pytest.mark.parametrize("point", faults.POINTS)
def test_crash_at_the_configured_point(exits, monkeypatch, point):
    monkeypatch.setenv(faults.ENV, point)
    with pytest.raises(Exited):
        faults.maybe_crash(point)
    assert exits == [75]


@pytest.mark.parametrize("point", faults.POINTS)
def test_no_crash_at_other_points(exits, monkeypatch, point):
    monkeypatch.setenv(faults.ENV, point)
    for other in faults.POINTS:
        if other != point:
            faults.maybe_crash(other)
    assert exits == []


@pytest.mark.parametrize("value", ["", "MID_LOG_WRITE", " mid_log_write", "mid_log_write,after_log_commit"])
def test_only_the_exact_point_name_crashes(exits, monkeypatch, value):
    monkeypatch.setenv(faults.ENV, value)
    faults.maybe_crash("mid_log_write")
    assert exits == []


def test_crash_is_not_an_exception_handlers_can_catch(exits, monkeypatch):
    # os._exit, not sys.exit: no SystemExit, no cleanup (the fake raises only to stop here)
    monkeypatch.setenv(faults.ENV, "after_log_commit")
    try:
        faults.maybe_crash("after_log_commit")
    except SystemExit:  # pragma: no cover - would mean sys.exit was used
        pytest.fail("maybe_crash raised SystemExit")
    except Exited:
        pass
    assert exits == [75]


def test_pause_waits_for_release(tmp_path, monkeypatch, exits):
    import threading
    import time

    monkeypatch.setenv(faults.PAUSE_ENV, f"after_table_commit:{tmp_path}")
    faults.maybe_crash("before_table_commit")  # another point: no pause
    assert not (tmp_path / "reached").exists()
    threading.Timer(0.3, (tmp_path / "release").touch).start()
    started = time.monotonic()
    faults.maybe_crash("after_table_commit")
    assert (tmp_path / "reached").exists() and exits == []
    assert time.monotonic() - started >= 0.25
