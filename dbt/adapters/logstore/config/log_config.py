"""Config resolution: turn a model's raw dbt config into a validated, typed `LogConfig`.

The home of `LogConfig`, `ModelRef`, `control_topic_for` and `resolve_log_config`, which checks
the options against each other and against the model (materialization, strategy, key). The
options' spellings and defaults are in options.py, their one-option readers in option_readers.py; what a continuing
log keeps from its table is in config/continuation.py. Validation happens here, before any table
or topic is touched; every error names the model, the key, the value and what is allowed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from dbt.adapters.logstore import formats
from dbt.adapters.logstore.formats import FormatRefusal, connect_schema, debezium_transactions
from dbt.adapters.logstore.config.sources import config_sources
from dbt.adapters.logstore.spark.json_images import TIMESTAMP_ISO, TIMESTAMP_SQL, JsonImages
from dbt.adapters.logstore.config.key_checks import check_known_keys, pass_through
from dbt.adapters.logstore.config.option_readers import (
    is_given, lookup, read_boolean, read_choice, read_client, read_duration_ms, read_format_options,
    read_parallelism, read_positive_int, read_system, read_timestamp_standard, read_unique_key,
    refuse_merge_only_options,
)
from dbt.adapters.logstore.config.options import (
    CHANGELOG_MODES, CONSISTENCIES, EMIT_MODES, FORMATS, KEY_FORMATS, LOGGABLE_MATERIALIZATIONS,
    LOGGABLE_STRATEGIES, ON_LOST, LogConfigError, ProfileConfigError, option_error,
)
from dbt.adapters.logstore.names import CONTROL_TOPIC_SUFFIX

# Kafka's legal topic names (see kafka.common.internals.Topic).
_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def control_topic_for(topic: str) -> str:
    """The control topic that confirms each committed write attempt of a log topic."""
    return topic + CONTROL_TOPIC_SUFFIX


@dataclass(frozen=True)
class ModelRef:
    """What config resolution needs to know about the model being built."""

    name: str
    schema: str
    alias: str
    materialized: str
    incremental_strategy: Optional[str] = None
    language: str = "sql"
    # (key, where it was set) for keys set by config() or schema.yml, the rest set in
    # dbt_project.yml (config/sources.py); None: not known
    sources: Optional[Tuple[Tuple[str, str], ...]] = None

    @classmethod
    def from_node(cls, node: Any) -> "ModelRef":
        """A dbt node (a manifest object at parse time, a dict in a model's context)."""
        raw, sources = node_config(node), config_sources(node)
        return cls(
            name=str(node_field(node, "name")),
            schema=str(node_field(node, "schema")),
            alias=str(node_field(node, "alias") or node_field(node, "name")),
            materialized=str(raw.get("materialized")),
            incremental_strategy=raw.get("incremental_strategy"),
            language=str(node_field(node, "language") or "sql"),
            sources=None if sources is None else tuple(sources.items()),
        )


def node_field(node: Any, key: str, default: Any = None) -> Any:
    if isinstance(node, Mapping):
        return node.get(key, default)
    return getattr(node, key, default)


def node_config(node: Any) -> Dict[str, Any]:
    """A node's config: a dict at run time, a config object at parse time."""
    value = node_field(node, "config")
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    if hasattr(value, "to_dict"):
        return value.to_dict(omit_none=True)
    return dict(value)


def check_all(nodes: Iterable[Any], resolve: Callable[[Any], Any]) -> None:
    """Resolve the log options of every node with a config, and fail naming every model whose
    options are bad, in one error (so a project is fixed in one pass). A problem of the profile
    (ProfileConfigError: every logged model has it) is named once, with its models."""
    errors = []
    bad = 0  # the models named (a node fails once at most: none is counted twice)
    writers: Dict[Tuple[str, str], List[str]] = {}  # (servers, topic) -> the models logging there
    profile: Dict[str, List[str]] = {}  # a profile problem -> the models it stops
    for node in sorted(nodes, key=lambda n: str(node_field(n, "unique_id"))):
        if node_field(node, "config") is None:
            continue
        try:
            log = resolve(node)
        except ProfileConfigError as exc:
            profile.setdefault(exc.detail, []).append(exc.model)
            continue
        except LogConfigError as exc:
            errors.append(str(exc.msg))
            bad += 1
            continue
        if getattr(log, "enabled", False):
            writers.setdefault((str(log.bootstrap_servers), str(log.topic)), []).append(log.model)
    for detail, models in profile.items():
        named = f"Model '{models[0]}'" if len(models) == 1 else \
            f"Models {', '.join(repr(m) for m in models)}"
        errors.append(f"{named}: {detail}")
        bad += len(models)
    for (_, topic), models in sorted(writers.items()):
        if len(models) > 1:  # e.g. two versions of a model given one 'kafka.topic'
            errors.append(
                f"Models {', '.join(repr(m) for m in models)} all log to topic '{topic}'; a topic "
                f"holds the log of one table (consumers could not tell their rows apart). Allowed: "
                f"a 'kafka.topic' of its own for each (the default, '<schema>.<alias>', is).")
            bad += len(models)
    if len(errors) == 1:
        raise LogConfigError(errors[0])
    if errors:
        raise LogConfigError(f"{bad} models have an invalid log configuration:\n"
                             + "\n".join(f"- {e}" for e in errors))


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
    # the format's own options (formats.FORMAT_OPTIONS), canonical key -> value
    format_options: Mapping[str, str] = field(default_factory=dict, hash=False)
    topic_config: Mapping[str, str] = field(default_factory=dict, hash=False)
    # What a run does when its log is lost (lifecycle/identity.py): 'fail' or 'restart'.
    on_lost: str = "fail"
    # Start a generation when the latest one is older than this (None: never on a schedule).
    generation_interval_ms: Optional[int] = None
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
        return formats.images_for(self.format_options, self.timestamp_standard, self.decimal_plain)

    @property
    def transaction_topic(self) -> Optional[str]:
        """The topic of Debezium's BEGIN/END events, when the log writes them."""
        if not debezium_transactions.enabled(self.format_options):
            return None
        return debezium_transactions.topic_for(str(self.topic), self.format_options)

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
            # a format option only where it is not its default: tables written before it existed
            # read the same (commit_protocol.log_is_new compares them)
            **{k: v for k, v in self.format_options.items() if v != formats.option_default(k)},
        }


