"""No silent typos (issue 36, item 2): every key of the adapter's families is checked at parse
time against the options and the profile's Kafka client, with "did you mean" suggestions; and
unique_key is read as dbt reads it."""
import pytest
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore.changes import checks as change_checks
from dbt.adapters.logstore.config import option_readers, options as log_options
from dbt.adapters.logstore.log.kafka import config as kafka_config
from dbt.adapters.logstore.config.log_config import (
    LogConfigError, ModelRef, check_all, node_config, resolve_log_config,
)
from dbt.adapters.logstore.config.options import ProfileConfigError

SERVERS = "broker:9092"
CLIENTS = ["kafka-python", "confluent"]


def ref(materialized="table", **kw):
    return ModelRef(name=kw.pop("name", "orders_model"), schema="analytics", alias="orders",
                    materialized=materialized, **kw)


def resolve(raw, client=None, properties=None, model=None):
    return resolve_log_config(model or ref(), raw, profile_bootstrap_servers=SERVERS,
                              profile_properties=properties, profile_client=client)


def error_of(raw, client=None, properties=None, model=None) -> str:
    with pytest.raises(LogConfigError) as info:
        resolve(raw, client=client, properties=properties, model=model)
    return str(info.value.msg)


def lines_of(message):
    return message.splitlines()


# --- the cases ----------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_a_misspelt_underscored_kafka_option_is_caught_with_a_suggestion(client):
    # was: passed `dbt parse` and logged to the default topic
    message = error_of({"log_system": "kafka", "kafka_topc": "crm.typo2"}, client=client)
    assert message == ("Model 'orders_model': unknown config key 'kafka_topc' (model config). "
                       "Did you mean 'kafka_topic'?")


@pytest.mark.parametrize("client,library", [("kafka-python", "kafka-python"),
                                            ("confluent", "librdkafka")])
def test_a_misspelt_dotted_kafka_option_is_caught_at_parse_naming_the_model_config(client, library):
    # was: passed parse, then failed at run time blaming the profile's kafka_properties
    message = error_of({"log_system": "kafka", "kafka.topik": "t"}, client=client)
    assert message == (f"Model 'orders_model': unknown config key 'kafka.topik' (model config, "
                       f"and {library} has no property 'topik'). Did you mean 'kafka.topic'?")
    assert "kafka_properties" not in message


@pytest.mark.parametrize("client", CLIENTS)
def test_a_misspelt_amoro_client_property_is_caught_with_a_suggestion(client):
    message = error_of({"log_system": "kafka", "properties.lingr.ms": "5"}, client=client)
    assert "unknown config key 'properties.lingr.ms' (model config" in message
    assert message.endswith("Did you mean 'properties.linger.ms'?")


def test_a_misspelt_log_option_gets_a_suggestion_and_no_list():
    # was: all 36 keys in one 1,300-character line
    message = error_of({"log.system": "kafka", "log.consistancy": "eventual"})
    assert message == ("Model 'orders_model': unknown config key 'log.consistancy' (model "
                       "config). Did you mean 'log.consistency'?")
    assert "Allowed" not in message and len(message) < 150


@pytest.mark.parametrize("key,suggested", [
    ("log.sytem.partitions", "log.system.partitions"),
    ("log_sytem", "log_system"),
    ("log.foramt", "log.format"),
    ("log-store.topik", "log-store.topic"),
    ("mixed-format.emit.mod", "mixed-format.emit.mode"),
    ("mixed_format_emit_mod", "mixed_format_emit_mode"),
    ("kafka.retires", "kafka.retries"),
    ("kafka_linger_ms", "kafka.linger.ms"),  # no underscored spelling: the dotted one
    ("kafka.topic_config.cleanup.policy", "kafka.topic-config.cleanup.policy"),
    ("log.store.topic", "log-store.topic"),  # another family's key when none of its own is close
])
def test_suggestions(key, suggested):
    message = error_of({"log.system": "kafka", key: "1"})
    assert f"unknown config key '{key}'" in message and f"Did you mean '{suggested}'" in message


