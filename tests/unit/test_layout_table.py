"""The Layout table matches the tree: it names every module of the package, and every path it
names exists (a row may name siblings of its first path by file name alone). The table is in the
documentation's Architecture page (docs/architecture.md, section "Layout"); it moved there from
the README."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "dbt" / "adapters" / "logstore"
PAGE = ROOT / "docs" / "architecture.md"


def layout_rows():
    text = PAGE.read_text()
    section = text[text.index("## Layout\n"):]
    end = section.find("\n## ", 1)
    section = section if end < 0 else section[:end]
    return [line for line in section.splitlines() if line.startswith("| `")]


def named_paths(row):
    where = row.split(" | ")[0]
    names = re.findall(r"`([^`]+)`", where)
    first = Path(names[0])
    return [first] + [first.parent / name if "/" not in name else Path(name) for name in names[1:]]


def test_every_module_of_the_package_is_in_the_layout_table():
    """Every module, in every sub-package (a folder named whole, as formats/ is, names its
    modules)."""
    named = {path for row in layout_rows() for path in named_paths(row)}
    modules = {p.relative_to(ROOT) for p in PACKAGE.rglob("*.py") if not p.name.startswith("__")}
    unnamed = {m for m in modules if m not in named and not any(d in named for d in m.parents)}
    assert len(modules) > 40
    assert not unnamed, f"add to the Layout table ({PAGE.relative_to(ROOT)}): {sorted(map(str, unnamed))}"


def test_every_path_in_the_layout_table_exists():
    missing = [str(path) for row in layout_rows() for path in named_paths(row) if not (ROOT / path).exists()]
    assert not missing, f"the Layout table ({PAGE.relative_to(ROOT)}) names paths that do not exist: {missing}"
