"""Change-feed benchmark: the log's change set of a keyed rebuild against the table formats' own
change feeds (Delta's Change Data Feed, Iceberg's changelog view), side by side.

    python benchmarks/change_feeds.py [--rows 1000000] [--repeats 3] [--formats iceberg,delta]
                                      [--results FILE]

`make bench-formats` runs it with the defaults. Each format runs in a process of its own (a
session's catalog is fixed when it starts: tests/table_formats.py's settings), with a local Spark
session on two cores and no broker. There a keyed table of `--rows` rows is created (version A),
then rebuilt with 1% of its keys changed (version B: 0.8% updated, 0.1% deleted, 0.1% new) in
two ways:

- replace: CREATE OR REPLACE TABLE ... AS SELECT of the staged new rows, the adapter's atomic
           rebuild of a table model on these formats;
- merge:   the same new rows MERGEd INTO a second copy of version A (changed rows updated, new
           ones inserted, missing ones deleted): what a user writes to get a small feed.

and the change from A to B is materialized, as a parquet table, each of these ways:

- logstore diff: the change set this project logs (dbt/adapters/logstore/changes/diff.py, typed
                 rows and repeated keys marked), as a keyed rebuild computes it: the new rows,
                 staged as parquet (the replace's source), against the table's version A;
- delta CDF:     spark.read.format("delta").option("readChangeFeed", "true") over version B;
- iceberg changelog: the system.create_changelog_view procedure from A's snapshot to B's,
                 with compute_updates (updates as before/after pairs), with net_changes (an
                 update as a delete and an insert) and with both (which Iceberg refuses); a
                 replace's snapshot does not descend from A's, so after a replace also the
                 changelog of B's snapshot alone.

For each: the records (rows of the result; the log has one per insert, update or delete, a
feed has a pre- and a post-image per update), their inserts/updates/deletes, the median time of
`--repeats` rounds (after the setup, which warms the JVM), and the ratios to the true number of
changed keys and to the logstore diff's time. The setup's own times (staging, replace, MERGE)
are reported too: a feed is paid for at write time as well as at read time.

It prints one table at the end and writes every figure to benchmarks/results-change-feeds.json
(and the table to the same name .txt) when run with the default row count, or to --results;
a run with other row counts and no --results writes nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.harness import RESULT, machine, print_result  # noqa: E402
from dbt.adapters.logstore.changes import diff as changes  # noqa: E402
from dbt.adapters.logstore.spark import row_source  # noqa: E402
from dbt.adapters.logstore.connections import session_defaults  # noqa: E402
from tests.table_formats import FORMATS, SESSION_SETTINGS, put_jars_on_class_path  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results-change-feeds.json"
DEFAULT_ROWS = 1_000_000

# Version A with bump 0 and no key dropped; version B bumps qty and updated_at of every 125th key
# (0.8%), drops every 1000th (0.1%) and adds N/1000 keys past N (0.1%).
ROWS = """select id, concat('customer-', cast(id as string)) as name,
       cast(id % 1000 as int) + {bump} as qty, id * 1.5 as price,
       timestamp_seconds(1704067200 + id + 86400 * {bump}) as updated_at
