"""Config resolution: spellings, defaults, validation messages, secrets."""
import pytest

from dbt.adapters.logstore.config.log_config import (
    CONTROL_TOPIC_SUFFIX,
    LogConfig,
    LogConfigError,
    ModelRef,
    control_topic_for,
    resolve_log_config,
)

SERVERS = "broker-1:9092,broker-2:9092"


def ref(materialized="table", **kw):
    kw.setdefault("name", "orders_model")
    kw.setdefault("schema", "analytics")
    kw.setdefault("alias", "orders")
    return ModelRef(materialized=materialized, **kw)


def resolve(raw, model=None, servers=SERVERS, properties=None):
    return resolve_log_config(model or ref(), raw, profile_bootstrap_servers=servers,
                              profile_properties=properties)


def error_of(raw, model=None, servers=SERVERS) -> str:
    with pytest.raises(LogConfigError) as info:
        resolve(raw, model=model, servers=servers)
    return str(info.value)


# --- defaults ----------------------------------------------------------------------------


def test_no_log_options_means_disabled():
    log = resolve({})
    assert log == LogConfig(model="orders_model")
    assert log.system == "none"
    assert not log.enabled
    assert log.topic is None
    assert log.table_properties() == {"log.system": "none"}


def test_explicit_none_disables_and_skips_other_validation():
    # with no log, other log options are not looked at (even invalid ones)
    log = resolve({"log.system": "none", "log.system.partitions": "abc"},
                  model=ref(materialized="view"))
    assert not log.enabled


def test_kafka_defaults():
    log = resolve({"log.system": "kafka"})
    assert log.enabled
    assert log.system == "kafka"
    assert log.topic == "analytics.orders"  # <schema>.<alias>
    assert log.bootstrap_servers == SERVERS  # from the profile
    assert log.consistency == "transactional"
    assert log.transactional
    assert log.partitions == 1
    assert log.replication == 1
    assert log.unique_key == ()
    assert not log.keyed


def test_default_topic_uses_alias_not_model_name():
    log = resolve({"log.system": "kafka"}, model=ref(name="stg_orders", alias="orders_v2"))
    assert log.topic == "analytics.orders_v2"
    assert log.model == "stg_orders"


def test_system_value_is_case_and_whitespace_insensitive():
    assert resolve({"log.system": " KAFKA "}).system == "kafka"
    assert resolve({"log.system": "kafka", "log.consistency": "Eventual",
                    "unique_key": "id"}).consistency == "eventual"


# --- both spellings ----------------------------------------------------------------------

DOTTED = {
    "log.system": "kafka",
    "kafka.topic": "custom.topic",
    "log.consistency": "eventual",
    "kafka.bootstrap.servers": "model-broker:9093",
    "log.system.partitions": 6,
    "log.system.replication": 3,
    "unique_key": "id",
}
UNDERSCORED = {
    "log_system": "kafka",
    "kafka_topic": "custom.topic",
    "log_consistency": "eventual",
    "kafka_bootstrap_servers": "model-broker:9093",
    "log_system_partitions": 6,
    "log_system_replication": 3,
    "unique_key": "id",
}


@pytest.mark.parametrize("raw", [DOTTED, UNDERSCORED], ids=["dotted", "underscored"])
def test_both_spellings_resolve_identically(raw):
    log = resolve(raw)
    assert log.system == "kafka"
    assert log.topic == "custom.topic"
    assert log.consistency == "eventual"
    assert not log.transactional
    assert log.bootstrap_servers == "model-broker:9093"  # model wins over profile
    assert log.partitions == 6
    assert log.replication == 3


def test_mixed_spellings():
    log = resolve({"log_system": "kafka", "kafka.topic": "t1", "log_system_partitions": "4"})
    assert (log.system, log.topic, log.partitions) == ("kafka", "t1", 4)


def test_same_option_both_spellings_same_value_is_fine():
    log = resolve({"log.system": "kafka", "log_system": "kafka",
                   "log.system.partitions": 3, "log_system_partitions": "3"})
    assert log.partitions == 3


