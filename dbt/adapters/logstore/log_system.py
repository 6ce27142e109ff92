"""The pluggable log-system interface. Kafka is the implementation; others plug in by name."""
from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from dbt.adapters.logstore.log_config import LogConfig


@dataclass
class WriteResult:
    """What one commit wrote: record count and, per partition, [first offset, next offset)."""

    topic: str
    records: int = 0
    offsets: Dict[int, "tuple[int, int]"] = field(default_factory=dict)
    # Kafka transactions the records took: a long write commits along the way, each
    # transaction well inside transaction.timeout.ms (see kafka_writer.TransactionClock)
    transactions: int = 1
    longest_transaction_s: float = 0.0  # from its begin to its commit, for the longest one

    def acknowledge(self, partition: int, offset: int) -> None:
        first, nxt = self.offsets.get(partition, (offset, offset + 1))
        self.offsets[partition] = (min(first, offset), max(nxt, offset + 1))


class LogWriter(ABC):
    """Writes the records of one table commit; nothing is visible before `commit` in
    transactional mode."""

    @abstractmethod
    def send(self, key: Optional[bytes], value: Optional[bytes], route: bytes,
             headers: Sequence[Tuple[str, bytes]] = ()) -> None:
        """Queue one record (a None value is a tombstone). `route` places keyless records:
        equal rows share a partition."""

    @abstractmethod
    def commit(self, confirmation: Optional[Callable[[WriteResult], Tuple[bytes, bytes]]]) -> WriteResult:
        """Make every queued record durable, then write the confirmation (key, value) that
        `confirmation` builds from what was written to the control topic — in the same
        transaction for transactional logs — and make it all visible. Without a confirmation
        (one task's share of a parallel write) only the records are committed."""

    @abstractmethod
    def abort(self) -> None:
        """Discard the records of this commit where the log supports it; always release."""


class LogSystem(ABC):
    name: str

    @abstractmethod
    def prepare(self, log: LogConfig) -> int:
        """Check the log is reachable and its topic exists (creating it), before the table
        changes; returns the topic's partition count."""

    @abstractmethod
    def check(self, log: LogConfig) -> "list[str]":
        """`dbt debug`: one line per check passed (reachable, topics creatable); raises on failure."""

    @abstractmethod
    def find_confirmation(self, log: LogConfig, table_id: str, changeset: str) -> Optional[Dict[str, Any]]:
        """The committed confirmation of a change set, if the control topic holds one."""

    @abstractmethod
    def open_writer(self, log: LogConfig, writer_id: str) -> LogWriter:
        """A writer for one commit; `writer_id` identifies the table (fences older writers)."""


_REGISTRY: Dict[str, Callable[[], LogSystem]] = {}
# The built-in log systems, by the module and class that implement them: imported when first
# asked for (kafka-python stays off the import path of models without a log), by name, so
# that this interface never imports its implementations back.
BUILT_IN = {"kafka": "dbt.adapters.logstore.kafka_log:KafkaLogSystem"}


def register(name: str, factory: Callable[[], LogSystem]) -> None:
    """Plug in a log system of another name (or replace one, in tests)."""
    _REGISTRY[name] = factory


def get_log_system(name: str) -> LogSystem:
    if name not in _REGISTRY and name in BUILT_IN:
        module, attribute = BUILT_IN[name].split(":")
        register(name, getattr(importlib.import_module(module), attribute))
    if name not in _REGISTRY:
        known = sorted({*_REGISTRY, *BUILT_IN})
        raise ValueError(f"unknown log system {name!r}; known: {', '.join(known)}")
    return _REGISTRY[name]()
