"""Spark's own Kafka writer, reached from SQL: the parallel mirror behind a Spark Thrift Server.

A Thrift Server runs only SQL, so the Python tasks of the session method's parallel mirror
(parallel_mirror.py) cannot run there. Spark's Kafka data source can: with
`spark.sql.sources.useV1SourceList` leaving `kafka` out (for this session only), a catalog
table `USING kafka` is a V2 table that `INSERT INTO ... WITH (options)` writes, in the
executors, with the JVM producer. The records are the attempt's own bytes (`records_sql`:
same keys, values, headers and partitions as every other writer; the partition is Kafka's
murmur2, computed in SQL by `murmur2_sql`), plus the writer header naming `spark-kafka.<try>`.

Spark's writer is not transactional (at-least-once): a retried Spark task sends its records
again. Exactly-once for consumers that follow docs/log-format.md comes from the confirmation:
the try's records lie between the partitions' end offsets before it and after it, and Spark
counts those that carry the try's headers (attempt and writer). When they count exactly the
change set's records, every record is there once (a successful job sent each at least once),
and the one confirmation lists the try's ranges as its writer's; when they count more (a
retried task), the try is not confirmed and the change set is written again as the next try,
whose records carry its own writer name. A plain `read_committed` consumer sees every try's records at once, as
for any parallel attempt (docs/operations.md, Parallel mirror).

Secrets never go into SQL text (a server logs its statements): a log whose client properties
hold one, or a property Spark's Java producer does not share, keeps the cursor (`refusal`).
"""
from __future__ import annotations

import json
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore.spark.catalog import logger
from dbt.adapters.logstore.spark.json_images import quote_identifier, sql_string
from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.log.log_system import SqlWriteUnconfirmed, WriteResult
from dbt.adapters.logstore.names import CHANGE_COLUMNS, H_ATTEMPT, H_TOMBSTONE, H_WRITER, TOMBSTONE_AFTER_DELETE

WRITER = "spark-kafka"
TRIES = 3  # tries of one attempt whose records came out more than once (retried Spark tasks)
# how long the topic's end offsets may lag the records a finished job wrote (a broker reports
# its high watermark once the replicas have them; the embedded broker's lags longer)
SETTLE_SECONDS = 10.0
V1_SOURCES = "spark.sql.sources.useV1SourceList"
MISSING_SOURCE = "Failed to find data source: kafka"

# Client properties the JVM producer takes under the same name and value as kafka-python
# (Spark passes `kafka.<name>` options to it). Anything else keeps the cursor.
SHARED_PROPERTIES = frozenset({
    "acks", "batch.size", "linger.ms", "compression.type", "request.timeout.ms",
    "delivery.timeout.ms", "max.block.ms", "max.request.size", "retries", "retry.backoff.ms",
    "security.protocol", "client.id", "transaction.timeout.ms",
})
PRODUCER_OPTIONS = {"acks": "all", "linger.ms": "20", "batch.size": str(512 * 1024),
                    "enable.idempotence": "true"}

Query = Callable[[str], List[Tuple[Any, ...]]]  # runs one statement, returns its rows


def refusal(log: LogConfig) -> Optional[str]:
    """Why this log's records cannot go through Spark's writer from SQL (None: they can)."""
    others = sorted(str(k) for k in log.client_properties if str(k) not in SHARED_PROPERTIES)
    if others:
        return (f"its Kafka client properties {', '.join(others)} would have to be written into "
                f"the SQL the server runs (secrets are never), or are not the JVM producer's")
    if log.transaction_topic:
        return "Debezium's transaction metadata numbers each event in one writer"
    return None


# -- Kafka's default partitioner in Spark SQL ------------------------------------------------
# murmur2 as org.apache.kafka.common.utils.Utils.murmur2 computes it, on 32-bit values held in
# bigints (masked after every multiplication, which stays below 2^63: ANSI-safe).
_M, _MASK, _SEED = 0x5BD1E995, 0xFFFFFFFF, 0x9747B28C


def _mul(expr: str) -> str:
    return f"(({expr}) * {_M} & {_MASK})"


def _let(value: str, name: str, body: str) -> str:
    """`body` with `name` bound to `value` (a one-element aggregate: SQL has no let)."""
    return f"aggregate(array({value}), cast(0 as bigint), (_, {name}) -> {body})"


