"""What a run record says (commit/run_record.py), with dbt's nodes and statuses as plain
values and the control topics faked: the invocation's own confirmations, the latest of the
others, each node's fate; when a record is due."""
from types import SimpleNamespace

from dbt.adapters.logstore.commit import run_record
from dbt.adapters.logstore.commit.snapshots import Snapshot


def node(uid, logged=True, kind="model"):
    return {"unique_id": uid, "name": uid.split(".")[-1], "resource_type": kind, "logged": logged}


def log_of(n):
    return SimpleNamespace(enabled=n["logged"], topic=f"s.{n['name']}", model=n["name"])


def test_each_model_named_with_its_latest_snapshot_and_its_fate():
    run_record.note_confirmed(log_of(node("model.p.a")), "inv",
                              Snapshot(id=4, end_offsets={0: 10}, records=3, generation=2))
    run_record.note_confirmed(log_of(node("model.p.e")), "older-inv",  # another invocation's
                              Snapshot(id=9, end_offsets={0: 90}, records=1))
    nodes = [node("model.p.a"), node("model.p.b"), node("model.p.c"), node("model.p.d"),
             node("model.p.e"), node("model.p.plain", logged=False), node("test.p.t", kind="test")]
    statuses = {"model.p.a": "success", "model.p.b": "error", "model.p.c": "skipped",
                "model.p.e": "success"}
    read = []

    def latest_of(logs):  # one read for all of them
        read.append(sorted(log.model for log in logs))
        return {log.topic: {"snapshot": 7, "end_offsets": {"0": 70}, "generation": 1, "changeset": "x"}
                for log in logs}

    record, logs = run_record.build_run_record("inv", "p", "s", {"which": "run", "select": ["a"]}, "t0",
                                               nodes, statuses, log_of, latest_of)
    did = {m.name: (m.did, m.snapshot) for m in record.models}
    assert did == {"a": ("changed", 4), "b": ("failed", 7), "c": ("skipped", 7),
                   "d": ("not selected", 7), "e": ("unchanged", 7), "plain": ("not logged", None)}
    assert record.model("a").end_offsets == {0: 10} and record.model("a").generation == 2
    assert read == [["b", "c", "d", "e"]]  # the control topics of what it did not confirm, at once
    assert [l.model for l in logs] == ["a", "b", "c", "d", "e"]
    assert record.selection == {"select": ["a"]}


def test_a_record_is_due_once_for_a_command_that_ran_nodes():
    watch = run_record.RunWatch()
    watch.invocation_id, watch.statuses = "inv", {"model.p.a": "success"}
    flags = SimpleNamespace(WHICH="run")
    assert watch.due("inv", flags, None)
    assert not watch.due("inv", flags, "--empty")  # reduced inputs log nothing
    assert not watch.due("inv", SimpleNamespace(WHICH="test"), None)
    assert not watch.due("other", flags, None)
    watch.written = "inv"
    assert not watch.due("inv", flags, None)
    watch.written, watch.statuses = None, {}
    assert not watch.due("inv", flags, None)  # no node ran (compile, a failed parse)


def test_args_from_dbt_flags():
    flags = SimpleNamespace(WHICH="build", SELECT=("a+",), EXCLUDE=(), SELECTOR=None, FULL_REFRESH=True)
    assert run_record.args_of(flags) == {"which": "build", "select": ["a+"], "exclude": [],
                                         "selector": None, "full_refresh": True}


def test_a_record_not_written_says_so_and_what_stands():
    import pytest
    from dbt_common.exceptions import DbtRuntimeError

    from dbt.adapters.logstore.config.log_config import LogConfig
    from dbt.adapters.logstore.log.run_records import RunRecord

    class Down:
        def write_run_record(self, *args):
            raise DbtRuntimeError("Model 'p (run record)': Kafka at 'h:1': unreachable. Check "
                                  "the servers. Nothing was changed.")

    record = RunRecord("inv", "p", "s", "run", {}, "t0", "t1", ())
    log = LogConfig(model="a", system="kafka", topic="s.a", bootstrap_servers="h:1")
    assert run_record.write_run_record(record, [], lambda l: Down()) is None  # nothing logged
    with pytest.raises(DbtRuntimeError) as caught:
        run_record.write_run_record(record, [log], lambda l: Down())
    text = str(caught.value)
    assert "Nothing was changed" not in text and "'s.p__logstore_runs'" in text
    assert "run record of invocation inv was not written" in text and "stands" in text


def test_the_latest_confirmation_is_the_first_of_the_highest_snapshot():
    import json

    from dbt.adapters.logstore.log.log_system import LogRecord

    def record(snapshot, attempt):
        return LogRecord(0, 0, b"t", json.dumps({"snapshot": snapshot, "attempt": attempt}).encode(), ())

    class System:
        def control_tails(self, logs):
            return {"s.a": [record(3, "x"), record(4, "y"), record(4, "z")], "s.b": []}

    logs = [log_of(node("model.p.a")), log_of(node("model.p.b"))]
    found = run_record.latest_confirmations(logs, lambda log: SimpleNamespace(system=System()))
    assert found["s.a"]["attempt"] == "y" and found["s.b"] is None
    assert run_record.latest_confirmations([], None) == {}


def test_a_microbatch_models_batches_count_together():
    log = log_of(node("model.p.daily"))
    run_record.note_confirmed(log, "inv2-batch-20240101", Snapshot(id=5, end_offsets={0: 5}, records=4))
    run_record.note_confirmed(log, "inv2-batch-20240102", Snapshot(id=6, end_offsets={0: 5}, records=0))
    record, _ = run_record.build_run_record("inv2", "p", "s", {"which": "run"}, "t0", [node("model.p.daily")],
                                            {"model.p.daily": "success"}, log_of, lambda logs: {})
    assert (record.model("daily").did, record.model("daily").snapshot) == ("changed", 6)
