"""Plots of a mirror benchmark result (benchmarks/mirror.py's results JSON), as PNG files.

    python benchmarks/plots.py [RESULTS_JSON ...] [--out DIR]

benchmarks/mirror.py calls write_plots() after every run (`make bench`, --quick too); this entry
point draws them again from a saved result, without running the benchmark. They go to plots/
next to the JSON (--out), named after it: benchmarks/results.json gives
benchmarks/plots/mirror-throughput.png and rebuild-time.png, results-brokers.json gives
brokers-mirror-throughput.png and brokers-rebuild-time.png.

- mirror-throughput: records/s by rows, a panel per Kafka client (and broker): the raw producer,
  each mirror configuration beside it, and the CPU bound the machine's cores set (a dashed line);
- rebuild-time: the keyed rebuild's run time (1% of the rows changed) with the log and without
  it, by rows, and the mirror step within the run with the log.

A result of benchmarks/cluster.py (it has "executor_cores") gives one plot instead:
results-cluster.json gives plots/cluster-throughput.png (results-cluster-quick.json:
quick-cluster-throughput.png), records/s per configuration as bars, a panel per broker, each with
its ratio to Spark's writer (DataFrame); a failed configuration has no bar, one that fell back to
the cursor (cluster.py's "fell_back") a hatched one. benchmarks/cluster.py draws it after its run.

Only what the result holds is drawn: a figure or series the JSON lacks (older results do not
record the CPU bound or the commit) is left out, and the subtitle says so.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # run by path: the benchmarks package beside this file
    sys.path.insert(0, str(HERE.parent))

# labels and loading, shared with the Performance page's tables
from benchmarks.report import configuration_label, load  # noqa: E402
from benchmarks.plot_style import (DPI, MIN_FONT, MIN_TEXT_KEY, WIDTH_IN, label_points, margins,  # noqa: E402,F401
                                   new_figure, rate_label, rows_axis, rows_label, save, tick_label)

THROUGHPUT = "mirror-throughput.png"
REBUILD = "rebuild-time.png"

RAW_STYLE = {"color": "black", "marker": "s", "linewidth": 2.4, "markersize": 7}
MIRROR_COLORS = ["tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink"]
MIRROR_MARKERS = ["o", "^", "D", "v", "P", "X"]
BOUND_STYLE = {"color": "tab:red", "linestyle": "--", "marker": "_", "linewidth": 1.6, "markersize": 14}
CLUSTER_THROUGHPUT = "throughput.png"  # after the result's name: cluster-throughput.png
SPARK_WRITER = "Spark writer (DataFrame)"  # the cluster result's reference (cluster.py's with_ratios)
KIND_STYLE = {"session": ("tab:blue", "mirror, session method"), "thrift": ("tab:orange", "mirror, thrift method"),
              "spark": ("0.45", "Spark's own Kafka writer"), "spark_sql": ("0.45", "Spark's own Kafka writer")}
BROKER_TITLES = {"embedded": "embedded broker (tansu)", "apache": "Apache Kafka, 3 nodes"}


def plot_paths(results_path: Optional[Path], out_dir: Optional[Path] = None) -> Tuple[Path, Path]:
    """Where a result's plots go: plots/ beside the JSON, prefixed by what follows "results-"."""
    if out_dir is None:
        out_dir = (results_path.parent if results_path else HERE) / "plots"
    stem = results_path.stem if results_path else "results"
    if stem == "results":
        prefix = ""
    else:
        prefix = (stem[len("results-"):] if stem.startswith("results-") else stem) + "-"
    return out_dir / (prefix + THROUGHPUT), out_dir / (prefix + REBUILD)


def is_cluster_result(data: Dict[str, Any]) -> bool:
    """benchmarks/cluster.py's result (it records its executor cores), not mirror.py's."""
    return "executor_cores" in data


