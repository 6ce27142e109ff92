"""MkDocs hook: the benchmark's plots (benchmarks/plots/*.png, written by benchmarks/plots.py)
live outside docs/; every PNG there joins the site under performance/, where the Performance
page (docs/performance.md) shows them."""
from pathlib import Path

from mkdocs.structure.files import File

PLOTS = Path(__file__).resolve().parents[2] / "benchmarks" / "plots"


def on_files(files, config):
    for png in sorted(PLOTS.glob("*.png")):
        files.append(File.generated(config, f"performance/{png.name}", abs_src_path=str(png)))
    return files


def on_serve(server, config, builder):
    if PLOTS.is_dir():
        server.watch(str(PLOTS))
    return server