@pytest.mark.parametrize("dotted,underscored,a,b", [
    ("log.system", "log_system", "kafka", "none"),
    ("kafka.topic", "kafka_topic", "t1", "t2"),
    ("log.consistency", "log_consistency", "transactional", "eventual"),
    ("kafka.bootstrap.servers", "kafka_bootstrap_servers", "a:1", "b:2"),
    ("log.system.partitions", "log_system_partitions", 1, 2),
    ("log.system.replication", "log_system_replication", 1, 3),
])
def test_same_option_both_spellings_conflicting_values_fails(dotted, underscored, a, b):
    raw = {"log.system": "kafka", dotted: a, underscored: b}
    message = error_of(raw)
    assert "orders_model" in message
    assert dotted in message and underscored in message
    assert repr(a) in message and repr(b) in message


# --- servers -----------------------------------------------------------------------------


def test_profile_servers_used_when_model_has_none():
    assert resolve({"log.system": "kafka"}, servers="p:9092").bootstrap_servers == "p:9092"


def test_model_servers_override_profile():
    log = resolve({"log.system": "kafka", "kafka_bootstrap_servers": " m:1 "}, servers="p:9092")
    assert log.bootstrap_servers == "m:1"


@pytest.mark.parametrize("servers", [None, "", "   "])
def test_missing_servers_fails(servers):
    message = error_of({"log.system": "kafka"}, servers=servers)
    assert "orders_model" in message
    assert "kafka.bootstrap.servers" in message
    assert "kafka_bootstrap_servers" in message


# --- invalid values ------------------------------------------------------------------------


def test_invalid_log_system():
    message = error_of({"log.system": "pulsar"})
    assert "orders_model" in message
    assert "log.system" in message
    assert "pulsar" in message
    assert "none, kafka" in message


def test_invalid_log_system_underscored_spelling():
    message = error_of({"log_system": "kinesis"})
    assert "orders_model" in message and "log.system" in message and "none, kafka" in message


def test_invalid_consistency():
    message = error_of({"log.system": "kafka", "log_consistency": "strong"})
    assert "orders_model" in message
    assert "log.consistency" in message
    assert "strong" in message
    assert "transactional, eventual" in message


@pytest.mark.parametrize("key", ["log.system.partitions", "log_system_partitions",
                                 "log.system.replication", "log_system_replication"])
@pytest.mark.parametrize("value", [0, -1, "abc", "0", "1.5", ""])
def test_invalid_partitions_and_replication(key, value):
    message = error_of({"log.system": "kafka", key: value})
    canonical = key.replace("_", ".")
    assert "orders_model" in message
    assert canonical in message
    assert "a positive integer" in message
    assert repr(value) in message


@pytest.mark.parametrize("value,expected", [(1, 1), ("12", 12), (" 7 ", 7), (100, 100)])
def test_partitions_accepts_positive_ints_and_strings(value, expected):
    assert resolve({"log.system": "kafka", "log.system.partitions": value}).partitions == expected


# Kafka allows 249 characters; the control topic `<topic>__logstore_commits` needs 18 of them.
MAX_TOPIC = 249 - len("__logstore_commits")


@pytest.mark.parametrize("topic", [
    "has space", "slash/topic", "colon:topic", "ümlaut", ".", "..", "x" * 250, "star*",
    "x" * 249, "x" * (MAX_TOPIC + 1),
])
def test_invalid_topic_names(topic):
    message = error_of({"log.system": "kafka", "kafka.topic": topic})
    assert "orders_model" in message
    assert "kafka.topic" in message
    assert "1-231 characters" in message
    assert "'.', '_', '-'" in message


def test_topic_length_limit_leaves_room_for_the_control_topic():
    assert MAX_TOPIC == 231
    assert len(CONTROL_TOPIC_SUFFIX) == 18
    longest = "x" * MAX_TOPIC
    assert resolve({"log.system": "kafka", "kafka.topic": longest}).topic == longest
    assert len(control_topic_for(longest)) == 249  # Kafka's own limit, exactly
    assert "1-231 characters" in error_of({"log.system": "kafka", "kafka.topic": longest + "x"})


def test_control_topic_for():
    assert CONTROL_TOPIC_SUFFIX == "__logstore_commits"
    assert control_topic_for("analytics.orders") == "analytics.orders__logstore_commits"
    assert control_topic_for("t") == "t__logstore_commits"


def test_too_long_default_topic_from_schema_and_alias_is_rejected():
    # the default topic `<schema>.<alias>` must also leave room for the control topic's suffix
    message = error_of({"log.system": "kafka"}, model=ref(schema="s", alias="a" * MAX_TOPIC))
    assert "kafka.topic" in message and "1-231 characters" in message
    log = resolve({"log.system": "kafka"}, model=ref(schema="s", alias="a" * (MAX_TOPIC - 2)))
    assert len(log.topic) == MAX_TOPIC


