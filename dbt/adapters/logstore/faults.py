"""Fault injection for the fault tests. Never set in normal use.

LOGSTORE_FAULT_INJECT=<point>: the process dies at once (no cleanup, no exception handlers)
when it reaches that step of the commit protocol.
LOGSTORE_FAULT_PAUSE=<point>:<dir>: the process stops at that step, creates <dir>/reached and
waits until <dir>/release exists, so a test can act while a run is in the middle of a step
(start a second run of the model, freeze the broker).
LOGSTORE_FAULT_PAUSE_EACH=<point>,<point>...:<dir>: every time the process reaches one of those
steps it creates <dir>/reached-<n> (n counts the pauses from 1; it holds the step's name) and
waits until <dir>/release-<n> exists (a test then acts at each step of a run: kill a broker).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

ENV = "LOGSTORE_FAULT_INJECT"
PAUSE_ENV = "LOGSTORE_FAULT_PAUSE"
PAUSE_EACH_ENV = "LOGSTORE_FAULT_PAUSE_EACH"
POINTS = ("before_table_commit", "after_table_commit", "mid_log_write", "before_log_commit",
          "after_log_commit")
# Between an incremental model's insert/overwrite and the tag that records it.
INCREMENTAL_POINT = "incremental_commit"
# Between an incremental model's intent and its insert/overwrite (a test then leaves there what
# Spark leaves when killed inside the statement).
INTENT_POINT = "incremental_intent"
# Between dropping the old table and renaming the staged one into its place.
SWAP_POINT = "mid_swap"
# Before the log system's identity checks of a run (its first questions to the log's broker).
LOG_CHECKS_POINT = "before_log_checks"
PAUSE_LIMIT_S = 600


def maybe_crash(point: str) -> None:
    if os.environ.get(ENV) == point:
        os._exit(75)
    pause = os.environ.get(PAUSE_ENV, "")
    if pause.partition(":")[0] == point:
        folder = Path(pause.partition(":")[2])
        (folder / "reached").touch()
        deadline = time.monotonic() + PAUSE_LIMIT_S
        while not (folder / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    points, _, each_folder = os.environ.get(PAUSE_EACH_ENV, "").partition(":")
    if point in points.split(","):
        folder = Path(each_folder)
        count = len(list(folder.glob("reached-*"))) + 1
        # written whole, then renamed: a test that sees the file reads the step's name, not ""
        written = folder / f".reached-{count}.{os.getpid()}"
        written.write_text(point)
        os.replace(written, folder / f"reached-{count}")
        deadline = time.monotonic() + PAUSE_LIMIT_S
        while not (folder / f"release-{count}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
