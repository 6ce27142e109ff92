"""MkDocs hook: renders the configuration reference into the Configuration page at build time.

The page (docs/configuration.md) holds markers such as `<!-- reference: model-options -->`;
dbt/adapters/logstore/config/reference.py replaces each with its table, from the options'
vocabulary (config/options.py, the formats' own options) and the profile fields (credentials.py).
"""
from dbt.adapters.logstore.config.reference import MARKER, expand

PAGE = "configuration.md"


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri != PAGE:
        return markdown
    if not MARKER.search(markdown):
        raise ValueError(f"{PAGE} has no `<!-- reference: ... -->` marker to render")
    return expand(markdown)
