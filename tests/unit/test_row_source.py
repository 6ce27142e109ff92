"""The row source's session helpers, with a fake SparkSession (no JVM)."""
import threading

from dbt.adapters.logstore import row_source


class FakeFrame:
    def __init__(self, calls):
        self.calls = calls

    def mapInArrow(self, function, schema):
        self.calls.append(("mapInArrow", function, schema))
        return self

    def collect(self):
        self.calls.append(("collect",))
        return []


class FakeContext:
    pass


class FakeSpark:
    def __init__(self):
        self.calls = []
        self.sparkContext = FakeContext()
        self.done = threading.Event()

    def range(self, *args, **kwargs):
        self.calls.append(("range", args, kwargs))
        frame = FakeFrame(self.calls)
        collect = frame.collect

        def collect_and_signal():
            try:
                return collect()
            finally:
                self.done.set()
        frame.collect = collect_and_signal
        return frame


def test_the_python_worker_starts_in_the_background_once_per_spark_context():
    spark = FakeSpark()
    row_source.start_python_worker(spark)
    assert spark.done.wait(5)
    assert [c[0] for c in spark.calls] == ["range", "mapInArrow", "collect"]
    function = spark.calls[1][1]
    assert list(function(iter([object()]))) == []  # a task that yields nothing
    row_source.start_python_worker(spark)  # the same context: nothing more
    assert len(spark.calls) == 3
    other = FakeSpark()
    row_source.start_python_worker(other)
    assert other.done.wait(5)


def test_a_failed_head_start_is_quiet():
    class Broken(FakeSpark):
        def range(self, *args, **kwargs):
            self.done.set()
            raise RuntimeError("no Python worker here")

    spark = Broken()
    row_source.start_python_worker(spark)  # no exception, in this thread or the other
    assert spark.done.wait(5)


def test_tables_the_mirror_reads_are_written_in_bounded_files():
    assert row_source.table_options() == f"options ('maxRecordsPerFile' = '{row_source.ROWS_PER_FILE}')"
    assert 0 < row_source.ROWS_PER_FILE <= row_source.ARROW_FROM
