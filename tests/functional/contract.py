"""The correctness contract, checked independently of the package's own reader:
a consumer that reads the topic from the start and applies the records in order ends with
exactly the table's rows."""
from __future__ import annotations

import base64
import json
import os
import time
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Context, Decimal
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional

from kafka import KafkaConsumer, TopicPartition

# tests/conftest.py names this process's Spark directory here; the profile's session_dir is the same
SESSION_DIR_VARIABLE = "LOGSTORE_TEST_SESSION_DIR"
# what the test profile's server_side_parameters set
TEST_SESSION = {"spark.sql.shuffle.partitions": "2", "spark.sql.session.timeZone": "UTC",
                # a Delta table read by path (read_table_files) in a session without Delta's
                # catalog: the tests read their tables' files so
                "spark.databricks.delta.requiredSparkConfsCheck.enabled": "false",
                "spark.databricks.delta.snapshotPartitions": "2"}


@dataclass(frozen=True)
class Message:
    partition: int
    offset: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: tuple = ()

    def header(self, name: str) -> Optional[str]:
        return next((v.decode() for k, v in self.headers if k == name), None)

    @property
    def envelope(self) -> Dict[str, Any]:
        """The change event (unwrapped from Kafka Connect's {"schema", "payload"} if wrapped)."""
        event = json.loads(self.value, parse_float=Decimal)
        if isinstance(event, dict) and set(event) == {"schema", "payload"}:
            return event["payload"]
        return event

    @property
    def op(self) -> str:
        return "d" if self.value is None else self.envelope["op"]

    @property
    def repeats_delete(self) -> bool:
        """The tombstone after a keyed `d` event (header logstore.tombstone), for compaction."""
        return self.value is None and self.header("logstore.tombstone") == "after-delete"


def end_offsets(bootstrap_servers: str, topics: Iterable[str]) -> Dict[str, int]:
    """Every partition's end offset of `topics`, as "topic:partition" (read_uncommitted: aborted
    writes count too), to show that a run wrote nothing anywhere."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=None,
                             isolation_level="read_uncommitted")
    try:
        parts = [TopicPartition(t, p) for t in sorted(topics)
                 for p in sorted(consumer.partitions_for_topic(t) or [])]
        return {f"{tp.topic}:{tp.partition}": o for tp, o in consumer.end_offsets(parts).items()}
    finally:
        consumer.close()


def new_messages(messages: List[Message], before: List[Message]) -> List[Message]:
    """The records of `messages` that `before` (an earlier read of the topic) did not have."""
    seen = {(m.partition, m.offset) for m in before}
    return [m for m in messages if (m.partition, m.offset) not in seen]


def changes(messages: List[Message]) -> List[Message]:
    """The records that are changes of their own: without the tombstones that only repeat the
    `d` event before them."""
    return [m for m in messages if not m.repeats_delete]


# The isolation the contract's consumer reads with. The confirmation rules (docs/log-format.md)
# make read_uncommitted exact too; a test may use it where the embedded broker leaves a fenced
# transaction open and so holds read_committed readers back (see test_faults_concurrency.py).
ISOLATION = {"level": "read_committed"}


def read_topic(bootstrap_servers: str, topic: str, idle_seconds: float = 0.2,
               timeout_seconds: float = 60.0, client: Optional[Mapping[str, Any]] = None,
               slow_read_seconds: float = 900.0) -> List[Message]:
    """Every record of the topic, partition by partition, in offset order (assign(), no group).
    The tests read after the writes they check have finished, so a short quiet spell past the
    high watermark is enough; while it is not reached (a transaction still open), the read goes
    on for `timeout_seconds`. The topic's end offsets as the read starts (its last stable
    offsets under read_committed) must be reached, however long that takes up to
    `slow_read_seconds`: a read that falls short fails rather than return part of the topic
    (600,000 records took 23 s alone and over 60 on a loaded machine, 2026-11-27). `client`:
    more kafka-python settings (e.g. SASL, for a cluster with ACLs)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=None,
                             enable_auto_commit=False, isolation_level=ISOLATION["level"],
                             **dict(client or {}))
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        if not parts:
            return []
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        there = consumer.end_offsets(parts)  # what the read must get to
        out: List[Message] = []
        started = time.monotonic()
        idle_since = started
        while True:
            polled = consumer.poll(timeout_ms=200)
            if polled:
                idle_since = time.monotonic()
            for tp, msgs in polled.items():
                out.extend(Message(tp.partition, m.offset, m.key, m.value, tuple(m.headers or ()))
                           for m in msgs)
            caught_up = all(consumer.highwater(tp) is not None
                            and consumer.position(tp) >= consumer.highwater(tp) for tp in parts)
            if caught_up and time.monotonic() - idle_since >= idle_seconds:
                break
            waited = time.monotonic() - started
            if waited >= timeout_seconds:
                positions = {tp: consumer.position(tp) for tp in parts}
                short = {tp.partition: (positions[tp], there[tp]) for tp in parts if positions[tp] < there[tp]}
                if not short:
                    break
                assert waited < slow_read_seconds, (
                    f"read {len(out)} records of {topic} in {waited:.0f} s, short of the end "
                    f"offsets it had as the read started (partition: (position, end)): {short}")
        return sorted(out, key=lambda m: (m.partition, m.offset))
    finally:
        consumer.close()


