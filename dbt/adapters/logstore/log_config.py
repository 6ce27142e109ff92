"""Config resolution: turn a model's raw dbt config into a validated, typed `LogConfig`.

Every option is accepted in Paimon's dotted spelling (`log.system`), in dbt's underscored
spelling (`log_system`) and, where Amoro has one, in Amoro's spelling (`log-store.topic`), from
`config()`, `dbt_project.yml` or schema yml. Further Kafka client properties pass through with
their prefix stripped (`kafka.linger.ms`, Amoro's `properties.linger.ms`), and topic settings
for creation come from `kafka.topic-config.*`. Validation happens here, before any table or topic
is touched; every error names the model, the key, the value and what is allowed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Tuple

from dbt_common.exceptions import DbtConfigError

from dbt.adapters.logstore.encoding import TIMESTAMP_ISO, TIMESTAMP_SQL, TIMESTAMP_STANDARDS, JsonImages
from dbt.adapters.logstore.names import CONTROL_TOPIC_SUFFIX

LOG_SYSTEMS = ("none", "kafka")
CONSISTENCIES = ("transactional", "eventual")
CHANGELOG_MODES = ("auto", "all", "upsert")
FORMATS = ("debezium-json", "json")
KEY_FORMATS = ("json",)
EMIT_MODES = ("file,log",)
KAFKA_CLIENTS = ("kafka-python", "confluent")
LOGGABLE_MATERIALIZATIONS = ("table", "incremental")
LOGGABLE_STRATEGIES = ("append", "insert_overwrite", "merge")
# dbt's `merge` options that Spark's MERGE applies but the logged change set (changes.py: full
# rows, scoped by unique_key alone) and the upsert by rewrite do not: with one of them set, the
# log would record changes the table did not make. `predicates` is dbt's older spelling of
# `incremental_predicates`. Refused on a logged merge model until the change set honours them.
MERGE_ONLY_OPTIONS: Dict[str, str] = {
    "merge_update_columns": "the MERGE updates only the listed columns of a matched row, while "
                            "the log records the whole new row",
    "merge_exclude_columns": "the MERGE leaves the excluded columns of a matched row as they "
                             "were, while the log records the whole new row",
    "incremental_predicates": "the MERGE matches only the rows its predicates select (a key they "
                              "leave out gets a second row), while the log matches by unique_key "
                              "alone and records an update",
    "predicates": "the MERGE matches only the rows its predicates select (a key they leave out "
                  "gets a second row), while the log matches by unique_key alone and records "
                  "an update",
}

# canonical key -> every other spelling of it (dbt's, Amoro's)
SPELLINGS: Dict[str, Tuple[str, ...]] = {
    "log.system": ("log_system",),
    "kafka.topic": ("kafka_topic", "log-store.topic"),
    "kafka.bootstrap.servers": ("kafka_bootstrap_servers", "log-store.address"),
    "log.consistency": ("log_consistency",),
    "log.changelog-mode": ("log_changelog_mode",),
    "log.format": ("log_format",),
    "log.key.format": ("log_key_format",),
    "log.ignore-delete": ("log_ignore_delete",),
    "log.system.partitions": ("log_system_partitions",),
    "log.system.replication": ("log_system_replication",),
    "mixed-format.emit.mode": ("mixed_format_emit_mode",),
    "log.mirror.parallelism": ("log_mirror_parallelism",),
    "log.timestamp-format.standard": ("log_timestamp_format_standard",),
    "log.encode.decimal-as-plain-number": ("log_encode_decimal_as_plain_number",),
}
# Amoro's switch: `log-store.enabled: true` (with `log-store.type`, default kafka) = log.system.
AMORO_ENABLED, AMORO_TYPE = "log-store.enabled", "log-store.type"

DEFAULTS: Dict[str, Any] = {
    "log.system": "none",
    "log.consistency": "transactional",
    "log.changelog-mode": "auto",
    "log.format": "debezium-json",
    "log.key.format": "json",
    "log.ignore-delete": False,
    "log.system.partitions": 1,
    "log.system.replication": 1,
    "mixed-format.emit.mode": "file,log",
    "log.mirror.parallelism": 1,
    "log.timestamp-format.standard": TIMESTAMP_SQL,
    "log.encode.decimal-as-plain-number": False,
}
# What a topic written before these options existed holds (see continue_stored_shape).
LEGACY_TIMESTAMPS = TIMESTAMP_ISO
# Spark tasks that write one change set in parallel (session method); 1 = the driver streams it.
MAX_PARALLELISM = 1024

CLIENT_PREFIXES = ("kafka.", "properties.")  # Paimon's and Amoro's pass-through prefixes
TOPIC_CONFIG_PREFIX = "kafka.topic-config."
# Prefixes that belong to this adapter: a key under them that is not known is a typo.
OWN_PREFIXES = ("log.", "log_", "log-store.", "mixed-format.", "mixed_format_")

# Kafka's legal topic names (see kafka.common.internals.Topic).
_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def control_topic_for(topic: str) -> str:
    """The control topic that confirms each committed write attempt of a log topic."""
    return topic + CONTROL_TOPIC_SUFFIX


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
    changelog_mode: str = "all"  # resolved: 'all' or 'upsert'
    mode_requested: str = "auto"  # as configured: 'auto', 'all' or 'upsert'
    timestamp_standard: str = TIMESTAMP_SQL
    timestamp_standard_given: bool = False
    decimal_plain: bool = False
    format: str = "debezium-json"
    key_format: str = "json"
    ignore_delete: bool = False
    partitions: int = 1
    replication: int = 1
    unique_key: Tuple[str, ...] = ()
    # Spark tasks writing a change set, each with its own producer (1: the driver writes it).
    parallelism: int = 1
    # The Kafka client library that writes the records (profile field kafka_client).
    client: str = "kafka-python"
    topic_config: Mapping[str, str] = field(default_factory=dict, hash=False)
    # Kafka client properties (profile, then model); may hold secrets, so never printed.
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

    @property
    def upsert(self) -> bool:
        return self.changelog_mode == "upsert"

    @property
    def images(self) -> JsonImages:
        """How this log writes (and its readers parse) row images."""
        return JsonImages(self.timestamp_standard, self.decimal_plain)

    def table_properties(self) -> Dict[str, str]:
        """The options stored with the Spark table (no client properties: they may be secret)."""
        if not self.enabled:
            return {"log.system": "none"}
        return {
            "log.system": self.system,
            "kafka.topic": str(self.topic),
            "kafka.bootstrap.servers": str(self.bootstrap_servers),
            "log.consistency": self.consistency,
            "log.changelog-mode": self.changelog_mode,
            "log.format": self.format,
            "log.timestamp-format.standard": self.timestamp_standard,
            "log.encode.decimal-as-plain-number": str(self.decimal_plain).lower(),
            "log.key.format": self.key_format,
            "log.ignore-delete": str(self.ignore_delete).lower(),
            "log.system.partitions": str(self.partitions),
            "log.system.replication": str(self.replication),
            "log.key": ",".join(self.unique_key),
        }


def _fail(model: str, key: str, value: Any, allowed: str) -> LogConfigError:
    return LogConfigError(
        f"Model '{model}': invalid value {value!r} for config '{key}'. Allowed: {allowed}."
    )


def _given(raw: Mapping[str, Any], key: str) -> bool:
    return raw.get(key) is not None


def _lookup(model: str, raw: Mapping[str, Any], key: str) -> Any:
    """Read one option in any of its spellings; the same option given twice must agree."""
    given = [(k, raw[k]) for k in (key,) + SPELLINGS.get(key, ()) if _given(raw, k)]
    for other, value in given[1:]:
        if str(value) != str(given[0][1]):
            raise LogConfigError(
                f"Model '{model}': config '{given[0][0]}' = {given[0][1]!r} conflicts with "
                f"'{other}' = {value!r}. Give the option once (any one spelling)."
            )
    return given[0][1] if given else DEFAULTS.get(key)


def _choice(model: str, raw: Mapping[str, Any], key: str, allowed: Tuple[str, ...]) -> str:
    value = str(_lookup(model, raw, key)).strip().lower()
    if value not in allowed:
        raise _fail(model, key, value, ", ".join(allowed))
    return value


def _boolean(model: str, raw: Mapping[str, Any], key: str) -> bool:
    value = _lookup(model, raw, key)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise _fail(model, key, value, "true, false")
    return text == "true"


def _positive_int(model: str, key: str, value: Any) -> int:
    try:
        number = int(str(value))
    except ValueError:
        raise _fail(model, key, value, "a positive integer") from None
    if number < 1:
        raise _fail(model, key, value, "a positive integer")
    return number


def _parallelism(model: str, raw: Mapping[str, Any]) -> int:
    value = _lookup(model, raw, "log.mirror.parallelism")
    allowed = f"an integer from 1 to {MAX_PARALLELISM} (1: the driver writes the change set)"
    try:
        number = int(str(value).strip())
    except ValueError:
        raise _fail(model, "log.mirror.parallelism", value, allowed) from None
    if isinstance(value, bool) or not 1 <= number <= MAX_PARALLELISM:
        raise _fail(model, "log.mirror.parallelism", value, allowed)
    return number


def _client(model: str, value: Optional[str]) -> str:
    client = str(value or "kafka-python").strip().lower()
    if client not in KAFKA_CLIENTS:
        raise LogConfigError(
            f"Model '{model}': invalid value {value!r} for profile field 'kafka_client'. "
            f"Allowed: {', '.join(KAFKA_CLIENTS)} (confluent needs pip install "
            f"'dbt-logstore[confluent]').")
    return client


def _unique_key(model: str, value: Any) -> Tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise _fail(model, "unique_key", value, "a column name or a list of column names")


def _system(model: str, raw: Mapping[str, Any]) -> str:
    system = _choice(model, raw, "log.system", LOG_SYSTEMS)
    if not _given(raw, AMORO_ENABLED):
        if _given(raw, AMORO_TYPE):
            raise LogConfigError(f"Model '{model}': config '{AMORO_TYPE}' needs "
                                 f"'{AMORO_ENABLED}: true' (or use 'log.system').")
        return system
    enabled = _boolean(model, raw, AMORO_ENABLED)
    amoro = str(raw.get(AMORO_TYPE) or "kafka").strip().lower() if enabled else "none"
    if amoro not in LOG_SYSTEMS:
        raise _fail(model, AMORO_TYPE, amoro, "kafka")
    if _given(raw, "log.system") or _given(raw, "log_system"):
        if amoro != system:
            raise LogConfigError(
                f"Model '{model}': config '{AMORO_ENABLED}' ({raw[AMORO_ENABLED]!r}) conflicts "
                f"with 'log.system' = {system!r}. Give the option once.")
    return amoro


def _changelog_mode(ref: ModelRef, log_format: str, requested: str,
                    unique_key: Tuple[str, ...]) -> str:
    """The changelog mode `auto` stands for, and a refusal of every combination that no
    standard consumer reads (the README's consumer table lists what each one is read by)."""
    model = ref.name
    if requested == "upsert" and not unique_key:
        raise LogConfigError(
            f"Model '{model}': config 'log.changelog-mode' = 'upsert' needs a 'unique_key' "
            f"(deletes become tombstones of a key). Allowed without a key: all, auto.")
    if log_format == "debezium-json":
        if requested == "upsert":
            raise LogConfigError(
                f"Model '{model}': config 'log.changelog-mode' = 'upsert' with 'log.format' = "
                f"'debezium-json' would write updates without their before image, which Flink's "
                f"debezium-json cannot read. Allowed: 'log.changelog-mode' all or auto with "
                f"debezium-json (a Debezium change stream), or 'log.format' = 'json' with upsert "
                f"(Flink's upsert-kafka). A topic that already holds that shape keeps it under "
                f"'auto' (see README, 'Moving an existing log').")
        return "all"
    mode = requested if requested != "auto" else ("upsert" if unique_key else "all")
    append_only = ref.materialized == "incremental" and (ref.incremental_strategy or "append") == "append"
    if mode == "all" and not append_only:
        raise LogConfigError(
            f"Model '{model}': config 'log.format' = 'json' writes bare rows, which cannot express "
            f"the updates and deletes of a materialized='{ref.materialized}'"
            + (f" ({ref.incremental_strategy})" if ref.incremental_strategy else "")
            + f" model{'' if unique_key else ' without a unique_key'}. Allowed: 'log.format' = "
            f"'debezium-json', or 'json' with a 'unique_key' (upsert mode: deletes as tombstones), "
            f"or 'json' on an incremental append model.")
    return mode


def _timestamp_standard(model: str, raw: Mapping[str, Any]) -> str:
    value = str(_lookup(model, raw, "log.timestamp-format.standard")).strip().upper()
    if value not in TIMESTAMP_STANDARDS:
        raise _fail(model, "log.timestamp-format.standard", value, ", ".join(TIMESTAMP_STANDARDS))
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


def _refuse_merge_only_options(model: str, system: str, raw: Mapping[str, Any]) -> None:
    for key, reason in MERGE_ONLY_OPTIONS.items():
        if _is_set(raw.get(key)):
            raise LogConfigError(
                f"Model '{model}': config '{key}' = {raw[key]!r} is not supported on a logged "
                f"incremental_strategy='merge' model (log.system = '{system}'): the log would "
                f"record changes the MERGE does not make ({reason}). Allowed: leave it unset, "
                f"or turn the log off for this model (log.system: none).")


def _check_known_keys(model: str, raw: Mapping[str, Any]) -> None:
    known = set(SPELLINGS) | {s for spellings in SPELLINGS.values() for s in spellings}
    known |= {AMORO_ENABLED, AMORO_TYPE}
    for key in raw:
        if key.startswith(OWN_PREFIXES) and key not in known:
            allowed = ", ".join(sorted(k for k in known if k.startswith(key.split(".")[0][:3])))
            raise LogConfigError(f"Model '{model}': unknown config key '{key}'. Allowed: {allowed}.")


def _pass_through(model: str, raw: Mapping[str, Any],
                  profile_properties: Mapping[str, str]) -> Tuple[Dict[str, str], Dict[str, str]]:
    """Client properties (`kafka.*`, `properties.*`, prefix stripped) and topic settings."""
    client: Dict[str, str] = dict(profile_properties)
    from_model: Dict[str, str] = {}
    topic_config: Dict[str, str] = {}
    for key, value in raw.items():
        if value is None:
            continue
        if key.startswith(TOPIC_CONFIG_PREFIX):
            topic_config[key[len(TOPIC_CONFIG_PREFIX):]] = str(value)
            continue
        prefix = next((p for p in CLIENT_PREFIXES if key.startswith(p)), None)
        if prefix is None or key in SPELLINGS:
            continue
        name = key[len(prefix):]
        if name in from_model and str(from_model[name]) != str(value):
            raise LogConfigError(
                f"Model '{model}': Kafka property '{name}' is given twice with different values "
                f"('kafka.{name}' and 'properties.{name}'). Give it once.")
        from_model[name] = str(value)
    client.update(from_model)  # the model's own setting wins over the profile default
    return client, topic_config


def resolve_log_config(
    ref: ModelRef,
    raw: Mapping[str, Any],
    profile_bootstrap_servers: Optional[str] = None,
    profile_properties: Optional[Mapping[str, str]] = None,
    profile_client: Optional[str] = None,
) -> LogConfig:
    """Resolve and validate the log options of one model from its raw config dict."""
    model = ref.name
    _check_known_keys(model, raw)
    system = _system(model, raw)
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
    unique_key = _unique_key(model, raw.get("unique_key"))
    if ref.materialized == "incremental":
        strategy = ref.incremental_strategy or "append"
        if strategy not in LOGGABLE_STRATEGIES:
            raise LogConfigError(
                f"Model '{model}': config 'log.system' = '{system}' is not supported with "
                f"incremental_strategy='{strategy}'. Allowed: {', '.join(LOGGABLE_STRATEGIES)}."
            )
        if strategy == "merge" and not unique_key:
            raise LogConfigError(f"Model '{model}': incremental_strategy='merge' needs a "
                                 f"'unique_key' (the key rows are upserted by).")
        if strategy == "merge":
            _refuse_merge_only_options(model, system, raw)

    emit = str(_lookup(model, raw, "mixed-format.emit.mode")).replace(" ", "").lower()
    if emit not in EMIT_MODES:
        raise LogConfigError(
            f"Model '{model}': config 'mixed-format.emit.mode' = {emit!r} is not supported. "
            f"Allowed: file,log. A dbt model is a table: its change set is computed against the "
            f"table's previous rows, so the table is always written (see README)."
        )

    consistency = _choice(model, raw, "log.consistency", CONSISTENCIES)
    if consistency == "eventual" and not unique_key:
        raise LogConfigError(
            f"Model '{model}': config 'log.consistency' = 'eventual' needs a 'unique_key'. "
            f"Allowed without a key: transactional (at-least-once delivery can only be "
            f"de-duplicated by key, as in Paimon)."
        )
    log_format = _choice(model, raw, "log.format", FORMATS)
    requested = _choice(model, raw, "log.changelog-mode", CHANGELOG_MODES)
    mode = _changelog_mode(ref, log_format, requested, unique_key)
    key_format = _choice(model, raw, "log.key.format", KEY_FORMATS)
    timestamps = _timestamp_standard(model, raw)

    topic = _lookup(model, raw, "kafka.topic") or f"{ref.schema}.{ref.alias}"
    if not _TOPIC_RE.fullmatch(control_topic_for(str(topic))) or topic in (".", ".."):
        limit = 249 - len(CONTROL_TOPIC_SUFFIX)  # room for the control topic's suffix
        raise _fail(
            model, "kafka.topic", topic,
            f"1-{limit} characters of ASCII letters, digits, '.', '_', '-'"
        )

    servers = _lookup(model, raw, "kafka.bootstrap.servers") or profile_bootstrap_servers
    if not servers or not str(servers).strip():
        raise LogConfigError(
            f"Model '{model}': config 'log.system' = 'kafka' needs Kafka servers, but neither "
            f"'kafka.bootstrap.servers' (model config) nor 'kafka_bootstrap_servers' (profile) "
            f"is set. Allowed: a comma-separated list of host:port."
        )
    client, topic_config = _pass_through(model, raw, profile_properties or {})

    return LogConfig(
        model=model,
        system=system,
        topic=str(topic),
        bootstrap_servers=str(servers).strip(),
        consistency=consistency,
        changelog_mode=mode,
        mode_requested=requested,
        timestamp_standard=timestamps,
        timestamp_standard_given=_given(raw, "log.timestamp-format.standard")
        or _given(raw, "log_timestamp_format_standard"),
        decimal_plain=_boolean(model, raw, "log.encode.decimal-as-plain-number"),
        format=log_format,
        key_format=key_format,
        ignore_delete=_boolean(model, raw, "log.ignore-delete"),
        partitions=_positive_int(model, "log.system.partitions",
                                 _lookup(model, raw, "log.system.partitions")),
        replication=_positive_int(model, "log.system.replication",
                                  _lookup(model, raw, "log.system.replication")),
        unique_key=unique_key,
        parallelism=_parallelism(model, raw),
        client=_client(model, profile_client),
        topic_config=topic_config,
        client_properties=client,
    )



def _servers(value: Optional[str]) -> frozenset:
    """One cluster, however its servers are listed."""
    return frozenset(s.strip() for s in (value or "").split(",") if s.strip())


def continues_log(log: LogConfig, table_props: Mapping[str, str]) -> bool:
    """Whether the table's stored options say its log goes on in the same topic of the same
    cluster (otherwise the log starts now, with the table's rows)."""
    return (table_props.get("log.system") == log.system
            and table_props.get("kafka.topic") == log.topic
            and _servers(table_props.get("kafka.bootstrap.servers")) == _servers(log.bootstrap_servers))


def continue_stored_shape(log: LogConfig, table_props: Mapping[str, str]) -> Tuple[LogConfig, List[str]]:
    """The options a continuing log is written with, and warnings for the user.

    A topic must not change its shape mid-stream, or its consumers (configured for one shape)
    break. So where the model leaves an option to its default (`log.changelog-mode: auto`, no
    `log.timestamp-format.standard`), a log that goes on keeps what its table recorded, also
    when the default has changed since (topics started by 0.1: keyed logs in debezium-json
    upsert mode, timestamps ISO-8601). An explicit option that differs from the recorded one is
    an error, as is a changed format (commit_protocol.log_is_new)."""
    if not log.enabled or not continues_log(log, table_props):
        return log, []
    warnings: List[str] = []
    advice = ("Allowed: keep it, or log to a new 'kafka.topic' (a new topic starts with the "
              "table's rows; see README, 'Moving an existing log').")
    stored_mode = table_props.get("log.changelog-mode")
    if stored_mode in CHANGELOG_MODES[1:] and stored_mode != log.changelog_mode:
        if log.mode_requested != "auto":
            raise LogConfigError(
                f"Model '{log.model}': 'log.changelog-mode' changed from '{stored_mode}' to "
                f"'{log.mode_requested}', but topic '{log.topic}' already holds '{stored_mode}' "
                f"records; its consumers read one shape. {advice}")
        log = replace(log, changelog_mode=stored_mode)
        if stored_mode == "upsert" and log.format == "debezium-json":
            warnings.append(
                f"Model '{log.model}': topic '{log.topic}' keeps the keyed shape it was started with "
                f"(debezium-json updates without before images, deletes as tombstones), which "
                f"Flink's debezium-json cannot read. To get the current default (before images, "
                f"'d' events), log to a new 'kafka.topic'.")
    stored_timestamps = table_props.get("log.timestamp-format.standard", LEGACY_TIMESTAMPS)
    if stored_timestamps != log.timestamp_standard:
        if log.timestamp_standard_given:
            raise LogConfigError(
                f"Model '{log.model}': 'log.timestamp-format.standard' changed from "
                f"'{stored_timestamps}' to '{log.timestamp_standard}', but topic '{log.topic}' "
                f"already holds {stored_timestamps} timestamps; its consumers parse one. {advice}")
        log = replace(log, timestamp_standard=stored_timestamps)
        warnings.append(
            f"Model '{log.model}': topic '{log.topic}' keeps writing {stored_timestamps} "
            f"timestamps, as it was started with (the default is now {TIMESTAMP_SQL}); Flink "
            f"reads them with 'debezium-json.timestamp-format.standard' = '{stored_timestamps}'. "
            f"Set 'log.timestamp-format.standard' to '{stored_timestamps}' to keep it without "
            f"this warning, or log to a new 'kafka.topic'.")
    return log, warnings
