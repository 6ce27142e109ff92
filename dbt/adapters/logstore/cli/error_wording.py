"""An error's sentence as the user meets it outside a dbt run: its own text (no exception
class, no "Runtime Error" heading), the right subject (a topic read with --bootstrap-servers,
`dbt debug`'s check, not a "Model"), and no "Nothing was changed." from a command that changes
nothing."""
from __future__ import annotations

import re
from typing import Optional

NOTHING_CHANGED = re.compile(r"\s*Nothing was changed\.")


def own_text(exc: BaseException) -> str:
    """The error's words on one line: dbt's errors keep them in .msg (str() puts the
    'Runtime Error' heading and line breaks around them)."""
    text = getattr(exc, "msg", None)
    if not isinstance(text, str) or not text.strip():
        text = str(exc)
    return " ".join(text.split())


def reworded(text: str, model: Optional[str] = None, subject: Optional[str] = None,
             read_only: bool = True) -> str:
    """`text` with "Model '<model>': " made "<subject>: " (None: kept), and without "Nothing
    was changed." when the command is `read_only`."""
    if model is not None and subject is not None:
        prefix = f"Model '{model}': "
        if text.startswith(prefix):
            text = f"{subject}: {text[len(prefix):]}"
    if read_only:
        text = NOTHING_CHANGED.sub("", text)
    return text.strip()


def without_secrets(text: str) -> str:
    """`text` with the value of every DBT_ENV_SECRET_ variable masked, as dbt's own output
    masks it (a profile may read its servers or passwords from one)."""
    from dbt_common.exceptions import env_secrets, scrub_secrets

    return scrub_secrets(text, env_secrets())
