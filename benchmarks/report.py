"""A mirror benchmark result (benchmarks/mirror.py's results JSON) as Markdown tables.

The Performance page (docs/performance.md) holds markers such as
`<!-- bench: benchmarks/results.json -->`; its MkDocs hook (docs/hooks/benchmarks.py) puts
these tables in their place at build time, so the page shows what the file holds, not a copy.
Plain Python (no matplotlib), so the docs extra can import it. Figures a result lacks (older
results record no CPU time, commit or broker) are shown as "-".
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

DASH = "-"


def load(results: Union[str, Path, Dict[str, Any]]) -> Dict[str, Any]:
    return results if isinstance(results, dict) else json.loads(Path(results).read_text())


def configuration_label(c: Dict[str, Any]) -> str:
    """'raw producer (client alone)', 'mirror transactional, 1 writer', 'mirror eventual, 2 tasks'."""
    if c["kind"] == "raw":
        return "raw producer (client alone)"
    writers = c.get("writers") or 1
    return f"mirror {c.get('consistency', '?')}, " + ("1 writer" if writers == 1 else f"{writers} tasks")


def _number(value: Optional[float], digits: int = 0) -> str:
    return DASH if value is None else f"{value:,.{digits}f}"


def _table(header: Sequence[str], rows: List[Sequence[str]], right_from: int) -> List[str]:
    """A Markdown table; columns from `right_from` on are right-aligned (figures)."""
    align = ["---" if i < right_from else "---:" for i in range(len(header))]
    return ["| " + " | ".join(line) + " |" for line in (header, align, *rows)]


def provenance(data: Dict[str, Any]) -> str:
    facts = [f"**{data.get('date') or 'date not recorded'}**", data.get("machine") or "machine not recorded",
             f"commit `{data['commit']}`" if data.get("commit") else "commit not recorded"]
    line = ", ".join(facts)
    if data.get("command"):
        line += f": `{data['command']}`"
    return line


def run_line(name: str, data: Dict[str, Any]) -> str:
    """One results file's run, for Contributing: the file, then date, machine, commit, command
    (any results file of benchmarks/: a machine recorded as a dict is its values)."""
    machine = data.get("machine")
    if isinstance(machine, dict):
        machine = ", ".join(f"{key} {value}" for key, value in machine.items())
    facts = [data.get("date") or "date not recorded", machine or "machine not recorded",
             f"commit `{data['commit']}`" if data.get("commit") else "commit not recorded"]
    line = f"`{name}`: " + ", ".join(facts)
    return line + (f"; `{data['command']}`" if data.get("command") else "")


def mirror_tables(data: Dict[str, Any]) -> List[str]:
    """A table per Kafka client (and broker), so that each fits the page."""
    configurations = data.get("configurations") or []
    groups: Dict[str, List[Dict[str, Any]]] = {}
    for c in configurations:
        broker = c.get("broker", "embedded")
        groups.setdefault(c["client"] + ("" if broker == "embedded" else f", on {broker}"), []).append(c)
    header = ["configuration", "rows", "records/s", "× raw", "CPU µs/record", "driver MiB", "JVM MiB",
              "Kafka txns (longest s)"]
    lines: List[str] = []
    for group, members in groups.items():
        rows = []
        for c in members:
            transactional = c["kind"] == "mirror" and c.get("longest_transaction_s")
            rows.append([configuration_label(c), _number(c["rows"]), _number(c.get("records_per_s")),
                         "1.00" if c["kind"] == "raw" else _number(c.get("ratio_to_raw"), 2),
                         _number(c.get("cpu_us_per_record"), 1), _number(c.get("driver_mb")),
                         _number(c.get("jvm_mb")),
                         f"{c['transactions']} ({c['longest_transaction_s']:.1f})"
                         if transactional and c.get("transactions") else DASH])
        lines += ([""] if lines else []) + [f"**{group}**", "", *_table(header, rows, right_from=1)]
    return lines


def cpu_bound_table(data: Dict[str, Any]) -> List[str]:
    """What the cores allow, beside the best mirror measured under each bound."""
    bounds = data.get("cpu_bounds") or []
    if not bounds:
        return []
    header = ["client", "broker", "rows", "raw µs/record", "Spark µs/record",
              "bound records/s", "bound × raw", "best mirror × bound"]
    rows = []
    for b in bounds:
        mirrors = [c for c in data.get("configurations") or [] if c["kind"] == "mirror"
                   and c["client"] == b["client"] and c["rows"] == b["rows"]
                   and c.get("broker", "embedded") == b.get("broker", "embedded") and c.get("records_per_s")]
        best = max((c["records_per_s"] for c in mirrors), default=None)
        rows.append([b["client"], b.get("broker", "embedded"), _number(b["rows"]),
                     _number(b["raw_cpu_us_per_record"], 1), _number(b["spark_cpu_us_per_record"], 1),
                     _number(b["records_per_s"]), _number(b.get("ratio_to_raw"), 2),
                     _number(best / b["records_per_s"], 2) if best else DASH])
    return ["**What the cores allow**: the mirror does the raw producer's work and Spark's "
            "(CPU µs per record, every process counted), so it sends at most cores / their sum "
            "records a second", "", *_table(header, rows, right_from=2)]


def rebuild_table(data: Dict[str, Any]) -> List[str]:
    rebuilds = data.get("rebuilds") or []
    if not rebuilds:
        return []
    header = ["rows", "client", "records", "with log s", "without s", "× without", "mirror s"]
    rows = [[_number(r["rows"]), r["client"], _number(r["records"]), _number(r["with_log_s"], 1),
             _number(r["without_log_s"], 1), _number(r.get("ratio"), 2), _number(r.get("mirror_s"), 1)]
            for r in rebuilds]
    return ["**Keyed rebuild, 1% of the rows changed**: the run with the log and without it, each "
            "in a fresh process", "", *_table(header, rows, right_from=2)]


def markdown(results: Union[str, Path, Dict[str, Any]], with_provenance: bool = True) -> str:
    """The result's provenance line and its tables (mirror per client, CPU bounds, rebuilds,
    failures). The Performance page shows the tables alone (with_provenance=False): where and how
    each was measured is in Contributing (docs/hooks/benchmarks.py, `run_line`)."""
    data = load(results)
    parts = [provenance(data), ""] if with_provenance else []
    parts += mirror_tables(data)
    for table in (cpu_bound_table(data), rebuild_table(data)):
        if table:
            parts += ["", *table]
    if data.get("failures"):
        parts += ["", "Failed configurations: " + "; ".join(str(f) for f in data["failures"])]
    return "\n".join(parts)
