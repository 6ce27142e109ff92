"""What a data topic keeps, as a first-class setting: the settings a new topic is created with so
that it keeps the contract where it can, and the warning a run gives when a topic's settings
cannot keep it.

A keyed log may be compacted (Debezium's and upsert-kafka's convention: the record key is the
primary key, a delete leaves a tombstone): the latest record of each key replays to the table.
A keyless log cannot be compacted (its records have no key) and, deleted by time or size, loses
its start: it needs infinite retention, or generations (`log.generation.interval`) more often
than its retention deletes. The user's `kafka.topic-config.*` always wins.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.log.log_system import LogState

POLICY, RETENTION_MS, RETENTION_BYTES = "cleanup.policy", "retention.ms", "retention.bytes"


def creation_settings(log: LogConfig) -> Dict[str, str]:
    """The data topic's settings at creation: the contract-keeping defaults under the model's
    own `kafka.topic-config.*`."""
    defaults = {POLICY: "compact"} if log.keyed else {RETENTION_MS: "-1"}
    return {**defaults, **log.topic_config}


def _finite(value: Optional[str]) -> bool:
    return value is not None and value.strip() not in ("", "-1")


def warnings(log: LogConfig, state: LogState) -> List[str]:
    """A warning when the topic's settings delete records a consumer from the log's start
    needs (none when the broker reports no settings)."""
    settings = state.settings
    policy = settings.get(POLICY, "")
    deletes = "delete" in policy and (_finite(settings.get(RETENTION_MS))
                                      or _finite(settings.get(RETENTION_BYTES)))
    if not deletes:
        return []
    kept = ", ".join(f"{k}={settings[k]}" for k in (POLICY, RETENTION_MS, RETENTION_BYTES)
                     if k in settings)
    interval = log.generation_interval_ms
    retention = settings.get(RETENTION_MS)
    if interval and _finite(retention) and interval < int(retention or 0) and not _finite(
            settings.get(RETENTION_BYTES)):
        return []  # a generation is always younger than what the broker deletes
    fix = ("'kafka.topic-config.cleanup.policy: compact' on a new topic (a keyed log compacts "
           "to the table)" if log.keyed else "'kafka.topic-config.retention.ms: -1' on a new topic")
    return [f"Model '{log.model}': topic '{log.topic}' deletes old records ({kept}), so a "
            f"consumer from its earliest offset stops reaching the table once they go. Start "
            f"consumers at the latest generation ('dbt-logstore tail {log.model} --from "
            f"latest-generation'), and set 'log.generation.interval' below its retention, or "
            f"use {fix}."]