def test_with_no_close_key_the_family_s_keys_are_listed_in_short_lines():
    message = error_of({"log.system": "kafka", "log.zzz": "1"})
    first, *listed = lines_of(message)
    assert first == "Model 'orders_model': unknown config key 'log.zzz' (model config). Allowed under 'log.':"
    assert listed and all(len(line) <= 100 and line.startswith("  ") for line in listed)
    keys = " ".join(listed)
    assert "log.consistency" in keys and "log.system.partitions" in keys
    assert "log_consistency" not in keys and "kafka_topic" not in keys  # only the family's


def test_with_no_close_client_property_the_client_s_properties_are_listed_in_short_lines():
    message = error_of({"log.system": "kafka", "kafka.qqqqq": "1"})
    first, *listed = lines_of(message)
    assert "unknown config key 'kafka.qqqqq' (model config, and kafka-python has no property 'qqqqq')" in first
    assert all(len(line) <= 100 for line in listed)
    text = " ".join(listed)
    assert "kafka.topic, kafka.topic-config.<name>" in text and "linger.ms" in text
    assert "sasl.plain.username" in text and "key.serializer" not in text


def test_with_confluent_librdkafka_s_list_is_pointed_to():
    message = error_of({"log.system": "kafka", "kafka.qqqqq": "1"}, client="confluent")
    assert "librdkafka has no property 'qqqqq'" in message
    assert log_options.LIBRDKAFKA_PROPERTIES in message
    assert all(len(line) <= 100 for line in lines_of(message)[1:])


def test_every_bad_key_of_a_model_is_named_in_one_error():
    message = error_of({"log_system": "kafka", "kafka_topc": "t", "log.consistancy": "eventual"})
    assert message.startswith("Model 'orders_model': 2 unknown config keys:")
    assert "'kafka_topc' (model config). Did you mean 'kafka_topic'?" in message
    assert "'log.consistancy' (model config). Did you mean 'log.consistency'?" in message


# --- what is accepted ---------------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_every_spelling_of_the_kafka_options_and_topic_settings_is_accepted(client):
    log = resolve({"log_system": "kafka", "kafka_topic": "t1", "kafka_bootstrap_servers": "m:1",
                   "kafka.topic-config.cleanup.policy": "compact",
                   "kafka.topic-config.anything.goes": "1"}, client=client)
    assert (log.topic, log.bootstrap_servers) == ("t1", "m:1")
    assert log.topic_config == {"cleanup.policy": "compact", "anything.goes": "1"}
    log = resolve({"log-store.enabled": True, "log-store.topic": "t2", "log-store.address": "a:1"},
                  client=client)
    assert (log.topic, log.bootstrap_servers) == ("t2", "a:1")


@pytest.mark.parametrize("client", CLIENTS)
def test_real_client_properties_pass_in_every_prefix(client):
    log = resolve({"log.system": "kafka", "kafka.linger.ms": 5, "properties.batch.size": "1024",
                   "kafka.transaction.timeout.ms": "90000", "kafka.ssl.cafile": "/ca.pem"},
                  client=client)
    assert log.client_properties == {"linger.ms": "5", "batch.size": "1024",
                                     "transaction.timeout.ms": "90000", "ssl.cafile": "/ca.pem"}


def test_the_check_follows_the_profile_s_client():
    librdkafka_only = {"log.system": "kafka", "kafka.queue.buffering.max.ms": "7"}
    assert resolve(librdkafka_only, client="confluent").client_properties == {"queue.buffering.max.ms": "7"}
    assert "kafka-python has no property 'queue.buffering.max.ms'" in error_of(librdkafka_only)
    python_only = {"log.system": "kafka", "kafka.ssl.check.hostname": "false"}
    assert resolve(python_only).client_properties == {"ssl.check.hostname": "false"}
    assert "librdkafka has no property 'ssl.check.hostname'" in error_of(python_only, client="confluent")


