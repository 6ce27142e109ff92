"""One run at a time per logged model: a lock table `<model>` + names.LOCK_SUFFIX in the
metastore, held as a lease.

Two runs of one model at once would diff against the same old rows and interleave their
change sets in the log. Creating a table is atomic in the metastore (a second CREATE TABLE of
the same name fails), so the run that creates the lock table owns the model until it drops it
(dbt's post-model hook drops it whether the run succeeded or failed).

The lock is a lease: it names its owner (dbt invocation, host, pid, the process's start time),
a random token, and when it expires. Another run takes a lock over only when its owner
certainly no longer runs (same host, pid gone) or its lease has expired, whatever the host.
So while the owner runs, and less than a tenth of its lease has passed since it took or renewed
the lock, nobody can have taken it: the owner reads nothing then. Later, before each step that
changes the table or the log, it checks that the lock still carries its token and renews it
(`hold`): an owner that was paused (SIGSTOP, a frozen VM) or slow past its lease and lost the
lock to another run stops there, changing nothing more; on the log side Kafka fences its
transactional id as well. (A small model's run ends within that tenth: its lock costs the
statement that takes it and the one that drops it.)
"""
from __future__ import annotations

import os
import socket
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Optional

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore.spark import leftovers
from dbt.adapters.logstore.spark.catalog import Catalog, logger
from dbt.adapters.logstore.names import (
    LOCK_EXPIRES, LOCK_HOST, LOCK_INVOCATION, LOCK_PID, LOCK_SINCE, LOCK_SPARK_SESSION, LOCK_STARTED,
    LOCK_SUFFIX, LOCK_TOKEN,
)

# How long a lease lasts without renewal (profile field lock_lease_seconds).
DEFAULT_LEASE_SECONDS = 600


