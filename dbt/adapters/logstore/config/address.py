"""Where a log's address (its Kafka servers) came from, for the errors that tell what to check:
the model's `kafka.bootstrap.servers` (in any spelling), the profile's `kafka_bootstrap_servers`,
or `dbt-logstore tail --bootstrap-servers`. A LogConfig says it by `servers_setting`
(with_servers_setting gives a copy that carries it; one without it names the model's setting)."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping, Optional

from dbt.adapters.logstore.config.log_config import LogConfig

# The setting a log's servers came from, as an error names it (Check ...).
MODEL_SERVERS = "kafka.bootstrap.servers"  # the model's config (the default)
PROFILE_SERVERS = "the profile's kafka_bootstrap_servers"
CLI_SERVERS = "--bootstrap-servers"  # dbt-logstore tail TOPIC --bootstrap-servers
_MODEL_SPELLINGS = ("kafka.bootstrap.servers", "kafka_bootstrap_servers", "log-store.address")


def servers_setting(log: Any) -> str:
    """The setting `log`'s servers came from: the one it carries (with_servers_setting), else
    the model's kafka.bootstrap.servers."""
    return getattr(log, "servers_setting", None) or MODEL_SERVERS


def servers_setting_of(model_config: Mapping[str, Any]) -> str:
    """Where a logged model's servers come from: its own config (any spelling of
    kafka.bootstrap.servers, the one it uses named) or, without it, the profile."""
    given = [key for key in _MODEL_SPELLINGS if model_config.get(key) is not None]
    if not given:
        return PROFILE_SERVERS
    return MODEL_SERVERS if given[0] == MODEL_SERVERS else f"the model's {given[0]}"


@dataclass(frozen=True, eq=False)
class _SourcedLogConfig(LogConfig):
    """A LogConfig that knows which setting its servers came from (for the errors only): equal
    to, and hashed as, the LogConfig of the same options."""

    servers_setting: str = field(default=MODEL_SERVERS, compare=False)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LogConfig):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name)
                   for f in fields(LogConfig) if f.compare)

    __hash__ = LogConfig.__hash__


def with_servers_setting(log: LogConfig, setting: str) -> LogConfig:
    """`log`, its errors naming `setting` as where its servers came from (a copy; every other
    field as it was)."""
    if servers_setting(log) == setting:
        return log
    values = {f.name: getattr(log, f.name) for f in fields(log) if f.init}
    return _SourcedLogConfig(**{**values, "servers_setting": setting})


def profile_log(credentials: Any) -> Optional[LogConfig]:
    """The log `dbt debug` checks: the profile's servers and client properties, its errors
    naming the profile's field (None: the profile names no servers)."""
    servers = getattr(credentials, "kafka_bootstrap_servers", None)
    if not servers:
        return None
    return with_servers_setting(
        LogConfig(model="dbt debug", system="kafka", bootstrap_servers=servers,
                  client_properties=dict(getattr(credentials, "kafka_properties", {}) or {})),
        PROFILE_SERVERS)
