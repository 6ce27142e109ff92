"""The readers of one raw option each: from a model's raw dbt config (any spelling) to a typed
value, or an error that names the model, the key, the value and what is allowed
(log_config.resolve_log_config calls them; options.py holds what each option allows)."""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

from dbt.adapters.logstore.config.options import (
    ALLOWED, AMORO_ENABLED, AMORO_TYPE, DEFAULTS, KAFKA_CLIENTS, LOG_SYSTEMS, MAX_PARALLELISM,
    MERGE_ONLY_OPTIONS, SPELLINGS, LogConfigError, option_error,
)
from dbt.adapters.logstore.formats import FORMAT_OPTIONS
from dbt.adapters.logstore.spark.json_images import TIMESTAMP_STANDARDS

def is_given(raw: Mapping[str, Any], key: str) -> bool:
    return raw.get(key) is not None


def lookup(model: str, raw: Mapping[str, Any], key: str) -> Any:
    """Read one option in any of its spellings; the same option given twice must agree."""
    given = [(k, raw[k]) for k in (key,) + SPELLINGS.get(key, ()) if is_given(raw, k)]
    for other, value in given[1:]:
        if str(value) != str(given[0][1]):
            raise LogConfigError(
                f"Model '{model}': config '{given[0][0]}' = {given[0][1]!r} conflicts with "
                f"'{other}' = {value!r}. Give the option once (any one spelling)."
            )
    return given[0][1] if given else DEFAULTS.get(key)


def read_choice(model: str, raw: Mapping[str, Any], key: str, allowed: Tuple[str, ...]) -> str:
    value = str(lookup(model, raw, key)).strip().lower()
    if value not in allowed:
        raise option_error(model, key, value, ", ".join(allowed))
    return value


def read_boolean(model: str, raw: Mapping[str, Any], key: str) -> bool:
    value = lookup(model, raw, key)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise option_error(model, key, value, "true, false")
    return text == "true"


def read_positive_int(model: str, key: str, value: Any) -> int:
    try:
        number = int(str(value))
    except ValueError:
        raise option_error(model, key, value, "a positive integer") from None
    if number < 1:
        raise option_error(model, key, value, "a positive integer")
    return number


_DURATION_UNITS = {"ms": 1, "s": 1000, "sec": 1000, "min": 60_000, "h": 3_600_000,
                   "d": 86_400_000, "day": 86_400_000, "days": 86_400_000}


def read_duration_ms(model: str, key: str, value: Any) -> Optional[int]:
    """A duration as Flink writes them (`7 d`, `12h`, `30 min`, `1000 ms`; a bare number is
    milliseconds) in milliseconds, or None when unset."""
    if value is None or str(value).strip() == "":
        return None
    text = str(value).strip().lower()
    number = text.rstrip("abcdefghijklmnopqrstuvwxyz ").strip()
    unit = text[len(number):].strip() or "ms"
    try:
        amount = float(number)
    except ValueError:
        amount = -1.0
    if unit not in _DURATION_UNITS or amount <= 0:
        raise option_error(model, key, value, str(ALLOWED[key]).replace("`", "'"))
    return int(amount * _DURATION_UNITS[unit])


def read_parallelism(model: str, raw: Mapping[str, Any]) -> int:
    value = lookup(model, raw, "log.mirror.parallelism")
    allowed = f"an integer from 1 to {MAX_PARALLELISM} (1: the driver writes the change set)"
    try:
        number = int(str(value).strip())
    except ValueError:
        raise option_error(model, "log.mirror.parallelism", value, allowed) from None
    if isinstance(value, bool) or not 1 <= number <= MAX_PARALLELISM:
        raise option_error(model, "log.mirror.parallelism", value, allowed)
    return number


def read_client(model: str, value: Optional[str]) -> str:
    client = str(value or "kafka-python").strip().lower()
    if client not in KAFKA_CLIENTS:
        raise LogConfigError(
            f"Model '{model}': invalid value {value!r} for profile field 'kafka_client'. "
            f"Allowed: {', '.join(KAFKA_CLIENTS)} (confluent needs pip install "
            f"'dbt-logstore[confluent]').")
    return client


