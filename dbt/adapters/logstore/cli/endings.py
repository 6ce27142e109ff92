"""How a `dbt-logstore` command ends other than by its own return: interrupted by Ctrl-C
(exit code 130, 'interrupted'), or its reader gone (`tail | head`: quietly)."""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any, Collection, List

INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command ended by Ctrl-C


class Interrupts:
    """Ctrl-C reaches the whole process group: the Spark JVM of `--from latest-full` or
    `status` dies of it too, and the read fails with a catalog or py4j error before Python
    sees the KeyboardInterrupt. Remembering the signal lets such a failure say 'interrupted'."""

    seen = False

    @classmethod
    def handle(cls, signum: int, frame: Any) -> None:
        cls.seen = True
        raise KeyboardInterrupt


def interrupted(before: Collection[int] = ()) -> int:
    """'interrupted', exit code 130; a Spark JVM this command started (a child process not in
    `before`) is stopped: pyspark starts it deaf to Ctrl-C, and it would finish its start or
    query with our stdout held."""
    print("interrupted", file=sys.stderr)
    for child in set(children()) - set(before):
        try:
            os.kill(child, signal.SIGTERM)
        except OSError:
            pass
    return INTERRUPTED


def children() -> List[int]:
    """This process's child processes (Linux's /proc; elsewhere none are found)."""
    found: List[int] = []
    for listing in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        try:
            found += [int(pid) for pid in listing.read_text().split()]
        except (OSError, ValueError):
            continue
    return found


def pipe_closed() -> int:
    """The reader of stdout went away (`tail | head`): end quietly; stdout is pointed at
    /dev/null so that the interpreter's last flush does not complain either."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 0
