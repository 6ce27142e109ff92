"""The parallel mirror without Spark or a broker: writers of a parallel attempt, the driver's
confirmation, the readers' rule for writers, the option's validation, the Kafka writer parts."""
import json

import pytest

from dbt.adapters.logstore import names
from dbt.adapters.logstore.names import H_ATTEMPT, H_WRITER
from dbt.adapters.logstore.commit.snapshots import (
    Attempt,
    Snapshot,
    write_change_set_parallel,
    write_task_share,
)
from dbt.adapters.logstore.log.kafka.log_system import KafkaLogSystem
from dbt.adapters.logstore.log.kafka.python_writer import KafkaLogWriter
from dbt.adapters.logstore.names import task_writer_id
from dbt.adapters.logstore.config.log_config import LogConfigError, ModelRef, resolve_log_config
from dbt.adapters.logstore.log.control_records import Confirmation
from tests.unit.commit.test_log_snapshots import (  # noqa: F401
    CHANGESET, LOG, ROWS, TABLE, FakeWriter, fake_system, records_of,
)
from tests.unit.log.kafka.test_kafka_log import (  # noqa: F401
    FakeConsumer,
    confirmation,
    encoded,
    fake_consumer,
    fake_producer,
    make_log,
)


class TaskWriter(FakeWriter):
    """A fake writer that also takes the confirmation-less commit of a task's share."""

    def commit(self, confirmation):
        if confirmation is not None:
            return super().commit(confirmation)
        self.committed += 1
        return self.result


@pytest.fixture
def writers(fake_system, monkeypatch):
    start = {}  # partition -> next offset, shared: the writers append to one log

    def open_writer(self, log, writer_id):
        writer = TaskWriter(log, writer_id, start=start, partition_of=lambda key, route: key[-2] % 2)
        writer.next_offsets = start  # one offset sequence per partition for all writers
        fake_system.writers.append(writer)
        return writer

    monkeypatch.setattr(fake_system, "open_writer", open_writer)
    return fake_system


def _tasks(shares, fail=False):
    def run(attempt):
        out = [write_task_share(attempt, i, 0, records_of(rows)(attempt)) for i, rows in enumerate(shares)]
        if fail:
            raise RuntimeError("a task failed")
        return out
    return run


def test_parallel_attempt_is_written_by_tasks_and_confirmed_by_the_driver(writers):
    previous = Snapshot(id=4, end_offsets={0: 10, 5: 3})
    snapshot = write_change_set_parallel(LOG, TABLE, _tasks([ROWS[:2], ROWS[2:]]), previous, CHANGESET)
    coordinator, task0, task1 = writers.writers
    # the table's own writer confirms; each task has its own, derived from the table's
    assert coordinator.writer_id == "analytics.orders"
    assert [task0.writer_id, task1.writer_id] == ["analytics.orders.task-0", "analytics.orders.task-1"]
    assert task_writer_id(TABLE.writer_id, 7) == "analytics.orders.task-7"
    assert task0.committed == task1.committed == 1 and task0.confirmation is None
    assert coordinator.sent == []  # the driver writes no data record
    # every record: the four headers plus its writer; one attempt for all tasks
    headers = [dict(h) for w in (task0, task1) for h in w.headers]
    assert {h[H_ATTEMPT] for h in headers} == {snapshot.attempt.encode()}
    # (task 1's delete is followed by its tombstone, written by the same task)
    assert [h[H_WRITER] for h in headers] == [b"task-0.0", b"task-0.0", b"task-1.0", b"task-1.0"]
    assert all(h["logstore.snapshot"] == b"5" for h in headers)
    key, value = coordinator.confirmation
    confirmed = json.loads(value)
    assert key == b"analytics.orders"
    assert confirmed["records"] == 4 and confirmed["snapshot"] == 5
    # keys {"id":1}, {"id":3} -> partition 1; {"id":2} -> partition 0 (the fake partitioner);
    # task 1 writes the delete of {"id":3} and its tombstone
    assert confirmed["writers"] == {"task-0.0": {"0": [0, 0], "1": [0, 0]}, "task-1.0": {"1": [1, 2]}}
    assert confirmed["offsets"] == {"0": [0, 0], "1": [0, 2]}
    assert confirmed["end_offsets"] == {"0": 1, "1": 3, "5": 3}
    assert snapshot.id == 5 and snapshot.records == 4


def test_a_failed_task_aborts_the_attempt_unconfirmed(writers):
    with pytest.raises(RuntimeError, match="a task failed"):
        write_change_set_parallel(LOG, TABLE, _tasks([ROWS], fail=True), Snapshot(), CHANGESET)
    coordinator = writers.writers[0]
    assert coordinator.aborted == 1 and coordinator.confirmation is None


def test_a_task_that_fails_aborts_its_own_share(writers):
    attempt = Attempt.new(LOG, TABLE, Snapshot(), CHANGESET)
    writers.writer_options = {}

    def broken():
        yield ROWS[0]
        raise RuntimeError("spark lost the partition")

    with pytest.raises(RuntimeError, match="lost"):
        write_task_share(attempt, 3, 1, records_of(broken())(attempt))
    (task,) = writers.writers
    assert task.writer_id == "analytics.orders.task-3" and task.aborted == 1 and task.committed == 0