def _split_top(text: str) -> List[str]:
    """Split a Spark type string on the commas outside any <...>."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return parts + [text[start:]]


def _norm(value: Any, kind: str) -> Any:
    """One canonical form for a value from Spark (Python objects) or from the log (JSON),
    directed by the Spark type string (`array<int>`, `map<string,int>`, `struct<a:int>`, ...)."""
    if value is None:
        return None
    if kind.startswith("array<"):
        return [_norm(v, kind[6:-1]) for v in value]
    if kind.startswith("map<"):
        key_kind, value_kind = _split_top(kind[4:-1])
        return sorted([str(_norm(k, key_kind)), _norm(v, value_kind)] for k, v in value.items())
    if kind.startswith("struct<"):
        fields = [f.split(":", 1) for f in _split_top(kind[7:-1])]
        get = value.get if isinstance(value, dict) else lambda n: getattr(value, n)
        return {name: _norm(get(name), sub) for name, sub in fields}
    if kind == "float":  # 32-bit: compare at its own precision
        return format(float(value), ".7g")
    if kind.startswith("decimal") or kind in ("int", "bigint", "smallint", "tinyint", "double"):
        return str(Decimal(str(value)).normalize(Context(prec=100)))
    if kind == "timestamp_ntz":
        return (datetime.fromisoformat(value) if isinstance(value, str) else value).isoformat()
    if kind == "timestamp":
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        if value.tzinfo is None:  # pyspark hands out naive local times
            value = value.astimezone()
        return value.astimezone(timezone.utc).isoformat()
    if kind == "date":
        return value.isoformat() if isinstance(value, date) else value
    if kind == "binary":
        return base64.b64encode(bytes(value)).decode() if not isinstance(value, str) else value
    return value


def canonical(row: Dict[str, Any], types: Dict[str, str]) -> str:
    return json.dumps({c: _norm(row.get(c), t) for c, t in types.items()}, sort_keys=True,
                      default=str, ensure_ascii=False)


def spark(settings: Optional[Dict[str, str]] = None):
    """This process's Spark session, started as the adapter starts it (Hive catalog, warehouse
    and Derby metastore in the test session's own directory), whichever comes first: a test's
    own query or a dbt run. A bare `getOrCreate()` would start an in-memory catalog with its
    warehouse in the current directory, which every later dbt run in this process would then
    reuse: its renamed partitioned tables keep their old partition paths."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from dbt.adapters.logstore.connections import session_defaults

    builder = SparkSession.builder
    # A running session is taken as it is: a builder's settings would overwrite its own (e.g.
    # a test profile's time zone). getActiveSession() would not do: it is per thread, and dbt
    # starts the session in its model threads.
    if SparkContext._active_spark_context is None:
        builder = builder.enableHiveSupport()
        settings = {**session_defaults(os.environ[SESSION_DIR_VARIABLE]), **TEST_SESSION, **(settings or {})}
        for key, value in settings.items():
            builder = builder.config(key, value)
    session = builder.getOrCreate()
    # a session someone started otherwise would make every later test in this process doubtful
    assert session.conf.get("spark.sql.catalogImplementation") == "hive", "bare Spark session"
    return session


def stop_spark() -> None:
    """End this process's Spark session (its JVM stays): the next one starts with its own
    settings, e.g. a table format's catalog (tests/table_formats.py), which a running session
    cannot take."""
    from pyspark.sql import SparkSession

    session = SparkSession._instantiatedSession
    if session is not None:
        session.stop()


def read_table_files(path: Path, table_format: str = "parquet"):
    """A table's rows read from its files (a process whose metastore another JVM holds):
    Delta by path, Iceberg from its newest metadata file, else the parquet files."""
    if table_format == "delta":
        return spark().read.format("delta").load(str(path))
    if table_format == "iceberg":
        newest = max(path.glob("metadata/*.metadata.json"), key=lambda p: int(p.name.split("-")[0]))
        return spark().read.format("iceberg").load(str(newest))
    return spark().read.parquet(str(path))


