"""MkDocs hook: the benchmark's results in the Performance page (docs/performance.md), at build time.

- Its plots (benchmarks/plots/*.png, written by benchmarks/plots.py) live outside docs/: every
  PNG there joins the site under performance/, where the page shows them.
- Its tables: each marker such as `<!-- bench: benchmarks/results.json -->` is replaced by the
  tables of that results file (benchmarks/report.py), so the page shows what the file holds. A
  marker naming a missing file fails the build. The page says what a run costs; where and how
  each figure was measured (date, machine, commit, command) is not on it.
- That provenance goes to Contributing (docs/contributing.md): its marker `<!-- bench-runs -->`
  becomes a line per results file of benchmarks/, read from the file.
"""
import importlib.util
import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
PLOTS = BENCHMARKS / "plots"
PAGE = "performance.md"
MARKER = re.compile(r"<!-- bench: (?P<path>[^ ]+) -->")
RUNS_PAGE = "contributing.md"
RUNS = re.compile(r"<!-- bench-runs -->")

_spec = importlib.util.spec_from_file_location("bench_report", BENCHMARKS / "report.py")
report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report)


def on_files(files, config):
    for png in sorted(PLOTS.glob("*.png")):
        files.append(File.generated(config, f"performance/{png.name}", abs_src_path=str(png)))
    return files


def runs() -> str:
    """A list item per results file of benchmarks/: where and how it was measured."""
    lines = []
    for path in sorted(BENCHMARKS.glob("*.json")):
        data = report.load(path)
        if isinstance(data, dict):
            lines.append(f"- {report.run_line(f'benchmarks/{path.name}', data)}")
    return "\n".join(lines)


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri == RUNS_PAGE:
        if not RUNS.search(markdown):
            raise ValueError(f"{RUNS_PAGE} has no `<!-- bench-runs -->` marker")
        return RUNS.sub(lambda m: runs(), markdown)
    if page.file.src_uri != PAGE:
        return markdown

    def tables(match):
        path = ROOT / match["path"]
        if not path.is_file():
            raise ValueError(f"{PAGE}: {match['path']} (in {match[0]}) does not exist")
        # in a div of its own: the stylesheet keeps these wide tables compact (md_in_html)
        return f'<div class="bench" markdown>\n\n{report.markdown(path, with_provenance=False)}\n\n</div>'

    return MARKER.sub(tables, markdown)


def on_serve(server, config, builder):
    server.watch(str(BENCHMARKS))  # the results files and the plots
    return server
