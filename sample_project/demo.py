"""End-to-end demo of dbt-logstore on the sample project (`make demo`).

1. starts the embedded Kafka-protocol broker on 127.0.0.1:9092 (memory storage);
2. runs dbt in this process (one Spark session for every command):
   `seed --full-refresh`, `run` (day 1), `run --vars '{day: 2}'`, `test`;
3. reads the topics back from the broker and prints their changelogs (gold_customers is fed by
   the changes of customers, read from its log with logstore_changes);
4. replays each changelog into rows and compares them with the table in Spark;
5. always stops the broker (and the Spark session) at the end.

Everything it writes stays under sample_project/target and sample_project/logs.
Exit code: 0 when every dbt command succeeded and every log replays to its table, 1 otherwise,
2 when the broker cannot be started.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
import unicodedata
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

PROJECT_DIR = Path(__file__).resolve().parent
TARGET_DIR = PROJECT_DIR / "target"
LOG_DIR = PROJECT_DIR / "logs"
SPARK_DIR = TARGET_DIR / "logstore_spark"  # the profile's default session_dir
BROKER_DIR = TARGET_DIR / "broker"         # pid file and broker log
HOST, PORT = "127.0.0.1", 9092             # profiles.yml's default kafka_bootstrap_servers
BOOTSTRAP_SERVERS = f"{HOST}:{PORT}"
# the demo's broker is its own: the profile's env_var('KAFKA_SERVERS') falls back to it
os.environ.pop("KAFKA_SERVERS", None)

# (model, Spark table, topic, unique_key) of the logged models
LOGGED_MODELS = [
    ("customers", "analytics.customers", "crm.customers", ("customer_id",)),
    ("orders", "analytics.orders", "shop.orders", ("order_id",)),
    ("gold_customers", "analytics.gold_customers", "crm.gold_customers", ("customer_id",)),
]
# gold_customers reads the changes of customers from its log; recomputed from the table itself:
GOLD_RECOMPUTED = ("select customer_id, full_name, lifetime_value, order_count "
                   "from analytics.customers where tier = 'gold'")

# Flags of every dbt command: this project, its profile, and all output under sample_project.
DBT_FLAGS = [
    "--project-dir", str(PROJECT_DIR),
    "--profiles-dir", str(PROJECT_DIR),
    "--target-path", str(TARGET_DIR),
    "--log-path", str(LOG_DIR),
]
# No usage tracking: it would also write a .user.yml cookie next to profiles.yml.
os.environ.setdefault("DO_NOT_TRACK", "1")
# Spark's JVM (started by dbt's first query) logs only errors and draws no progress bars:
# without this it warns on every query that the session already exists.
os.environ.setdefault(
    "PYSPARK_SUBMIT_ARGS",
    "--conf spark.log.level=ERROR --conf spark.ui.showConsoleProgress=false pyspark-shell",
)


class DemoFailure(Exception):
    pass


def banner(text: str) -> None:
    print(f"\n{'=' * 100}\n== {text}\n{'=' * 100}", flush=True)


# --- dbt ---------------------------------------------------------------------------------------

class Dbt:
    """Runs dbt commands in this process; remembers which run wrote which log offsets."""

    def __init__(self) -> None:
        from dbt.cli.main import dbtRunner

        self._runner = dbtRunner()
        # (topic, partition, offset) -> label of the dbt command that wrote the record
        self.written_by: Dict[Tuple[str, int, int], str] = {}

    def __call__(self, *args: str, label: Optional[str] = None) -> Any:
        banner("dbt " + " ".join(args))
        colors = "--use-colors" if sys.stdout.isatty() else "--no-use-colors"
        result = self._runner.invoke([*args, *DBT_FLAGS, colors])
        if not result.success:
            detail = f": {type(result.exception).__name__}: {result.exception}" if result.exception else ""
            raise DemoFailure(f"`dbt {' '.join(args)}` failed{detail}")
        if label:
            self._remember_offsets(result.result, label)
        return result.result

    def _remember_offsets(self, run_result: Any, label: str) -> None:
        for node_result in getattr(run_result, "results", []) or []:
            response = node_result.adapter_response or {}
            topic, offsets = response.get("topic"), response.get("log_offsets") or {}
            for partition, (first, last) in offsets.items():  # inclusive offset range
                for offset in range(first, last + 1):
                    self.written_by[(topic, int(partition), offset)] = label


# --- formatting --------------------------------------------------------------------------------

def _width(text: str) -> int:
    """Terminal columns of `text` (CJK characters take two)."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _pad(text: str, width: int, right: bool = False) -> str:
    fill = " " * max(0, width - _width(text))
    return fill + text if right else text + fill