def table_state(relation: str):
    """Column types and canonical rows of a table (or of `<table> version as of <v>`)."""
    df = spark().sql(f"select * from {relation}")
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    return types, Counter(canonical(r.asDict(recursive=True), types) for r in df.collect())


def replay(messages: List[Message], types: Dict[str, str],
           value_format: str = "debezium-json") -> Counter:
    """Apply the records in order: insert/update upsert by key (keyless: add the row),
    delete or tombstone removes the key (keyless: one equal row); at the first record of a
    snapshot that starts a log generation, start over, and skip older snapshots' records after. With `value_format` 'json'
    a record's value is the row itself."""
    keyed: Dict[bytes, str] = {}
    keyless: Counter = Counter()
    floor = 0  # docs/log-format.md: a generation start supersedes every older snapshot
    for m in messages:
        snapshot = int(m.header("logstore.snapshot") or 0)
        if m.header("logstore.starts-generation") is not None and snapshot > floor:
            keyed, keyless, floor = {}, Counter(), snapshot
        if snapshot < floor:
            continue
        if m.value is None:
            env = {"op": "d", "before": None, "after": None}
        elif value_format == "json":
            env = {"op": "c", "before": None, "after": json.loads(m.value, parse_float=Decimal)}
        else:
            env = m.envelope
        if m.key is not None:
            if env["op"] == "d":
                keyed.pop(m.key, None)
            else:
                keyed[m.key] = canonical(env["after"], types)
        elif env["op"] == "d":
            row = canonical(env["before"], types)
            assert keyless[row] > 0, f"log deletes a row it never inserted: {row}"
            keyless[row] -= 1
        else:
            keyless[canonical(env["after"], types)] += 1
    return Counter(keyed.values()) + keyless


def _assert_replay_gives(messages: List[Message], types: Dict[str, str], table: Counter,
                         topic: str, relation: str, value_format: str = "debezium-json") -> None:
    replayed = replay(messages, types, value_format)
    assert replayed == table, (
        f"replaying {topic} does not give {relation}:\n only in log: {replayed - table}\n"
        f" only in table: {table - replayed}"
    )


def wait_for_confirmations(bootstrap_servers: str, topic: str, count: int,
                           timeout_seconds: float = 60.0,
                           client: Optional[Mapping[str, Any]] = None) -> List[Dict[str, Any]]:
    """The topic's confirmations once at least `count` are readable. A transaction's commit
    markers land after the producer's commit returns (in Kafka as on the embedded broker), and
    an open transaction of a dead writer holds read_committed readers back until it is
    aborted, so a reader right after a run may briefly see less than was committed."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        confirmations = [json.loads(m.value) for m in
                         read_topic(bootstrap_servers, topic + "__logstore_commits", client=client)]
        if len(confirmations) >= count or time.monotonic() > deadline:
            return confirmations
        time.sleep(0.5)


def replay_confirmed(bootstrap_servers: str, topic: str, types: Dict[str, str], table: Counter,
                     timeout_seconds: float = 30.0) -> Counter:
    """Replay of the confirmed records, read again while it differs from `table` (commit
    markers land asynchronously, see wait_for_confirmations), up to a deadline."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        replayed = replay(confirmed(bootstrap_servers, topic, read_topic(bootstrap_servers, topic)), types)
        if replayed == table or time.monotonic() > deadline:
            return replayed
        time.sleep(0.5)


def confirmed(bootstrap_servers: str, topic: str, messages: List[Message],
              client: Optional[Mapping[str, Any]] = None) -> List[Message]:
    """The records a consumer delivers by docs/log-format.md: those of write attempts that a
    record in the control topic confirms, within the offsets it states (for a parallel attempt,
    within the offsets of the record's own writer)."""
    ranges = {}
    for m in read_topic(bootstrap_servers, topic + "__logstore_commits", client=client):
        c = json.loads(m.value)
        if "writers" in c:
            for writer, offsets in c["writers"].items():
                ranges[(c["attempt"], writer)] = {int(p): (a, b) for p, (a, b) in offsets.items()}
        else:
            ranges[(c["attempt"], None)] = {int(p): (a, b) for p, (a, b) in c["offsets"].items()}

    def delivered(m: Message) -> bool:
        first, last = ranges.get((m.header("logstore.attempt"), m.header("logstore.writer")),
                                 {}).get(m.partition, (1, 0))
        return first <= m.offset <= last

    return [m for m in messages if delivered(m)]


