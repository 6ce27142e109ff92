"""lifecycle/identity.py: what a run and plain `status` find of a table's log, from the log's
state and the table's properties (no broker: LogState is data)."""
import json

from dbt.adapters.logstore.log.control_records import confirmation_record
from dbt.adapters.logstore.log.lifecycle.identity import assess, identity_properties, lost_message
from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.commit.snapshots import Snapshot, TableRef
from dbt.adapters.logstore.log.log_system import LogRecord, LogState, WriteResult

LOG = LogConfig(model="orders", system="kafka", topic="shop.orders", bootstrap_servers="b:9092",
                unique_key=("id",))
TABLE = TableRef("shop", "orders")


def confirmation(snapshot, first, last, generation=1, starts=False, ts_ms=None, table=TABLE):
    previous = Snapshot(id=snapshot - 1, end_offsets={0: first})
    result = WriteResult(topic="shop.orders", records=last - first + 1, offsets={0: (first, last + 1)})
    _, value = confirmation_record(LOG, table, snapshot, f"run-{snapshot}", f"a{snapshot}", previous,
                                   result, generation=generation, starts_generation=starts)
    if ts_ms is not None:
        value = json.dumps({**json.loads(value), "ts_ms": ts_ms}).encode()
    return LogRecord(0, snapshot - 1, b"shop.orders", value)


def state(**kw):
    defaults = dict(cluster_id="c1", topic_exists=True, topic_id="t1", control_topic_exists=True,
                    control_topic_id="k1", start_offsets={0: 0}, end_offsets={0: 10},
                    control_records=(confirmation(1, 0, 4, starts=True), confirmation(2, 5, 9)))
    return LogState(**{**defaults, **kw})


def props(**kw):
    base = {**LOG.table_properties(), "logstore.snapshot.id": "2",
            "logstore.snapshot.offsets": '{"0": 10}', "logstore.changeset.committed": "run-2",
            "logstore.changeset.mirrored": "run-2", "logstore.generation": "1",
            **identity_properties(state())}
    return {**base, **kw}


def test_the_same_log_is_not_lost():
    found = assess(LOG, props(), state(), "shop.orders")
    assert not found.lost and found.reachable.number == 1 and not found.due
    assert (found.next_start.number, found.next_start.base) == (2, 2)


def test_a_deleted_or_recreated_topic_is_lost():
    assert "no longer exists" in assess(LOG, props(), state(topic_exists=False), "shop.orders").findings[0]
    found = assess(LOG, props(), state(topic_id="t2", end_offsets={0: 0}), "shop.orders")
    assert "was deleted and created again" in found.findings[0]
    found = assess(LOG, props(), state(control_topic_exists=False, control_records=()), "shop.orders")
    assert "control topic 'shop.orders__logstore_commits' no longer exists" in found.findings[0]
    # the snapshot numbering goes on from the table's, whatever the log lost
    assert (found.next_start.number, found.next_start.base) == (2, 2)


def test_confirmations_held_back_by_an_open_transaction_are_a_note_not_a_loss():
    # the control topic's last records exist but are not readable yet: nothing is proven lost
    only_first = (confirmation(1, 0, 4, starts=True),)
    found = assess(LOG, props(), state(control_records=only_first, control_held_back=(1, 3)),
                   "shop.orders")
    assert not found.lost
    assert "held back by an open transaction" in found.notes[0] and "snapshots 2 to 2" in found.notes[0]
    # read to its end, the same control topic has lost a confirmation
    assert assess(LOG, props(), state(control_records=only_first), "shop.orders").lost
    # held back, but every confirmation the table counts on was read: nothing to note
    assert not assess(LOG, props(), state(control_held_back=(2, 3)), "shop.orders").notes


def test_another_cluster_behind_the_same_servers_is_lost():
    found = assess(LOG, props(), state(cluster_id="c2"), "shop.orders")
    assert "another Kafka cluster" in found.findings[0]


def test_a_table_recorded_before_ids_is_judged_by_its_offsets_and_confirmations():
    legacy = {k: v for k, v in props().items() if not k.startswith("logstore.log.")}
    assert not assess(LOG, legacy, state(topic_id="t9"), "shop.orders").lost
    found = assess(LOG, legacy, state(end_offsets={0: 3}), "shop.orders")
    assert "holds fewer records" in found.findings[0]
    found = assess(LOG, legacy, state(control_records=(confirmation(1, 0, 4, starts=True),)), "shop.orders")
    assert "confirms snapshots up to 1" in found.findings[0]


def test_retention_past_the_latest_copy_is_lost_and_a_later_generation_is_reachable():
    found = assess(LOG, props(), state(start_offsets={0: 3}), "shop.orders")
    assert "deleted records" in found.findings[0] and found.reachable is None
    with_generation = state(end_offsets={0: 20}, start_offsets={0: 12}, control_records=(
        confirmation(1, 0, 4, starts=True), confirmation(2, 5, 9),
        confirmation(3, 10, 14, generation=2, starts=True), confirmation(4, 15, 19, generation=2)))
    found = assess(LOG, props(**{"logstore.snapshot.id": "4", "logstore.snapshot.offsets": '{"0": 20}',
                                 "logstore.generation": "2"}), with_generation, "shop.orders")
    assert found.lost  # the latest copy starts at 10, the topic at 12
    ok = assess(LOG, props(**{"logstore.snapshot.id": "4", "logstore.snapshot.offsets": '{"0": 20}',
                              "logstore.generation": "2"}),
                LogState(**{**with_generation.__dict__, "start_offsets": {0: 7}}), "shop.orders")
    assert not ok.lost and ok.reachable.number == 2 and ok.next_start.number == 3


def test_a_table_without_a_log_record_whose_topic_holds_its_log():
    found = assess(LOG, None, state(), "shop.orders")  # dropped by hand
    assert "already holds a log of this table (snapshots 1 to 2)" in found.findings[0]
    assert (found.next_start.number, found.next_start.base) == (2, 2)  # never snapshot 1 again
    switched_off = {"log.system": "none"}
    assert assess(LOG, switched_off, state(), "shop.orders").lost
    # another table's log in the topic is no log of this one
    assert not assess(LOG, None, state(), "shop.customers").lost
    message = lost_message(LOG, found)
    assert "Nothing was changed" in message and "log.on-lost: restart" in message


def test_a_committed_generation_waits_for_recovery_not_for_a_verdict():
    pending = json.dumps({"changeset": "run-3-start", "generation": 2, "base": 2, "offsets": {}})
    found = assess(LOG, props(**{"logstore.changeset.committed": "run-3-start",
                                 "logstore.generation.pending": pending}),
                   state(topic_exists=False), "shop.orders")
    assert found.finishing and not found.lost


def test_a_generation_falls_due_after_its_interval():
    log = LogConfig(**{**LOG.__dict__, "generation_interval_ms": 1000})
    old = state(control_records=(confirmation(1, 0, 4, starts=True, ts_ms=5_000), confirmation(2, 5, 9)))
    assert not assess(log, props(), old, "shop.orders", now_ms=5_500).due
    assert assess(log, props(), old, "shop.orders", now_ms=6_000).due


def test_a_log_system_that_cannot_observe_its_logs_is_not_judged():
    from dbt.adapters.logstore.log.log_system import LogSystem

    class Blind(LogSystem):
        name = "blind"
        prepare = check = find_confirmation = open_writer = open_reader = None

    unknown = Blind.observe(Blind.__new__(Blind), LOG)
    assert not unknown.known and not assess(LOG, props(), unknown, "shop.orders").lost