def test_librdkafka_s_refusal_of_a_value_is_named():
    message = error_of({"log.system": "kafka", "properties.security.protocol": "SSSL"},
                       client="confluent")
    assert "config 'properties.security.protocol' (model config) passes 'security.protocol' to librdkafka" in message
    assert "Invalid value \"SSSL\"" in message and "Allowed:" in message


@pytest.mark.parametrize("key", ["materialized", "unique_key", "partition_by", "file_format",
                                 "tags", "meta", "grants", "properties", "kafka", "logs",
                                 "location_root", "tblproperties", "persist_docs", "kafkaesque"])
def test_dbt_s_and_other_packages_keys_are_not_ours(key):
    assert resolve({"log.system": "kafka", key: "x" if key != "unique_key" else "id"}).enabled


def test_a_typo_is_caught_whether_or_not_the_model_logs():
    assert "Did you mean 'kafka_topic'" in error_of({"kafka_topc": "t"})
    assert "Did you mean 'kafka.linger.ms'" in error_of({"log.system": "none", "kafka.lingr.ms": "1"})


def test_an_invalid_profile_client_leaves_the_properties_to_read_client():
    assert not resolve({"kafka.anything": "1"}, client="librdkafka").enabled  # no log: not read
    message = error_of({"log.system": "kafka", "kafka.anything": "1"}, client="librdkafka")
    assert "'kafka_client'. Allowed: kafka-python, confluent" in message


# --- the profile's kafka_properties -----------------------------------------------------------


@pytest.mark.parametrize("client,library", [("kafka-python", "kafka-python"),
                                            ("confluent", "librdkafka")])
def test_a_misspelt_profile_property_names_the_profile(client, library):
    with pytest.raises(ProfileConfigError) as info:
        resolve({"log.system": "kafka"}, client=client, properties={"lingr.ms": "5"})
    assert str(info.value.msg) == (
        f"Model 'orders_model': unknown Kafka client property 'lingr.ms' (profile "
        f"'kafka_properties'): {library} has no such property. Did you mean 'linger.ms'?")


def test_profile_properties_in_the_client_s_spellings_are_accepted():
    props = {"security.protocol": "SSL", "ssl_cafile": "/ca.pem", "linger-ms": "3"}
    assert resolve({"log.system": "kafka"}, properties=props).client_properties == props
    confluent = {"sasl.plain.username": "u", "sasl.username": "u", "queue.buffering.max.ms": "7"}
    assert resolve({"log.system": "kafka"}, client="confluent",
                   properties=confluent).client_properties == confluent


def test_profile_properties_are_not_checked_for_a_model_without_a_log():
    assert not resolve({}, properties={"lingr.ms": "5"}).enabled


def _node(name, **config):
    return {"unique_id": f"model.p.{name}", "name": name, "schema": "analytics", "alias": name,
            "config": {"materialized": "table", **config}}


def _check_all(nodes, properties=None, client=None):
    check_all(nodes, lambda n: resolve(node_config(n), client=client, properties=properties,
                                       model=ModelRef.from_node(n)))


def test_a_profile_problem_is_named_once_with_every_model_it_stops():
    nodes = [_node("a", **{"log.system": "kafka"}), _node("b", **{"log.system": "kafka"}),
             _node("c", **{"log.system": "kafka", "kafka_topc": "t"}), _node("d")]
    with pytest.raises(LogConfigError) as info:
        _check_all(nodes, properties={"lingr.ms": "5"})
    message = str(info.value.msg)
    assert message.startswith("3 models have an invalid log configuration:")
    assert message.count("lingr.ms") == 1
    assert ("- Models 'a', 'b': unknown Kafka client property 'lingr.ms' (profile "
            "'kafka_properties'): kafka-python has no such property. Did you mean 'linger.ms'?") in message
    assert "- Model 'c': unknown config key 'kafka_topc' (model config)." in message
    assert "'d'" not in message


