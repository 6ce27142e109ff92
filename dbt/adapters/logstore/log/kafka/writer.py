"""What both Kafka writers (python_writer, confluent_writer) share: where a record goes
and when a long transactional write commits along the way."""
from __future__ import annotations

import time

from dbt.adapters.logstore.log.log_system import WriteResult


def partition_for(data: bytes, partitions: "list[int]") -> int:
    """Kafka's default partitioner: murmur2 of the bytes, as the Java client computes it."""
    from kafka.partitioner.default import murmur2

    return partitions[(murmur2(data) & 0x7FFFFFFF) % len(partitions)]


class TransactionClock:
    """When a long transactional write commits along the way. A broker aborts a transaction
    open longer than its transaction.timeout.ms (Apache Kafka enforces it; Paimon's users hit
    it), so a change set of any size is written in transactions of at most a third of it. The
    attempt still has one confirmation, in its last transaction: consumers that follow the
    confirmations get it exactly once; a plain read_committed consumer sees the committed part
    of an attempt that later fails, and its retry (docs/log-format.md, section 5)."""

    CHECK_EVERY = 1000  # records between looks at the clock
    SHARE = 3  # of transaction.timeout.ms

    def __init__(self, timeout_ms: float) -> None:
        self.budget_s = float(timeout_ms) / 1000 / self.SHARE
        self.started = time.monotonic()

    def due(self) -> bool:
        return time.monotonic() - self.started >= self.budget_s

    def first_record(self) -> None:
        """The broker opens a transaction at its first record, not at begin_transaction (a step
        of the client alone): a writer that has sent nothing yet (the coordinator of a parallel
        attempt, open while its tasks write) starts the transaction's time now."""
        self.started = time.monotonic()

    def committed(self, result: WriteResult) -> None:
        """A transaction committed: note how long it was open, and start the next one's time."""
        now = time.monotonic()
        result.longest_transaction_s = max(result.longest_transaction_s, now - self.started)
        self.started = now
