"""dbt in a long-lived Python process: one process that runs the dbt commands it is given one
after another (dbt's programmatic entry, `dbtRunner`, the CLI's own commands), in a process
group of its own.

Two uses:
- test_faults_generations.py kills it in the middle of a command (a kill lands in the command,
  not in Python or Spark starting);
- fault_project.dbt() runs the tests' ordinary commands on a Thrift Server project in one
  (`long_lived`): a fresh `dbt` process spends about 4.8 of its 7.8 CPU-seconds on starting
  (Python, dbt's imports, its project), and the suite runs about 60 such commands on two
  cores (measured side by side: docs/contributing.md, Timings). Commands that a test kills or
  injects a fault into still run as `dbt` processes of their own.
"""
from __future__ import annotations

import atexit
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

# dbt commands read from stdin (one JSON list of arguments a line), run one after another; after
# each, its exit code as the `dbt` command would have it (0, 1: a node failed, 2: dbt failed)
END = "DBT-COMMAND-ENDED "
DRIVER = f"""import json, sys
from dbt.cli.main import dbtRunner
runner = dbtRunner()
for line in sys.stdin:
    result = runner.invoke(json.loads(line))
    code = 0 if result.success else (2 if result.exception is not None else 1)
    print("\\n{END}" + json.dumps(code), flush=True)
"""


class DbtProcess:
    """One Python process that runs the dbt commands it is given one after another, in one Spark
    JVM (the session method's, started by the first), in a process group of its own."""

    def __init__(self, root: Path, env: Optional[Dict[str, str]] = None) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", DRIVER], cwd=root, text=True, env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        self.lines: "queue.Queue[Optional[str]]" = queue.Queue()
        self.output: List[str] = []  # the running command's
        self.busy = threading.Lock()  # held by the thread whose command runs (long_lived)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _ended(self, deadline: float) -> Optional[int]:
        """The running command's exit code, None if it still runs at `deadline`."""
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return None
            if line is None:
                raise AssertionError(f"the dbt process ended ({self.process.wait()}) in the middle "
                                     "of a command:\n" + "".join(self.output)[-3000:])
            if line.startswith(END):
                return json.loads(line[len(END):])
            self.output.append(line)

    def _start(self, args: List[str]) -> None:
        self.output = []
        self.process.stdin.write(json.dumps(args) + "\n")
        self.process.stdin.flush()

    def finished(self, args: List[str], within: float) -> bool:
        """`dbt <args>` started; whether it ended within `within` seconds."""
        self._start(args)
        return self._ended(time.monotonic() + within) is not None

    def run(self, args: List[str], timeout: float = 600) -> Tuple[int, str]:
        """`dbt <args>`: its exit code and its output."""
        self._start(args)
        code = self._ended(time.monotonic() + timeout)
        assert code is not None, f"dbt {args[0]} still runs after {timeout:.0f} s:\n" \
            + "".join(self.output)[-3000:]
        return code, "".join(self.output)

    def invoke(self, args: List[str], timeout: float = 600) -> Tuple[bool, str]:
        """dbt's success and its output."""
        code, output = self.run(args, timeout)
        return code == 0, output

    def kill(self) -> None:
        """SIGKILL to its process group: dbt and its Spark JVM, at once."""
        assert self.process.poll() is None, "the dbt process had ended: nothing was killed"
        os.killpg(self.process.pid, signal.SIGKILL)
        assert self.process.wait(timeout=60) == -signal.SIGKILL

    def close(self) -> None:
        """Its end (stdin closed), or its kill when it does not end."""
        try:
            self.process.stdin.close()
            self.process.wait(timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


# The long-lived processes of this pytest worker, by project and environment. A worker runs
# one test at a time, so two are kept (each holds dbt's imports: about 200 MB); the one used
# least recently is closed when a third is needed.
_KEPT = 2
_processes: Dict[Tuple[str, str], DbtProcess] = {}
_lock = threading.Lock()


def long_lived(root: Path, env: Dict[str, str]) -> DbtProcess:
    """The long-lived dbt process of the project at `root` with environment `env`."""
    key = (str(root), json.dumps(sorted(env.items())))
    with _lock:
        process = _processes.pop(key, None)
        if process is None or process.process.poll() is not None:
            process = DbtProcess(root, env)
        _processes[key] = process  # now the most recently used
        while len(_processes) > _KEPT:
            _processes.pop(next(iter(_processes))).close()
        return process


@atexit.register
def _close_all() -> None:
    """At the worker's end. (A worker that ends without it closes their stdin all the same,
    and each ends with its input.)"""
    for process in _processes.values():
        process.close()
    _processes.clear()
