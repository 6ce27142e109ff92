"""The log options' vocabulary and readers: every option's spellings, defaults and allowed
values, `LogConfigError`, and the readers that turn one raw option into a typed value or an error.

Every option is accepted in Paimon's dotted spelling (`log.system`), in dbt's underscored
spelling (`log_system`) and, where Amoro has one, in Amoro's spelling (`log-store.topic`), from
`config()`, `dbt_project.yml` or schema yml. Further Kafka client properties pass through with
their prefix stripped (`kafka.linger.ms`, Amoro's `properties.linger.ms`), and topic settings
for creation come from `kafka.topic-config.*`. The readers (`read_choice`, `read_boolean`, ...) are
called by log_config.resolve_log_config; every error names the model, the key, the value and
what is allowed. No key of the adapter's families is ignored (check_known_keys): one that is no
option, and a client property the profile's Kafka client does not have (model config or the
profile's `kafka_properties`), is an error suggesting the closest keys.

What each option means (DESCRIPTIONS, and the formats' FormatOption.meaning), the values it
takes (ALLOWED) and the defaults that depend on the model (DEFAULTS_SHOWN) are here too: the
Configuration page of the documentation is rendered from them (config_reference.py), so an option
cannot be added without its reference.
"""
from __future__ import annotations

import difflib
import importlib
import re
import textwrap
from functools import lru_cache
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

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
LOGGABLE_STRATEGIES = ("append", "insert_overwrite", "merge", "microbatch")
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


def _family(key: str) -> str:
    """The prefix `key` is under (the longest), or ''."""
    return max((p for p in OWN_PREFIXES + CLIENT_PREFIXES if key.startswith(p)), key=len, default="")


@lru_cache(maxsize=None)
def known_keys() -> Tuple[str, ...]:
    """Every option's every spelling, and Amoro's switch."""
    spelled = set(SPELLINGS) | {s for spellings in SPELLINGS.values() for s in spellings}
    return tuple(sorted(spelled | {AMORO_ENABLED, AMORO_TYPE}))


def wrapped(text: str, width: int = 100) -> str:
    """`text` on lines of its own, indented, of at most `width` characters (a list of keys
    printed whole would be one line of a thousand)."""
    return "\n" + textwrap.fill(text, width=width, initial_indent="  ", subsequent_indent="  ",
                                 break_on_hyphens=False, break_long_words=False)


def _quoted(names: Sequence[str]) -> str:
    return " or ".join(f"'{n}'" for n in names)