def murmur2_sql(data: str) -> str:
    """Spark SQL of Kafka's murmur2 of the binary expression `data`, as a non-negative bigint
    below 2^32 (the Java int's bits)."""
    hexed, n = f"hex({data})", f"length({data})"

    def byte(index: str) -> str:
        return f"cast(conv(substr(_h, 2 * ({index}) + 1, 2), 16, 10) as bigint)"

    word = " | ".join(f"shiftleft({byte(f'_i * 4 + {j}')}, {8 * j})" for j in range(4))
    k = _let(_mul(word), "_k1", _mul("_k1 ^ shiftright(_k1, 24)"))
    words = (f"aggregate(if(_n >= 4, sequence(0, cast(_n / 4 as int) - 1), array()), "
             f"cast(({_SEED} ^ _n) as bigint), (_acc, _i) -> ({_mul('_acc')} ^ {k}))")
    tail_at = "(_n - _n % 4)"
    tail = (f"(_w ^ if(_n % 4 = 3, shiftleft({byte(f'{tail_at} + 2')}, 16), 0)"
            f" ^ if(_n % 4 >= 2, shiftleft({byte(f'{tail_at} + 1')}, 8), 0)"
            f" ^ if(_n % 4 >= 1, {byte(tail_at)}, 0))")
    with_tail = f"if(_n % 4 = 0, _w, {_mul(tail)})"
    final = _let(with_tail, "_t",
                 _let(_mul("_t ^ shiftright(_t, 13)"), "_u", "_u ^ shiftright(_u, 15)"))
    return _let(hexed, "_h", _let(f"cast({n} as bigint)", "_n", _let(words, "_w", final)))


def partition_sql(data: str, partitions: Sequence[int]) -> str:
    """The partition Kafka's default partitioner gives `data` (kafka.writer.partition_for)."""
    ids = ", ".join(str(p) for p in partitions)
    return f"element_at(array({ids}), cast(({murmur2_sql(data)} & 2147483647) % {len(partitions)} as int) + 1)"


# -- the write --------------------------------------------------------------------------------
def _header(name: str, value: bytes) -> str:
    return f"named_struct('key', {sql_string(name)}, 'value', X'{value.hex()}')"


def insert_sql(attempt: Any, changes_relation: str, sink: str, topic: str, partitions: Sequence[int],
               writer: str, parallelism: int, options: Dict[str, str]) -> str:
    """The INSERT that writes the attempt's records with Spark's Kafka writer, in at most
    `parallelism` tasks: the change table's files merged without a shuffle (it is written in
    files of row_source.ROWS_PER_FILE rows), so a change set of fewer files takes fewer tasks.
    A tombstone stays right behind its delete: both come out of one row (a change set holds one
    change per key, so the deletes' rows may go apart from the rest)."""
    headers = attempt.headers(writer)
    plain = "array(" + ", ".join(_header(k, v) for k, v in headers) + ")"
    tomb = "array(" + ", ".join(_header(k, v) for k, v in headers + ((H_TOMBSTONE, TOMBSTONE_AFTER_DELETE),)) + ")"
    with_options = ", ".join(f"{sql_string('kafka.' + k)} = {sql_string(v)}" for k, v in options.items())
    # a keyed record's partition is the JVM producer's own: murmur2 of its key, as every
    # writer's; a keyless one is placed by its row image, computed here (3 s per 200,000 rows
    # on two cores, measured: not spent where the producer does the same)
    place = "cast(null as int)" if attempt.encoder().keyed else partition_sql("route", partitions)
    records = (f"(select /*+ COALESCE({parallelism}) */ key, value, op, {place} as _p "
               f"from ({attempt.records_sql(changes_relation)}) records)")
    target = f"insert into {sink} with ({with_options}) "
    columns = f"{sql_string(topic)} as topic"
    if not attempt.encoder().tombstone_after_delete:
        return (f"{target}select key, value, {plain} as headers, _p as `partition`, {columns} "
                f"from {records} numbered")
    pair = (f"array(named_struct('key', key, 'value', value, 'headers', {plain}, 'partition', _p), "
            f"named_struct('key', key, 'value', cast(null as binary), 'headers', {tomb}, 'partition', _p))")
    return (f"{target}select key, value, {plain} as headers, _p as `partition`, {columns} "
            f"from {records} numbered where not (op = 'd' and key is not null) "
            f"union all select r.key, r.value, r.headers, r.`partition`, {columns} "
            f"from {records} deletes lateral view inline({pair}) r where deletes.op = 'd' and deletes.key is not null")


