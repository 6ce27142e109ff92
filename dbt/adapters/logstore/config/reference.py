"""The configuration reference, rendered from the code as Markdown tables: the model options from
their one vocabulary (config/options.py: SPELLINGS, DEFAULTS, ALLOWED, DESCRIPTIONS, OTHER_KEYS,
OWN_PREFIXES, and the formats' own FormatOption entries) and the profile fields from the
credentials (credentials.py: the fields, their defaults, FIELD_DESCRIPTIONS).

The documentation's hook (docs/hooks/config_reference.py) calls `expand` on the Configuration
page (docs/configuration.md) at build time, which replaces each marker `<!-- reference: NAME -->`
with its table; tests/unit/config/test_config_reference.py checks that nothing is left undescribed.
"""
from __future__ import annotations

import dataclasses
import html
import re
from typing import Any, Callable, Dict, List, Sequence, Tuple, Union

from dbt.adapters.spark.connections import SparkCredentials

from dbt.adapters.logstore.config import options as log_options
from dbt.adapters.logstore.credentials import (
    FIELD_DEFAULTS_SHOWN, FIELD_DESCRIPTIONS, LogstoreCredentials,
)
from dbt.adapters.logstore.formats import FORMAT_OPTIONS

MARKER = re.compile(r"<!-- reference: ([a-z-]+) -->")


class ReferenceError(ValueError):
    """A marker names no reference, or an option or field has no description."""


@dataclasses.dataclass(frozen=True)
class Row:
    key: str  # Markdown: every spelling, canonical first
    default: str
    allowed: str
    meaning: str


def code(text: Any) -> str:
    return f"`{text}`"


def shown_value(value: Any) -> str:
    """A default or allowed value as the reference writes it."""
    if value is None or value == "" or value == {}:
        return "none" if value != {} else "`{}`"
    if isinstance(value, bool):
        return code(str(value).lower())
    return code(value)


def shown_allowed(allowed: Union[Tuple[str, ...], str]) -> str:
    return allowed if isinstance(allowed, str) else ", ".join(code(value) for value in allowed)


def option_meaning(key: str) -> str:
    """An option's meaning: log_options.DESCRIPTIONS, or for a format's own option its meaning
    and the formats it applies to."""
    if key in log_options.DESCRIPTIONS:
        return log_options.DESCRIPTIONS[key]
    option = next((o for o in FORMAT_OPTIONS if o.key == key), None)
    if option is None or not option.meaning.strip():
        raise ReferenceError(f"model option {key!r} has no description (log_options.DESCRIPTIONS)")
    formats = " or ".join(code(name) for name in option.formats)
    # a format's meaning is plain text: `<kafka.topic>` must not read as an HTML tag
    return f"{html.escape(option.meaning, quote=False)} Applies to `log.format` {formats}."


def option_rows() -> List[Row]:
    """One row per option, in the vocabulary's order."""
    rows = []
    for key, spellings in log_options.SPELLINGS.items():
        if key in log_options.DEFAULTS_SHOWN:
            default = log_options.DEFAULTS_SHOWN[key]
        else:
            default = shown_value(log_options.DEFAULTS[key])
        if key not in log_options.ALLOWED:
            raise ReferenceError(f"model option {key!r} has no allowed values (log_options.ALLOWED)")
        rows.append(Row(" / ".join(code(s) for s in (key, *spellings)), default,
                        shown_allowed(log_options.ALLOWED[key]), option_meaning(key)))
    return rows


def other_key_rows() -> List[Row]:
    return [Row(*entry) for entry in log_options.OTHER_KEYS]


def profile_fields() -> List[str]:
    """The profile fields this adapter adds to dbt-spark's, then `host`, whose default it
    changes."""
    spark = {f.name for f in dataclasses.fields(SparkCredentials)}
    own = [f.name for f in dataclasses.fields(LogstoreCredentials) if f.name not in spark]
    return own + ["host"]


def field_default(name: str) -> str:
    if name in FIELD_DEFAULTS_SHOWN:
        return FIELD_DEFAULTS_SHOWN[name]
    spec = next(f for f in dataclasses.fields(LogstoreCredentials) if f.name == name)
    if spec.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return shown_value(spec.default_factory())  # type: ignore[misc]
    value = spec.default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return shown_value(value)


def profile_rows() -> List[Row]:
    rows = []
    for name in profile_fields():
        if not FIELD_DESCRIPTIONS.get(name, "").strip():
            raise ReferenceError(f"profile field {name!r} has no description "
                                 f"(credentials.FIELD_DESCRIPTIONS)")
        rows.append(Row(code(name), field_default(name), "", FIELD_DESCRIPTIONS[name]))
    return rows


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def render_model_options() -> str:
    return table(("key (every spelling)", "default", "allowed", "meaning"),
                 [(r.key, r.default, r.allowed, r.meaning) for r in option_rows()])


def render_other_keys() -> str:
    prefixes = ", ".join(code(p) for p in log_options.OWN_PREFIXES[:-1])
    clients = " or ".join(code(f"{p}<property>") for p in log_options.CLIENT_PREFIXES)
    return (table(("key", "default", "allowed", "meaning"),
                  [(r.key, r.default, r.allowed, r.meaning) for r in other_key_rows()])
            + f"\nAny other key under {prefixes} or {code(log_options.OWN_PREFIXES[-1])} is an "
              f"error, and so is a {clients} that the profile's `kafka_client` does not have "
              f"(in the profile's `kafka_properties` too). This catches typos such as "
              f"`log.sytem.partitions`, `kafka_topc` or `kafka.lingr.ms` at parse time; the "
              f"error suggests the closest keys.\n")


def render_profile_fields() -> str:
    return table(("field", "default", "meaning"),
                 [(r.key, r.default, r.meaning) for r in profile_rows()])


REFERENCES: Dict[str, Callable[[], str]] = {
    "profile-fields": render_profile_fields,
    "model-options": render_model_options,
    "other-keys": render_other_keys,
}


def expand(markdown: str) -> str:
    """`markdown` with each marker `<!-- reference: NAME -->` replaced by its table."""
    def render(match: "re.Match[str]") -> str:
        name = match.group(1)
        if name not in REFERENCES:
            raise ReferenceError(f"unknown reference {name!r}; known: {', '.join(REFERENCES)}")
        return REFERENCES[name]()
    return MARKER.sub(render, markdown)