from range({upto}) where {keep}"""
COLUMNS = ("id", "name", "qty", "price", "updated_at")


def version_a(rows: int) -> str:
    return ROWS.format(bump=0, upto=rows, keep="true")


def version_b(rows: int) -> str:
    return ROWS.format(bump="cast(id % 125 = 7 as int)", upto=rows + rows // 1000,
                       keep=f"id >= {rows} or id % 1000 <> 500")


def true_changes(rows: int) -> Dict[str, int]:
    def every(step: int, offset: int) -> int:  # keys below `rows` with key % step == offset
        return max(0, (rows - offset + step - 1) // step)
    return {"inserts": rows // 1000, "updates": every(125, 7), "deletes": every(1000, 500)}


# a row's change type in each result, as insert, update (its post-image) or delete; pre-images
# are records but not changes of their own
KINDS = {"c": "inserts", "u": "updates", "d": "deletes",
         "insert": "inserts", "update_postimage": "updates", "delete": "deletes",
         "update_after": "updates"}


def merge_sql(table: str, source: str) -> str:
    # without the condition every matched row would be rewritten, and be an update in the feeds
    same = " and ".join(f"t.{c} <=> s.{c}" for c in COLUMNS)
    return (f"merge into {table} t using ({source}) s on t.id = s.id "
            f"when matched and not ({same}) then update set * "
            f"when not matched then insert * when not matched by source then delete")


def child(fmt: str, rows: int, repeats: int) -> Dict[str, Any]:
    """Set up both versions in `fmt` and time every way to their change; runs in its own process."""
    put_jars_on_class_path()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    work = Path(tempfile.mkdtemp(prefix=f"logstore-feeds-{fmt}-"))
    builder = SparkSession.builder.master("local[2]").appName(f"logstore-feeds-{fmt}").enableHiveSupport()
    settings = {**session_defaults(str(work)), **SESSION_SETTINGS[fmt],
                "spark.sql.shuffle.partitions": "2", "spark.sql.session.timeZone": "UTC",
                "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "2g"}
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    props = "tblproperties ('delta.enableChangeDataFeed' = 'true')" if fmt == "delta" else ""

    def timed(action: Callable[[], Any]) -> float:
        started = time.monotonic()
        action()
        return time.monotonic() - started

    def build(verb: str, table: str, sql: str) -> float:
        return timed(lambda: spark.sql(f"{verb} table {table} using {fmt} {props} as {sql}"))

    def version(table: str) -> int:
        if fmt == "delta":
            return spark.sql(f"describe history {table}").agg({"version": "max"}).first()[0]
        return spark.sql(f"select snapshot_id from {table}.snapshots "
                         f"order by committed_at desc limit 1").first()[0]

    def to_parquet(out: str, sql: str) -> None:  # as the adapter writes staged rows and change sets
        spark.sql(f"create table {out} using parquet {row_source.table_options()} as {sql}")

    try:
        spark.sql("create database bench")
        setup = {"create_s": build("create", "bench.t", version_a(rows))}
        a = version("bench.t")
        # as a dbt run of the model: the new rows staged as plain parquet, then the replace
        setup["stage_s"] = timed(lambda: to_parquet("bench.staged", version_b(rows)))
        setup["replace_s"] = build("create or replace", "bench.t", "select * from bench.staged")
        b = version("bench.t")
        build("create", "bench.m", version_a(rows))
        ma = version("bench.m")
        setup["merge_s"] = timed(lambda: spark.sql(merge_sql("bench.m", "select * from bench.staged")))
        mb = version("bench.m")
        setup["versions"] = {"replace": [a, b], "merge": [ma, mb]}

        fields = spark.table("bench.staged").schema.fields
        names, types = [f.name for f in fields], [f.dataType.simpleString() for f in fields]

        def logstore_diff(out: str) -> None:  # the staged rows against the table before the replace
            to_parquet(out, changes.change_set_sql(
                changes.ChangeInput("bench.staged", names, types),
                changes.ChangeInput(f"(select * from bench.t version as of {a})", names, types),
                ["id"], mark_duplicates=True))

        def delta_cdf(table: str, v: int) -> Callable[[str], None]:
            def run(out: str) -> None:
                (spark.read.format("delta").option("readChangeFeed", "true")
                 .option("startingVersion", v).option("endingVersion", v)
                 .table(table).createOrReplaceTempView("feed"))
                to_parquet(out, "select * from feed")
            return run

        def iceberg_changelog(table: str, snapshots: str, flags: str) -> Callable[[str], None]:
            def run(out: str) -> None:
                spark.sql(f"call spark_catalog.system.create_changelog_view(table => '{table}', "
                          f"changelog_view => 'feed', options => map({snapshots}), "
                          f"identifier_columns => array('id'), {flags})")
                to_parquet(out, "select * from feed")
            return run

        kind_column = {"logstore": changes.OP, "delta": "_change_type", "iceberg": "_change_type"}
        ways: List[tuple] = [("logstore", "logstore diff", logstore_diff)]
        if fmt == "delta":
            ways += [("delta", f"CDF after {s}", delta_cdf(t, v))
                     for s, t, v in (("replace", "bench.t", b), ("merge", "bench.m", mb))]
        else:
            # identifier columns make compute_updates default to true, which net_changes refuses
            flag_sets = {"compute_updates": "compute_updates => true",
                         "net_changes": "compute_updates => false, net_changes => true",
                         "compute_updates + net_changes": "compute_updates => true, net_changes => true"}
            for s, t, (v0, v1) in (("replace", "bench.t", (a, b)), ("merge", "bench.m", (ma, mb))):
                snapshots = f"'start-snapshot-id', '{v0}', 'end-snapshot-id', '{v1}'"
                ways += [("iceberg", f"changelog {name} after {s}", iceberg_changelog(t, snapshots, flags))
                         for name, flags in flag_sets.items()]
            # a replace starts a new lineage, which A is not in: B's snapshot is all there is
            ways.append(("iceberg", "changelog compute_updates after replace, B alone",
                         iceberg_changelog("bench.t", f"'end-snapshot-id', '{b}'", flag_sets["compute_updates"])))

        results = {method: {"format": fmt, "method": method, "times": [], "error": None}
                   for _, method, _ in ways}
        for round_ in range(repeats):  # alternate the order, so that no way always goes first
            order = list(enumerate(ways))
            for i, (source, method, run) in (order if round_ % 2 == 0 else order[::-1]):
                result = results[method]
                if result["error"]:
                    continue
                # a table of its own each time: a dropped parquet table's files stay behind with
                # Iceberg's SparkSessionCatalog, and the next CTAS to its location fails
                out = f"bench.out_{i}_{round_}"
                spark.sql("drop view if exists feed")
                try:
                    result["times"].append(timed(lambda: run(out)))
                except Exception as error:  # a way the format refuses is a finding, not a failure
                    result["error"] = str(error).strip().splitlines()[0][:300]
                    print(f"  {fmt}: {method}: {result['error']}", flush=True)
                    continue
                if round_ == 0:
                    counts = {kind.lower(): n for kind, n in spark.sql(
                        f"select {kind_column[source]}, count(*) from {out} group by 1").collect()}
                    result["records"] = sum(counts.values())
                    result["kinds"] = counts
                    for kind in ("inserts", "updates", "deletes"):
                        result[kind] = sum(n for k, n in counts.items() if KINDS.get(k) == kind)
                    print(f"  {fmt}: {method}: {result['records']:,} records {counts} "
                          f"in {result['times'][-1]:.2f} s", flush=True)
        for result in results.values():
            result["seconds"] = statistics.median(result["times"]) if result["times"] else None
        ours = results["logstore diff"]
        expected = true_changes(rows)
        assert {k: ours[k] for k in expected} == expected, f"logstore diff {ours} != {expected}"
        return {"format": fmt, "setup": setup, "ways": list(results.values())}
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def run_child(fmt: str, args: argparse.Namespace, logs: Path) -> Dict[str, Any]:
    """One format's process: its progress lines echoed, its Spark noise kept in a log file."""
    log_file = logs / f"{fmt}.log"
    command = [sys.executable, __file__, "--child", fmt, "--rows", str(args.rows),
               "--repeats", str(args.repeats)]
    result = None
    with open(log_file, "w") as log:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True)
        for line in process.stdout:
            if line.startswith(RESULT):
                result = json.loads(line[len(RESULT):])
            else:
                print(line, end="", flush=True)
    if process.wait() != 0 or result is None:
        tail = "\n".join(log_file.read_text().splitlines()[-30:])
        raise SystemExit(f"{fmt} failed (exit {process.returncode}):\n{tail}")
    return result