def test_typos_of_several_models_are_all_named_in_one_pass():
    with pytest.raises(LogConfigError) as info:
        _check_all([_node("a", **{"log_system": "kafka", "kafka_topc": "t"}),
                    _node("b", **{"log_system": "kafka", "kafka.topik": "t"}),
                    _node("c", **{"log_system": "kafka", "properties.lingr.ms": "1"}),
                    _node("d", **{"log.consistancy": "eventual"})])
    message = str(info.value.msg)
    assert message.startswith("4 models have an invalid log configuration:")
    for name, suggested in (("a", "kafka_topic"), ("b", "kafka.topic"),
                            ("c", "properties.linger.ms"), ("d", "log.consistency")):
        assert f"Model '{name}'" in message and f"Did you mean '{suggested}'" in message


# --- the kafka sub-package's answer -------------------------------------------------------------


def test_the_named_module_answers():
    # log_options reaches it by name (only the kafka sub-package imports a client library)
    assert log_options.CLIENT_PROPERTIES == kafka_config.__name__
    assert log_options.NO_SUCH_PROPERTY == kafka_config.NO_SUCH_PROPERTY


@pytest.mark.parametrize("name", ["linger.ms", "linger_ms", "linger-ms", "sasl.plain.password",
                                  "transaction.timeout.ms", "ssl.check.hostname"])
def test_kafka_python_takes_its_settings_in_every_spelling(name):
    assert kafka_config.property_refusal("kafka-python", name, "1") is None


@pytest.mark.parametrize("name", ["lingr.ms", "fetch.max.bytes", "key.serializer", "partitioner",
                                  "queue.buffering.max.ms", ""])
def test_kafka_python_refuses_what_its_producer_does_not_take_as_text(name):
    assert kafka_config.property_refusal("kafka-python", name, "1") == kafka_config.NO_SUCH_PROPERTY


def test_librdkafka_takes_its_properties_and_kafka_python_s_translated_names():
    for name in ("linger.ms", "queue.buffering.max.ms", "sasl.plain.username", "ssl.cafile",
                 "enable_idempotence"):
        assert kafka_config.property_refusal("confluent", name, "1") is None, name
    assert kafka_config.property_refusal("confluent", "max.request.size", "2000000") is None
    # librdkafka checks the value too, under its own name
    assert kafka_config.property_refusal("confluent", "max.request.size", "1") == (
        'Configuration property "message.max.bytes" value 1 is outside allowed range 1000..1000000000')
    assert kafka_config.property_refusal("confluent", "lingr.ms", "1") == kafka_config.NO_SUCH_PROPERTY
    assert "JAAS" in kafka_config.property_refusal("confluent", "sasl.jaas.config", "x")
    assert kafka_config.property_refusal("confluent", "sasl.jaas.config", None) is None  # the name alone


def test_the_librdkafka_check_never_makes_a_client(monkeypatch):
    import confluent_kafka

    made = []
    monkeypatch.setattr(confluent_kafka, "Producer", lambda config: made.append(config))
    assert kafka_config.property_refusal("confluent", "batch.num.messages", "7") is None
    assert made == []


def test_property_names_are_what_the_client_takes():
    python = kafka_config.property_names("kafka-python")
    assert "linger.ms" in python and "sasl.plain.username" in python and "selector" not in python
    confluent = kafka_config.property_names("confluent")
    assert {"linger.ms", "queue.buffering.max.ms", "sasl.username", "ssl.cafile"} <= set(confluent)
    assert all(kafka_config.property_refusal("confluent", n, None) is None for n in confluent)


# --- unique_key as dbt reads it -------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, "", "   ", [], ()])
def test_no_key_as_dbt_reads_it(value):
    log = resolve({"log.system": "kafka", "unique_key": value})
    assert log.unique_key == () and not log.keyed
    assert log.table_properties()["log.key"] == ""


