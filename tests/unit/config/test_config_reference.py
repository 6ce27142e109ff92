"""The configuration reference (dbt/adapters/logstore/config/reference.py), which the
documentation's hook renders into docs/configuration.md: every model option and profile field has
a meaning, and the rendered tables name every spelling and every default, so an option added to
the vocabulary cannot go undocumented."""
import dataclasses
from pathlib import Path

import pytest
from dbt.adapters.spark.connections import SparkCredentials

from dbt.adapters.logstore.config import reference as config_reference, options as log_options
from dbt.adapters.logstore.config.reference import ReferenceError, expand
from dbt.adapters.logstore.credentials import FIELD_DESCRIPTIONS, LogstoreCredentials
from dbt.adapters.logstore.formats import FORMAT_OPTIONS

PAGE = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def test_every_option_has_a_description():
    format_options = {option.key: option for option in FORMAT_OPTIONS}
    for key in log_options.SPELLINGS:
        if key in format_options:
            assert format_options[key].meaning.strip(), f"{key}: FormatOption.meaning is empty"
        else:
            assert log_options.DESCRIPTIONS.get(key, "").strip(), f"{key}: no log_options.DESCRIPTIONS entry"


def test_no_description_of_an_option_that_does_not_exist():
    assert not set(log_options.DESCRIPTIONS) - set(log_options.SPELLINGS)


def test_every_option_has_allowed_values_and_a_default():
    for key in log_options.SPELLINGS:
        assert log_options.ALLOWED.get(key), f"{key}: no log_options.ALLOWED entry"
        assert key in log_options.DEFAULTS or key in log_options.DEFAULTS_SHOWN, f"{key}: no default"


def test_allowed_choices_are_what_the_readers_accept():
    assert log_options.ALLOWED["log.system"] == log_options.LOG_SYSTEMS
    assert log_options.ALLOWED["log.format"] == log_options.FORMATS
    assert log_options.ALLOWED["log.consistency"] == log_options.CONSISTENCIES
    assert log_options.ALLOWED["log.changelog-mode"] == log_options.CHANGELOG_MODES
    for option in FORMAT_OPTIONS:
        if option.allowed:
            assert log_options.ALLOWED[option.key] == option.allowed


def test_every_profile_field_has_a_description():
    spark = {f.name for f in dataclasses.fields(SparkCredentials)}
    own = {f.name for f in dataclasses.fields(LogstoreCredentials)} - spark
    assert own, "LogstoreCredentials adds no field?"
    for name in own | {"host"}:
        assert FIELD_DESCRIPTIONS.get(name, "").strip(), f"profile field {name!r}: no FIELD_DESCRIPTIONS entry"
    assert set(config_reference.profile_fields()) == own | {"host"}


def test_the_options_table_names_every_spelling_and_default():
    rendered = config_reference.render_model_options()
    for key, spellings in log_options.SPELLINGS.items():
        row = next(line for line in rendered.splitlines() if line.startswith(f"| `{key}`"))
        for spelling in (key, *spellings):
            assert f"`{spelling}`" in row, f"{spelling} missing from {key}'s row"
        if key in log_options.DEFAULTS_SHOWN:
            assert log_options.DEFAULTS_SHOWN[key] in row
        else:
            default = log_options.DEFAULTS[key]
            shown = str(default).lower() if isinstance(default, bool) else str(default)
            assert f"`{shown}`" in row, f"{key}: default {shown!r} missing"


def test_the_other_keys_and_own_prefixes_are_rendered():
    rendered = config_reference.render_other_keys()
    assert "`log-store.enabled`" in rendered and "`log-store.type`" in rendered
    assert f"`{log_options.TOPIC_CONFIG_PREFIX}<name>`" in rendered
    for prefix in log_options.CLIENT_PREFIXES + log_options.OWN_PREFIXES:
        assert f"`{prefix}" in rendered
    assert "`unique_key`" in rendered


def test_the_profile_table_names_every_field_and_default():
    rendered = config_reference.render_profile_fields()
    assert "| `kafka_client` | `kafka-python` |" in rendered
    assert "| `lock_lease_seconds` | `600` |" in rendered
    assert "| `kafka_properties` | `{}` |" in rendered
    assert "| `kafka_bootstrap_servers` | none |" in rendered
    assert "`<project>/<target-path>/logstore_spark`" in rendered
    for name in config_reference.profile_fields():
        assert f"| `{name}` |" in rendered


def test_the_configuration_page_renders_every_reference():
    page = PAGE.read_text()
    for name in config_reference.REFERENCES:
        assert f"<!-- reference: {name} -->" in page, f"docs/configuration.md lacks the {name} marker"
    rendered = expand(page)
    assert "<!-- reference:" not in rendered
    assert "`log.transaction-metadata.topic`" in rendered


def test_an_unknown_marker_is_an_error():
    with pytest.raises(ReferenceError, match="nope"):
        expand("<!-- reference: nope -->")


def test_a_missing_description_fails_the_rendering(monkeypatch):
    monkeypatch.setattr(log_options, "DESCRIPTIONS",
                        {k: v for k, v in log_options.DESCRIPTIONS.items() if k != "log.format"})
    with pytest.raises(ReferenceError, match="log.format"):
        config_reference.render_model_options()