class _Client:
    """What the profile's Kafka client takes (kafka/config.py, by name: see CLIENT_PROPERTIES)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.library = "librdkafka" if name == "confluent" else "kafka-python"
        module = importlib.import_module(CLIENT_PROPERTIES)
        self.refusal: Callable[[str, str, Any], Optional[str]] = module.property_refusal
        self._names: Callable[[str], Tuple[str, ...]] = module.property_names

    @property
    def names(self) -> Tuple[str, ...]:
        return self._names(self.name)

    def check(self, name: str, value: Any) -> Optional[str]:
        return self.refusal(self.name, name, value)

    def allowed(self, prefix: str = "") -> str:
        """The client's properties, for an 'Allowed' list (librdkafka's: where they are listed)."""
        if self.name == "confluent":
            return f"{prefix}<property> for a librdkafka property ({LIBRDKAFKA_PROPERTIES})"
        return (f"{prefix}<property> for one of kafka-python's producer settings: "
                + ", ".join(self.names))


def _client(name: Optional[str]) -> Optional[_Client]:
    """The profile's Kafka client, or None when its name is not one (read_client says so when
    the model logs)."""
    client = str(name or "kafka-python").strip().lower()
    return _Client(client) if client in KAFKA_CLIENTS else None


def suggestions(key: str, candidates: Sequence[str], preferred: Sequence[str] = ()) -> List[str]:
    """At most two candidates close to `key` (difflib.get_close_matches): first those of its own
    family, compared without the prefix they share (which would make any two `properties.` keys
    look alike), then any; `preferred` (exact translations, such as `kafka_linger_ms` ->
    `kafka.linger.ms`) before all."""
    family = _family(key)
    rests = {c[len(family):]: c for c in candidates if family and _family(c) == family}
    close = [rests[r] for r in difflib.get_close_matches(key[len(family):], rests, n=2, cutoff=0.75)]
    if not close:
        close = difflib.get_close_matches(key, candidates, n=2, cutoff=0.75)
    return list(dict.fromkeys([*preferred, *close]))[:2]


def _unknown_key(key: str, value: Any, client: Optional[_Client],
                 source: str = "model config") -> Optional[str]:
    """Why `key` (a model config key, set in `source`) is not one the adapter takes, or None
    when it is."""
    if key in known_keys() or key.startswith(TOPIC_CONFIG_PREFIX):
        return None
    family = _family(key)
    if not family:
        return None  # not the adapter's: dbt's own, or another package's
    candidates = list(known_keys())
    preferred: List[str] = []
    why = ""
    if family in CLIENT_PREFIXES or family == "kafka_":
        if client is None:
            if family in CLIENT_PREFIXES:
                return None  # the profile's client is not known: read_client fails the model
        else:
            name = key[len(family):]
            if family in CLIENT_PREFIXES:
                refusal = client.check(name, value)
                if refusal is None:
                    return None
                if refusal != NO_SUCH_PROPERTY:
                    return (f"config '{key}' ({source}) passes '{name}' to {client.library}, "
                            f"which refuses it: {refusal}. Allowed: leave it unset, or a value "
                            f"{client.library} takes.")
                why = f", and {client.library} has no property '{name}'"
            candidates += [p + n for p in CLIENT_PREFIXES for n in client.names]
            dotted = name.replace("_", ".")
            if family == "kafka_" and client.check(dotted, None) is None:
                preferred.append("kafka." + dotted)
            # 'kafka.propertes.acks': the other prefix spelled inside this one; the user's own
            # prefix with the property is the key meant ('kafka.acks'), not the other prefix
            head, _, rest = name.partition(".")
            if (family in CLIENT_PREFIXES and rest and client.check(rest, None) is None
                    and difflib.get_close_matches(head + ".", CLIENT_PREFIXES, n=1, cutoff=0.6)):
                return f"unknown config key '{key}' ({source}{why}). Did you mean '{family}{rest}'?"
        topic_setting = re.fullmatch(r"topic[._-]?config[._-](.+)", key[len(family):])
        if family != "properties." and topic_setting:
            preferred.append(TOPIC_CONFIG_PREFIX + topic_setting.group(1))
    found = suggestions(key, candidates, preferred)
    text = f"unknown config key '{key}' ({source}{why})."
    if found:
        return f"{text} Did you mean {_quoted(found)}?"
    return f"{text} {_allowed_in_family(family, client)}"


def _allowed_in_family(family: str, client: Optional[_Client]) -> str:
    """The keys allowed under `family`, as a wrapped list (printed when no key is close)."""
    own = [k for k in known_keys() if _family(k) == family]
    if family in CLIENT_PREFIXES:
        own += [TOPIC_CONFIG_PREFIX + "<name>"] if family == "kafka." else []
        own.append(client.allowed(family) if client else f"{family}<property> for a Kafka "
                                                          f"client property")
        if len(own) > 1:
            own[-1] = "and " + own[-1]
    return f"Allowed under '{family}':" + wrapped(", ".join(own) + ".")


def check_known_keys(model: str, raw: Mapping[str, Any], client: Optional[str] = None,
                     sources: Optional[Mapping[str, str]] = None) -> None:
    """Every key of the adapter's families (OWN_PREFIXES, and CLIENT_PREFIXES: a property of the
    profile's Kafka client `client`) is an option, Amoro's switch, a topic setting or a
    client property: otherwise one error names every bad key of the model, with the closest
    keys ("did you mean"), or the keys allowed where none is close."""
    taker = None
    if any(_family(key) in CLIENT_PREFIXES + ("kafka_",) for key in raw):
        taker = _client(client)
    # where each key was set (config_sources.py): config(), a schema.yml, else dbt_project.yml
    where = (lambda key: sources.get(key, "dbt_project.yml")) if sources is not None else (
        lambda key: "model config")
    problems = [p for p in (_unknown_key(key, value, taker, where(key))
                            for key, value in raw.items()) if p]
    if len(problems) == 1:
        raise LogConfigError(f"Model '{model}': {problems[0]}")
    if problems:
        raise LogConfigError(f"Model '{model}': {len(problems)} unknown config keys:"
                             + "".join(f"\n  - {p}" for p in problems))


def check_profile_properties(model: str, properties: Mapping[str, Any], client: str) -> None:
    """The profile's `kafka_properties` are properties of its `kafka_client`."""
    taker = _client(client)
    if taker is None or not properties:
        return
    problems = []
    for name, value in properties.items():
        refusal = taker.check(str(name), value)
        if refusal is None:
            continue
        if refusal != NO_SUCH_PROPERTY:
            problems.append(f"Kafka client property '{name}' (profile 'kafka_properties') is "
                            f"refused by {taker.library}: {refusal}. Allowed: a value "
                            f"{taker.library} takes.")
            continue
        found = suggestions(str(name), taker.names)
        text = (f"unknown Kafka client property '{name}' (profile 'kafka_properties'): "
                f"{taker.library} has no such property.")
        problems.append(f"{text} Did you mean {_quoted(found)}?" if found
                        else f"{text} Allowed:" + wrapped(taker.allowed() + "."))
    if len(problems) == 1:
        raise ProfileConfigError(model, problems[0])
    if problems:
        raise ProfileConfigError(model, f"{len(problems)} Kafka client properties of the profile "
                                        f"are not taken:" + "".join(f"\n  - {p}" for p in problems))


def pass_through(model: str, raw: Mapping[str, Any], profile_properties: Mapping[str, str],
                 client: Optional[str] = None) -> Tuple[Dict[str, str], Dict[str, str]]:
    """Client properties (`kafka.*`, `properties.*`, prefix stripped) and topic settings; the
    profile's `kafka_properties` must be properties of its Kafka client `client` (the model's
    were checked by check_known_keys)."""
    if client is not None:
        check_profile_properties(model, profile_properties, client)
    client_properties: Dict[str, str] = dict(profile_properties)
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
    client_properties.update(from_model)  # the model's own setting wins over the profile default
    return client_properties, topic_config


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