def cluster_plot_path(results_path: Optional[Path], out_dir: Optional[Path] = None) -> Path:
    """results-cluster.json: plots/cluster-throughput.png; results-cluster-quick.json (--quick):
    plots/quick-cluster-throughput.png, which .gitignore keeps out as every quick-*.png."""
    if out_dir is None:
        out_dir = (results_path.parent if results_path else HERE) / "plots"
    stem = results_path.stem if results_path else "results-cluster"
    name = stem[len("results-"):] if stem.startswith("results-") else stem
    if name.endswith("-quick"):
        name = "quick-" + name[:-len("-quick")]
    return out_dir / f"{name}-{CLUSTER_THROUGHPUT}"


def write_cluster_plot(results: Union[str, Path, Dict[str, Any]], out_dir: Union[str, Path, None] = None) -> Path:
    """Write the cluster benchmark's plot (a JSON file's path or its dict); return its path."""
    path = None if isinstance(results, dict) else Path(results)
    target = cluster_plot_path(path, Path(out_dir) if out_dir is not None else None)
    target.parent.mkdir(parents=True, exist_ok=True)
    save(cluster_figure(load(results)), target)
    return target


def write_plots(results: Union[str, Path, Dict[str, Any]], out_dir: Union[str, Path, None] = None) -> List[Path]:
    """Write the plots of a result (a JSON file's path or its dict): both of a mirror result, the
    one of a cluster result; return their paths."""
    path = None if isinstance(results, dict) else Path(results)
    data = load(results)
    if is_cluster_result(data):
        return [write_cluster_plot(data if path is None else path, out_dir)]
    throughput, rebuild = plot_paths(path, Path(out_dir) if out_dir is not None else None)
    throughput.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for figure, target in ((throughput_figure(data), throughput), (rebuild_figure(data), rebuild)):
        save(figure, target)
        written.append(target)
    return written


# --- records/s by rows ---------------------------------------------------------------------------