def _changelog_mode(ref: ModelRef, log_format: str, requested: str,
                    unique_key: Tuple[str, ...]) -> str:
    """The changelog mode `auto` stands for, and a refusal of every combination that no
    standard consumer reads (docs/consumers.md, 'Who reads what', lists what each one is read by)."""
    model = ref.name
    if requested == "upsert" and not unique_key:
        raise LogConfigError(
            f"Model '{model}': config 'log.changelog-mode' = 'upsert' needs a 'unique_key' "
            f"(deletes become tombstones of a key). Allowed without a key: all, auto.")
    append_only = ref.materialized == "incremental" and (ref.incremental_strategy or "append") == "append"
    materialization = f"materialized='{ref.materialized}'" + (
        f" ({ref.incremental_strategy})" if ref.incremental_strategy else "")
    try:
        return formats.get_format(log_format).changelog_mode(requested, unique_key, append_only, materialization)
    except FormatRefusal as refusal:
        raise LogConfigError(f"Model '{model}': {refusal}") from None


def _format_options(model: str, raw: Mapping[str, Any], log_format: str, parallelism: int,
                    timestamps: str, timestamps_given: bool) -> Tuple[Dict[str, str], str]:
    """The format's own options, and the timestamp standard they need: Kafka Connect's envelope
    declares timestamps as Debezium's ZonedTimestamp, which is ISO-8601."""
    options = read_format_options(model, raw, log_format)
    if connect_schema.included(options):
        if timestamps_given and timestamps != TIMESTAMP_ISO:
            raise LogConfigError(
                f"Model '{model}': config 'log.timestamp-format.standard' = '{timestamps}' with "
                f"'{connect_schema.SCHEMA_INCLUDE}' = true: the Connect schema declares timestamps "
                f"as io.debezium.time.ZonedTimestamp, which is ISO-8601. Allowed: ISO-8601, or "
                f"leave it unset.")
        timestamps = TIMESTAMP_ISO
    if debezium_transactions.enabled(options) and parallelism > 1:
        raise LogConfigError(
            f"Model '{model}': config '{debezium_transactions.METADATA}' = true needs "
            f"'log.mirror.parallelism' = 1: each event's position in its transaction is counted "
            f"as the driver writes the change set. Allowed: one of the two.")
    topic = options.get(debezium_transactions.METADATA_TOPIC)
    if topic and not _TOPIC_RE.fullmatch(topic):
        raise option_error(model, debezium_transactions.METADATA_TOPIC, topic,
                           "1-249 characters of ASCII letters, digits, '.', '_', '-'")
    return options, timestamps


