"""docs/hooks/version.py: the site shows dbt-logstore's version, read from the code."""
import importlib.util
from pathlib import Path

from dbt.adapters.logstore.__version__ import version

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("docs_version_hook", ROOT / "docs" / "hooks" / "version.py")
hook = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hook)


def test_every_footer_names_the_packages_version():
    config = hook.on_config({"copyright": None})
    assert config["copyright"] == f"dbt-logstore {version}"
    assert hook.on_config({"copyright": "x"})["copyright"] == f"dbt-logstore {version} · x"


def test_the_hook_is_registered_and_no_page_writes_the_version_by_hand():
    assert "docs/hooks/version.py" in (ROOT / "mkdocs.yml").read_text()
    assert "copyright:" not in (ROOT / "mkdocs.yml").read_text()
