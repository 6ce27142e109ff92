"""A Kafka broker killed (SIGKILL) in the middle of a mirror, on a three-node Apache Kafka cluster
of this module's own (tests/kafka_cluster.py): replication 3, min.insync.replicas 2, acks=all.

The run is held right after the first records of its change set (LOGSTORE_FAULT_PAUSE
mid_log_write, dbt/adapters/logstore/faults.py), so its transaction is open; the broker that
coordinates that transaction is killed, and the run goes on with the rest of its records. It
must either complete (the producer finds the new coordinator and partition leaders) or fail
with a message in plain words; the broker comes back, and the next run must leave a log that
replays to the table with every snapshot confirmed once and no confirmed record lost."""
import json
import time
import uuid
from pathlib import Path

import pytest

from tests.functional.contract import read_topic, replay_confirmed, wait_for_confirmations
from tests.functional.fault_project import FaultProject, dbt, write_project
from tests.kafka_cluster import KafkaCluster

# Keyed, three partitions, three replicas. Run 2 inserts 60k rows (a mirror of seconds on this
# machine); run 1 and run 3's own change are small: every 100th id changes version with the step.
MODEL = """
{{ config(materialized='table', unique_key='id', log_system='kafka', log_system_partitions=3,
          log_system_replication=3, kafka_topic='killed_' ~ var('suffix')) }}
select id, case when id % 100 = 0 then concat('v', cast({{ var('step') }} as string))
                else 'base' end as version
from range({{ var('rows') }}) as r(id)
"""
BIG_ROWS = 60_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Three nodes of this module's own: the test kills one."""
    kafka = KafkaCluster(tmp_path_factory.mktemp("killed_kafka"), nodes=3)
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.stop()


def _admin(cluster: KafkaCluster):
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10000)


def _leaders(cluster: KafkaCluster, topic: str) -> dict:
    admin = _admin(cluster)
    try:
        (description,) = admin.describe_topics([topic])
        return {p["partition_index"]: p["leader_id"] for p in description["partitions"]}
    finally:
        admin.close()


def _coordinator(cluster: KafkaCluster, transactional_id: str):
    """The node coordinating the held run's transaction and the transaction's state."""
    admin = _admin(cluster)
    try:
        description = admin.describe_transactions([transactional_id])[transactional_id]
        return description.coordinator_id, str(getattr(description.state, "value", description.state))
    finally:
        admin.close()


def _wait_until_paused(folder: Path, process, limit: float = 240.0) -> None:
    deadline = time.monotonic() + limit
    while not (folder / "reached").exists():
        if process.poll() is not None:
            pytest.fail(f"the held run ended before its pause point:\n{process.stdout.read()[-3000:]}")
        assert time.monotonic() < deadline, "the held run never reached its pause point"
        time.sleep(0.2)


def _confirmed_records_present(messages, confirmations) -> None:
    """acks=all: every record a confirmation states is still in the log, at the offsets it
    states, on the cluster with the killed broker back (SIGKILL lost what it had not flushed)."""
    by_position = {(m.partition, m.offset): m for m in messages}
    for c in confirmations:
        ranges = {int(p): (first, last) for p, (first, last) in c["offsets"].items()}
        for partition, (first, last) in ranges.items():
            for offset in (first, last):  # a range's ends are records (commit markers lie between)
                m = by_position.get((partition, offset))
                assert m is not None and m.header("logstore.attempt") == c["attempt"], (
                    f"snapshot {c['snapshot']}: offset {partition}:{offset} lost")
        mine = [m for m in messages if m.header("logstore.attempt") == c["attempt"]]
        inside = [m for m in mine if m.partition in ranges
                  and ranges[m.partition][0] <= m.offset <= ranges[m.partition][1]]
        assert len(inside) == len(mine) == c["records"], (
            f"snapshot {c['snapshot']}: {c['records']} records confirmed, {len(mine)} in the log, "
            f"{len(inside)} within the confirmed offsets")