def throughput_figure(data: Dict[str, Any]) -> Figure:
    configurations = data.get("configurations") or []
    measured = [c for c in configurations if c.get("records_per_s") and c.get("rows")]
    notes = []
    unmeasured = len(configurations) - len(measured)
    if unmeasured:
        notes.append(f"{unmeasured} configuration(s) without records/s in this result (skipped or failed): not drawn")
    if "cpu_bounds" not in data:
        notes.append("CPU bound not drawn: this result does not record it (benchmarks/mirror.py records it "
                     "in results.json from now on)")
        bounds: List[Dict[str, Any]] = []
    else:
        bounds = [b for b in data["cpu_bounds"] if b.get("records_per_s") and b.get("rows")]
        if not bounds:
            notes.append("no CPU bound in this result (no Spark -> driver figure: --no-fetch, or a mirror missing)")
    for failure in data.get("failures") or []:
        notes.append(f"FAILED {failure.get('configuration')}: {str(failure.get('error'))[:80]}")

    def broker(c: Dict[str, Any]) -> str:
        return c.get("broker") or "embedded"

    clients = sorted({c["client"] for c in measured}, key=lambda c: (c != "kafka-python", c))
    brokers = sorted({broker(c) for c in measured}, key=lambda b: (b != "embedded", b))
    panels = [(b, c) for b in brokers for c in clients] or [("embedded", "no client")]
    labels = sorted({configuration_label(c) for c in measured if c["kind"] == "mirror"},
                    key=lambda label: ("eventual" in label, "tasks" in label, label))
    style = {label: (MIRROR_COLORS[i % len(MIRROR_COLORS)], MIRROR_MARKERS[i % len(MIRROR_MARKERS)])
             for i, label in enumerate(labels)}

    nrows = len(panels)  # one column of panels: the page's column is narrow
    figure, top = new_figure(WIDTH_IN, 4.6 * nrows + 0.5 * (nrows - 1),
                          "Mirror throughput by rows, beside the raw producer", data, notes)
    axes = figure.subplots(nrows, 1, squeeze=False)
    all_rows = sorted({c["rows"] for c in measured} | {b["rows"] for b in bounds})
    labelled = []
    for (broker_name, client), ax in zip(panels, [ax for row in axes for ax in row]):
        here = [c for c in measured if c["client"] == client and broker(c) == broker_name]
        series: Dict[str, List[Dict[str, Any]]] = {}
        for c in here:
            series.setdefault(configuration_label(c), []).append(c)
        values, marks = [], []
        for label, points in sorted(series.items(), key=lambda kv: (not kv[0].startswith("raw"),
                                                                   labels.index(kv[0]) if kv[0] in labels else 0)):
            points.sort(key=lambda c: c["rows"])
            xs, ys = [c["rows"] for c in points], [c["records_per_s"] for c in points]
            values += ys
            if label.startswith("raw"):
                color = RAW_STYLE["color"]
                ax.plot(xs, ys, label=label, zorder=3, **RAW_STYLE)
            else:
                color, marker = style[label]
                ratios = [f"{c['ratio_to_raw']:.2f}" if c.get("ratio_to_raw") is not None else "-" for c in points]
                shown = f"  ×raw {' / '.join(ratios)}" if any(r != "-" for r in ratios) else ""
                ax.plot(xs, ys, label=label + shown, color=color, marker=marker, linewidth=1.8, markersize=7, zorder=4)
            marks += [(x, y, rate_label(y), color) for x, y in zip(xs, ys)]
        limit = sorted((b for b in bounds if b["client"] == client and (b.get("broker") or "embedded") == broker_name),
                       key=lambda b: b["rows"])
        if limit:
            ys = [b["records_per_s"] for b in limit]
            values += ys
            cores = {b.get("cores") for b in limit}
            ax.plot([b["rows"] for b in limit], ys, zorder=2,
                    label="CPU bound: cores / (raw's + Spark's CPU per record)"
                    + (f", {cores.pop()} cores" if len(cores) == 1 and None not in cores else ""), **BOUND_STYLE)
            marks += [(b["rows"], b["records_per_s"], rate_label(b["records_per_s"]), BOUND_STYLE["color"])
                      for b in limit]
        labelled.append((ax, marks))
        rows_axis(ax, all_rows)
        if values and max(values) / min(values) >= 10:
            ax.set_yscale("log")
            ax.set_ylabel("records/s (log scale)")
            ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.set_ylim(min(values) / 1.5, max(values) * 1.5)
        else:
            ax.set_ylabel("records/s")
            ax.set_ylim(0, max(values) * 1.3 if values else 1)
        ax.yaxis.set_major_formatter(FuncFormatter(tick_label))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.grid(True, which="major", alpha=0.3)
        ax.set_title(f"{client}" + (f" on {broker_name}" if len(brokers) > 1 or broker_name != "embedded" else ""),
                     fontsize=11)
        if here or limit:
            shown_rows = sorted({c["rows"] for c in here
                                 if c["kind"] == "mirror" and c.get("ratio_to_raw") is not None})
            title = (f"×raw: mirror / raw producer at {' / '.join(rows_label(r) for r in shown_rows)} rows"
                     if shown_rows else None)
            ax.legend(fontsize=MIN_FONT, loc="best", framealpha=0.9, title=title, title_fontsize=MIN_FONT)
        else:
            ax.text(0.5, 0.5, "no configuration measured in this result", ha="center", va="center",
                    transform=ax.transAxes, color="0.4")
    margins(figure, top, left_in=0.95, hspace=0.35)
    for ax, marks in labelled:  # the layout is final: the labels' pixel distances hold
        label_points(ax, marks)
    return figure


# --- rebuild time by rows ------------------------------------------------------------------------