def resolve_log_config(
    ref: ModelRef,
    raw: Mapping[str, Any],
    profile_bootstrap_servers: Optional[str] = None,
    profile_properties: Optional[Mapping[str, str]] = None,
    profile_client: Optional[str] = None,
) -> LogConfig:
    """Resolve and validate the log options of one model from its raw config dict."""
    model = ref.name
    check_known_keys(model, raw, profile_client, None if ref.sources is None else dict(ref.sources))
    system = read_system(model, raw)
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
    if ref.materialized == "snapshot":
        # a snapshot holds every version of a source key: its rows' own key is dbt's scd id
        scd_id = (raw.get("snapshot_table_column_names") or {}).get("dbt_scd_id") or "dbt_scd_id"
        unique_key: Tuple[str, ...] = (str(scd_id),)
    else:
        unique_key = read_unique_key(model, raw.get("unique_key"))
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
            refuse_merge_only_options(model, system, raw)
        if strategy == "microbatch" and not raw.get("partition_by"):
            # dbt-spark's microbatch overwrites the partitions of each batch's rows; without
            # partition_by it would overwrite the whole table with one batch
            raise LogConfigError(f"Model '{model}': incremental_strategy='microbatch' needs a "
                                 f"'partition_by' (each batch overwrites the partitions it has "
                                 f"rows in, as dbt-spark runs it).")

    emit = str(lookup(model, raw, "mixed-format.emit.mode")).replace(" ", "").lower()
    if emit not in EMIT_MODES:
        raise LogConfigError(
            f"Model '{model}': config 'mixed-format.emit.mode' = {emit!r} is not supported. "
            f"Allowed: file,log. A dbt model is a table: its change set is computed against the "
            f"table's previous rows, so the table is always written (see docs/configuration.md)."
        )

    consistency = read_choice(model, raw, "log.consistency", CONSISTENCIES)
    if consistency == "eventual" and not unique_key:
        raise LogConfigError(
            f"Model '{model}': config 'log.consistency' = 'eventual' needs a 'unique_key'. "
            f"Allowed without a key: transactional (at-least-once delivery can only be "
            f"de-duplicated by key, as in Paimon)."
        )
    log_format = read_choice(model, raw, "log.format", FORMATS)
    requested = read_choice(model, raw, "log.changelog-mode", CHANGELOG_MODES)
    mode = _changelog_mode(ref, log_format, requested, unique_key)
    key_format = read_choice(model, raw, "log.key.format", KEY_FORMATS)
    timestamps = read_timestamp_standard(model, raw)

    topic = lookup(model, raw, "kafka.topic") or f"{ref.schema}.{ref.alias}"
    if not _TOPIC_RE.fullmatch(control_topic_for(str(topic))) or topic in (".", ".."):
        limit = 249 - len(CONTROL_TOPIC_SUFFIX)  # room for the control topic's suffix
        raise option_error(
            model, "kafka.topic", topic,
            f"1-{limit} characters of ASCII letters, digits, '.', '_', '-'"
        )

    servers = lookup(model, raw, "kafka.bootstrap.servers") or profile_bootstrap_servers
    if not servers or not str(servers).strip():
        raise LogConfigError(
            f"Model '{model}': config 'log.system' = 'kafka' needs Kafka servers, but neither "
            f"'kafka.bootstrap.servers' (model config) nor 'kafka_bootstrap_servers' (profile) "
            f"is set. Allowed: a comma-separated list of host:port."
        )
    client, topic_config = pass_through(model, raw, profile_properties or {},
                                        read_client(model, profile_client))
    parallelism = read_parallelism(model, raw)
    timestamps_given = (is_given(raw, "log.timestamp-format.standard")
                        or is_given(raw, "log_timestamp_format_standard"))
    format_options, timestamps = _format_options(model, raw, log_format, parallelism, timestamps,
                                                 timestamps_given)

    return LogConfig(
        model=model,
        system=system,
        topic=str(topic),
        bootstrap_servers=str(servers).strip(),
        consistency=consistency,
        changelog_mode=mode,
        mode_requested=requested,
        timestamp_standard=timestamps,
        timestamp_standard_given=timestamps_given,
        decimal_plain=read_boolean(model, raw, "log.encode.decimal-as-plain-number"),
        format=log_format,
        key_format=key_format,
        ignore_delete=read_boolean(model, raw, "log.ignore-delete"),
        partitions=read_positive_int(model, "log.system.partitions",
                                     lookup(model, raw, "log.system.partitions")),
        replication=read_positive_int(model, "log.system.replication",
                                      lookup(model, raw, "log.system.replication")),
        unique_key=unique_key,
        parallelism=parallelism,
        format_options=format_options,
        client=read_client(model, profile_client),
        topic_config=topic_config,
        client_properties=client,
        on_lost=read_choice(model, raw, "log.on-lost", ON_LOST),
        generation_interval_ms=read_duration_ms(model, "log.generation.interval",
                                                lookup(model, raw, "log.generation.interval")),
    )
