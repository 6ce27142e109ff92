"""The suite's kills and freezes, each asserting that it found and stopped what it meant to: a
kill that finds nothing to kill (the process had ended, no executor of the application runs, the
pid is gone) fails the test there, instead of letting it pass with no fault having happened."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Optional

GONE_SECONDS = 30.0  # a SIGKILLed process leaves /proc (or is a zombie) well within this


def state(pid: int) -> Optional[str]:
    """The process's state letter (R, S, T, Z, ...), None when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def alive(pid: Optional[int]) -> bool:
    return bool(pid) and state(int(pid)) not in (None, "Z", "X")


def kill_group(process: subprocess.Popen, what: str = "the run", timeout: float = 120.0) -> str:
    """SIGKILL a process started with start_new_session=True and its group (dbt and its Spark
    JVM, at once); asserts it was running and that the signal ended it. Its output (if piped)."""
    assert process.poll() is None, \
        f"{what} (pid {process.pid}) had already ended ({process.returncode}): nothing was killed"
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # ended between the look and the kill: the assertion below says so
    output = process.communicate(timeout=timeout)[0] if process.stdout else process.wait(timeout)
    assert process.returncode == -signal.SIGKILL, \
        f"{what} (pid {process.pid}) ended by itself ({process.returncode}), not by the kill"
    return output if isinstance(output, str) else ""


def kill_pid(pid: Optional[int], what: str, timeout: float = GONE_SECONDS) -> None:
    """SIGKILL one process that is not our child (an executor JVM); asserts it existed and is gone."""
    assert alive(pid), f"{what}: no such process (pid {pid}): nothing was killed"
    os.kill(int(pid), signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while alive(pid):
        assert time.monotonic() < deadline, f"{what} (pid {pid}) still runs after SIGKILL"
        time.sleep(0.05)


def wait_until_stopped(pid: int, limit: float = 30.0) -> None:
    """Until every thread of `pid` is stopped (SIGSTOP is delivered asynchronously: a run told
    to go on right after it could still pass a step before it stops)."""
    deadline = time.monotonic() + limit
    while True:
        states = []
        for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
            try:
                states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
            except (OSError, IndexError):
                continue  # a thread that just ended
        if states and all(s in "Tt" for s in states):
            return
        assert states, f"process {pid} is gone: nothing was frozen"
        assert time.monotonic() < deadline, f"process {pid} did not stop: {states}"
        time.sleep(0.05)


def freeze(pid: Optional[int], what: str) -> None:
    """SIGSTOP `pid`; asserts it existed and that every thread of it stopped."""
    assert alive(pid), f"{what}: no such process (pid {pid}): nothing was frozen"
    os.kill(int(pid), signal.SIGSTOP)
    wait_until_stopped(int(pid))


def thaw(pid: Optional[int]) -> None:
    """SIGCONT, if the process is still there (a cleanup: never fails)."""
    if pid:
        try:
            os.kill(int(pid), signal.SIGCONT)
        except ProcessLookupError:
            pass