def rebuild_figure(data: Dict[str, Any]) -> Figure:
    """Grouped bars per measured row count: the run without the log, the run with it (the mirror
    step, part of it, hatched at its foot), the ratio above."""
    measured = sorted((r for r in data.get("rebuilds") or [] if r.get("rows")),
                      key=lambda r: (r["rows"], r.get("client") or ""))
    clients = sorted({r.get("client") or "?" for r in measured})
    notes = []
    if "rebuilds" not in data:
        notes.append("this result records no keyed rebuild")
    names = {"without_log_s": "run without the log", "with_log_s": "run with the log",
             "mirror_s": "mirror step (part of the run with the log)"}
    lacking = [name for key, name in names.items() if any(r.get(key) is None for r in measured)]
    if lacking:
        notes.append(f"not in this result for every row count, not drawn there: {', '.join(lacking)}")
    figure, top = new_figure(WIDTH_IN, 4.8, "Keyed rebuild, 1% of the rows changed: run time with and without the log",
                          data, notes)
    ax = figure.subplots()
    if not measured:
        ax.text(0.5, 0.5, "no keyed rebuild in this result", ha="center", va="center",
                transform=ax.transAxes, color="0.4", fontsize=12)
        ax.set_xticks([])
        ax.set_yticks([])
        margins(figure, top, bottom_in=0.4)
        return figure
    width = 0.36
    drawn = set()

    def bar(x: float, height: float, key: str, **style: Any) -> None:
        ax.bar(x, height, width, label=None if key in drawn else names[key], **style)
        drawn.add(key)

    for i, r in enumerate(measured):
        without, with_log, mirror = r.get("without_log_s"), r.get("with_log_s"), r.get("mirror_s")
        if without is not None:
            bar(i - width / 2, without, "without_log_s", color="tab:blue")
            ax.annotate(f"{without:.1f} s", (i - width / 2, without), textcoords="offset points", xytext=(0, 3),
                        ha="center", va="bottom", fontsize=9, color="tab:blue")
        if with_log is not None:
            bar(i + width / 2, with_log, "with_log_s", color="tab:red")
            ratio = r.get("ratio") or (with_log / without if without else None)
            ratio = f"\n×{ratio:.2f}" if ratio else ""
            ax.annotate(f"{with_log:.1f} s{ratio}", (i + width / 2, with_log), textcoords="offset points",
                        xytext=(0, 3), ha="center", va="bottom", fontsize=9, color="tab:red", fontweight="bold")
        if mirror is not None:
            bar(i + width / 2, mirror, "mirror_s", color="none", edgecolor="0.15", hatch="///", linewidth=0.8)
            ax.annotate(f"{mirror:.1f} s", (i + width / 2, mirror), textcoords="offset points", xytext=(0, 3),
                        ha="center", va="bottom", fontsize=MIN_FONT, color="0.1")
    ax.set_xticks(range(len(measured)))
    ax.set_xticklabels([f"{r['rows']:,} rows" + (f" [{r.get('client')}]" if len(clients) > 1 else "")
                        + (f"\n{r['records']:,} records emitted" if r.get("records") is not None else "")
                        for r in measured])
    ax.set_xlim(-0.7, len(measured) - 0.3)
    ax.set_xlabel("table size (rows)")
    ax.set_ylabel("dbt run of the model (s)")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.15)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    ax.set_title("each rebuild in a fresh process" + (f", {clients[0]} client" if len(clients) == 1 else "")
                 + "; ×: with the log / without", fontsize=10)
    ax.legend(fontsize=MIN_FONT, loc="upper left")
    margins(figure, top, bottom_in=0.95)
    return figure


# --- the cluster benchmark: records/s per configuration ------------------------------------------