def test_invalid_default_topic_from_schema_is_rejected():
    message = error_of({"log.system": "kafka"}, model=ref(schema="my schema"))
    assert "kafka.topic" in message and "my schema.orders" in message


def test_topic_with_trailing_newline_is_rejected():
    # e.g. a YAML block scalar `kafka_topic: |` leaves a trailing newline; Kafka rejects the
    # name, so config resolution must too (before anything is touched).
    message = error_of({"log.system": "kafka", "kafka.topic": "orders\n"})
    assert "kafka.topic" in message


@pytest.mark.parametrize("topic", ["a", "x" * 231, "a.b_c-D9", "...", "._-"])
def test_valid_topic_names(topic):
    assert resolve({"log.system": "kafka", "kafka.topic": topic}).topic == topic


# --- materializations, strategies, language -----------------------------------------------


@pytest.mark.parametrize("materialized", ["view", "ephemeral", "materialized_view"])
def test_log_on_non_table_materialization_fails(materialized):
    message = error_of({"log.system": "kafka"}, model=ref(materialized=materialized))
    assert "orders_model" in message
    assert f"materialized='{materialized}'" in message
    assert "table, incremental, seed, snapshot" in message


def test_a_snapshot_logs_keyed_by_its_scd_id_not_by_its_source_key():
    model = ref(materialized="snapshot")
    assert resolve({"log.system": "kafka", "unique_key": "id"}, model=model).unique_key == ("dbt_scd_id",)
    renamed = {"log.system": "kafka", "snapshot_table_column_names": {"dbt_scd_id": "scd"}}
    assert resolve(renamed, model=model).unique_key == ("scd",)


def test_a_seed_can_carry_a_log():
    assert resolve({"log.system": "kafka", "unique_key": "id"}, model=ref(materialized="seed")).keyed


@pytest.mark.parametrize("materialized", ["view", "ephemeral", "seed", "snapshot"])
def test_no_log_on_non_table_materialization_is_fine(materialized):
    assert not resolve({}, model=ref(materialized=materialized)).enabled


@pytest.mark.parametrize("strategy", ["delete+insert", "replace_where"])
def test_incremental_unsupported_strategy_fails(strategy):
    message = error_of({"log.system": "kafka"},
                       model=ref(materialized="incremental", incremental_strategy=strategy))
    assert "orders_model" in message
    assert f"incremental_strategy='{strategy}'" in message
    assert "append, insert_overwrite, merge, microbatch" in message


def test_microbatch_logs_with_a_partition_by_and_needs_one():
    model = ref(materialized="incremental", incremental_strategy="microbatch")
    assert resolve({"log.system": "kafka", "partition_by": ["day"]}, model=model).enabled
    message = error_of({"log.system": "kafka"}, model=model)
    assert "orders_model" in message and "'partition_by'" in message


@pytest.mark.parametrize("strategy", [None, "append", "insert_overwrite"])
def test_incremental_supported_strategies(strategy):
    log = resolve({"log.system": "kafka"},
                  model=ref(materialized="incremental", incremental_strategy=strategy))
    assert log.enabled


def test_strategy_ignored_for_table_materialization():
    assert resolve({"log.system": "kafka"},
                   model=ref(materialized="table", incremental_strategy="merge")).enabled


def test_python_model_fails():
    message = error_of({"log.system": "kafka"}, model=ref(language="python"))
    assert "orders_model" in message
    assert "python" in message
    assert "SQL" in message


# --- unique_key --------------------------------------------------------------------------


def test_unique_key_string_becomes_tuple():
    log = resolve({"log.system": "kafka", "unique_key": "id"})
    assert log.unique_key == ("id",)
    assert log.keyed


def test_unique_key_list_becomes_tuple():
    log = resolve({"log.system": "kafka", "unique_key": ["tenant", "id"]})
    assert log.unique_key == ("tenant", "id")
    assert isinstance(log.unique_key, tuple)


@pytest.mark.parametrize("value", [5, ["id", 3], {"id": 1}])
def test_unique_key_invalid(value):
    message = error_of({"log.system": "kafka", "unique_key": value})
    assert "orders_model" in message and "unique_key" in message
    assert "a column name or a list of column names" in message


# --- properties and secrets --------------------------------------------------------------


