"""What a continuing log keeps from its table: the same cluster however its servers are listed,
and the recorded changelog mode and timestamp standard where the model leaves them to a default."""
import pytest

from dbt.adapters.logstore.config.log_config import LogConfigError, ModelRef, resolve_log_config
from dbt.adapters.logstore.config.continuation import _servers, continue_stored_shape

SERVERS = "broker-1:9092,broker-2:9092"


def resolve(raw):
    ref = ModelRef(name="orders_model", schema="analytics", alias="orders", materialized="table")
    return resolve_log_config(ref, raw, profile_bootstrap_servers=SERVERS)


def test_servers_are_a_set_of_trimmed_names():
    assert _servers("b1:9092,b2:9092") == _servers(" b2:9092 , b1:9092,") == frozenset(
        {"b1:9092", "b2:9092"})
    assert _servers(None) == _servers("") == _servers(" , ") == frozenset()
    assert _servers("b1:9092") != _servers("b1:9093")


# --- a log that goes on keeps its shape ------------------------------------------------------

STORED = {"log.system": "kafka", "kafka.topic": "analytics.orders", "kafka.bootstrap.servers": SERVERS}


def test_continuing_log_keeps_the_0_1_keyed_shape_under_auto():
    log = resolve({"log.system": "kafka", "unique_key": "id"})
    kept, warnings = continue_stored_shape(log, {**STORED, "log.changelog-mode": "upsert"})
    assert kept.changelog_mode == "upsert" and kept.upsert
    assert kept.timestamp_standard == "ISO-8601"  # recorded before the option existed
    assert any("Flink's debezium-json cannot read" in w and "new 'kafka.topic'" in w for w in warnings)
    assert any("ISO-8601" in w for w in warnings)


def test_continuing_log_with_recorded_shape_has_nothing_to_say():
    log = resolve({"log.system": "kafka", "unique_key": "id"})
    props = {**STORED, "log.changelog-mode": "all", "log.timestamp-format.standard": "SQL"}
    assert continue_stored_shape(log, props) == (log, [])


def test_new_topic_takes_the_new_defaults():
    log = resolve({"log.system": "kafka", "unique_key": "id", "kafka.topic": "other"})
    kept, warnings = continue_stored_shape(log, {**STORED, "log.changelog-mode": "upsert"})
    assert kept.changelog_mode == "all" and warnings == []


def test_explicit_change_of_a_recorded_shape_is_an_error():
    log = resolve({"log.system": "kafka", "unique_key": "id", "log.changelog-mode": "all"})
    with pytest.raises(LogConfigError, match="changed from 'upsert' to 'all'"):
        continue_stored_shape(log, {**STORED, "log.changelog-mode": "upsert"})
    log = resolve({"log.system": "kafka", "log.timestamp-format.standard": "SQL"})
    with pytest.raises(LogConfigError, match="changed from 'ISO-8601' to 'SQL'"):
        continue_stored_shape(log, {**STORED, "log.changelog-mode": "all"})