def table(rows: int, expected: Dict[str, int], formats: List[Dict[str, Any]]) -> str:
    true = sum(expected.values())
    lines = [f"{rows:,} rows; true change: {true:,} keys ({expected['inserts']:,} inserted, "
             f"{expected['updates']:,} updated, {expected['deletes']:,} deleted)"]
    for f in formats:
        s = f["setup"]
        lines.append(f"{f['format']}: version A {s['create_s']:.2f} s, new rows staged {s['stage_s']:.2f} s, "
                     f"replace {s['replace_s']:.2f} s, "
                     f"MERGE {s['merge_s']:.2f} s")
    lines.append(f"\n{'format':<9}{'method':<56}{'records':>10}  {'ins/upd/del':<22}"
                 f"{'x true':>8}{'seconds':>9}{'x diff':>8}")
    for f in formats:
        diff_s = next(w["seconds"] for w in f["ways"] if w["method"] == "logstore diff")
        for w in f["ways"]:
            if w["error"]:
                lines.append(f"{f['format']:<9}{w['method']:<56}{'':>8}  error: {w['error'][:120]}")
                continue
            split = f"{w['inserts']:,}/{w['updates']:,}/{w['deletes']:,}"
            lines.append(f"{f['format']:<9}{w['method']:<56}{w['records']:>10,}  {split:<22}"
                         f"{w['records'] / true:>8.2f}{w['seconds']:>9.2f}{w['seconds'] / diff_s:>8.2f}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS)
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds of each way (median)")
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--results", help=f"JSON file (default {RESULTS.relative_to(ROOT)} "
                                          f"at the default row count, else none)")
    parser.add_argument("--child", choices=FORMATS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print_result(child(args.child, args.rows, args.repeats))
        return 0

    results = Path(args.results) if args.results else (RESULTS if args.rows == DEFAULT_ROWS else None)
    logs = Path(tempfile.mkdtemp(prefix="logstore-feeds-logs-"))
    print(f"{args.rows:,} rows, {args.repeats} rounds; Spark logs in {logs}", flush=True)
    formats = [run_child(fmt, args, logs) for fmt in args.formats.split(",")]
    expected = true_changes(args.rows)
    text = table(args.rows, expected, formats)
    print("\n" + text)
    if results is None:
        print("\nresults not written (not the default row count; --results FILE to write them)")
        return 0
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": machine(),
           "command": " ".join(["python", "benchmarks/change_feeds.py"] + sys.argv[1:]),
           "rows": args.rows, "repeats": args.repeats, "true_changes": expected, "formats": formats}
    results.write_text(json.dumps(out, indent=1) + "\n")
    results.with_suffix(".txt").write_text(f"{out['command']}\n{out['date']}, {out['machine']}\n\n{text}\n")
    print(f"\nresults written to {results} and {results.with_suffix('.txt')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
