"""MkDocs hook: the figures of docs/figures.yml written into the pages, and GitHub-only notes left out.

- A figure stands in a page between markers, `<!-- figure: NAME -->...<!-- /figure -->`; the text
  between them is replaced by `render(NAME)`, from docs/figures.yml, so the site always quotes the
  file. README.md quotes the same figures between the same markers, and
  tests/unit/test_figures.py checks that the README and the pages' sources quote them as
  rendered here: README and site cannot disagree. An unknown figure fails the build.
- `<!-- github-only -->...<!-- /github-only -->` holds a note for readers of the Markdown source
  on GitHub (where the generated reference tables are invisible comments); the site leaves it out.
"""
import datetime
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
FIGURES_FILE = ROOT / "docs" / "figures.yml"
FIGURE = re.compile(r"<!-- figure: (?P<name>[a-z-]+) -->(?P<text>.*?)<!-- /figure -->", re.S)
GITHUB_ONLY = re.compile(r"<!-- github-only -->.*?<!-- /github-only -->\n?", re.S)


def load(path: Path = FIGURES_FILE) -> dict:
    return yaml.safe_load(path.read_text())


def render(name: str, figures: dict = None) -> str:
    """A figure's text, as every page and the README quote it."""
    figures = load() if figures is None else figures
    if name == "suite":
        suite = figures["suite"]
        day = suite["date"]
        day = day.isoformat() if isinstance(day, datetime.date) else str(day)
        return f"{suite['minutes']} minutes ({suite['tests']:,} tests, {day})"
    raise ValueError(f"unknown figure {name!r} (docs/figures.yml, docs/hooks/figures.py)")


def quoted(text: str):
    """(name, quoted text) of every figure marker in a Markdown text."""
    return [(m["name"], m["text"]) for m in FIGURE.finditer(text)]


def on_page_markdown(markdown, page, config, files):
    figures = load()
    markdown = FIGURE.sub(lambda m: render(m["name"], figures), markdown)
    return GITHUB_ONLY.sub("", markdown)


def on_serve(server, config, builder):
    server.watch(str(FIGURES_FILE))
    return server