def confirmed_ranges(confirmation):
    """What one control record confirms: per (attempt, writer), {partition: (first, last)}."""
    return Confirmation.from_json({"table": "", "snapshot": 0, **confirmation}).ranges()


def test_readers_deliver_a_parallel_attempt_by_writer():
    conf = {"attempt": "a1", "offsets": {"0": [0, 9]},
            "writers": {"task-0.1": {"0": [0, 3]}, "task-1.0": {"0": [6, 9]}}}
    ranges = confirmed_ranges(conf)
    # task 0's first attempt (task-0.0, offsets 4-5) was retried: not confirmed, not delivered
    assert ranges == {("a1", "task-0.1"): {0: (0, 3)}, ("a1", "task-1.0"): {0: (6, 9)}}
    assert ("a1", "task-0.0") not in ranges and ("a1", None) not in ranges
    assert confirmed_ranges({"attempt": "a2", "offsets": {"1": [4, 5]}}) == {("a2", None): {1: (4, 5)}}


# --- the option ------------------------------------------------------------------------------

REF = ModelRef(name="orders", schema="analytics", alias="orders", materialized="table")


def resolve(**raw):
    return resolve_log_config(REF, {"log.system": "kafka", "unique_key": "id", **raw},
                              profile_bootstrap_servers="k:9092")


def test_parallelism_defaults_to_one_and_takes_both_spellings():
    assert resolve().parallelism == 1
    assert resolve(**{"log.mirror.parallelism": 4}).parallelism == 4
    assert resolve(log_mirror_parallelism="8").parallelism == 8


@pytest.mark.parametrize("value", [0, -1, "two", 1025, "1.5", True])
def test_parallelism_errors_name_model_key_and_allowed_values(value):
    with pytest.raises(LogConfigError) as err:
        resolve(**{"log.mirror.parallelism": value})
    message = str(err.value)
    assert "Model 'orders'" in message and "'log.mirror.parallelism'" in message
    assert "an integer from 1 to 1024" in message


def test_parallelism_spellings_must_agree():
    with pytest.raises(LogConfigError, match="conflicts"):
        resolve(**{"log.mirror.parallelism": 2, "log_mirror_parallelism": 3})


def test_parallelism_is_not_stored_with_the_table():
    assert "log.mirror.parallelism" not in resolve(log_mirror_parallelism=2).table_properties()


# --- the Kafka writer's parts ----------------------------------------------------------------


def test_a_share_commits_without_a_confirmation(fake_producer):
    log = make_log(consistency="transactional")
    writer = KafkaLogWriter(log, "analytics.orders.task-2")
    writer.send(b'{"id":1}', b"{}", route=b"")
    result = writer.commit(None)
    (producer,) = fake_producer.instances
    assert producer.config["transactional_id"] == "dbt-logstore.analytics.orders.task-2"
    assert [s.topic for s in producer.sent] == ["analytics.orders"]  # no control record
    assert producer.calls[-2:] == ["commit_transaction", "close"]
    assert result.records == 1


def test_recovery_fences_the_tasks_of_a_parallel_log(fake_consumer, fake_producer):
    fake_consumer.records = encoded(confirmation())
    log = make_log(consistency="transactional", parallelism=3)
    KafkaLogSystem().find_confirmation(log, "analytics.orders", "run-4")
    assert [p.config["transactional_id"] for p in fake_producer.instances] == [
        "dbt-logstore.analytics.orders"] + [f"dbt-logstore.analytics.orders.task-{i}" for i in range(3)]
    assert all(p.calls == ["init_transactions", "close"] for p in fake_producer.instances)


def test_attempt_pickles_for_spark_tasks():
    import pickle

    attempt = Attempt.new(LOG, TABLE, Snapshot(id=2), CHANGESET)
    assert pickle.loads(pickle.dumps(attempt)) == attempt
    assert attempt.snapshot_id == 3 and len(attempt.attempt) == 32
    assert names.H_WRITER == "logstore.writer"


class FailingFrame:
    """A Spark DataFrame whose job fails with `error` (as collect() raises a task's error)."""

    def __init__(self, error):
        self.error = error

    def sql(self, query):
        return self

    def repartition(self, parallelism):
        return self

    def mapInArrow(self, function, schema):
        return self

    def collect(self):
        raise self.error


def _attempt():
    return Attempt.new(LOG, TABLE, Snapshot(), CHANGESET)


def test_a_task_whose_write_a_lost_node_broke_off_makes_an_interrupted_attempt():
    from dbt.adapters.logstore.commit.parallel_mirror import spark_tasks
    from dbt.adapters.logstore.log.log_system import LogWriteInterrupted

    # Spark's text of a failed Python task carries the task's traceback
    error = RuntimeError("Job aborted due to stage failure: ... PythonException: Traceback ...\n"
                         "dbt.adapters.logstore.log.log_system.LogWriteInterrupted: Model "
                         "'orders_model': writing to Kafka topic 'analytics.orders' failed")
    with pytest.raises(LogWriteInterrupted, match="Model 'orders_model': a Spark task's write"):
        spark_tasks(FailingFrame(error), "changes", 2)(_attempt())
    other = RuntimeError("Job aborted due to stage failure: ... MSG_SIZE_TOO_LARGE")
    with pytest.raises(RuntimeError, match="MSG_SIZE_TOO_LARGE"):
        spark_tasks(FailingFrame(other), "changes", 2)(_attempt())
