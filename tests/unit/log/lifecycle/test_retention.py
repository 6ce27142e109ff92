"""lifecycle/retention.py: settings a new topic is created with, and the warning for settings that
delete what a consumer from the log's start needs."""
from dbt.adapters.logstore.log.lifecycle.retention import creation_settings, warnings
from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.log.log_system import LogState

KEYLESS = LogConfig(model="events", system="kafka", topic="t", bootstrap_servers="b:9092")
KEYED = LogConfig(model="orders", system="kafka", topic="t", bootstrap_servers="b:9092",
                  unique_key=("id",))


def test_new_topics_keep_the_contract_and_the_models_settings_win():
    assert creation_settings(KEYLESS) == {"retention.ms": "-1"}
    assert creation_settings(KEYED) == {"cleanup.policy": "compact"}
    given = LogConfig(**{**KEYED.__dict__, "topic_config": {"cleanup.policy": "delete"}})
    assert creation_settings(given) == {"cleanup.policy": "delete"}


def test_a_warning_for_a_topic_that_deletes_by_time_or_size():
    kept = LogState(settings={"cleanup.policy": "delete", "retention.ms": "-1"})
    assert warnings(KEYLESS, kept) == []
    assert warnings(KEYED, LogState(settings={"cleanup.policy": "compact", "retention.ms": "604800000"})) == []
    deleting = LogState(settings={"cleanup.policy": "delete", "retention.ms": "604800000"})
    (warning,) = warnings(KEYLESS, deleting)
    assert "latest-generation" in warning and "retention.ms=604800000" in warning
    scheduled = LogConfig(**{**KEYLESS.__dict__, "generation_interval_ms": 86_400_000})
    assert warnings(scheduled, deleting) == []  # a generation always younger than retention
    assert warnings(KEYLESS, LogState()) == []  # a broker that reports no settings
