"""MkDocs hook: dbt-logstore's version on every page of the site, read from the code
(dbt/adapters/logstore/__version__.py, what `dbt-logstore --version` prints), never written into
a page: the footer says "dbt-logstore <version>" (Material shows `copyright` there)."""
from dbt.adapters.logstore.__version__ import version


def footer(existing=None) -> str:
    return f"dbt-logstore {version}" + (f" · {existing}" if existing else "")


def on_config(config):
    config["copyright"] = footer(config.get("copyright"))
    return config
