"""The log options' vocabulary: every option's spellings, defaults and allowed values, what each
means, and `LogConfigError`. The readers that turn one raw option into a typed value or an error
are in option_readers.py; the check that no key is ignored, in key_checks.py.

Every option is accepted in Paimon's dotted spelling (`log.system`), in dbt's underscored
spelling (`log_system`) and, where Amoro has one, in Amoro's spelling (`log-store.topic`), from
`config()`, `dbt_project.yml` or schema yml. Further Kafka client properties pass through with
their prefix stripped (`kafka.linger.ms`, Amoro's `properties.linger.ms`), and topic settings
for creation come from `kafka.topic-config.*`.

What each option means (DESCRIPTIONS, and the formats' FormatOption.meaning), the values it
takes (ALLOWED) and the defaults that depend on the model (DEFAULTS_SHOWN) are here too: the
Configuration page of the documentation is rendered from them (reference.py), so an option
cannot be added without its reference.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple, Union

from dbt_common.exceptions import DbtConfigError

from dbt.adapters.logstore.formats import FORMAT_OPTIONS, FORMATS as _FORMATS, debezium_transactions
from dbt.adapters.logstore.spark.json_images import TIMESTAMP_SQL, TIMESTAMP_STANDARDS

LOG_SYSTEMS = ("none", "kafka")
CONSISTENCIES = ("transactional", "eventual")
ON_LOST = ("fail", "restart")  # what a run does when its log is lost (lifecycle/identity.py)
CHANGELOG_MODES = ("auto", "all", "upsert")
FORMATS = tuple(_FORMATS)  # the registered record formats (formats/)
KEY_FORMATS = ("json",)
EMIT_MODES = ("file,log",)
KAFKA_CLIENTS = ("kafka-python", "confluent")
BOOLEANS = ("true", "false")
LOGGABLE_MATERIALIZATIONS = ("table", "incremental", "seed", "snapshot")
# The dbt resources that build a table, so may have a log (models, seeds, snapshots).
LOGGABLE_RESOURCES = ("model", "seed", "snapshot")
LOGGABLE_STRATEGIES = ("append", "insert_overwrite", "merge", "microbatch")
# dbt's `merge` options that Spark's MERGE applies but the logged change set (changes/diff.py: full
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
    "log.on-lost": ("log_on_lost",),
    "log.generation.interval": ("log_generation_interval",),
    # and the formats' own options
    **{option.key: option.spellings for option in FORMAT_OPTIONS},
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
    "log.on-lost": "fail",
    "log.generation.interval": None,
    **{option.key: option.default for option in FORMAT_OPTIONS},
}
# Spark tasks that write one change set in parallel (session method); 1 = the driver streams it.
MAX_PARALLELISM = 1024

# canonical key -> the values it takes: the choices its reader checks, or a phrase where the
# value is not a choice
ALLOWED: Dict[str, Union[Tuple[str, ...], str]] = {
    "log.system": LOG_SYSTEMS,
    "kafka.topic": "a Kafka topic name",
    "kafka.bootstrap.servers": "`host:port[,host:port]`",
    "log.consistency": CONSISTENCIES,
    "log.changelog-mode": CHANGELOG_MODES,
    "log.format": FORMATS,
    "log.key.format": KEY_FORMATS,
    "log.ignore-delete": BOOLEANS,
    "log.system.partitions": "a positive integer",
    "log.system.replication": "a positive integer",
    "mixed-format.emit.mode": EMIT_MODES,
    "log.mirror.parallelism": f"1 to {MAX_PARALLELISM}",
    "log.timestamp-format.standard": TIMESTAMP_STANDARDS,
    "log.encode.decimal-as-plain-number": BOOLEANS,
    "log.on-lost": ON_LOST,
    "log.generation.interval": "a duration: a number and `ms`, `s`, `min`, `h` or `d` (`7 d`)",
    **{option.key: option.allowed for option in FORMAT_OPTIONS if option.allowed},
    debezium_transactions.METADATA_TOPIC: "a Kafka topic name",
}

# The defaults that depend on the model or the profile (no entry in DEFAULTS), as the reference
# shows them (Markdown).
DEFAULTS_SHOWN: Dict[str, str] = {
    "log.generation.interval": "none (a generation only when the log is lost or asked for)",
    "kafka.topic": "`<schema>.<alias>`",
    "kafka.bootstrap.servers": "the profile's `kafka_bootstrap_servers`",
    debezium_transactions.METADATA_TOPIC: f"`<kafka.topic>{debezium_transactions.TOPIC_SUFFIX}`",
}

# What each option means, by canonical key (Markdown; links are relative to the documentation's
# pages). The formats' own options carry theirs (FormatOption.meaning).
DESCRIPTIONS: Dict[str, str] = {
    "log.system": "`kafka`: every commit's changes also go to Kafka. `none`: no log.",
    "kafka.topic": "The topic of this table's log. It is created if missing.",
    "kafka.bootstrap.servers": "Kafka servers for this model.",
    "log.consistency": (
        "`transactional`: exactly-once delivery. `eventual`: at-least-once, with lower latency; "
        "it needs a `unique_key`, as in Paimon. See [Consistency](operations.md#consistency)."),
    "log.changelog-mode": (
        "`all`: updates carry before and after images, and deletes carry the old row (keyed logs "
        "add a tombstone after each delete, for compaction). `upsert` (with `log.format: json` "
        "and a `unique_key`): the row by key, deletes as tombstones, as Flink's upsert-kafka "
        "reads. `auto` = `all` with `debezium-json`; with `json`, `upsert` with a `unique_key` "
        "and `all` without. See [Who reads what](consumers.md#who-reads-what)."),
    "log.format": (
        "The record value: a Debezium change event, or (`json`) the row itself. `json` expresses "
        "only upserts with tombstones (`upsert` mode, needs a key) or, on incremental `append` "
        "models, inserts; other uses are refused at parse time."),
    "log.key.format": "The record key: a JSON object of the `unique_key` columns.",
    "log.ignore-delete": "Drop deletes from the log. The log then no longer replays to the table.",
    "log.system.partitions": (
        "Partitions when the topic is created. An existing topic with fewer partitions is an "
        "error."),
    "log.system.replication": "Replication factor when the topic is created.",
    "mixed-format.emit.mode": (
        "Amoro's option. Only `file,log`: a dbt model's change set is computed against its "
        "table, so the table is always written."),
    "log.mirror.parallelism": (
        "How many Spark tasks write the change set: each with its own producer (session method), "
        "or Spark's own Kafka writer behind a Thrift Server (see "
        "[Parallel mirror](operations.md#parallel-mirror)). `1`: the driver streams it."),
    "log.timestamp-format.standard": (
        "How timestamps are written, as Flink's `*.timestamp-format.standard`: "
        "`2024-05-01 10:00:00.000000Z` (SQL) or `2024-05-01T10:00:00.000000Z` (ISO-8601). Always "
        "UTC, whatever the Spark session time zone."),
    "log.encode.decimal-as-plain-number": (
        "Write decimal columns without exponent (`0.0000001000`, not `1.000E-7`), as Flink's "
        "`encode.decimal-as-plain-number`."),
    "log.on-lost": (
        "What a run does when the topic no longer holds the table's log (deleted or recreated "
        "topics, another cluster, records removed by retention, a rebuilt table whose topic "
        "holds its old log): `fail` changes nothing and says what it found; `restart` starts a "
        "new generation, the table's rows, first. See [The log's life](operations.md#the-logs-life)."),
    "log.generation.interval": (
        "Start a new generation (the table's rows) on the first run after the latest one is this "
        "old, so a topic with finite retention always holds a complete copy: keep it well below "
        "the topic's `retention.ms`. See [The log's life](operations.md#the-logs-life)."),
}

CLIENT_PREFIXES = ("kafka.", "properties.")  # Paimon's and Amoro's pass-through prefixes
TOPIC_CONFIG_PREFIX = "kafka.topic-config."
# Prefixes that belong to this adapter: a key under them that is not known is a typo. (A key
# under CLIENT_PREFIXES that is no option must be a property of the profile's Kafka client.)
OWN_PREFIXES = ("log.", "log_", "log-store.", "mixed-format.", "mixed_format_", "kafka_")
# Which client properties the Kafka clients take is known to the kafka sub-package, the one
# place that imports a client library (tests/unit/test_import_graph.py): named here, as
# log_system.BUILT_IN names the log system, and imported when a key needs it.
CLIENT_PROPERTIES = "dbt.adapters.logstore.log.kafka.config"
NO_SUCH_PROPERTY = "no such property"  # kafka.config.property_refusal's answer for a typo
LIBRDKAFKA_PROPERTIES = "https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md"

# The keys that are not one option of SPELLINGS, for the reference (Markdown):
# (the key as written, default, allowed, meaning).
OTHER_KEYS: Tuple[Tuple[str, str, str, str], ...] = (
    (f"`{AMORO_ENABLED}` (with `{AMORO_TYPE}`)", "unset (`log.system` decides)",
     f"`true`, `false`; `{AMORO_TYPE}`: `kafka` (its default)",
     f"Amoro's switch: `true` is `log.system: kafka`, `false` is `none`. `{AMORO_TYPE}` needs "
     f"`{AMORO_ENABLED}: true`; a `log.system` that says otherwise is an error."),
    (f"`{TOPIC_CONFIG_PREFIX}<name>`", "none", "any topic setting",
     "Applied when the topic is created, e.g. `kafka.topic-config.cleanup.policy: compact`."),
    (" / ".join(f"`{prefix}<property>`" for prefix in CLIENT_PREFIXES), "none",
     "a property of the profile's `kafka_client`: kafka-python's producer settings in Java "
     "spelling, or librdkafka's (`confluent`)",
     "Passed to the Kafka client with the prefix stripped (`properties.` is Amoro's), e.g. "
     "`kafka.linger.ms: 5`, `kafka.transaction.timeout.ms: 120000`. A model setting wins over "
     "the profile's `kafka_properties`. A property the client does not have is an error at parse "
     "time, in the model and in the profile alike. Keep secrets in the profile: model config is "
     "written to `manifest.json`."),
    ("`unique_key` (dbt's own)", "none", "a column or a list of columns",
     "The record key. Keyed tables log inserts, updates and deletes per key. Read as dbt reads "
     "it: `''` and `[]` are no key, and a column named twice is one column; a blank entry in a "
     "list is an error, and so (before the table changes) is a column the model's rows lack."),
)


class LogConfigError(DbtConfigError):
    """A log option is invalid; the message names model, key, value and what is allowed."""


class ProfileConfigError(LogConfigError):
    """A setting of the profile is invalid: every logged model has the same problem, so
    log_config.check_all names it once, with its models. `detail` is the message without the
    model."""

    def __init__(self, model: str, detail: str) -> None:
        super().__init__(f"Model '{model}': {detail}")
        self.model, self.detail = model, detail


def option_error(model: str, key: str, value: Any, allowed: str) -> LogConfigError:
    return LogConfigError(
        f"Model '{model}': invalid value {value!r} for config '{key}'. Allowed: {allowed}."
    )
