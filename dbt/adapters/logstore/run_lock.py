"""One run at a time per logged model: a lock table `<model>__logstore_lock` in the metastore.

Two runs of one model at once would diff against the same old rows and interleave their
change sets in the log. Creating a table is atomic in the metastore (a second CREATE TABLE of
the same name fails), so the run that creates the lock table owns the model until it drops it
(dbt's post-model hook drops it whether the run succeeded or failed).

A run that crashed cannot drop its lock. The lock names its owner (dbt invocation, host, pid
and the process's start time), so the next run on the same host sees that the owner is gone and
takes the lock over; any later step of the crashed run cannot happen, its process is dead. An
owner on another host cannot be checked from here: that lock stays until the owner's run ends or
someone who knows it is dead removes it (`dbt run-operation logstore_unlock`).
"""
from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Mapping, Optional

LOCK_SUFFIX = "__logstore_lock"
P_INVOCATION, P_HOST, P_PID, P_STARTED, P_SINCE = (
    "logstore.lock.invocation", "logstore.lock.host", "logstore.lock.pid",
    "logstore.lock.process_started", "logstore.lock.since")


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

    @classmethod
    def this_process(cls, invocation: str) -> "LockOwner":
        return cls(invocation=invocation, host=socket.gethostname(), pid=os.getpid(),
                   process_started=_process_start(os.getpid()),
                   since=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "LockOwner":
        return cls(invocation=props.get(P_INVOCATION, "?"), host=props.get(P_HOST, "?"),
                   pid=int(props.get(P_PID) or 0), process_started=props.get(P_STARTED) or None,
                   since=props.get(P_SINCE, "?"))

    def properties(self) -> dict:
        return {P_INVOCATION: self.invocation, P_HOST: self.host, P_PID: str(self.pid),
                P_STARTED: self.process_started or "", P_SINCE: self.since}

    def describe(self) -> str:
        return f"dbt invocation {self.invocation} (host {self.host}, pid {self.pid}, since {self.since})"

    def is_gone(self, this_host: Optional[str] = None) -> bool:
        """True only when the owner certainly no longer runs: same host, and its pid is dead or
        now belongs to a process started at another time."""
        if self.host != (this_host or socket.gethostname()) or self.pid <= 0:
            return False
        if not _alive(self.pid):
            return True
        started = _process_start(self.pid)
        return bool(self.process_started and started and started != self.process_started)


def locked_message(model: str, lock_relation: str, owner: LockOwner) -> str:
    return (
        f"Model '{model}' is being run by another dbt run: {owner.describe()} holds its lock "
        f"{lock_relation}. Two runs of one logged model at once would mix their changes in the "
        f"log, so this run changed nothing. Wait for that run to finish and run again. If that "
        f"run is no longer running (its host crashed), remove the lock with: dbt run-operation "
        f"logstore_unlock --args '{{model: {model}}}'")
