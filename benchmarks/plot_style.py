"""How every plot of benchmarks/plots.py is drawn: the size the Performance page shows it at,
the smallest text it may have (recorded in the PNG for the site's layout test), its labels of rows
and rates, its title and subtitle, and its axes' margins."""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

from matplotlib.backends.backend_agg import FigureCanvasAgg  # no display: Agg renders to files
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

# Drawn for the width the Performance page shows them at: its content column at 1280 pixels is
# 748 CSS pixels (7.4 inches at 100 pixels an inch), saved at twice that (DPI 200) for the
# full-size image a click away. No text smaller than MIN_FONT points: 8.5 points at DPI 200 shown
# at half size is 11.8 CSS pixels. Each PNG records its smallest text in file pixels (MIN_TEXT_KEY),
# which the site's layout test scales by the width the image is shown at (tests/docs/test_layout.py).
WIDTH_IN = 7.4
DPI = 200
MIN_FONT = 8.5
MIN_TEXT_KEY = "logstore:min-text-px"


def min_text_px(figure: Figure) -> float:
    """The smallest visible text of a figure, in pixels of its PNG (font size at DPI)."""
    from matplotlib.text import Text
    sizes = [t.get_fontsize() for t in figure.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return min(sizes) * DPI / 72.0 if sizes else 0.0


def save(figure: Figure, target: Path) -> None:
    """The figure as a PNG at DPI, its smallest text's size in its metadata (MIN_TEXT_KEY)."""
    FigureCanvasAgg(figure)
    figure.draw_without_rendering()  # the legends' and ticks' texts exist before they are measured
    figure.savefig(target, dpi=DPI, metadata={MIN_TEXT_KEY: f"{min_text_px(figure):.1f}"})


# --- labels --------------------------------------------------------------------------------------

def rows_label(rows: float) -> str:
    for size, suffix in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if rows >= size:
            value = rows / size
            return f"{value:.0f}{suffix}" if value == int(value) else f"{value:.1f}{suffix}"
    return f"{rows:.0f}"


def rate_label(value: float) -> str:
    """Records/s as a point's label: 6.2k, 72.9k, 310k, 1.25M."""
    if value >= 1_000_000:
        return f"{value / 1e6:.2f}M"
    if value >= 100_000:
        return f"{value / 1e3:.0f}k"
    if value >= 1_000:
        return f"{value / 1e3:.1f}k"
    return f"{value:.0f}"


def tick_label(value: float, _: Any = None) -> str:
    """Records/s on an axis: 0, 500, 2k, 10k, 200k, 1M."""
    for size, suffix in ((1_000_000, "M"), (1_000, "k")):
        if value >= size:
            return f"{value / size:.1f}".rstrip("0").rstrip(".") + suffix
    return f"{value:.0f}"


def subtitle(data: Dict[str, Any], notes: Iterable[str], width_in: float = 12.0,
             facts: Optional[List[str]] = None) -> str:
    """Date, machine and commit of the result (or the `facts` given), its command and the notes,
    wrapped to the figure."""
    facts = facts or [data.get("date") or "date not recorded", data.get("machine") or "machine not recorded",
                      f"commit {data['commit']}" if data.get("commit") else "commit not recorded"]
    lines = [" · ".join(facts)]
    if data.get("command"):
        lines.append(data["command"])
    lines += [f"Note: {note}" for note in notes]
    chars = max(40, int(width_in * 15))  # 8.5-point text
    return "\n".join(wrapped for line in lines for wrapped in textwrap.wrap(line, chars) or [""])


def rows_axis(ax: Any, rows: List[float]) -> None:
    """Rows on x: log scale when they span a decade or more, ticks at the measured counts."""
    rows = sorted(set(rows))
    if rows and max(rows) / min(rows) >= 10:
        ax.set_xscale("log")
        ax.set_xlabel("rows (log scale)")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlim(min(rows) / 1.6, max(rows) * 1.6)
    else:
        ax.set_xlabel("rows")
        if len(rows) == 1:
            ax.set_xlim(rows[0] * 0.5, rows[0] * 1.5)
    ax.set_xticks(rows)
    ax.set_xticklabels([rows_label(r) for r in rows])


def new_figure(width: float, body: float, title: str, data: Dict[str, Any], notes: List[str],
            facts: Optional[List[str]] = None) -> Tuple[Figure, float]:
    """A figure `width` inches wide with the title and the subtitle on top of `body` inches of
    axes; and the top of the axes' area (figure fraction)."""
    text = subtitle(data, notes, width, facts)
    header = 0.75 + 0.2 * (text.count("\n") + 1)
    figure = Figure(figsize=(width, header + body))
    height = figure.get_figheight()
    figure.text(0.5, 1 - 0.12 / height, title, ha="center", va="top", fontsize=12, fontweight="bold", wrap=True)
    figure.text(0.5, 1 - 0.48 / height, text, ha="center", va="top", fontsize=MIN_FONT, color="0.25",
                linespacing=1.5)
    return figure, 1 - header / height


def margins(figure: Figure, top: float, bottom_in: float = 0.75, left_in: float = 0.85, **more: float) -> None:
    width, height = figure.get_size_inches()
    figure.subplots_adjust(top=top, bottom=bottom_in / height, left=left_in / width, right=1 - 0.25 / width, **more)


def label_points(ax: Any, points: List[Tuple[float, float, str, str]], gap_px: float = 11.0) -> None:
    """Label each (x, y, text, colour) beside its point: left of the smallest x, right of the
    others, labels at the same x pushed apart so that none overlaps (axes' scales and limits set)."""
    if not points:
        return
    first = min(x for x, *_ in points)
    to_points = 72.0 / ax.figure.dpi
    for x in sorted({x for x, *_ in points}):
        here = sorted((p for p in points if p[0] == x), key=lambda p: p[1])
        wanted = [ax.transData.transform((x, y))[1] for _, y, *_ in here]
        placed: List[float] = []
        for y_px in wanted:
            placed.append(max(y_px, placed[-1] + gap_px) if placed else y_px)
        shift = max(0.0, (placed[-1] - wanted[-1]) / 2) if placed else 0.0  # centre the pushed group
        left = x == first and len({p[0] for p in points}) > 1
        for (_, y, text, color), y_px, at in zip(here, wanted, placed):
            ax.annotate(text, (x, y), textcoords="offset points", fontsize=MIN_FONT, va="center",
                        ha="right" if left else "left", color=color,
                        xytext=(-8 if left else 8, (at - shift - y_px) * to_points))