def json_value(value: Any) -> str:
    """A value as it appears in the record's JSON (decimals keep their exact digits)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, Decimal)):
        return str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {json_value(v)}" for k, v in value.items()) + "}"
    return json.dumps(value, ensure_ascii=False, default=str)


def image(values: Optional[Dict[str, Any]], only: Optional[Sequence[str]] = None) -> List[str]:
    """A row image as tokens, one per column ("-" for none), for `wrap`."""
    if values is None:
        return ["-"]
    if only is not None:
        values = {k: v for k, v in values.items() if k in only}
    items = [f"{k}: {json_value(v)}" for k, v in values.items()]
    if not items:
        return ["{}"]
    items = [item + ("," if n < len(items) - 1 else "") for n, item in enumerate(items)]
    items[0] = "{" + items[0]
    items[-1] = items[-1] + "}"
    return items


def cell(value: Any) -> str:
    """A table value for display."""
    if value is None:
        return "null"
    if isinstance(value, datetime):
        text = value.isoformat(sep=" ")
        return text.replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def print_table(header: Sequence[str], rows: Iterable[Sequence[str]], indent: str = "  ",
                right: Sequence[bool] = ()) -> None:
    """Aligned columns; a cell holding several lines ("\n") continues on the next lines."""
    rows = [[c.split("\n") for c in r] for r in rows]
    widths = [max([_width(h)] + [_width(line) for r in rows for line in r[i]])
              for i, h in enumerate(header)]
    right = list(right) + [False] * (len(header) - len(right))

    def line(values: Sequence[str]) -> str:
        return indent + "  ".join(_pad(v, w, r) for v, w, r in zip(values, widths, right)).rstrip()

    print(line(header))
    print(indent + "  ".join("-" * w for w in widths))
    for r in rows:
        for n in range(max(len(c) for c in r)):
            print(line([c[n] if n < len(c) else "" for c in r]))


def wrap(tokens: Sequence[str], width: int) -> str:
    """Join tokens with spaces into lines of at most `width` columns (a token is never split)."""
    lines: List[str] = []
    for token in tokens:
        if lines and _width(lines[-1]) + 1 + _width(token) <= width:
            lines[-1] += " " + token
        else:
            lines.append(token)
    return "\n".join(lines)


# --- the log -----------------------------------------------------------------------------------

def show_changelog(topic: str, records: List[Any], written_by: Dict[Tuple[str, int, int], str]) -> None:
    counts = {op: sum(1 for r in records if r.op == op) for op in ("c", "u", "d")}
    print(f"\n{topic}: {len(records)} records "
          f"({counts['c']} inserts, {counts['u']} updates, {counts['d']} deletes); "
          f"an update shows only the columns it changed")
    header = ["part", "offset", "written by", "op", "key", "before -> after"]
    records = sorted(records, key=lambda r: (r.partition, r.offset))
    rows = [[str(r.partition), str(r.offset), written_by.get((topic, r.partition, r.offset), "?"),
             r.op, " ".join(image(r.key))] for r in records]
    # the before -> after column gets what the terminal has left (at least 50 columns)
    used = 2 + sum(2 + max([_width(h)] + [_width(row[i]) for row in rows])
                   for i, h in enumerate(header[:-1]))
    width = max(50, shutil.get_terminal_size((160, 24)).columns - used)
    for row, r in zip(rows, records):
        changed = None
        if r.op == "u" and r.before is not None and r.after is not None:
            changed = [k for k in r.after if r.before.get(k) != r.after.get(k)]
        row.append(wrap(image(r.before, changed) + ["->"] + image(r.after, changed), width))
    print_table(header, rows, right=[True, True])


# --- comparing the table with the log replica --------------------------------------------------

def spark_value(value: Any, data_type: Any) -> Any:
    """A value collected from Spark, normalised for comparison."""
    from pyspark.sql.types import TimestampType

    if value is not None and isinstance(data_type, TimestampType):
        # PySpark hands back naive local-time datetimes: make them aware (UTC).
        return value.astimezone(timezone.utc)
    return value


def log_value(value: Any, data_type: Any) -> Any:
    """A value of a replayed JSON row image, decoded by the column's Spark type."""
    from pyspark.sql.types import (
        BooleanType, DateType, DecimalType, FloatType, DoubleType, IntegralType, StringType,
        TimestampNTZType, TimestampType,
    )

    if value is None:
        return None
    if isinstance(data_type, DecimalType):
        return Decimal(str(value))
    if isinstance(data_type, IntegralType):
        return int(value)
    if isinstance(data_type, (FloatType, DoubleType)):
        return float(value)
    if isinstance(data_type, DateType):
        return date.fromisoformat(value)
    if isinstance(data_type, TimestampType):
        return datetime.fromisoformat(value).astimezone(timezone.utc)
    if isinstance(data_type, TimestampNTZType):
        return datetime.fromisoformat(value)
    if isinstance(data_type, (StringType, BooleanType)):
        return value
    return value


