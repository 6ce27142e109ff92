"""One source for each figure that README.md and the site both quote (docs/figures.yml): the site's
hook (docs/hooks/figures.py) writes each `<!-- figure: NAME -->...<!-- /figure -->` from the file,
and here README.md and the pages' sources must quote it as the hook renders it."""
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("figures_hook", ROOT / "docs" / "hooks" / "figures.py")
hook = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hook)

SOURCES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_suite_figure_renders_from_the_file():
    figures = hook.load()
    assert {"minutes", "tests", "date"} <= set(figures["suite"])
    text = hook.render("suite", figures)
    assert text.startswith(f"{figures['suite']['minutes']} minutes (")
    assert f"{figures['suite']['tests']:,} tests" in text


def test_readme_and_the_site_quote_the_suite_figure():
    readme = dict(hook.quoted((ROOT / "README.md").read_text()))
    assert "suite" in readme, "README.md quotes no <!-- figure: suite --> figure"
    pages = [name for page in SOURCES[1:] for name, _ in hook.quoted(page.read_text())]
    assert "suite" in pages, "no page of docs/ quotes the suite figure"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_quoted_figure_is_the_files(source):
    figures = hook.load()
    for name, text in hook.quoted(source.read_text()):
        expected = hook.render(name, figures)
        assert text == expected, (f"{source.relative_to(ROOT)} quotes the {name} figure as {text!r}; "
                                  f"docs/figures.yml gives {expected!r}: write that between the markers")


def test_the_hook_writes_figures_and_leaves_github_notes_out():
    page = SimpleNamespace(file=SimpleNamespace(src_uri="x.md"))
    markdown = ("took <!-- figure: suite -->stale<!-- /figure -->.\n"
                "<!-- github-only -->\n> on GitHub only\n<!-- /github-only -->\nafter\n")
    out = hook.on_page_markdown(markdown, page, None, None)
    assert out == f"took {hook.render('suite')}.\nafter\n"
    with pytest.raises(ValueError, match="unknown figure"):
        hook.on_page_markdown("<!-- figure: nothing -->1<!-- /figure -->", page, None, None)
