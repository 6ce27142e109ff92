"""The benchmarks' results: rates, the cells and aligned columns of the tables they print, and
their results files (one key kept across rewrites, the plots drawn after a run)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

DASH = "-"


def rate(result: Dict[str, Any], missing: Optional[float] = None) -> Optional[float]:
    """Records per second of a measured result; `missing` when it took no time (not measured)."""
    return result["records"] / result["seconds"] if result.get("seconds") else missing


def rate_ratio(a: Dict[str, Any], b: Dict[str, Any]) -> str:
    """a's records/s over b's, as a cell."""
    return f"{rate(a) / rate(b):.2f}" if a["seconds"] and b["seconds"] else DASH


def ratio(a: Optional[float], b: Optional[float]) -> str:
    """a / b, as a cell; "-" when either is missing or zero."""
    return f"{a / b:.2f}" if a and b else DASH


def seconds(value: Optional[float]) -> str:
    return DASH if not value else f"{value:.1f}"


def mb(value: Optional[float]) -> str:
    return DASH if value is None else f"{value:,.0f}"


def number(value: Optional[float], pattern: str = "{:,.0f}") -> str:
    return DASH if value is None else pattern.format(value)


def text_table(header: Sequence[str], rows: List[Sequence[str]], left: int = 1,
               header_left: Optional[int] = None) -> List[str]:
    """Columns padded to their widest cell: the first `left` left-aligned (names), the others
    right-aligned (figures); the header's first `header_left` (default `left`) left-aligned."""
    header_left = left if header_left is None else header_left
    widths = [max(len(r[i]) for r in list(rows) + [header]) for i in range(len(header))]

    def line(cells: Sequence[str], lefts: int) -> str:
        return "  ".join(c.ljust(w) if i < lefts else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return [line(header, header_left)] + [line(row, left) for row in rows]


def store_in(path: Path, key: str, value: Any) -> None:
    """Set one key of a results file (mirror.py rewrites the file, keeping this key), its other
    keys and its formatting as they were."""
    data = json.loads(path.read_text()) if path.is_file() else {}
    data[key] = value
    path.write_text(json.dumps(data, indent=1) + "\n")


def kept(results: Path) -> Dict[str, Any]:
    """What a rewrite of the results file keeps of it: benchmarks/cluster.py's result ("cluster"),
    which the mirror benchmark does not measure."""
    try:
        old = json.loads(results.read_text())
    except (OSError, ValueError):
        return {}
    return {key: old[key] for key in ("cluster",) if isinstance(old, dict) and key in old}


def write_plots(results: Path) -> None:
    """The PNG plots of a results file (benchmarks/plots.py), next to it under plots/."""
    try:
        from benchmarks import plots
    except ImportError as exc:  # matplotlib: the bench extra
        print(f"plots skipped ({exc}; pip install 'dbt-logstore[bench]')")
        return
    try:
        for path in plots.write_plots(results):
            print(f"plot written to {path}")
    except Exception as exc:  # the run's figures are saved: draw them again with benchmarks/plots.py
        print(f"plots FAILED ({type(exc).__name__}: {exc}); python benchmarks/plots.py {results}")