def test_table_properties_of_enabled_log():
    log = resolve(dict(DOTTED))
    assert log.table_properties() == {
        "log.system": "kafka",
        "kafka.topic": "custom.topic",
        "kafka.bootstrap.servers": "model-broker:9093",
        "log.consistency": "eventual",
        "log.changelog-mode": "all",
        "log.format": "debezium-json",
        "log.timestamp-format.standard": "SQL",
        "log.encode.decimal-as-plain-number": "false",
        "log.key.format": "json",
        "log.ignore-delete": "false",
        "log.system.partitions": "6",
        "log.system.replication": "3",
        "log.key": "id",
    }


SECRET = "s3cr3t-Pa55word!"
SECRET_PROPS = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                "sasl.plain.username": "svc-user", "sasl.plain.password": SECRET}


def test_client_properties_kept_but_not_in_table_properties():
    log = resolve({"log.system": "kafka"}, properties=SECRET_PROPS)
    assert dict(log.client_properties) == SECRET_PROPS
    props = log.table_properties()
    for key, value in SECRET_PROPS.items():
        assert key not in props
    assert SECRET not in " ".join(f"{k}={v}" for k, v in props.items())


def test_repr_and_str_do_not_contain_secrets():
    log = resolve({"log.system": "kafka"}, properties=SECRET_PROPS)
    assert SECRET not in repr(log)
    assert SECRET not in str(log)
    assert "sasl" not in repr(log)


def test_client_properties_are_copied():
    props = dict(SECRET_PROPS)
    log = resolve({"log.system": "kafka"}, properties=props)
    props["sasl.plain.password"] = "changed"
    assert log.client_properties["sasl.plain.password"] == SECRET


def test_client_properties_do_not_affect_equality():
    a = resolve({"log.system": "kafka"}, properties=SECRET_PROPS)
    b = resolve({"log.system": "kafka"}, properties={})
    assert a == b
    assert hash(a) == hash(b)


# --- the full option surface (changelog modes, formats, pass-through, Amoro spellings) ------


def test_changelog_mode_auto_is_all_for_debezium_json():
    # a Debezium change stream (before images, `d` events) whatever the key: what Flink's
    # debezium-json and Kafka Connect's Debezium sinks read
    assert resolve({"log.system": "kafka"}).changelog_mode == "all"
    assert resolve({"log.system": "kafka", "unique_key": "id"}).changelog_mode == "all"
    assert resolve({"log.system": "kafka", "unique_key": "id",
                    "log_changelog_mode": "all"}).changelog_mode == "all"


def test_changelog_mode_auto_is_upsert_for_keyed_json():
    # the shape of Flink's upsert-kafka: the row by key, deletes as tombstones
    log = resolve({"log.system": "kafka", "unique_key": "id", "log.format": "json"})
    assert log.changelog_mode == "upsert" and log.mode_requested == "auto"


def test_debezium_json_upsert_is_refused_at_parse_time():
    message = error_of({"log.system": "kafka", "unique_key": "id", "log.changelog-mode": "upsert"})
    assert "Model 'orders_model'" in message and "'log.changelog-mode' = 'upsert'" in message
    assert "debezium-json" in message and "Allowed:" in message and "upsert-kafka" in message


def test_json_without_upsert_is_refused_where_rows_change():
    # a table model replaces its rows: bare rows cannot say that one was deleted
    message = error_of({"log.system": "kafka", "log.format": "json"})
    assert "Model 'orders_model'" in message and "'log.format' = 'json'" in message
    assert "materialized='table'" in message and "Allowed:" in message
    message = error_of({"log.system": "kafka", "unique_key": "id", "log.format": "json",
                        "log.changelog-mode": "all"})
    assert "'log.format' = 'json'" in message


def test_json_without_upsert_is_allowed_on_incremental_append():
    ref = ModelRef(name="m", schema="s", alias="m", materialized="incremental",
                   incremental_strategy="append")
    log = resolve_log_config(ref, {"log.system": "kafka", "log.format": "json"},
                             profile_bootstrap_servers="b:9092")
    assert log.changelog_mode == "all" and log.format == "json"


@pytest.mark.parametrize("value,expected", [("SQL", "SQL"), ("sql", "SQL"),
                                            ("ISO-8601", "ISO-8601"), ("iso-8601", "ISO-8601")])
def test_timestamp_standard(value, expected):
    log = resolve({"log.system": "kafka", "log_timestamp_format_standard": value})
    assert log.timestamp_standard == expected and log.timestamp_standard_given
    assert log.images.timestamps == expected


