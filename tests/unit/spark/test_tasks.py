"""spark/tasks.py: one Spark task per input piece, through the DataFrame API (no RDD): the task
function mapInPandas runs, fed as Spark would feed it, with a fake session."""
import pandas as pd
from pyspark.sql.types import LongType, StringType, StructField, StructType

from dbt.adapters.logstore.spark import tasks

SCHEMA = StructType([StructField("key", StringType()), StructField("off", LongType())])


class FakeFrame:
    def __init__(self, rows, schema):
        self.rows, self.schema, self.partitions, self.task = rows, schema, None, None

    def repartition(self, n):
        self.partitions = n
        return self

    def mapInPandas(self, task, schema):
        self.task, self.out_schema = task, schema
        return self


class FakeSpark:
    def createDataFrame(self, rows, schema):
        self.frame = FakeFrame(rows, schema)
        return self.frame


def test_a_task_per_piece_and_its_rows_in_batches(monkeypatch):
    monkeypatch.setattr(tasks, "ROWS_PER_BATCH", 2)
    seen = []

    def work(mine):
        for part, lo, hi in mine:
            seen.append((type(part), part, lo, hi))
            yield from ((None if o == lo else f"k{o}", o) for o in range(lo, hi))

    spark = FakeSpark()
    frame = tasks.rows_by_task(spark, [(0, 0, 3), (1, 5, 6)], "part bigint, lo bigint, hi bigint",
                               work, SCHEMA)
    assert spark.frame.partitions == 2 and frame.out_schema is SCHEMA
    # Spark hands a task its partition's pieces as pandas frames (numpy values)
    out = list(frame.task(iter([pd.DataFrame([(0, 0, 3)], columns=["part", "lo", "hi"])])))
    assert seen == [(int, 0, 0, 3)]  # plain Python ints, as the pieces were made
    assert [list(f.columns) for f in out] == [["key", "off"], ["key", "off"]]
    assert [tuple(r) for f in out for r in f.itertuples(index=False)] == [(None, 0), ("k1", 1), ("k2", 2)]


def test_no_pieces_is_one_empty_partition():
    spark = FakeSpark()
    tasks.rows_by_task(spark, [], "part bigint, lo bigint, hi bigint", lambda mine: iter(()), SCHEMA)
    assert spark.frame.partitions == 1 and spark.frame.rows == []