READ_VIEW = "logstore_kafka_read"  # the session's temporary view of the try's ranges


def count_sql(attempt: Any, writer: str, topic: str, ranges: Dict[int, Tuple[int, int]],
              options: Dict[str, str]) -> List[str]:
    """How many records in `ranges` carry the attempt's and `writer`'s headers: Spark reads
    them back in its executors, through a temporary view of the Kafka source with its headers
    (a catalog table USING kafka has no headers column to filter on)."""
    starting = json.dumps({topic: {str(p): first for p, (first, _) in ranges.items()}})
    ending = json.dumps({topic: {str(p): end for p, (_, end) in ranges.items()}})
    read = {**{f"kafka.{k}": v for k, v in options.items() if k == "bootstrap.servers"
               or k == "security.protocol" or k.startswith("request.")},
            "subscribe": topic, "startingOffsets": starting, "endingOffsets": ending,
            "includeHeaders": "true"}
    view_options = ", ".join(f"{sql_string(k)} {sql_string(v)}" for k, v in read.items())
    mine = " and ".join(
        f"exists(headers, h -> h.key = {sql_string(name)} and h.value = X'{value.hex()}')"
        for name, value in ((H_ATTEMPT, attempt.attempt.encode()), (H_WRITER, writer.encode())))
    return [f"create or replace temporary view {READ_VIEW} using kafka options ({view_options})",
            f"select count(*) from {READ_VIEW} where {mine}"]


def _options(log: LogConfig) -> Dict[str, str]:
    options = {"bootstrap.servers": str(log.bootstrap_servers), **PRODUCER_OPTIONS}
    options.update({str(k): str(v) for k, v in log.client_properties.items()
                    if str(k) != "transaction.timeout.ms"})
    return options


def _acks_all(log: LogConfig) -> bool:
    """Whether the try's records are below the end offsets as soon as the job is done."""
    return _options(log).get("acks") in ("all", "-1")


def expected_records(query: Query, changes_relation: str, tombstones: bool) -> int:
    """The records the change set makes: one per change, and a tombstone behind each delete of
    a key when the format writes them."""
    op, key = (quote_identifier(c) for c in CHANGE_COLUMNS[:2])
    extra = f" + count_if({op} = 'd' and {key} is not null)" if tombstones else ""
    rows = query(f"select count(*){extra} from {changes_relation}")
    return int(rows[0][0] or 0)


