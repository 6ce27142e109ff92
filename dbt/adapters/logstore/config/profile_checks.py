"""Every field this adapter adds to a profile, checked when a connection opens (dbt debug,
dbt run, every `dbt-logstore` command) before Spark or Kafka is reached: a bad one is one
sentence naming the field and the profile, as the CLI's own arguments are checked."""
from __future__ import annotations

import math
from typing import Any, Dict, Optional

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore.spark.engine_output import ENGINE_OUTPUTS
from dbt.adapters.logstore.config.key_checks import check_profile_properties
from dbt.adapters.logstore.config.options import KAFKA_CLIENTS, ProfileConfigError
from dbt.adapters.logstore.config.server_list import checked_servers


class ProfileFieldError(DbtRuntimeError):
    """A field of the profile is not one the adapter can use (the message says which, why,
    and what is allowed)."""


def _where(profile: Optional[str], target: Optional[str]) -> str:
    if profile and target:
        return f"profile '{profile}' (target '{target}')"
    return f"profile '{profile}'" if profile else "the profile"


def where_in(profile: Optional[str], target: Optional[str]) -> str:
    """How a message names the profile: "the profile 'shop' (target 'dev')"."""
    return f"the {_where(profile, target)}"


def check_profile(creds: Any, profile: Optional[str] = None, target: Optional[str] = None) -> None:
    """ProfileFieldError for the first field that cannot be used."""
    where = _where(profile, target)

    def refuse(field: str, value: Any, why: str) -> ProfileFieldError:
        return ProfileFieldError(f"Field {field} of the {where}: {value!r} {why}.")

    servers = getattr(creds, "kafka_bootstrap_servers", None)
    if servers is not None:
        try:
            checked_servers(str(servers))
        except ValueError as exc:
            raise ProfileFieldError(f"Field kafka_bootstrap_servers of the {where}: {exc}.") from None
    client = getattr(creds, "kafka_client", "kafka-python")
    if str(client).strip().lower() not in KAFKA_CLIENTS:
        raise refuse("kafka_client", client,
                     f"is not a Kafka client: give {' or '.join(KAFKA_CLIENTS)} (confluent "
                     f"needs pip install 'dbt-logstore[confluent]')")
    properties = getattr(creds, "kafka_properties", None) or {}
    if not isinstance(properties, dict):
        raise refuse("kafka_properties", properties, "is not a mapping: give property: value "
                     "pairs in Java spelling, e.g. security.protocol: SASL_SSL")
    try:
        check_profile_properties("", properties, str(client).strip().lower())
    except ProfileConfigError as exc:
        detail = exc.detail.replace(" (profile 'kafka_properties')", "")
        raise ProfileFieldError(f"Field kafka_properties of the {where}: {detail}") from None
    lease = getattr(creds, "lock_lease_seconds", 600)
    if isinstance(lease, bool) or not isinstance(lease, (int, float)) or not math.isfinite(lease) \
            or lease <= 0:
        shown = f"{lease:g}" if isinstance(lease, (int, float)) else repr(lease)
        raise ProfileFieldError(f"Field lock_lease_seconds of the {where}: {shown} is not a "
                                f"number of seconds above 0: give e.g. 600.")
    if str(getattr(creds, "method", "")) == "connect":
        _check_connect(creds, where)
    output = getattr(creds, "engine_output", "file")
    if output not in ENGINE_OUTPUTS:
        raise refuse("engine_output", output,
                     f"is not one of {', '.join(ENGINE_OUTPUTS)}: give file (Spark's output in "
                     f"logs/dbt-logstore-engine.log) or console")


def _check_connect(creds: Any, where: str) -> None:
    """`method: connect`: the host is a Spark Connect URL (with the token and use_ssl
    fields), and Spark Connect's Python client is installed."""
    from dbt.adapters.logstore.spark.connect import connect_target, missing_client

    try:
        connect_target(getattr(creds, "host", None), getattr(creds, "token", None),
                       bool(getattr(creds, "use_ssl", False)))
    except ValueError as exc:
        raise ProfileFieldError(f"Field host of the {where}: {exc}.") from None
    missing = missing_client()
    if missing is not None:
        raise ProfileFieldError(f"Field method of the {where}: 'connect' needs Spark Connect's "
                                f"Python client: pip install 'dbt-logstore[connect]' ({missing}).")


class ProfileReadError(ProfileFieldError):
    """dbt could not read the project's profile or dbt_project.yml (a variable env_var() needs
    is not set, the profile is not found, ...): dbt's words, with where it looked."""


def check_project_profile(project_dir: Any, profiles_dir: str, target: Optional[str],
                          vars: Dict[str, Any]) -> None:
    """The checks of a dbt project's profile as dbt reads it, before the project is parsed
    (whose own checks would name a model for the profile's mistake): the `dbt-logstore`
    commands'."""
    from dbt.adapters.logstore.config.project_runtime import runtime_config

    from dbt_common.exceptions import DbtBaseException

    try:
        config = runtime_config(str(project_dir), profiles_dir, target, vars)
    except DbtBaseException as exc:
        words = " ".join(str(getattr(exc, "msg", None) or exc).split())
        raise ProfileReadError(f"dbt could not read the project at {project_dir} with the "
                               f"profiles in {profiles_dir}: {words}") from None
    check_profile(config.credentials, config.profile_name, config.target_name)