def cluster_figure(data: Dict[str, Any]) -> Figure:
    """Horizontal bars of records/s per configuration, a panel per broker, each bar labelled with
    its records/s and its ratio to Spark's writer (DataFrame) on that broker. A failed
    configuration has no bar, only "failed"; one whose records the cursor wrote after Spark's
    writer ("fell_back") is hatched."""
    from matplotlib.patches import Patch

    entries = data.get("configurations") or []

    def broker(e: Dict[str, Any]) -> str:
        return e.get("broker") or "embedded"

    brokers = sorted({broker(e) for e in entries}, key=lambda b: (b != "embedded", b)) or ["embedded"]
    notes = [f"{e['configuration']} @{broker(e)} fell back to the cursor: {e.get('note', '')}"
             for e in entries if e.get("fell_back") and not e.get("failed")]
    notes += [f"FAILED {e['configuration']} @{broker(e)}: {str(e.get('error'))[:100]}"
              for e in entries if e.get("failed")]
    facts = [f"{data['rows']:,} rows (one record each)" if data.get("rows") else "rows not recorded",
             data.get("date") or "date not recorded", data.get("cluster") or "cluster not recorded",
             # cluster.py's "N cores, M GiB, <platform>": the platform would take a line of its own
             ", ".join((data.get("machine") or "machine not recorded").split(", ")[:2])]
    rates = [e["records_per_s"] for e in entries if not e.get("failed") and e.get("records_per_s")]
    counts = [max(1, sum(broker(e) == b for e in entries)) for b in brokers]
    figure, top = new_figure(WIDTH_IN, sum(0.42 * n + 0.75 for n in counts) + 1.2,
                          "Cluster: records/s to Kafka per configuration, beside Spark's own writer",
                          data, notes, facts)
    axes = figure.subplots(len(brokers), 1, squeeze=False, sharex=True, gridspec_kw={"height_ratios": counts})[:, 0]
    for broker_name, ax in zip(brokers, axes):
        here = [e for e in entries if broker(e) == broker_name]
        for y, e in enumerate(here):
            color = KIND_STYLE.get(e.get("kind"), ("tab:gray", ""))[0]
            rate = None if e.get("failed") else e.get("records_per_s")
            if rate is None:  # no bar: nothing was measured
                ax.annotate("failed", (0, y), textcoords="offset points", xytext=(6, 0), va="center",
                            fontsize=9, color="tab:red", fontweight="bold")
                continue
            fell_back = bool(e.get("fell_back"))
            ax.barh(y, rate, 0.62, color=color, edgecolor="0.15" if fell_back else color,
                    hatch="///" if fell_back else None, alpha=0.55 if fell_back else 1.0)
            ratio = e.get("ratio_to_spark_writer")
            text = f"{rate_label(rate)}/s" + (
                "  (reference)" if e["configuration"] == SPARK_WRITER else
                f"  ×{ratio:.2f}" if ratio is not None else "")
            ax.annotate(text + ("  (fell back)" if fell_back else ""), (rate, y),
                        textcoords="offset points", xytext=(5, 0), va="center", fontsize=8.5,
                        color="0.1", fontweight="bold" if e["configuration"] == SPARK_WRITER else "normal",
                        bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})  # over the dashed line
        reference = next((e.get("records_per_s") for e in here
                          if e["configuration"] == SPARK_WRITER and not e.get("failed")), None)
        if reference:
            ax.axvline(reference, color="0.3", linestyle="--", linewidth=1, zorder=0)
        ax.set_yticks(range(len(here)))
        ax.set_yticklabels([e["configuration"] for e in here], fontsize=9.5)
        ax.set_ylim(max(1, len(here)) - 0.5, -0.5)  # the first configuration on top
        ax.set_title(BROKER_TITLES.get(broker_name, broker_name), fontsize=11, loc="left")
        ax.grid(True, axis="x", alpha=0.3)
        ax.set_axisbelow(True)
        if not here:
            ax.text(0.5, 0.5, "no configuration in this result", ha="center", va="center",
                    transform=ax.transAxes, color="0.4")
    axes[-1].set_xlim(0, max(rates) * 1.45 if rates else 1)  # room for the labels right of the bars
    axes[-1].xaxis.set_major_formatter(FuncFormatter(tick_label))
    axes[-1].set_xlabel("records/s (dashed, ×: against the reference)")
    kinds = {e.get("kind") for e in entries}
    shown = {label: color for kind, (color, label) in KIND_STYLE.items() if kind in kinds}  # spark, spark_sql: one
    handles = [Patch(color=color, label=label) for label, color in shown.items()]
    if any(e.get("fell_back") and not e.get("failed") for e in entries):
        handles.append(Patch(facecolor=KIND_STYLE["thrift"][0], alpha=0.55, edgecolor="0.15", hatch="///",
                             label="fell back to the cursor (Spark's writer's records unconfirmed)"))
    if handles:
        figure.legend(handles=handles, loc="lower center", ncol=min(2, len(handles)), fontsize=MIN_FONT, frameon=False)
    margins(figure, top, bottom_in=1.25, left_in=2.3, hspace=0.32)
    return figure


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="*", default=[str(HERE / "results.json")],
                        help="results JSON file(s) of benchmarks/mirror.py or benchmarks/cluster.py "
                        "(default: benchmarks/results.json)")
    parser.add_argument("--out", help="directory of the PNG files (default: plots/ next to each JSON)")
    args = parser.parse_args(argv)
    for results in args.results:
        for path in write_plots(results, args.out):
            print(f"plot written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
