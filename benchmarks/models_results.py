"""The small-models benchmark's results (benchmarks/models.py): its cases, each model's mean
seconds and statements, plain and logged, and their ratios (the table it prints and the
Performance page shows), the run records' and the whole runs' seconds."""
from __future__ import annotations

from statistics import mean
from typing import Any, Dict, List, Optional, Sequence

from benchmarks.tables import DASH, text_table

CASES = ("first build", "rebuild", "rebuild, 2 logged inputs", "incremental merge", "keyless rebuild")
INCREMENTAL = "incremental_merge"
KEYLESS = "keyless"
DOWNSTREAM = "downstream"  # ref()s m01 and m02: its confirmation names them (model_inputs.py)
WARMUP = "warmup"


def run_record_summary(runs: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """Per method, the logged invocations' run-record seconds (mean, and each)."""
    out: Dict[str, Any] = {}
    for r in runs:
        if r["variant"] == "logged" and r.get("run_record_s") is not None:
            out.setdefault(r["method"], []).append(r["run_record_s"])
    return {method: {"mean_s": mean(each), "each_s": each} for method, each in out.items()}


def invocation_summary(runs: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """Per method and run (0: the first build), the whole `dbt run`'s seconds (one thread, every
    model; dbt's own start and end included), plain and logged, and their ratio: what a
    project's run takes, where the table above gives each model's own time."""
    out: Dict[str, Any] = {}
    for r in runs:
        if r.get("invocation_s") is not None:
            out.setdefault(r["method"], {}).setdefault(str(r["run"]), {})[r["variant"]] = r["invocation_s"]
    for by_run in out.values():
        for seconds in by_run.values():
            if seconds.get("plain") and seconds.get("logged") is not None:
                seconds["ratio"] = round(seconds["logged"] / seconds["plain"], 2)
    return out


def case_of(model: str, run: int) -> Optional[str]:
    """A model's case in a run (0: the first build, 1.. rebuilds); None: not in the table."""
    if model == INCREMENTAL:
        return "incremental merge" if run > 0 else None
    if model == KEYLESS:
        return "keyless rebuild" if run > 0 else None
    if model == DOWNSTREAM:
        return "rebuild, 2 logged inputs" if run > 0 else None
    if model == WARMUP:
        return None
    return "first build" if run == 0 else "rebuild"


def summarize(runs: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Mean seconds and statements a model, plain and logged, and the ratios, per method and case
    (`runs`: one per dbt invocation, {"method", "variant", "run", "nodes": {model: {...}}})."""
    cells: Dict[tuple, Dict[str, List[float]]] = {}
    for r in runs:
        for model, node in r["nodes"].items():
            case = case_of(model, r["run"])
            if case is None:
                continue
            cell = cells.setdefault((r["method"], case, r["variant"]), {"seconds": [], "statements": []})
            cell["seconds"].append(node["seconds"])
            cell["statements"].append(node["statements"])
    rows = []
    methods = list(dict.fromkeys(r["method"] for r in runs))
    for method in methods:
        for case in CASES:
            plain, logged = cells.get((method, case, "plain")), cells.get((method, case, "logged"))
            if not plain or not logged:
                continue
            row: Dict[str, Any] = {"method": method, "case": case, "models": len(logged["seconds"])}
            for variant, cell in (("plain", plain), ("logged", logged)):
                row[f"{variant}_s"] = mean(cell["seconds"])
                row[f"{variant}_statements"] = mean(cell["statements"])
            row["added_s"] = row["logged_s"] - row["plain_s"]
            row["ratio_s"] = row["logged_s"] / row["plain_s"] if row["plain_s"] else None
            row["ratio_statements"] = (row["logged_statements"] / row["plain_statements"]
                                       if row["plain_statements"] else None)
            rows.append(row)
    return rows


def _f(value: Optional[float], digits: int = 2) -> str:
    return DASH if value is None else f"{value:.{digits}f}"


def _cells(row: Dict[str, Any]) -> List[str]:
    return [row["method"], row["case"], str(row["models"]), _f(row["plain_s"]), _f(row["logged_s"]),
            "+" + _f(row["added_s"]), _f(row["ratio_s"]), _f(row["plain_statements"], 1),
            _f(row["logged_statements"], 1), _f(row["ratio_statements"])]


HEADERS = ("method", "case", "models", "plain s", "logged s", "added s", "× s", "plain stmts",
           "logged stmts", "× stmts")


def table(rows: Sequence[Dict[str, Any]]) -> str:
    """The ratio table, as the benchmark prints it: a row per method and case, a model's mean."""
    return "\n".join(text_table(HEADERS, [_cells(r) for r in rows], left=2))


def markdown(rows: Sequence[Dict[str, Any]]) -> str:
    """The same table in Markdown (for docs/performance.md)."""
    align = ["---", "---"] + ["---:"] * (len(HEADERS) - 2)
    return "\n".join("| " + " | ".join(cells) + " |"
                     for cells in (HEADERS, align, *(_cells(r) for r in rows)))


def invocation_lines(invocations: Dict[str, Any], models: int) -> List[str]:
    """invocation_summary as the benchmark prints it: a line per method and run."""
    lines = []
    for method, by_run in invocations.items():
        for run, seconds in sorted(by_run.items()):
            if "ratio" in seconds:
                case = "first build" if run == "0" else f"rebuild {run}"
                lines.append(f"  {method}: the whole dbt run ({case}, {models} models, one thread): plain "
                             f"{seconds['plain']:.1f} s, logged {seconds['logged']:.1f} s (x{seconds['ratio']:.2f})")
    return lines