def compare(spark: Any, model: str, table: str, topic: str, key: Sequence[str],
            records: List[Any]) -> bool:
    from dbt.adapters.logstore.reading.replay import Replica

    replica = Replica()
    for record in records:  # partition order is kept, so every key's changes are in order
        replica.apply(record)

    df = spark.table(table)
    fields = df.schema.fields
    columns = [f.name for f in fields]
    table_rows = [tuple(spark_value(row[f.name], f.dataType) for f in fields) for row in df.collect()]

    problems = []
    log_rows = []
    for image_ in replica.rows():
        if list(image_) != columns:
            problems.append(f"a replayed row has columns {list(image_)}, the table {columns}")
        log_rows.append(tuple(log_value(image_.get(f.name), f.dataType) for f in fields))

    key_index = [columns.index(k) for k in key]

    def order(row: Tuple[Any, ...]) -> Tuple[Any, ...]:
        return tuple(row[i] for i in key_index)

    table_rows.sort(key=order)
    log_rows.sort(key=order)

    print(f"\n{model}: table {table} in Spark ({len(table_rows)} rows)")
    print_table(columns, [[cell(v) for v in r] for r in table_rows])
    print(f"{model}: replayed from topic {topic} with replay.Replica ({len(log_rows)} rows)")
    print_table(columns, [[cell(v) for v in r] for r in log_rows])

    only_table = [r for r in table_rows if r not in log_rows]
    only_log = [r for r in log_rows if r not in table_rows]
    for r in only_table:
        problems.append(f"only in the table: {[cell(v) for v in r]}")
    for r in only_log:
        problems.append(f"only in the log replica: {[cell(v) for v in r]}")
    if problems:
        print(f"MISMATCH {model}: table {table} and log {topic} differ:")
        for p in problems:
            print(f"  - {p}")
        return False
    print(f"MATCH {model}: table {table} and the replay of {topic} hold the same "
          f"{len(table_rows)} rows")
    return True


# --- main --------------------------------------------------------------------------------------

def stop_spark() -> None:
    if "pyspark" not in sys.modules:
        return
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:  # type: ignore[attr-defined]
        SparkContext._active_spark_context.stop()  # type: ignore[attr-defined]