def assert_contract(bootstrap_servers: str, topic: str, relation: str,
                    value_format: str = "debezium-json",
                    client: Optional[Mapping[str, Any]] = None) -> List[Message]:
    messages = confirmed(bootstrap_servers, topic, read_topic(bootstrap_servers, topic, client=client),
                         client=client)
    types, table = table_state(relation)
    _assert_replay_gives(messages, types, table, topic, relation, value_format)
    return messages


def _in_zone(value: Any, kind: str, zone: timezone) -> Any:
    """A timestamp without an offset, as a client other than pyspark hands it out (PyHive over
    thrift: a naive datetime or a string), is a wall time in the server's session time zone."""
    if kind != "timestamp" or value is None:
        return value
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=zone) if value.tzinfo is None else value


def rows_state(types: Dict[str, str], rows: Iterable[Dict[str, Any]],
               session_zone: timezone = timezone.utc) -> Counter:
    """The canonical multiset of rows read through another client than the in-process Spark
    session (e.g. PyHive from a Thrift Server whose session time zone is `session_zone`).
    Decimals, dates and timestamps may come as Python objects or strings."""
    return Counter(
        canonical({c: _in_zone(row.get(c), t, session_zone) for c, t in types.items()}, types)
        for row in rows
    )


def assert_contract_rows(bootstrap_servers: str, topic: str, types: Dict[str, str],
                         rows: Iterable[Dict[str, Any]], relation: str = "the table",
                         session_zone: timezone = timezone.utc) -> List[Message]:
    """The contract for a table read elsewhere: `types` maps column -> Spark type name
    (as `describe` shows it), `rows` are the table's rows as dicts."""
    messages = confirmed(bootstrap_servers, topic, read_topic(bootstrap_servers, topic))
    _assert_replay_gives(messages, types, rows_state(types, rows, session_zone), topic, relation)
    return messages


def table_properties(relation: str) -> Dict[str, str]:
    return {r[0]: r[1] for r in spark().sql(f"show tblproperties {relation}").collect()}


def assert_transaction_metadata(bootstrap_servers: str, topic: str, transaction_topic: str,
                                where: str) -> int:
    """Debezium's transaction metadata against the confirmed log, read independently of the
    package: every confirmed attempt has exactly one BEGIN and one END (read_committed: a killed
    attempt's are never visible), END's event_count and data_collections count the attempt's
    change events (not the tombstones after deletes), whose blocks number them 1..n in order;
    no other transaction appears. Returns how many transactions were checked."""
    confirmations = [json.loads(m.value) for m in read_topic(bootstrap_servers, topic + "__logstore_commits")]
    events: Dict[str, List[Dict[str, Any]]] = {}
    partition_of: Dict[int, int] = {}  # id(event) -> its partition
    for m in confirmed(bootstrap_servers, topic, read_topic(bootstrap_servers, topic)):
        if m.value is not None:
            event = m.envelope
            partition_of[id(event)] = m.partition
            events.setdefault(m.header("logstore.attempt"), []).append(event)
    seen: Dict[str, List[str]] = {}
    ends: Dict[str, Dict[str, Any]] = {}
    for m in read_topic(bootstrap_servers, transaction_topic):
        event = json.loads(m.value)
        event = event["payload"] if set(event) == {"schema", "payload"} else event
        seen.setdefault(event["id"], []).append(event["status"])
        if event["status"] == "END":
            ends[event["id"]] = event
    attempts = [c["attempt"] for c in confirmations]
    assert sorted(seen) == sorted(attempts), (
        f"{where}: transactions {sorted(seen)} on {transaction_topic}, confirmed attempts {sorted(attempts)}")
    for attempt in attempts:
        assert seen[attempt] == ["BEGIN", "END"], f"{where}: attempt {attempt}: {seen[attempt]}"
        mine = events.get(attempt, [])
        assert ends[attempt]["event_count"] == len(mine), (
            f"{where}: END of {attempt} counts {ends[attempt]['event_count']} events, the log holds {len(mine)}")
        assert [c["event_count"] for c in ends[attempt]["data_collections"]] == [len(mine)]
        blocks = [e["transaction"] for e in mine]
        assert all(b["id"] == attempt and b["data_collection_order"] == b["total_order"] for b in blocks), \
            f"{where}: the blocks of {attempt}: {blocks[:3]}"
        assert sorted(b["total_order"] for b in blocks) == list(range(1, len(mine) + 1)), \
            f"{where}: the blocks of {attempt} do not number its events 1..{len(mine)}"
        for partition in set(partition_of.values()):  # in the order written, within a partition
            orders = [e["transaction"]["total_order"] for e in mine if partition_of[id(e)] == partition]
            assert orders == sorted(orders), f"{where}: {attempt}, partition {partition}: {orders}"
    return len(attempts)
