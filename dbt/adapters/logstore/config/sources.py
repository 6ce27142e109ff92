"""Where a model's config key was set, for the errors that name it: the model's config()
call, its properties file (schema.yml), or else dbt_project.yml (the only other place dbt
reads a model's config from)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Mapping, Optional

RESOURCE_SECTIONS = ("models", "seeds", "snapshots")


def _field(node: Any, key: str) -> Any:
    return node.get(key) if isinstance(node, Mapping) else getattr(node, key, None)


def _properties_entry(node: Any) -> Dict[str, Any]:
    """The node's entry in its properties file (`patch_path`, e.g. 'project://models/schema.yml'):
    its `config` block, keys as written."""
    patch_path = _field(node, "patch_path")
    if not patch_path or "://" not in str(patch_path):
        return {}
    path = _project_dir() / str(patch_path).split("://", 1)[1]
    try:
        import yaml

        document = yaml.safe_load(path.read_text()) or {}
    except Exception:  # unreadable: the key is named without its file
        return {}
    for section in RESOURCE_SECTIONS:
        for entry in document.get(section) or []:
            if isinstance(entry, Mapping) and entry.get("name") == _field(node, "name"):
                return dict(entry.get("config") or {})
    return {}


def _project_dir() -> Path:
    """The dbt project's directory: dbt's --project-dir, else the current directory."""
    try:
        from dbt.flags import get_flags

        return Path(getattr(get_flags(), "PROJECT_DIR", None) or ".")
    except Exception:
        return Path(".")


def config_sources(node: Any) -> Optional[Dict[str, str]]:
    """Each config key of the node that config() or its properties file set, with the place
    (keys not here came from dbt_project.yml); None for a node that does not say (no
    config_call_dict: not one of dbt's)."""
    if _field(node, "config_call_dict") is None:
        return None
    sources: Dict[str, str] = {}
    properties_file = str(_field(node, "patch_path") or "").split("://", 1)[-1]
    for key in _properties_entry(node):
        sources[str(key)] = properties_file
    call = _field(node, "config_call_dict") or {}
    file = _field(node, "original_file_path") or "the model's file"
    for key in call:
        sources[str(key)] = f"config() in {file}"
    return sources