def test_broker_killed_mid_mirror_then_restarted_log_stays_exact(cluster, spark_thrift_server, tmp_path_factory):
    root = tmp_path_factory.mktemp("killed_project")
    schema = f"killed_{uuid.uuid4().hex[:8]}"
    project = FaultProject(root, schema, spark_thrift_server)
    # Bounded waits: a failure shows within the test's time, not after kafka-python's 2 minutes;
    # 25 s is well past Kafka's own failover (broker.session.timeout.ms 9 s, then new leaders).
    write_project(root, schema, cluster.bootstrap_servers, spark_thrift_server,
                  kafka_properties={"delivery.timeout.ms": "25000", "request.timeout.ms": "10000"},
                  models={"killed": MODEL})
    suffix = uuid.uuid4().hex[:8]
    topic, bootstrap = f"killed_{suffix}", cluster.bootstrap_servers
    transactional_id = f"dbt-logstore.{schema}.killed"  # names.transactional_id of the table

    def run(step: int, rows: int, **kwargs):
        return dbt(root, "run", "-s", "killed", "--vars",
                   json.dumps({"step": step, "rows": rows, "suffix": suffix}), **kwargs)

    first = run(1, 1000)
    assert first.returncode == 0, first.stdout[-3000:]

    # run 2 is held with its transaction open after its first records ...
    pause = tmp_path_factory.mktemp("killed_pause")
    held = run(2, BIG_ROWS, pause=f"mid_log_write:{pause}", wait=False)
    try:
        _wait_until_paused(pause, held)
        time.sleep(1)  # linger: the first records reach the partitions, which join the transaction
        victim, state = _coordinator(cluster, transactional_id)
        leaders = _leaders(cluster, topic)
        assert state == "Ongoing", f"the held run's transaction is {state}"
        print(f"\nkilling node {victim}: coordinator of {transactional_id} (transaction {state}); "
              f"partition leaders of {topic}: {leaders} (node {victim} leads "
              f"{sorted(p for p, n in leaders.items() if n == victim) or 'none'})")
        cluster.kill(victim)  # ... when the broker coordinating it dies
        killed_at = time.monotonic()
        (pause / "release").touch()
        output, _ = held.communicate(timeout=420)
    finally:
        (pause / "release").touch()
        if held.poll() is None:
            held.kill()
            held.communicate()
    out = " ".join(output.split())
    print(f"run 2 ended {time.monotonic() - killed_at:.1f} s after the kill, exit code "
          f"{held.returncode}")
    print(f"partition leaders after the kill: {_leaders(cluster, topic)}")

    if held.returncode == 0:
        completed = True
        # the mirror went on past the dead node: its records and confirmation are in the log
        lines = [l.strip() for l in output.splitlines() if "mirrored" in l and "snapshot 2" in l]
        assert lines, out[-3000:]
        print(f"run 2 COMPLETED despite the kill: {lines[0]}")
    else:
        completed = False
        # a clear message: the model, the topic, what the table holds and how it is settled
        print("run 2 FAILED: " + next((l.strip() for l in output.splitlines() if "Model 'killed'" in l), out[-600:]))
        assert held.returncode == 1, out[-3000:]
        assert "Model 'killed'" in out and f"'{topic}'" in out, out[-3000:]
        assert "The table's change is committed" in out and "logstore_recover" in out, out[-3000:]
        assert "Traceback" not in output, output[-3000:]
        # the cause in plain words (kafka.errors.write_cause), not only the client's exception
        assert "did not acknowledge the records in time" in out or \
            "Kafka aborted this run's transaction" in out, out[-3000:]

    # the broker comes back (with whatever it had not flushed lost: SIGKILL)
    cluster.restart(victim)
    third = run(3, BIG_ROWS)
    text = " ".join(third.stdout.split())
    assert third.returncode == 0, text[-3000:]
    if not completed:  # the next run settles the change set the failed run left, once
        assert "re-sending change set" in text or "already confirmed" in text, text[-3000:]
    print("run 3: " + next(l.strip() for l in third.stdout.splitlines() if "mirrored" in l))

    confirmations = wait_for_confirmations(bootstrap, topic, 3)
    assert [c["snapshot"] for c in confirmations] == [1, 2, 3], "each snapshot confirmed once"
    types, table = project.rows("killed")
    assert sum(table.values()) == BIG_ROWS
    assert replay_confirmed(bootstrap, topic, types, table) == table
    _confirmed_records_present(read_topic(bootstrap, topic), confirmations)
    assert project.tables() == {"killed"}, "no change, staging or lock table left behind"