class SparkKafkaTasks:
    """`run_tasks` for log_snapshots.write_change_set_parallel: the attempt written by Spark's
    Kafka writer through `query` (the Thrift Server's session), checked by the topic's offsets."""

    def __init__(self, log: LogConfig, query: Query, changes_relation: str, sink: str,
                 end_offsets: Callable[[], Dict[int, int]]) -> None:
        self.log, self.changes, self.sink = log, changes_relation, sink
        self._query, self._end_offsets = query, end_offsets

    def query(self, sql: str) -> List[Tuple[Any, ...]]:
        started = time.monotonic()
        try:
            return self._query(sql)
        finally:
            logger.debug(f"{self.log.model}: {time.monotonic() - started:.2f} s: {sql[:80]}")

    def end_offsets(self) -> Dict[int, int]:
        started = time.monotonic()
        try:
            return self._end_offsets()
        finally:
            logger.debug(f"{self.log.model}: {time.monotonic() - started:.2f} s: the topic's end offsets")

    def available(self) -> bool:
        """Creates the session's Kafka sink table; False when the server has no Kafka source
        (spark-sql-kafka is not on its class path)."""
        topic = sql_string(str(self.log.topic))
        servers = sql_string(str(self.log.bootstrap_servers))
        self.query(f"drop table if exists {self.sink}")
        try:
            self.query(f"create table {self.sink} using kafka options ('kafka.bootstrap.servers' "
                       f"{servers}, 'subscribe' {topic}, 'topic' {topic})")
        except Exception as exc:  # noqa: BLE001 - the server's error text tells
            if MISSING_SOURCE in str(exc):
                return False
            raise
        return True

    def close(self) -> None:
        self.query(f"drop view if exists {READ_VIEW}")
        self.query(f"drop table if exists {self.sink}")

    def __call__(self, attempt: Any) -> List[Tuple[str, WriteResult]]:
        tombstones = attempt.encoder().tombstone_after_delete
        expected = expected_records(self.query, self.changes, tombstones)
        previous = self._v1_sources()
        self.query(f"set {V1_SOURCES}=" + ",".join(s for s in previous.split(",") if s.strip() != "kafka"))
        try:
            for attempt_try in range(TRIES):
                writer = f"{WRITER}.{attempt_try}"
                before = self.end_offsets()
                partitions = sorted(before)
                try:
                    self.query(insert_sql(attempt, self.changes, self.sink, str(self.log.topic),
                                          partitions, writer, self.log.parallelism, _options(self.log)))
                except Exception as exc:  # noqa: BLE001 - the server's error, in its first line
                    first = str(exc).strip().splitlines()[0][:500] if str(exc).strip() else type(exc).__name__
                    raise DbtRuntimeError(
                        f"Model '{self.log.model}': writing to Kafka topic '{self.log.topic}' with "
                        f"Spark's Kafka writer failed: {first}") from exc
                ranges, written = self._written(attempt, writer, before, expected)
                if written == expected:
                    result = WriteResult(topic=str(self.log.topic), records=expected,
                                         offsets=ranges, transactions=0)  # Spark's writer has none
                    return [(writer, result)]
                if written < expected:  # the broker does not show them all: a retry would not either
                    raise SqlWriteUnconfirmed(
                        f"Model '{self.log.model}': the topic's end offsets showed {written} of the "
                        f"{expected} records Spark's Kafka writer wrote within {SETTLE_SECONDS:.0f} s "
                        f"(a broker whose end offsets lag, as the embedded one's); none of them is "
                        f"confirmed.")
            raise SqlWriteUnconfirmed(
                f"Model '{self.log.model}': Spark's Kafka writer wrote some of the change set's "
                f"{expected} records more than once in each of {TRIES} tries (Spark retried tasks); "
                f"none of them is confirmed.")
        finally:
            self.query(f"set {V1_SOURCES}={previous}")

    def _count(self, statements: List[str]) -> int:
        rows: List[Tuple[Any, ...]] = []
        for sql in statements:
            rows = self.query(sql)
        return int(rows[0][0] or 0) if rows else 0

    def _v1_sources(self) -> str:
        rows = self.query(f"set {V1_SOURCES}")
        return str(rows[0][1]) if rows else ""

    def _written(self, attempt: Any, writer: str, before: Dict[int, int],
                 expected: int) -> Tuple[Dict[int, Tuple[int, int]], int]:
        """The ranges the try's records lie in (from `before` to the end offsets now, per
        partition that grew), and how many records of the try they hold, counted by Spark
        (`count_sql`: by the attempt's and writer's headers, so that transaction markers, or an
        earlier run's INSERT still going on, are not counted). Read again while they hold fewer
        than the job wrote (end offsets lag)."""
        deadline = time.monotonic() + SETTLE_SECONDS
        acks_all = _acks_all(self.log)
        while True:
            after = self.end_offsets()
            # every partition (Spark's Kafka source wants them all), empty where none grew
            bounds = {p: (min(before.get(p, 0), end), end) for p, end in sorted(after.items())}
            grown = sum(end - first for first, end in bounds.values())
            # exactly the change set's count of offsets: every record once and nothing else
            # (each was sent at least once, and acks=all puts each below the end offsets once the
            # job is done; with fewer acks the end offsets may lag, and another writer's records,
            # an earlier run's INSERT still going on, could make up the count); otherwise Spark
            # reads the range back and counts the try's
            if grown < expected:
                written = grown
            elif grown == expected and acks_all:
                written = expected
            else:
                written = self._count(count_sql(attempt, writer, str(self.log.topic), bounds,
                                                _options(self.log)))
            if written >= expected or time.monotonic() > deadline:
                return {p: r for p, r in bounds.items() if r[1] > r[0]}, written
            time.sleep(0.2)