def test_timestamp_standard_defaults_to_sql_and_is_validated():
    log = resolve({"log.system": "kafka"})
    assert log.timestamp_standard == "SQL" and not log.timestamp_standard_given
    message = error_of({"log.system": "kafka", "log.timestamp-format.standard": "RFC3339"})
    assert "'log.timestamp-format.standard'" in message and "SQL, ISO-8601" in message


def test_decimal_as_plain_number():
    assert resolve({"log.system": "kafka", "log.encode.decimal-as-plain-number": True}).images.plain_decimals
    assert not resolve({"log.system": "kafka"}).images.plain_decimals
    assert "true, false" in error_of({"log.system": "kafka", "log_encode_decimal_as_plain_number": "yes"})


def test_upsert_without_key_fails():
    message = error_of({"log.system": "kafka", "log.changelog-mode": "upsert"})
    assert "orders_model" in message and "'log.changelog-mode'" in message and "unique_key" in message


def test_eventual_without_key_fails():
    message = error_of({"log.system": "kafka", "log.consistency": "eventual"})
    assert "orders_model" in message and "'log.consistency'" in message and "unique_key" in message


@pytest.mark.parametrize("key,value,allowed", [
    ("log.changelog-mode", "retract", "auto, all, upsert"),
    ("log.format", "avro", "debezium-json, json"),
    ("log.key.format", "csv", "json"),
    ("log.ignore-delete", "maybe", "true, false"),
])
def test_invalid_choices_name_the_allowed_values(key, value, allowed):
    message = error_of({"log.system": "kafka", "unique_key": "id", key: value})
    assert f"'{key}'" in message and value in message and allowed in message


def test_unknown_key_under_log_prefix_fails():
    message = error_of({"log.system": "kafka", "log.sytem.partitions": 3})
    assert "unknown config key 'log.sytem.partitions'" in message and "log.system.partitions" in message


def test_amoro_spellings():
    log = resolve({"log-store.enabled": True, "log-store.topic": "amoro.t",
                   "log-store.address": "amoro:9092", "properties.linger.ms": "7"})
    assert (log.system, log.topic, log.bootstrap_servers) == ("kafka", "amoro.t", "amoro:9092")
    assert log.client_properties["linger.ms"] == "7"
    assert not resolve({"log-store.enabled": "false"}).enabled


def test_amoro_and_paimon_spellings_must_agree():
    message = error_of({"log.system": "kafka", "kafka.topic": "a", "log-store.topic": "b"})
    assert "'kafka.topic'" in message and "'log-store.topic'" in message


def test_kafka_pass_through_and_topic_config():
    log = resolve({"log.system": "kafka", "kafka.linger.ms": 5, "kafka.topic-config.cleanup.policy": "compact"},
                  properties={"linger.ms": "100", "security.protocol": "SSL"})
    assert log.client_properties == {"linger.ms": "5", "security.protocol": "SSL"}  # model wins
    assert log.topic_config == {"cleanup.policy": "compact"}


def test_same_client_property_twice_differently_fails():
    message = error_of({"log.system": "kafka", "kafka.acks": "all", "properties.acks": "1"})
    assert "acks" in message and "twice" in message


def test_emit_mode_other_than_file_log_fails():
    message = error_of({"log.system": "kafka", "mixed-format.emit.mode": "log"})
    assert "'mixed-format.emit.mode'" in message and "file,log" in message
    assert resolve({"log.system": "kafka", "mixed-format.emit.mode": "file, log"}).enabled


def test_merge_needs_a_key():
    message = error_of({"log.system": "kafka"},
                       model=ref(materialized="incremental", incremental_strategy="merge"))
    assert "unique_key" in message
    assert resolve({"log.system": "kafka", "unique_key": "id"},
                   model=ref(materialized="incremental", incremental_strategy="merge")).enabled


# --- merge options the logged change set does not honour ------------------------------------

MERGE_MODEL = dict(materialized="incremental", incremental_strategy="merge")


