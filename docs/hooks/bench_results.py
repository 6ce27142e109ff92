"""MkDocs hook: the benchmark's results as tables in the Performance page, at build time.

docs/performance.md holds markers such as `<!-- bench: benchmarks/results.json -->`; each is
replaced by the tables of that results file (benchmarks/report.py), so the page shows what the
file holds. A marker naming a missing file fails the build.
"""
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = "performance.md"
MARKER = re.compile(r"<!-- bench: (?P<path>[^ ]+) -->")

_spec = importlib.util.spec_from_file_location("bench_report", ROOT / "benchmarks" / "report.py")
report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report)


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri != PAGE:
        return markdown

    def tables(match):
        path = ROOT / match["path"]
        if not path.is_file():
            raise ValueError(f"{PAGE}: {match['path']} (in {match[0]}) does not exist")
        # in a div of its own: the stylesheet keeps these wide tables compact (md_in_html)
        return f'<div class="bench" markdown>\n\n{report.markdown(path)}\n\n</div>'

    return MARKER.sub(tables, markdown)


def on_serve(server, config, builder):
    server.watch(str(ROOT / "benchmarks"))
    return server
