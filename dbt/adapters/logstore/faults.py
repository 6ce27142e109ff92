"""Crash injection for the fault tests: with LOGSTORE_FAULT_INJECT=<point> the process dies at
once (no cleanup, no exception handlers) when it reaches that step of the commit protocol.
Never set in normal use."""
from __future__ import annotations

import os

ENV = "LOGSTORE_FAULT_INJECT"
POINTS = ("before_table_commit", "after_table_commit", "mid_log_write", "before_log_commit",
          "after_log_commit")
# Between an incremental model's insert/overwrite and the tag that records it.
INCREMENTAL_POINT = "incremental_commit"


def maybe_crash(point: str) -> None:
    if os.environ.get(ENV) == point:
        os._exit(75)