def _process_start(pid: int) -> Optional[str]:
    """The process's start time in clock ticks since boot (Linux), which tells a live owner from
    a later process that reused its pid; None where /proc is not available."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            # the command name (field 2) may hold spaces: fields are counted after its ')'
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


@dataclass(frozen=True)
class LockOwner:
    invocation: str
    host: str
    pid: int
    process_started: Optional[str]
    since: str
    token: str = ""
    expires_ms: int = 0  # 0: a lock of a version without leases (never expires by time)
    # time.monotonic() just before this process last wrote the lease (took or renewed it); 0:
    # not this process's writing. A clock of this process, so a change of the wall clock
    # cannot stretch the window in which the owner reads nothing.
    written_at: float = field(default=0.0, compare=False)
    # the owner's Spark Connect session, if it runs its statements on one (LOCK_SPARK_SESSION)
    spark_session: str = ""

    @classmethod
    def this_process(cls, invocation: str, lease_seconds: float = DEFAULT_LEASE_SECONDS,
                     spark_session: str = "") -> "LockOwner":
        return cls(invocation=invocation, host=socket.gethostname(), pid=os.getpid(),
                   process_started=_process_start(os.getpid()),
                   since=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   token=uuid.uuid4().hex, expires_ms=_expiry(lease_seconds),
                   written_at=time.monotonic(), spark_session=spark_session)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "LockOwner":
        return cls(invocation=props.get(LOCK_INVOCATION, "?"), host=props.get(LOCK_HOST, "?"),
                   pid=int(props.get(LOCK_PID) or 0), process_started=props.get(LOCK_STARTED) or None,
                   since=props.get(LOCK_SINCE, "?"), token=props.get(LOCK_TOKEN, ""),
                   expires_ms=int(props.get(LOCK_EXPIRES) or 0),
                   spark_session=props.get(LOCK_SPARK_SESSION, ""))

    def properties(self) -> dict:
        props = {LOCK_INVOCATION: self.invocation, LOCK_HOST: self.host, LOCK_PID: str(self.pid),
                 LOCK_STARTED: self.process_started or "", LOCK_SINCE: self.since,
                 LOCK_TOKEN: self.token, LOCK_EXPIRES: str(self.expires_ms)}
        if self.spark_session:
            props[LOCK_SPARK_SESSION] = self.spark_session
        return props

    def renewed(self, lease_seconds: float) -> "LockOwner":
        return replace(self, expires_ms=_expiry(lease_seconds), written_at=time.monotonic())

    def certainly_held(self, lease_seconds: float, now: Optional[float] = None) -> bool:
        """Whether this process wrote its lease less than a tenth of `lease_seconds` ago (by its
        own clock) and the lease is not due for renewal: then no other run can have taken the
        lock over (a takeover needs the lease expired or this process gone), and nothing needs
        reading. A clock difference between hosts of up to nine tenths of the lease is safe."""
        if not self.written_at:
            return False
        elapsed = (time.monotonic() if now is None else now) - self.written_at
        return 0 <= elapsed < lease_seconds / 10 and not self.due_for_renewal(lease_seconds)

    def due_for_renewal(self, lease_seconds: float, now_ms: Optional[int] = None) -> bool:
        """Whether a tenth of a `lease_seconds` lease has passed since it was last renewed:
        renewing at every step would cost a metastore write each, and after any step at least
        nine tenths of the lease are left."""
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        return self.expires_ms - now < lease_seconds * 900

    def describe(self) -> str:
        return f"dbt invocation {self.invocation} (host {self.host}, pid {self.pid}, since {self.since})"

    def expired(self, now_ms: Optional[int] = None) -> bool:
        return 0 < self.expires_ms < (now_ms if now_ms is not None else int(time.time() * 1000))

    def is_gone(self, this_host: Optional[str] = None) -> bool:
        """True only when the owner certainly no longer holds the model: its lease expired, or
        it ran on this host and its pid is dead or now belongs to a process started at another
        time."""
        if self.expired():
            return True
        if self.host != (this_host or socket.gethostname()) or self.pid <= 0:
            return False
        if not _alive(self.pid):
            return True
        started = _process_start(self.pid)
        return bool(self.process_started and started and started != self.process_started)


def _expiry(lease_seconds: float) -> int:
    return int((time.time() + lease_seconds) * 1000)


def lost_message(model: str, lock_relation: str, holder: Optional[LockOwner]) -> str:
    now = f"now held by {holder.describe()}" if holder else "since released"
    return (f"Model '{model}': this run lost its lock {lock_relation} ({now}): its lease expired "
            f"while the run was paused or slow, and another run took the model over. This run "
            f"stops here and changes nothing more; the run that holds the model settles what this "
            f"one left. Raise the profile's lock_lease_seconds if runs are this slow.")


def locked_message(model: str, lock_relation: str, owner: LockOwner) -> str:
    return (
        f"Model '{model}' is being run by another dbt run: {owner.describe()} holds its lock "
        f"{lock_relation}. Two runs of one logged model at once would mix their changes in the "
        f"log, so this run changed nothing. Wait for that run to finish and run again; if it "
        f"died, its lease expires {_when(owner.expires_ms)} and the next run takes the lock over, "
        f"or remove the lock now with: dbt run-operation logstore_unlock --args "
        f"'{{model: {model}}}'")


def _when(expires_ms: int) -> str:
    if not expires_ms:
        return "never (a lock without a lease)"
    return time.strftime("at %Y-%m-%dT%H:%M:%SZ", time.gmtime(expires_ms / 1000))


# --- the lock, taken, checked, released ----------------------------------------------------

def lock_relation(target_relation: Any) -> str:
    return str(target_relation.incorporate(path={"identifier": f"{target_relation.identifier}{LOCK_SUFFIX}"}))


def owner_of(catalog: Catalog, lock: str) -> Optional[LockOwner]:
    """Who holds `lock`, or None when nobody does (no lock table)."""
    try:
        props = catalog.properties(lock)
    except Exception:
        return None
    return LockOwner.from_properties(props)


def take(catalog: Catalog, model: str, lock: str, owner: LockOwner,
         stop_session: Optional[Callable[[str], int]] = None) -> bool:
    """Take the model's run lock for `owner` or fail, naming the run that holds it. A lock whose
    owner is certainly gone (LockOwner.is_gone) is taken over; first, when the owner ran on a
    Spark Connect session, `stop_session` interrupts what it had sent there (a Connect server
    runs a statement to its end after its client died: an insert that ended after this run
    judged it would change the table behind the log). Returns whether a lock was found (and
    taken over): only then may a run of this model have begun after this dbt invocation
    listed its schema, so only then does what it left need a listing of its own."""
    props = ", ".join(f"'{k}' = '{v}'" for k, v in owner.properties().items())
    error: Optional[Exception] = None
    taken_over = False
    for _ in range(3):
        try:
            leftovers.create_or_clear(catalog, lock, f"create table {lock} (held_by string) using parquet "
                                                     f"tblproperties ({props})")
            return taken_over
        except Exception as exc:
            held = owner_of(catalog, lock)
            if held is None:  # not a lock conflict (or the lock was just released): retry
                error = exc
                continue
            if not held.is_gone():
                raise DbtRuntimeError(locked_message(model, lock, held)) from None
            why = "whose lease expired" if held.expired() else "which ended without releasing it"
            logger.info(f"{model}: taking over the lock of {held.describe()}, {why}")
            if held.spark_session and stop_session is not None:
                stopped = stop_session(held.spark_session)
                if stopped:
                    logger.info(f"{model}: interrupted {stopped} statement(s) that run still had "
                                f"on the Spark Connect server")
            catalog.run(leftovers.drop_sql(lock))
            taken_over = True
    raise DbtRuntimeError(f"Model '{model}': could not create its run lock {lock}: {error}")


def hold(catalog: Catalog, model: str, lock: str, owner: LockOwner, lease_seconds: float) -> LockOwner:
    """Before a step that changes the table or the log: the lock must still carry `owner`'s
    token (a run paused past its lease has lost it, and stops here: LockLost); then its lease
    is renewed when due. Returns the owner as the lock now names it. Nothing is read while the
    lock is certainly still `owner`'s (LockOwner.certainly_held)."""
    if owner.certainly_held(lease_seconds):
        return owner
    held = owner_of(catalog, lock)
    if held is None or held.token != owner.token:
        raise LockLost(lost_message(model, lock, held))
    if not owner.due_for_renewal(lease_seconds):
        return owner
    owner = owner.renewed(lease_seconds)
    catalog.run(f"alter table {lock} set tblproperties ('{LOCK_EXPIRES}' = '{owner.expires_ms}')")
    return owner


class LockLost(DbtRuntimeError):
    """This run's lock is another run's now (or gone): the run stops."""


def release(catalog: Catalog, lock: str, owner: Optional[LockOwner],
            lease_seconds: float = DEFAULT_LEASE_SECONDS) -> None:
    """Drop `lock` unless another run has taken it over meanwhile (which needs no reading while
    the lock is certainly still `owner`'s)."""
    if owner is None or not owner.certainly_held(lease_seconds):
        held = owner_of(catalog, lock)
        if held is not None and owner is not None and held.token and held.token != owner.token:
            return  # another run's lock now
    try:
        catalog.run(leftovers.drop_sql(lock))
    except Exception as exc:  # the run's own error (if any) matters more
        logger.warning(f"could not release the run lock {lock}: {exc}; the next run on "
                       f"this host takes it over")


def unlock(catalog: Catalog, lock: str) -> str:
    """Remove a model's run lock whoever holds it, naming its owner."""
    held = owner_of(catalog, lock)
    catalog.run(leftovers.drop_sql(lock))
    return f"removed the lock of {held.describe()}" if held else "no lock was held"
