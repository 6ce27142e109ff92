"""Change-set benchmark: the keyed rebuild's diff, JSON images against typed rows, side by side.

    python benchmarks/diff.py [--rows 1000000] [--repeats 3] [--ways json,typed,floor]

One local Spark session builds a new and an old table (`--rows` rows, 1% of them changed, the
shape of benchmarks/mirror.py's model; the new one first, in the cold JVM, timed: the CTAS that
is the whole no-log run's work and the logged run's staging) and then times, alternately, the
two ways dbt/adapters/logstore/changes/diff.py computes a keyed rebuild's change set:

- json:  rows compared by their JSON images, keys checked for repeats by a group-by of their own
         (the way every keyed diff ran before 2026-11-22; still the way for changed columns or
         types, or map columns);
- typed: rows compared as typed structs, JSON rendered only for the changed rows, repeats
         counted within the diff's own shuffle.

and, as a yardstick, the least any diff of two unordered tables does:

- floor: the same full outer join on the key carrying a 64-bit hash of each row instead of the
         row, only counted (no JSON, no write, no check for repeated keys; not even exact).

The first round of each is reported apart (code generation and JIT warm-up of a fresh JVM, as in
a dbt run's first diff); the median of the later rounds is the warm cost. json and typed must
give the same change set, which the script checks. (CTAS + a way's first round) / CTAS is what
the keyed rebuild's ratio to the no-log run would be with no fixed step and no mirror at all.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.projects import ROWS_SQL as ROWS  # noqa: E402  (the rows of the mirror's model)
from dbt.adapters.logstore.changes import diff as changes  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3, help="rounds of each way after the first")
    parser.add_argument("--ways", default="json,typed,floor", help="the ways to time, comma-separated")
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    work = Path(tempfile.mkdtemp(prefix="logstore-diff-bench-"))
    spark = (SparkSession.builder.master("local[2]").appName("logstore-diff-bench")
             .config("spark.sql.warehouse.dir", str(work / "warehouse"))
             .config("spark.sql.shuffle.partitions", "4").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        spark.sql("show tables").collect()  # a dbt run's metadata queries come before its CTAS
        spark.sql("select 1").collect()
        started = time.monotonic()
        spark.sql("create table new using parquet as " + ROWS.format(
            note="case when id % 100 = 7 then 'changed' else 'same' end", rows=args.rows))
        ctas = time.monotonic() - started
        spark.sql("create table old using parquet as " + ROWS.format(note="'same'", rows=args.rows))
        fields = spark.table("new").schema.fields
        columns, types = [f.name for f in fields], [f.dataType.simpleString() for f in fields]

        def json_way() -> None:  # no types known: JSON images; a separate uniqueness query
            assert not spark.sql(changes.duplicate_keys_sql("new", ["id"])).collect()
            sql = changes.change_set_sql(changes.ChangeInput("new", columns),
                                         changes.ChangeInput("old", columns), ["id"])
            spark.sql("create table changes_json using parquet as " + sql)

        def typed_way() -> None:
            sql = changes.change_set_sql(changes.ChangeInput("new", columns, types),
                                         changes.ChangeInput("old", columns, types), ["id"],
                                         mark_duplicates=True)
            spark.sql("create table changes_typed using parquet as " + sql)
            assert not spark.sql(changes.marked_duplicates_sql("changes_typed")).collect()

        digest = f"xxhash64({', '.join(changes.quote_identifier(c) for c in columns)})"

        def floor_way() -> None:
            spark.sql(f"select count(*) from (select id, {digest} as h from old) o full outer join "
                      f"(select id, {digest} as h from new) n on o.id = n.id "
                      f"where not (o.h <=> n.h)").collect()

        every = {"json": json_way, "typed": typed_way, "floor": floor_way}
        ways = {name: every[name] for name in args.ways.split(",")}
        times = {name: [] for name in ways}
        for round_ in range(args.repeats + 1):
            order = list(ways) if round_ % 2 == 0 else list(reversed(list(ways)))
            for name in order:
                spark.sql(f"drop table if exists changes_{name}")
                started = time.monotonic()
                ways[name]()
                times[name].append(time.monotonic() - started)
        written = [name for name in ("json", "typed") if name in ways]
        sets = [sorted(map(tuple, spark.table(f"changes_{name}").collect())) for name in written]
        assert all(s == sets[0] for s in sets), "the two ways gave different change sets"
        count = f" ({len(sets[0]):,} changes{', the same both ways' if len(sets) == 2 else ''})" if sets else ""

        print(f"\nkeyed diff of {args.rows:,} rows, 1% changed{count}; "
              f"the new rows' CTAS in the cold JVM: {ctas:.2f} s")
        print(f"{'way':<8}{'first round s':>15}{'warm median s':>15}{'(CTAS + first) / CTAS':>24}")
        for name in ways:
            print(f"{name:<8}{times[name][0]:>15.2f}{statistics.median(times[name][1:]):>15.2f}"
                  f"{(ctas + times[name][0]) / ctas:>24.2f}")
        if len(written) == 2:
            warm = {n: statistics.median(t[1:]) for n, t in times.items()}
            print(f"typed / json: first round x{times['typed'][0] / times['json'][0]:.2f}, "
                  f"warm x{warm['typed'] / warm['json']:.2f}")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