def demo(dbt: Dbt) -> bool:
    dbt("seed", "--full-refresh")
    dbt("run", label="run day 1")
    dbt("run", "--vars", "{day: 2}", label="run day 2")
    dbt("test", "--vars", "{day: 2}")

    from dbt.adapters.logstore.reading.reader import read_changelog
    from pyspark.sql import SparkSession

    banner("The changelogs, read back from the broker (read_committed)")
    changelogs = {}
    for _, _, topic, _ in LOGGED_MODELS:
        changelogs[topic] = list(read_changelog(BOOTSTRAP_SERVERS, topic))
        show_changelog(topic, changelogs[topic], dbt.written_by)

    banner("Tables in Spark vs. the rows replayed from their logs")
    spark = SparkSession.builder.getOrCreate()  # the session dbt used
    matches = [compare(spark, model, table, topic, key, changelogs[topic])
               for model, table, topic, key in LOGGED_MODELS]

    banner("gold_customers (fed by the log of customers) vs. recomputed from customers")
    fed = sorted(tuple(r) for r in spark.table("analytics.gold_customers").collect())
    recomputed = sorted(tuple(r) for r in spark.sql(GOLD_RECOMPUTED).collect())
    print_table(["customer_id", "full_name", "lifetime_value", "order_count"],
                [[cell(v) for v in r] for r in fed])
    if fed == recomputed:
        print(f"MATCH gold_customers: {len(fed)} rows, the same as recomputed from customers")
    else:
        print(f"MISMATCH gold_customers: fed {fed} but recomputed {recomputed}")
    return all(matches) and fed == recomputed


def main() -> int:
    started = time.monotonic()
    sys.stdout.reconfigure(line_buffering=True)  # keep our lines in order with dbt's when piped
    from dbt.adapters.logstore.cli.broker import BrokerError, EmbeddedBroker

    # Start from a clean state. The broker keeps its topics in memory, so every demo starts with
    # empty topics; the Spark warehouse and Derby metastore, though, persist on disk in
    # target/logstore_spark. Deleting them makes the tables start empty too, so table and log
    # begin together and the log of this run replays exactly to the tables of this run.
    # (`dbt run --full-refresh` would not do: it would log the old rows' deletes to topics that
    # never saw their inserts.)
    shutil.rmtree(SPARK_DIR, ignore_errors=True)

    broker = EmbeddedBroker(HOST, PORT, BROKER_DIR)
    if broker.pid() is not None:  # left running (killed demo, or started by hand): stale topics
        print(f"stopping the broker left running with state in {BROKER_DIR} (pid {broker.pid()}): "
              f"its topics hold an earlier run's records")
        broker.stop()
    try:
        pid = broker.start()
    except BrokerError as exc:
        print(f"error: cannot start the embedded Kafka broker: {exc}.\n"
              f"The demo needs that port (see sample_project/profiles.yml): stop whatever is "
              f"listening on it and run the demo again.", file=sys.stderr)
        return 2
    print(f"embedded Kafka broker running at {BOOTSTRAP_SERVERS} (pid {pid}, log {broker.log_file})",
          flush=True)

    # Stop cleanly (broker included) on Ctrl-C and on `kill`.
    interrupted: List[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        interrupted.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    ok = False
    try:
        ok = demo(Dbt())
    except DemoFailure as exc:
        if not interrupted:  # dbt reports an interruption as its own failure
            print(f"\nerror: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        pass
    finally:
        try:
            stop_spark()
        except Exception as exc:  # e.g. Ctrl-C also reached the JVM: the broker must still stop
            print(f"(stopping Spark: {type(exc).__name__}: {exc})", file=sys.stderr)
        finally:
            broker.stop()
            print(f"\nembedded Kafka broker stopped (pid {pid})")
    if interrupted:
        print(f"demo interrupted after {time.monotonic() - started:.0f} s")
        return 128 + interrupted[0]
    print(f"demo {'succeeded' if ok else 'FAILED'} in {time.monotonic() - started:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