def test_an_empty_key_is_no_key_for_the_options_that_need_one():
    message = error_of({"log.system": "kafka", "unique_key": "", "log.consistency": "eventual"})
    assert "'log.consistency' = 'eventual' needs a 'unique_key'" in message
    message = error_of({"log.system": "kafka", "unique_key": ""},
                       model=ref("incremental", incremental_strategy="merge"))
    assert "incremental_strategy='merge' needs a 'unique_key'" in message


@pytest.mark.parametrize("value,expected", [
    (["id", "id"], ("id",)),
    (["tenant", "id", "tenant"], ("tenant", "id")),
    (["id", "ID"], ("id",)),  # Spark's names are case-insensitive: one column
    ([" id ", "id"], ("id",)),
    (" id ", ("id",)),
    (("tenant", "id"), ("tenant", "id")),
])
def test_a_column_named_twice_is_one_key_column(value, expected):
    log = resolve({"log.system": "kafka", "unique_key": value})
    assert log.unique_key == expected
    assert log.table_properties()["log.key"] == ",".join(expected)


@pytest.mark.parametrize("value", [["id", ""], [""], ["id", "  "]])
def test_a_blank_entry_in_a_key_list_is_an_error(value):
    message = error_of({"log.system": "kafka", "unique_key": value})
    assert message.startswith(f"Model 'orders_model': invalid value {value!r} for config 'unique_key'.")
    assert "without blank entries ('' or [] for no key)" in message


@pytest.mark.parametrize("value", [5, ["id", 3], {"id": 1}])
def test_a_key_that_is_not_column_names_is_an_error(value):
    assert "a column name or a list of column names" in error_of({"log.system": "kafka", "unique_key": value})


def test_read_unique_key_directly():
    read = option_readers.read_unique_key
    assert read("m", ["b", "a", "B", "a"]) == ("b", "a")
    assert read("m", "id") == ("id",)


# --- a key column the rows lack: one sentence before the table changes --------------------------


def _log(key):
    return resolve({"log.system": "kafka", "unique_key": key})


def test_a_missing_key_column_fails_in_one_sentence():
    with pytest.raises(DbtRuntimeError) as info:
        change_checks.check_columns(_log(["id", "tenant"]), [("id", "int"), ("name", "string")])
    message = str(info.value.msg)
    assert message == ("Model 'orders_model': config 'unique_key' = ['id', 'tenant'] names column "
                       "'tenant', which the model's rows do not have (allowed: id, name); nothing "
                       "was changed.")


def test_several_missing_key_columns_are_named():
    with pytest.raises(DbtRuntimeError, match="names columns 'a', 'b', which"):
        change_checks.check_key_columns(_log(["a", "b"]), ["id"])


def test_key_columns_match_case_insensitively_and_keyless_logs_pass():
    change_checks.check_key_columns(_log("ID"), ["id", "name"])
    change_checks.check_key_columns(_log(None), ["id"])


class _Catalog:
    def __init__(self, columns, duplicates=()):
        self._columns, self._duplicates, self.queries = columns, list(duplicates), []

    def column_names(self, relation):
        return list(self._columns)

    def rows(self, sql):
        self.queries.append(sql)
        return self._duplicates


def test_check_unique_names_a_missing_key_column_before_any_query():
    catalog = _Catalog(["id", "name"])
    with pytest.raises(DbtRuntimeError, match="names column 'idd', which the model's rows do not have"):
        change_checks.check_unique(catalog, _log("idd"), "analytics.orders__logstore_new")
    assert catalog.queries == []
    change_checks.check_unique(catalog, _log("id"), "analytics.orders__logstore_new")
    assert len(catalog.queries) == 1


def test_catalog_column_names_reads_an_empty_query():
    from dbt.adapters.logstore.spark.catalog import Catalog

    class Table:
        column_names = ("id", "name")
        rows = []

    queries = []

    def execute(sql, fetch=False):
        queries.append((sql, fetch))
        return None, Table()

    assert Catalog(execute).column_names("analytics.orders__logstore_new") == ["id", "name"]
    assert queries == [("select * from analytics.orders__logstore_new limit 0", True)]