@pytest.mark.parametrize("key,value", [
    ("merge_update_columns", ["amount"]),
    ("merge_exclude_columns", ["updated_at"]),
    ("incremental_predicates", ["DBT_INTERNAL_DEST.day >= '2026-01-01'"]),
    ("predicates", ["DBT_INTERNAL_DEST.day >= '2026-01-01'"]),  # dbt's older spelling
])
def test_merge_only_options_are_refused_on_a_logged_merge_model(key, value):
    message = error_of({"log.system": "kafka", "unique_key": "id", key: value},
                       model=ref(**MERGE_MODEL))
    assert "Model 'orders_model': " in message
    assert f"'{key}'" in message and repr(value) in message
    assert "not supported on a logged" in message and "log.system = 'kafka'" in message
    assert "Allowed: leave it unset, or turn the log off for this model" in message


@pytest.mark.parametrize("value", [None, [], "", ()])
@pytest.mark.parametrize("key", ["merge_update_columns", "merge_exclude_columns",
                                 "incremental_predicates", "predicates"])
def test_merge_only_options_unset_or_empty_are_accepted(key, value):
    log = resolve({"log.system": "kafka", "unique_key": "id", key: value},
                  model=ref(**MERGE_MODEL))
    assert log.enabled and log.unique_key == ("id",)


@pytest.mark.parametrize("key,value", [
    ("merge_update_columns", ["amount"]),
    ("merge_exclude_columns", ["updated_at"]),
    ("incremental_predicates", ["DBT_INTERNAL_DEST.day >= '2026-01-01'"]),
])
def test_merge_only_options_are_accepted_on_an_unlogged_model(key, value):
    for raw in ({}, {"log.system": "none"}, {"log_system": "none"}):
        log = resolve({**raw, "unique_key": "id", key: value}, model=ref(**MERGE_MODEL))
        assert not log.enabled


@pytest.mark.parametrize("strategy", ["append", "insert_overwrite"])
def test_merge_only_options_are_accepted_where_dbt_spark_ignores_them(strategy):
    # dbt-spark applies them only in its MERGE: with other strategies table and log agree
    log = resolve({"log.system": "kafka", "unique_key": "id",
                   "merge_update_columns": ["amount"], "incremental_predicates": ["x > 1"]},
                  model=ref(materialized="incremental", incremental_strategy=strategy))
    assert log.enabled


def test_merge_only_option_refused_with_amoro_spelling_of_the_log():
    message = error_of({"log-store.enabled": True, "unique_key": "id",
                        "merge_exclude_columns": ["updated_at"]}, model=ref(**MERGE_MODEL))
    assert "'merge_exclude_columns'" in message


# --- stored table properties ----------------------------------------------------------------


@pytest.mark.parametrize("unique_key,stored", [(None, ""), ("id", "id"),
                                               (["tenant", "id"], "tenant,id")])
def test_table_properties_record_the_key(unique_key, stored):
    raw = {"log.system": "kafka"}
    if unique_key is not None:
        raw["unique_key"] = unique_key
    assert resolve(raw).table_properties()["log.key"] == stored


def test_table_properties_record_format_mode_and_ignore_delete():
    props = resolve({"log.system": "kafka", "unique_key": "id", "log_format": "json",
                     "log_ignore_delete": "true"}).table_properties()
    assert props["log.format"] == "json"
    assert props["log.changelog-mode"] == "upsert"  # auto, resolved
    assert props["log.ignore-delete"] == "true"


def test_topic_config_is_not_a_table_property():
    log = resolve({"log.system": "kafka", "kafka.topic-config.retention.ms": 1000,
                   "kafka.topic-config.cleanup.policy": "compact"})
    assert log.topic_config == {"retention.ms": "1000", "cleanup.policy": "compact"}
    props = log.table_properties()
    assert not any("retention" in k or "cleanup" in k or "topic-config" in k for k in props)
    assert "compact" not in props.values()


def test_topic_config_is_not_a_client_property():
    log = resolve({"log.system": "kafka", "kafka.topic-config.cleanup.policy": "compact"})
    assert dict(log.client_properties) == {}


def test_model_pass_through_properties_are_not_table_properties():
    log = resolve({"log.system": "kafka", "kafka.sasl.plain.password": SECRET,
                   "properties.linger.ms": "5"})
    assert log.client_properties["sasl.plain.password"] == SECRET
    assert log.client_properties["linger.ms"] == "5"
    props = log.table_properties()
    assert SECRET not in props.values()
    assert "linger.ms" not in props and "sasl.plain.password" not in props
    assert SECRET not in repr(log)


def test_canonical_spellings_are_not_passed_through():
    log = resolve({"log.system": "kafka", "kafka.topic": "t", "kafka.bootstrap.servers": "m:1"})
    assert dict(log.client_properties) == {}


