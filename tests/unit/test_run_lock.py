"""The run lock's owner check: a lock is taken over only when its owner certainly ended."""
import os
import subprocess
import sys

from dbt.adapters.logstore import run_lock
from dbt.adapters.logstore.run_lock import LockOwner


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_properties_round_trip():
    owner = LockOwner.this_process("inv-1")
    again = LockOwner.from_properties(owner.properties())
    assert again == owner
    assert again.pid == os.getpid() and again.invocation == "inv-1"


def test_a_live_owner_on_this_host_holds_the_lock():
    assert not LockOwner.this_process("me").is_gone()


def test_a_dead_owner_on_this_host_is_gone():
    owner = LockOwner.this_process("crashed")
    dead = LockOwner(**{**owner.__dict__, "pid": _dead_pid()})
    assert dead.is_gone()


def test_a_reused_pid_is_a_different_process():
    owner = LockOwner.this_process("old")
    if owner.process_started is None:  # no /proc here: only liveness can be checked
        return
    reused = LockOwner(**{**owner.__dict__, "process_started": str(int(owner.process_started) - 1)})
    assert reused.is_gone()


def test_an_owner_on_another_host_is_never_presumed_gone():
    owner = LockOwner.this_process("elsewhere")
    remote = LockOwner(**{**owner.__dict__, "host": "another-host", "pid": _dead_pid()})
    assert not remote.is_gone()
    assert not LockOwner.from_properties({}).is_gone()  # nothing known: not gone


def test_the_locked_message_names_model_owner_and_the_way_out():
    owner = LockOwner("inv-7", "h1", 4242, "1", "2026-11-22T10:00:00Z")
    message = run_lock.locked_message("orders", "analytics.orders__logstore_lock", owner)
    for part in ("'orders'", "inv-7", "h1", "4242", "analytics.orders__logstore_lock",
                 "changed nothing", "dbt run-operation logstore_unlock --args '{model: orders}'"):
        assert part in message
