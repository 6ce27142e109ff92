"""The mirror benchmark's results (benchmarks/mirror.py): a configuration's entry as results.json
holds it, the bound the machine's cores set on the mirror, and the targets `--check` holds a
result to (TARGETS)."""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional

from benchmarks.tables import rate


def cpu_bounds(configurations: List[Dict[str, Any]], fetch_us: Dict[int, float]) -> List[Dict[str, Any]]:
    """What the machine's cores allow: the mirror does the raw producer's work (the client and
    the broker) plus Spark's (rendering the records, sending them to the driver), so with every
    core busy it sends at most cores / (raw's + Spark's CPU us per record) records a second.
    One bound per raw producer (client, rows, broker) whose mirrors were measured, as
    results.json holds them ("cpu_bounds"; benchmarks/plots.py draws them)."""
    bounds, cores = [], os.cpu_count() or 1
    for raw in (c for c in configurations if c["kind"] == "raw" and c.get("cpu_us_per_record")):
        spark_us = fetch_us.get(raw["rows"])
        mirrors = [c for c in configurations if c["kind"] == "mirror" and c["client"] == raw["client"]
                   and c["rows"] == raw["rows"] and c.get("broker") == raw.get("broker")
                   and c.get("cpu_us_per_record")]
        if not spark_us or not mirrors:
            continue
        bound = cores / ((raw["cpu_us_per_record"] + spark_us) / 1e6)
        bounds.append({"client": raw["client"], "rows": raw["rows"], "broker": raw.get("broker", "embedded"),
                       "cores": cores, "raw_cpu_us_per_record": raw["cpu_us_per_record"],
                       "spark_cpu_us_per_record": spark_us, "records_per_s": bound,
                       "ratio_to_raw": bound / raw["records_per_s"] if raw.get("records_per_s") else None,
                       "mirrors": mirrors})
    return bounds


def cpu_budget(configurations: List[Dict[str, Any]], fetch_us: Dict[int, float]) -> List[str]:
    """cpu_bounds() as the lines the run prints."""
    lines = []
    for b in cpu_bounds(configurations, fetch_us):
        used = ", ".join(f"{m['consistency']} {m['writers']} writer(s) {m['cpu_us_per_record']:.1f}"
                         for m in b["mirrors"])
        ratio = f" = x{b['ratio_to_raw']:.2f} the raw producer" if b["ratio_to_raw"] is not None else ""
        lines.append(f"CPU us/record, {b['rows']:,} rows [{b['client']}] on {b['broker']}: raw producer "
                     f"{b['raw_cpu_us_per_record']:.1f} + Spark -> driver {b['spark_cpu_us_per_record']:.1f}; "
                     f"mirror {used}. On {b['cores']} cores the mirror can send at most "
                     f"{b['records_per_s']:,.0f} records/s{ratio}")
    return lines


def entry(kind: str, client: str, rows: int, consistency: str, writers: int,
           result: Dict[str, Any], raw: Optional[Dict[str, Any]], broker: str = "embedded") -> Dict[str, Any]:
    """One configuration's figures, as results.json holds them."""
    records_per_s = rate(result) if result["seconds"] else None
    ratio = records_per_s / rate(raw) if raw is not None and records_per_s and raw["seconds"] else None
    return {"kind": kind, "client": client, "rows": rows, "consistency": consistency,
            "writers": writers, "broker": broker, "records": result["records"], "seconds": result["seconds"],
            "records_per_s": records_per_s, "ratio_to_raw": ratio, "driver_mb": result.get("driver_mb"),
            "jvm_mb": result.get("jvm_mb"), "transactions": result.get("transactions"),
            "longest_transaction_s": result.get("longest_transaction_s"),
            "cpu_us_per_record": result["cpu_s"] / result["records"] * 1e6
            if result.get("cpu_s") and result["records"] else None}


# --- the results file and the targets (issue: performance) -----------------------------------

def _mirrors(results: Dict[str, Any], **match: Any) -> List[Dict[str, Any]]:
    return [c for c in results["configurations"] if c["kind"] == "mirror"
            and all(c.get(k) == v for k, v in match.items())]


def _lowest_ratio(**match: Any) -> Callable[[Dict[str, Any]], Optional[float]]:
    """The target's figure: the lowest mirror / raw ratio of the matching configurations."""
    def measure(results: Dict[str, Any]) -> Optional[float]:
        ratios = [c["ratio_to_raw"] for c in _mirrors(results, writers=1, **match)
                  if c.get("ratio_to_raw") is not None]
        return min(ratios) if ratios else None
    return measure


def _rebuild_ratio(rows: int) -> Callable[[Dict[str, Any]], Optional[float]]:
    def measure(results: Dict[str, Any]) -> Optional[float]:
        ratios = [r["ratio"] for r in results["rebuilds"] if r["rows"] == rows]
        return max(ratios) if ratios else None
    return measure


def _driver_memory_growth(results: Dict[str, Any]) -> Optional[float]:
    """Per client and path, the driver's peak from its smallest to its largest row count, when
    those span 100k to 10M rows; the largest growth."""
    growth = []
    for client in {c["client"] for c in results["configurations"]}:
        for writers in {c["writers"] for c in _mirrors(results, client=client)}:
            runs = sorted(_mirrors(results, client=client, writers=writers,
                                   consistency="transactional"), key=lambda c: c["rows"])
            if runs and runs[0]["rows"] <= 100_000 and runs[-1]["rows"] >= 10_000_000:
                growth.append(runs[-1]["driver_mb"] / runs[0]["driver_mb"] - 1)
    return max(growth) if growth else None


# (name, the figure measured from results.json, comparison, target)
TARGETS = [
    ("mirror / raw, kafka-python, 1 writer, 1M rows",
     _lowest_ratio(client="kafka-python", rows=1_000_000), ">=", 0.9),
    ("mirror / raw, confluent, 1 writer, 1M rows, transactional",
     _lowest_ratio(client="confluent", rows=1_000_000, consistency="transactional"), ">=", 0.8),
    ("mirror / raw, confluent, 1 writer, 1M rows, eventual",
     _lowest_ratio(client="confluent", rows=1_000_000, consistency="eventual"), ">=", 0.8),
    ("mirror / raw at 100k rows (fixed costs)", _lowest_ratio(rows=100_000), ">=", 0.6),
    ("keyed rebuild 1M rows 1% changed, with log / without", _rebuild_ratio(1_000_000), "<", 2.0),
    ("keyed rebuild 10M rows 1% changed, with log / without", _rebuild_ratio(10_000_000), "<", 2.0),
    ("driver peak RSS, 100k -> 10M rows", _driver_memory_growth, "<", 0.20),
]


def check(results: Dict[str, Any]) -> int:
    """Print each target with its measured figure; non-zero when one is missed or missing."""
    missed = 0
    print(f"targets, from {results.get('date')} on {results.get('machine')}:")
    for name, measure, comparison, target in TARGETS:
        value = measure(results)
        if value is None:
            verdict, shown = "NOT MEASURED", "-"
        else:
            met = value >= target if comparison == ">=" else value < target
            verdict, shown = ("met" if met else "MISSED"), f"{value:.2f}"
        missed += verdict != "met"
        print(f"  {verdict:<12} {name}: {shown} (target {comparison} {target})")
    for failure in results.get("failures", []):
        missed += 1
        print(f"  {'FAILED':<12} {failure['configuration']}: {failure['error']}")
    return 1 if missed else 0