def test_same_client_property_twice_with_the_same_value_is_fine():
    log = resolve({"log.system": "kafka", "kafka.acks": "all", "properties.acks": "all"})
    assert log.client_properties["acks"] == "all"


# --- Amoro's switch ---------------------------------------------------------------------------


def test_amoro_type_without_enabled_fails():
    message = error_of({"log-store.type": "kafka"})
    assert "orders_model" in message
    assert "'log-store.type'" in message and "'log-store.enabled: true'" in message


def test_amoro_type_without_enabled_fails_even_with_log_system():
    message = error_of({"log.system": "kafka", "log-store.type": "kafka"})
    assert "'log-store.type'" in message and "log-store.enabled" in message


@pytest.mark.parametrize("system_key", ["log.system", "log_system"])
def test_amoro_disabled_conflicts_with_log_system_kafka(system_key):
    message = error_of({"log-store.enabled": False, system_key: "kafka"})
    assert "orders_model" in message
    assert "'log-store.enabled'" in message and "'log.system'" in message
    assert "'kafka'" in message


def test_amoro_enabled_conflicts_with_log_system_none():
    message = error_of({"log-store.enabled": "true", "log.system": "none"})
    assert "'log-store.enabled'" in message and "'none'" in message


def test_amoro_enabled_agrees_with_log_system_kafka():
    log = resolve({"log-store.enabled": True, "log.system": "kafka"})
    assert log.system == "kafka" and log.enabled


def test_amoro_disabled_agrees_with_log_system_none():
    assert not resolve({"log-store.enabled": False, "log.system": "none"}).enabled


@pytest.mark.parametrize("value", ["kafka", " Kafka ", None])
def test_amoro_type_kafka_or_default(value):
    raw = {"log-store.enabled": True}
    if value is not None:
        raw["log-store.type"] = value
    assert resolve(raw).system == "kafka"


def test_amoro_disabled_ignores_type():
    assert not resolve({"log-store.enabled": False, "log-store.type": "pulsar"}).enabled


def test_amoro_unknown_type_fails():
    message = error_of({"log-store.enabled": True, "log-store.type": "pulsar"})
    assert "'log-store.type'" in message and "pulsar" in message and "kafka" in message


@pytest.mark.parametrize("value", ["maybe", "yes", 1])
def test_amoro_enabled_must_be_boolean(value):
    message = error_of({"log-store.enabled": value})
    assert "'log-store.enabled'" in message and "true, false" in message


def test_unknown_amoro_key_fails():
    message = error_of({"log-store.enabled": True, "log-store.topik": "t"})
    assert "unknown config key 'log-store.topik'" in message
    assert "log-store.topic" in message


# --- every node at once (check_all) -----------------------------------------------------------

def _node(name, alias, **config):
    return {"unique_id": f"model.p.{name}", "name": name, "schema": "analytics", "alias": alias,
            "config": {"materialized": "table", **config}}


def _check_all(*nodes):
    from dbt.adapters.logstore.config.log_config import ModelRef, check_all, node_config

    check_all(nodes, lambda n: resolve(node_config(n), model=ModelRef.from_node(n)))


def test_every_bad_model_in_one_error():
    with pytest.raises(LogConfigError) as info:
        _check_all(_node("a", "a", **{"log.system": "kafka", "log.format": "avro"}),
                   _node("b", "b", **{"log.system": "kafka", "log.sytem.partitions": 2}),
                   _node("c", "c", **{"log.system": "kafka"}))
    assert "2 models have an invalid log configuration" in str(info.value)
    assert "'a'" in str(info.value) and "'b'" in str(info.value) and "'c'" not in str(info.value)


def test_two_models_on_one_topic_are_refused_before_anything_runs():
    # two versions of a model, both given the topic the first one had
    v1 = _node("orders_v1", "orders_v1", **{"log.system": "kafka", "kafka.topic": "shop.orders"})
    v2 = _node("orders_v2", "orders_v2", **{"log.system": "kafka", "kafka.topic": "shop.orders"})
    with pytest.raises(LogConfigError, match="Models 'orders_v1', 'orders_v2' all log to topic 'shop.orders'"):
        _check_all(v1, v2)
    _check_all(_node("orders_v1", "orders_v1", **{"log.system": "kafka"}),  # defaults differ
               _node("orders_v2", "orders_v2", **{"log.system": "kafka"}))
