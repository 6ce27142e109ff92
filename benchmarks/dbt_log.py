"""What the benchmarks read in a dbt.log: its parts by invocation, the SQL statements each node
ran (dbt's query comment before each), and the run record's write (its debug line)."""
from __future__ import annotations

import re
from typing import Dict, List, Optional

RUN_RECORD = re.compile(r"run record of \S+ written to \S+ in (?P<seconds>[\d.]+) s")
HEADER = re.compile(r"^(?:\x1b\[[0-9;]*m)?=+ [\d:.]+ \| (?P<invocation>[0-9a-f-]+) =+\s*$")
STATEMENT = re.compile(r"On (?P<node>model\.[\w.]+): /\* \{")


def invocations(text: str) -> Dict[str, str]:
    """A dbt.log's text split by invocation: invocation id -> its lines (dbt starts each
    invocation's part with `===... HH:MM:SS.ffffff | <invocation id> ===...`)."""
    parts: Dict[str, List[str]] = {}
    current: Optional[List[str]] = None
    for line in text.splitlines():
        found = HEADER.match(line)
        if found:
            current = parts.setdefault(found["invocation"], [])
        elif current is not None:
            current.append(line)
    return {key: "\n".join(lines) for key, lines in parts.items()}


def statements(text: str, project: str = "bench") -> Dict[str, int]:
    """SQL statements a node ran, in one invocation's part of dbt.log: its `On model.<project>.
    <name>: /* {...} */` lines (dbt's query comment, the SQL after it). Model name -> count."""
    counts: Dict[str, int] = {}
    prefix = f"model.{project}."
    for line in text.splitlines():
        for found in STATEMENT.finditer(line):
            node = found["node"]
            if node.startswith(prefix):
                name = node[len(prefix):]
                counts[name] = counts.get(name, 0) + 1
    return counts


def run_record_seconds(text: str) -> Optional[float]:
    """The seconds the invocation's run record took to write (its debug line), None: none."""
    found = RUN_RECORD.search(text)
    return None if found is None else float(found["seconds"])
