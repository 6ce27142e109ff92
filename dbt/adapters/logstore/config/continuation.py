"""What a continuing log keeps from its table: whether the table's stored options say its log goes
on (`continues_log`), and the options it then goes on with (`continue_stored_shape`): a topic
keeps its shape mid-stream.
"""
from __future__ import annotations

from dataclasses import replace
from typing import List, Mapping, Optional, Tuple

from dbt.adapters.logstore.spark.json_images import TIMESTAMP_ISO, TIMESTAMP_SQL
from dbt.adapters.logstore.config.log_config import LogConfig, LogConfigError
from dbt.adapters.logstore.config.options import CHANGELOG_MODES

# What a topic written before these options existed holds (see continue_stored_shape).
LEGACY_TIMESTAMPS = TIMESTAMP_ISO


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
              "table's rows; see docs/operations.md, 'Moving an existing log').")
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
