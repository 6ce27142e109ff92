"""lifecycle/generations.py and the readers' side of generations (start points, replica reset)."""
from dbt.adapters.logstore.log.control_records import Confirmation
from dbt.adapters.logstore.log.lifecycle.generations import (
    Generation, GenerationStart, generations, reachable,
)
from dbt.adapters.logstore.reading.reader import StartPoint, start_after
from dbt.adapters.logstore.reading.replay import ChangeRecord, Normalizer, Replica


def c(snapshot, generation=None, start=None, ts=0):
    return Confirmation("t", snapshot, f"a{snapshot}", {0: (0, 0)}, {0: 1}, ts,
                        generation=generation, generation_start=start)


def test_a_log_written_before_generations_is_one_generation_from_its_start():
    assert generations([c(1), c(2)]) == [Generation(1, 1, {}, 0)]


def test_generations_from_their_confirmations():
    found = generations([c(1, 1, {0: 0}), c(2, 1), c(3, 2, {0: 7}, ts=9)])
    assert found == [Generation(1, 1, {0: 0}, 0), Generation(2, 3, {0: 7}, 9)]
    assert reachable(found, {0: 0}).number == 1  # nothing deleted: from the first
    assert reachable(found, {0: 5}).number == 2
    assert reachable(found, {0: 8}) is None  # the latest copy lost its start


def test_start_points_of_generations():
    confirmations = [c(1, 1, {0: 0}), c(2, 1), c(3, 2, {0: 7}), c(4, 2)]
    assert start_after(confirmations, StartPoint.parse("latest-generation")) == (2, {0: 7})
    assert start_after(confirmations, StartPoint.parse("generation:1")) == (0, {0: 0})
    assert str(StartPoint.parse("generation=2")) == "generation:2"


def test_a_pending_generation_is_read_back_for_its_own_change_set_only():
    start = GenerationStart(3, 8, {0: 40, 1: 12})
    props = start.pending_properties("run-9")
    assert GenerationStart.pending(props, "run-9") == GenerationStart(3, 8, {0: 40, 1: 12})
    assert GenerationStart.pending(props, "run-10") is None


def record(snapshot, key, op="c", generation=None, after=None):
    return ChangeRecord(0, 0, {"id": key}, op, None, after or {"id": key, "v": snapshot}, 0,
                        snapshot, generation)


def test_a_replica_resets_at_a_generation_and_ignores_older_snapshots_after_it():
    replica = Replica()
    for r in [record(1, 1), record(1, 2), record(3, 1, "r", generation=2),
              record(2, 5)]:  # snapshot 2 read late from another partition: superseded
        replica.apply(r)
    assert replica.rows() == [{"id": 1, "v": 3}]


def test_the_normalizer_starts_over_at_a_generation():
    out = list(Normalizer().apply([record(1, 1), record(2, 1, "r", generation=2)]))
    assert [r.op for r in out] == ["c", "r"]  # after the reset, a first image again


def test_a_downstream_read_across_a_new_generation_or_deleted_records_is_refused():
    import pytest

    from dbt.adapters.logstore.reading.reader import ReaderError
    from dbt.adapters.logstore.reading.source_changes import SourcePosition, plan_read

    at_2 = SourcePosition("t", 2, {"0": 1})
    plain = [c(1, 1, {0: 0}), c(2, 1), c(3, 1)]
    plan, _ = plan_read("up", "t", plain, at_2, 3, log_start={0: 0})
    assert (plan.from_snapshot, plan.to_snapshot) == (2, 3)
    with pytest.raises(ReaderError, match="started generation 2 .*--full-refresh"):
        plan_read("up", "t", plain + [c(4, 2, {0: 1})], at_2, 4, log_start={0: 0})
    with pytest.raises(ReaderError, match="deleted by retention: partition 0 now starts at offset 5"):
        plan_read("up", "t", plain, at_2, 3, log_start={0: 5})
