"""The run lock's owner check: a lock is taken over only when its owner certainly ended."""
import os
import subprocess
import sys
import time
from dataclasses import replace

from dbt.adapters.logstore.commit import run_lock
from dbt.adapters.logstore.commit.run_lock import LockOwner, lost_message


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


# --- leases ------------------------------------------------------------------------------------

def test_a_lock_is_a_lease_with_a_token():
    owner = LockOwner.this_process("inv-1", lease_seconds=60)
    props = owner.properties()
    assert len(props["logstore.lock.lease_id"]) == 32
    assert LockOwner.from_properties(props) == owner
    assert not owner.expired()
    assert owner.renewed(120).expires_ms > owner.expires_ms
    assert owner.renewed(120).token == owner.token


def test_a_lease_is_renewed_once_a_tenth_of_it_has_passed():
    owner = LockOwner.this_process("inv-1", lease_seconds=60)
    now = owner.expires_ms - 60_000
    assert not owner.due_for_renewal(60, now_ms=now)
    assert not owner.due_for_renewal(60, now_ms=now + 5_000)
    assert owner.due_for_renewal(60, now_ms=now + 7_000)
    assert owner.due_for_renewal(60, now_ms=owner.expires_ms + 1)  # expired
    assert replace(owner, expires_ms=0).due_for_renewal(60)  # a lock without a lease


def test_an_expired_lease_is_gone_even_on_another_host():
    other = LockOwner(invocation="i", host="elsewhere", pid=1, process_started=None, since="s",
                      token="t", expires_ms=1)
    assert other.expired() and other.is_gone()
    alive = LockOwner(invocation="i", host="elsewhere", pid=1, process_started=None, since="s",
                      token="t", expires_ms=int(time.time() * 1000) + 60000)
    assert not alive.expired() and not alive.is_gone()


def test_a_lock_without_a_lease_never_expires_by_time():
    old = LockOwner.from_properties({"logstore.lock.host": "elsewhere", "logstore.lock.pid": "1"})
    assert old.expires_ms == 0 and not old.expired() and not old.is_gone()


def test_lost_message_says_what_happened_and_what_to_do():
    holder = LockOwner.this_process("inv-2", lease_seconds=60)
    message = lost_message("orders", "a.orders__logstore_lock", holder)
    assert "Model 'orders'" in message and "lost its lock" in message and "inv-2" in message
    assert "changes nothing more" in message and "lock_lease_seconds" in message
    assert "since released" in lost_message("orders", "l", None)


# --- what an owner reads ---------------------------------------------------------------------

class _Catalog:
    """Records statements; the lock's properties are `held`'s."""

    def __init__(self, held=None):
        self.held, self.statements = held, []

    def properties(self, relation):
        self.statements.append(f"show tblproperties {relation}")
        if self.held is None:
            raise RuntimeError("TABLE_OR_VIEW_NOT_FOUND")
        return self.held.properties()

    def run(self, sql):
        self.statements.append(sql)


def test_within_a_tenth_of_its_lease_an_owner_reads_nothing():
    # a takeover needs the lease expired or the owner gone: neither can be so yet
    owner = LockOwner.this_process("inv-1", lease_seconds=600)
    assert owner.certainly_held(600)
    catalog = _Catalog(held=owner)
    assert run_lock.hold(catalog, "orders", "s.orders__logstore_lock", owner, 600) is owner
    run_lock.release(catalog, "s.orders__logstore_lock", owner, 600)
    assert catalog.statements == ["drop table if exists s.orders__logstore_lock purge"]


def test_later_an_owner_checks_its_token_and_stops_if_the_lock_is_anothers():
    owner = LockOwner.this_process("inv-1", lease_seconds=6)
    later = owner.written_at + 0.7  # past a tenth of a 6 s lease
    assert not owner.certainly_held(6, now=later)
    paused = replace(owner, written_at=owner.written_at - 1)
    other = LockOwner.this_process("inv-2", lease_seconds=6)
    catalog = _Catalog(held=other)
    try:
        run_lock.hold(catalog, "orders", "l", paused, 6)
    except run_lock.LockLost as exc:
        assert "lost its lock" in str(exc)
    else:
        raise AssertionError("a paused owner must stop")
    run_lock.release(catalog, "l", paused, 6)  # another run's lock now: not dropped
    assert catalog.statements == ["show tblproperties l", "show tblproperties l"]


def test_an_owner_not_written_by_this_process_is_never_certain():
    read = LockOwner.from_properties(LockOwner.this_process("inv-1").properties())
    assert not read.certainly_held(600)


def test_a_lock_names_the_owners_spark_connect_session_and_a_takeover_stops_it(monkeypatch):
    # a Connect server runs a dead client's statements to their end: the taker interrupts them
    owner = LockOwner.this_process("inv-1", spark_session="alice/1b4e28ba-2fa1-11d2-883f-0016d3cca427")
    assert LockOwner.from_properties(owner.properties()).spark_session == owner.spark_session
    assert "logstore.lock.spark_session" not in LockOwner.this_process("inv-2").properties()
    dead = replace(owner, pid=_dead_pid())
    catalog, stopped = _Catalog(held=dead), []

    def create_or_clear(catalog, relation, sql):
        if not stopped:
            raise RuntimeError("TABLE_OR_VIEW_ALREADY_EXISTS")
        catalog.statements.append("create lock")

    monkeypatch.setattr(run_lock.leftovers, "create_or_clear", create_or_clear)
    taken_over = run_lock.take(catalog, "orders", "l", LockOwner.this_process("inv-3"),
                               stop_session=lambda session: stopped.append(session) or 2)
    assert taken_over and stopped == [owner.spark_session]
    assert catalog.statements[-2:] == ["drop table if exists l purge", "create lock"]
