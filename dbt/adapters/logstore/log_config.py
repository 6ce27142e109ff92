"""Config resolution: turn a model's raw dbt config into a validated, typed `LogConfig`.

Every key is accepted in Paimon's dotted spelling (`log.system`) and in dbt's underscored
spelling (`log_system`), from `config()`, `dbt_project.yml` or schema yml. Validation happens
here, before any table or topic is touched, and every error names the model, the key, the value
and what is allowed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from dbt_common.exceptions import DbtConfigError

LOG_SYSTEMS = ("none", "kafka")
CONSISTENCIES = ("transactional", "eventual")
LOGGABLE_MATERIALIZATIONS = ("table", "incremental")
LOGGABLE_STRATEGIES = ("append", "insert_overwrite")

# canonical (dotted) key -> dbt spelling
KEY_SPELLINGS: Dict[str, str] = {
    "log.system": "log_system",
    "kafka.topic": "kafka_topic",
    "kafka.bootstrap.servers": "kafka_bootstrap_servers",
    "log.consistency": "log_consistency",
    "log.system.partitions": "log_system_partitions",
    "log.system.replication": "log_system_replication",
}

DEFAULTS: Dict[str, Any] = {
    "log.system": "none",
    "log.consistency": "transactional",
    "log.system.partitions": 1,
    "log.system.replication": 1,
}

# Kafka's legal topic names (see kafka.common.internals.Topic).
_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]{1,249}")


class LogConfigError(DbtConfigError):
    """A log option is invalid; the message names model, key, value and what is allowed."""


@dataclass(frozen=True)
class ModelRef:
    """What config resolution needs to know about the model being built."""

    name: str
    schema: str
    alias: str
    materialized: str
    incremental_strategy: Optional[str] = None
    language: str = "sql"


@dataclass(frozen=True)
class LogConfig:
    """The resolved log options of one model. `system == 'none'` means no log."""

    model: str
    system: str = "none"
    topic: Optional[str] = None
    bootstrap_servers: Optional[str] = None
    consistency: str = "transactional"
    partitions: int = 1
    replication: int = 1
    unique_key: Tuple[str, ...] = ()
    # Kafka client properties from the profile; may hold secrets, so never printed.
    client_properties: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def enabled(self) -> bool:
        return self.system != "none"

    @property
    def transactional(self) -> bool:
        return self.consistency == "transactional"

    @property
    def keyed(self) -> bool:
        return bool(self.unique_key)

    def table_properties(self) -> Dict[str, str]:
        """The options stored with the Spark table (no secrets: client properties stay out)."""
        if not self.enabled:
            return {"log.system": "none"}
        return {
            "log.system": self.system,
            "kafka.topic": str(self.topic),
            "kafka.bootstrap.servers": str(self.bootstrap_servers),
            "log.consistency": self.consistency,
            "log.system.partitions": str(self.partitions),
            "log.system.replication": str(self.replication),
        }


def _fail(model: str, key: str, value: Any, allowed: str) -> LogConfigError:
    return LogConfigError(
        f"Model '{model}': invalid value {value!r} for config '{key}'. Allowed: {allowed}."
    )


def _lookup(model: str, raw: Mapping[str, Any], key: str) -> Any:
    """Read one option in either spelling; the same option given twice must agree."""
    dotted, underscored = key, KEY_SPELLINGS[key]
    has_dotted = raw.get(dotted) is not None
    has_under = raw.get(underscored) is not None
    if has_dotted and has_under and str(raw[dotted]) != str(raw[underscored]):
        raise LogConfigError(
            f"Model '{model}': config '{dotted}' = {raw[dotted]!r} conflicts with "
            f"'{underscored}' = {raw[underscored]!r}. Give the option once (either spelling)."
        )
    if has_dotted:
        return raw[dotted]
    if has_under:
        return raw[underscored]
    return DEFAULTS.get(key)


def _positive_int(model: str, key: str, value: Any) -> int:
    try:
        number = int(str(value))
    except ValueError:
        raise _fail(model, key, value, "a positive integer") from None
    if number < 1:
        raise _fail(model, key, value, "a positive integer")
    return number


def _unique_key(model: str, value: Any) -> Tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise _fail(model, "unique_key", value, "a column name or a list of column names")


def resolve_log_config(
    ref: ModelRef,
    raw: Mapping[str, Any],
    profile_bootstrap_servers: Optional[str] = None,
    profile_properties: Optional[Mapping[str, str]] = None,
) -> LogConfig:
    """Resolve and validate the log options of one model from its raw config dict."""
    model = ref.name
    system = str(_lookup(model, raw, "log.system")).strip().lower()
    if system not in LOG_SYSTEMS:
        raise _fail(model, "log.system", system, ", ".join(LOG_SYSTEMS))
    if system == "none":
        return LogConfig(model=model)

    if ref.materialized not in LOGGABLE_MATERIALIZATIONS:
        raise LogConfigError(
            f"Model '{model}': config 'log.system' = '{system}' is not supported on "
            f"materialized='{ref.materialized}'. A log needs a table: allowed materializations "
            f"are {', '.join(LOGGABLE_MATERIALIZATIONS)}."
        )
    if ref.language != "sql":
        raise LogConfigError(
            f"Model '{model}': config 'log.system' = '{system}' is only supported on SQL models "
            f"(this model's language is '{ref.language}')."
        )
    if ref.materialized == "incremental":
        strategy = ref.incremental_strategy or "append"
        if strategy not in LOGGABLE_STRATEGIES:
            raise LogConfigError(
                f"Model '{model}': config 'log.system' = '{system}' is not supported with "
                f"incremental_strategy='{strategy}'. Allowed: {', '.join(LOGGABLE_STRATEGIES)}."
            )

    consistency = str(_lookup(model, raw, "log.consistency")).strip().lower()
    if consistency not in CONSISTENCIES:
        raise _fail(model, "log.consistency", consistency, ", ".join(CONSISTENCIES))

    topic = _lookup(model, raw, "kafka.topic") or f"{ref.schema}.{ref.alias}"
    if not _TOPIC_RE.fullmatch(str(topic)) or topic in (".", ".."):
        raise _fail(
            model, "kafka.topic", topic, "1-249 characters of ASCII letters, digits, '.', '_', '-'"
        )

    servers = _lookup(model, raw, "kafka.bootstrap.servers") or profile_bootstrap_servers
    if not servers or not str(servers).strip():
        raise LogConfigError(
            f"Model '{model}': config 'log.system' = 'kafka' needs Kafka servers, but neither "
            f"'kafka.bootstrap.servers' (model config) nor 'kafka_bootstrap_servers' (profile) "
            f"is set. Allowed: a comma-separated list of host:port."
        )

    return LogConfig(
        model=model,
        system=system,
        topic=str(topic),
        bootstrap_servers=str(servers).strip(),
        consistency=consistency,
        partitions=_positive_int(model, "log.system.partitions",
                                 _lookup(model, raw, "log.system.partitions")),
        replication=_positive_int(model, "log.system.replication",
                                  _lookup(model, raw, "log.system.replication")),
        unique_key=_unique_key(model, raw.get("unique_key")),
        client_properties=dict(profile_properties or {}),
    )
