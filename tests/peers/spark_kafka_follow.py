"""Follow dbt-logstore topics with Spark Structured Streaming's own Kafka source and apply the
changes to a table, as the "Spark Structured Streaming" recipe of docs/consumers.md does (this file is that
recipe, tested; it imports nothing of dbt-logstore).

Run as its own process, with its own Spark session (Spark's Kafka source comes in through
`spark.jars` when the session starts; a running session cannot load it later):

    python spark_kafka_follow.py JOB.json

JOB.json:
    {"bootstrap_servers": str, "directory": str, "jars": [path, ...],
     "models": [{"name": str, "topic": str, "format": "debezium-json" | "json", "keyed": bool,
                 "columns": [[name, spark type], ...]}, ...]}

Each line "sync" on stdin runs every model's query once more, `availableNow` from its checkpoint
(from the earliest offsets the first time), then writes the model's current rows as JSON lines
to DIRECTORY/<name>/result/ (timestamps as instants with their offset) and answers on stdout
with one JSON line: {"ok": true, "models": {name: {"records": records read, "batches": n}}} or
{"ok": false, "error": traceback}. End of stdin stops Spark and the process.
"""
import json
import os
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor

# The answers go to the original stdout; everything else (Spark's JVM inherits fd 1) to stderr.
ANSWERS = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)

from pyspark.sql import SparkSession, Window  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402


def row_ddl(columns):
    return ", ".join(f"`{name}` {kind}" for name, kind in columns)


def envelope_ddl(columns):
    row = row_ddl(columns)
    return f"before struct<{row}>, after struct<{row}>, op string"


# ------------------------------------------------------------------------------------------
# The recipe

def read_log(spark, bootstrap_servers, topic):
    return (spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            # only records of committed transactions: never a change of a failed dbt run
            .option("kafka.isolation.level", "read_committed")
            .load())


def apply_keyed(state, batch, columns, debezium):
    """The state (`key` + the row's columns) after the batch: each key's last record in the
    batch (a key's records share one partition, in offset order) decides. A `c`/`u`/`r` event,
    or with `json` a row, upserts; a `d` event or a tombstone (null value) deletes the key (the
    tombstone after a `d` only repeats the delete: the same result as skipping it)."""
    value = "cast(value as string)"
    parse = (f"from_json({value}, '{envelope_ddl(columns)}') as e" if debezium
             else f"named_struct('op', if(value is null, 'd', 'c'), 'after', "
                  f"from_json({value}, '{row_ddl(columns)}')) as e")
    last = Window.partitionBy("key").orderBy(F.desc("partition"), F.desc("offset"))
    latest = (batch.selectExpr("cast(key as string) as key", "partition", "offset", parse)
              .withColumn("n", F.row_number().over(last)).where("n = 1"))
    upserts = latest.where("e.op in ('c', 'u', 'r')").select("key", "e.after.*")
    return state.join(latest.select("key"), "key", "left_anti").unionByName(upserts)


def apply_keyless(state, batch, columns):
    """Keyless Debezium events: `c`/`r` add their row, `d` removes one equal row (`u`: both).
    A multiset difference, so the order within the batch does not matter (a row's delete never
    overtakes its insert: equal rows share a partition, in offset order, across batches)."""
    events = batch.selectExpr(f"from_json(cast(value as string), '{envelope_ddl(columns)}') as e")
    added = events.where("e.op in ('c', 'u', 'r')").select("e.after.*")
    removed = events.where("e.op in ('u', 'd')").select("e.before.*")
    return state.unionByName(added).exceptAll(removed)


class Follower:
    """One model's streaming query; its table is a parquet directory per micro-batch,
    STATE/<batch id>: a batch reads the previous version and writes its own, so a batch that
    Spark runs again after a failure (same id, same records) rewrites the same version."""

    def __init__(self, spark, job, model):
        self.spark, self.model = spark, model
        self.home = os.path.join(job["directory"], model["name"])
        self.state_dir = os.path.join(self.home, "state")
        self.checkpoint = os.path.join(self.home, "checkpoint")
        self.servers = job["bootstrap_servers"]
        columns = model["columns"]
        key = [("key", "string")] if model["keyed"] else []
        self.state_schema = row_ddl(key + [tuple(c) for c in columns])

    def versions(self):
        if not os.path.isdir(self.state_dir):
            return []
        return sorted(int(v) for v in os.listdir(self.state_dir)
                      if os.path.exists(os.path.join(self.state_dir, v, "_SUCCESS")))

    def state(self, before=None):
        done = [v for v in self.versions() if before is None or v < before]
        if not done:
            return self.spark.createDataFrame([], self.state_schema)
        return self.spark.read.schema(self.state_schema).parquet(
            os.path.join(self.state_dir, str(done[-1])))

    def apply_batch(self, batch, batch_id):
        model = self.model
        previous = self.state(before=batch_id)
        batch.persist()  # read from Kafka once, though the apply uses the batch twice
        try:
            if model["keyed"]:
                new = apply_keyed(previous, batch, model["columns"],
                                  model["format"] == "debezium-json")
            else:
                new = apply_keyless(previous, batch, model["columns"])
            new.write.mode("overwrite").parquet(os.path.join(self.state_dir, str(batch_id)))
        finally:
            batch.unpersist()

    def sync(self):
        query = (read_log(self.spark, self.servers, self.model["topic"])
                 .writeStream.foreachBatch(self.apply_batch)
                 .option("checkpointLocation", self.checkpoint)
                 .trigger(availableNow=True)
                 .start())
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        progress = query.recentProgress
        (self.state().drop("key").coalesce(1).write.mode("overwrite")
         .option("timestampFormat", "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX")
         .option("ignoreNullFields", "false")
         .json(os.path.join(self.home, "result")))
        return {"records": sum(p["numInputRows"] for p in progress),
                "batches": sum(1 for p in progress if p["numInputRows"])}


def main(job_path):
    with open(job_path) as f:
        job = json.load(f)
    spark = (SparkSession.builder.master("local[2]").appName("spark-kafka-follow")
             .config("spark.jars", ",".join(job["jars"]))
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.warehouse.dir", os.path.join(job["directory"], "warehouse"))
             # a reader's zone other than the writer's: the records' instants must not care
             .config("spark.sql.session.timeZone", "Asia/Kolkata")
             .getOrCreate())
    followers = [Follower(spark, job, m) for m in job["models"]]
    try:
        for line in sys.stdin:
            if line.strip() != "sync":
                continue
            try:
                # the queries of the models run side by side, as separate streams would
                with ThreadPoolExecutor(len(followers)) as pool:
                    done = dict(zip((f.model["name"] for f in followers),
                                    pool.map(Follower.sync, followers)))
                answer = {"ok": True, "models": done}
            except Exception:
                answer = {"ok": False, "error": traceback.format_exc()}
            ANSWERS.write(json.dumps(answer) + "\n")
            ANSWERS.flush()
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