def read_unique_key(model: str, value: Any) -> Tuple[str, ...]:
    """The unique_key columns as dbt reads the config: None, '' (or blanks) and [] are no key
    (dbt's `{% if unique_key %}`); names are trimmed (dbt writes them into its SQL unquoted), and
    a column named twice is one column (Spark's names are case-insensitive: the first spelling
    is kept). A blank entry in a list names no column (dbt's merge would write
    `DBT_INTERNAL_SOURCE. = ...`): an error, as is anything but a name or a list of names."""
    if value is None:
        return ()
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not all(isinstance(v, str) for v in names):
        raise option_error(model, "unique_key", value, "a column name or a list of column names")
    if isinstance(value, str) and not value.strip():
        return ()
    if any(not name.strip() for name in names):
        raise option_error(model, "unique_key", value,
                           "a column name or a list of column names, without blank entries "
                           "('' or [] for no key)")
    columns: Dict[str, str] = {}
    for name in names:
        columns.setdefault(name.strip().lower(), name.strip())
    return tuple(columns.values())


def read_system(model: str, raw: Mapping[str, Any]) -> str:
    system = read_choice(model, raw, "log.system", LOG_SYSTEMS)
    if not is_given(raw, AMORO_ENABLED):
        if is_given(raw, AMORO_TYPE):
            raise LogConfigError(f"Model '{model}': config '{AMORO_TYPE}' needs "
                                 f"'{AMORO_ENABLED}: true' (or use 'log.system').")
        return system
    enabled = read_boolean(model, raw, AMORO_ENABLED)
    amoro = str(raw.get(AMORO_TYPE) or "kafka").strip().lower() if enabled else "none"
    if amoro not in LOG_SYSTEMS:
        raise option_error(model, AMORO_TYPE, amoro, "kafka")
    if is_given(raw, "log.system") or is_given(raw, "log_system"):
        if amoro != system:
            raise LogConfigError(
                f"Model '{model}': config '{AMORO_ENABLED}' ({raw[AMORO_ENABLED]!r}) conflicts "
                f"with 'log.system' = {system!r}. Give the option once.")
    return amoro


def read_timestamp_standard(model: str, raw: Mapping[str, Any]) -> str:
    value = str(lookup(model, raw, "log.timestamp-format.standard")).strip().upper()
    if value not in TIMESTAMP_STANDARDS:
        raise option_error(model, "log.timestamp-format.standard", value, ", ".join(TIMESTAMP_STANDARDS))
    return value


def _is_set(value: Any) -> bool:
    """Whether a dbt option is actually given: None, '' and an empty list leave it unset."""
    if value is None:
        return False
    if isinstance(value, str):
        return bool(value.strip())
    if isinstance(value, (list, tuple, dict, set)):
        return bool(value)
    return True


def refuse_merge_only_options(model: str, system: str, raw: Mapping[str, Any]) -> None:
    for key, reason in MERGE_ONLY_OPTIONS.items():
        if _is_set(raw.get(key)):
            raise LogConfigError(
                f"Model '{model}': config '{key}' = {raw[key]!r} is not supported on a logged "
                f"incremental_strategy='merge' model (log.system = '{system}'): the log would "
                f"record changes the MERGE does not make ({reason}). Allowed: leave it unset, "
                f"or turn the log off for this model (log.system: none).")


def read_format_options(model: str, raw: Mapping[str, Any], log_format: str) -> Dict[str, str]:
    """The formats' own options (formats.FORMAT_OPTIONS) that apply to `log_format`, as canonical
    strings; one given for another format is an error."""
    options: Dict[str, str] = {}
    for option in FORMAT_OPTIONS:
        spellings = (option.key,) + option.spellings
        given = any(is_given(raw, s) for s in spellings)
        if log_format not in option.formats:
            if given and str(lookup(model, raw, option.key)).strip().lower() not in ("", option.default):
                raise LogConfigError(
                    f"Model '{model}': config '{option.key}' applies to 'log.format' "
                    f"{' or '.join(repr(f) for f in option.formats)}, not '{log_format}'. Allowed: "
                    f"leave it unset, or change 'log.format'.")
            continue
        if option.allowed == ("true", "false"):
            value = str(read_boolean(model, raw, option.key)).lower()
        elif option.allowed:
            value = read_choice(model, raw, option.key, option.allowed)
        else:
            value = str(lookup(model, raw, option.key) or "").strip()
        options[option.key] = value
    return options
