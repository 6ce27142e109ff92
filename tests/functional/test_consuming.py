"""The consuming side from the command line, against a Spark Thrift Server and the broker:
`dbt-logstore tail MODEL` from each start point (the model resolved through the dbt project),
the hybrid read, following new changes, and `dbt-logstore status` noticing a table/log
disagreement made on purpose. dbt and the CLI run as subprocesses, as a user runs them."""
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.functional.contract import rows_state
from tests.functional.fault_project import dbt, write_project
from tests.functional.test_downstream import ORDERS

CLI = str(Path(sys.executable).parent / "dbt-logstore")


def tail(root, *args, timeout=120):
    result = subprocess.run([CLI, "tail", "orders", "--json", "--project-dir", str(root), *args],
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines()]


def apply(rows, changes):
    """A consumer: keyed upserts and deletes by id."""
    state = {r["id"]: r for r in rows}
    for c in changes:
        if c["op"] == "d":
            state.pop(c["key"]["id"])
        else:
            state[c["key"]["id"]] = c["after"]
    return list(state.values())


@pytest.fixture(scope="module")
def logged(tmp_path_factory, kafka_bootstrap_servers, spark_thrift_server):
    """The orders model run three times; the table's rows after each snapshot."""
    root = tmp_path_factory.mktemp("consuming_project")
    schema = f"consuming_{uuid.uuid4().hex[:8]}"
    # an upsert log (json by key, deletes as tombstones): the one tail --normalize exists for
    orders = ORDERS.replace("log_system='kafka'", f"log_system='kafka', kafka_topic='orders_{schema}', "
                                                  f"log_format='json'")
    write_project(root, schema, kafka_bootstrap_servers, spark_thrift_server, models={"orders": orders})
    snapshots, times = {}, {}
    for step in (1, 2, 3):
        times[step] = int(time.time() * 1000)
        result = dbt(root, "run", "--vars", json.dumps({"step": step}))
        assert result.returncode == 0, result.stdout[-3000:]
        snapshots[step] = spark_thrift_server.table(f"{schema}.orders")
    return root, schema, snapshots, times


def same_rows(types, a, b):
    return rows_state(types, a) == rows_state(types, b)


def test_tail_from_each_start_point(logged):
    root, schema, snapshots, times = logged
    types, final = snapshots[3]
    everything = tail(root)
    assert {c["snapshot"] for c in everything} == {1, 2, 3}
    assert same_rows(types, apply([], everything), final)
    # from snapshot N: the table as of N plus the changes after it is the table now
    for n in (1, 2, 3):
        after_n = tail(root, "--from", f"snapshot:{n}")
        assert {c["snapshot"] for c in after_n} == set(range(n + 1, 4))
        assert same_rows(types, apply(snapshots[n][1], after_n), final), n
    assert tail(root, "--from", "latest") == []
    # from a time: the snapshots committed at or after it
    since_3 = tail(root, "--from", f"timestamp:{times[3]}")
    assert {c["snapshot"] for c in since_3} == {3}
    assert same_rows(types, apply(snapshots[2][1], since_3), final)


def test_tail_normalize_gives_real_update_pairs(logged):
    root, _, snapshots, _ = logged
    types, final = snapshots[3]
    raw = tail(root)
    # an upsert log: rows by key, no before images, no updates as such
    assert {c["op"] for c in raw} == {"c", "d"} and all(c["before"] is None for c in raw)
    normalized = tail(root, "--normalize")
    assert {c["op"] for c in normalized} == {"c", "u", "d"}
    assert same_rows(types, apply([], normalized), final)
    state = {}
    for c in normalized:  # every update and delete carries the row it replaces
        key = c["key"]["id"]
        if c["op"] == "c":
            assert key not in state
        else:
            assert c["before"] == state[key], c
        if c["op"] == "u":
            assert c["before"] != c["after"]
        if c["op"] == "d":
            del state[key]
        else:
            state[key] = c["after"]


def test_hybrid_read_is_the_table_then_its_changes(logged, spark_thrift_server):
    root, schema, snapshots, _ = logged
    types, final = snapshots[3]
    hybrid = tail(root, "--from", "latest-full")
    assert {c["op"] for c in hybrid} == {"r"} and {c["snapshot"] for c in hybrid} == {3}
    assert same_rows(types, apply([], hybrid), final)

    # with --follow, the next commit's changes arrive after the table's rows, none twice
    follower = subprocess.Popen([CLI, "tail", "orders", "--json", "--from", "latest-full",
                                 "--follow", "--project-dir", str(root)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = [json.loads(follower.stdout.readline()) for _ in range(len(final))]
        assert {c["op"] for c in seen} == {"r"}
        result = dbt(root, "run", "--vars", json.dumps({"step": 1}))  # back to step 1's rows
        assert result.returncode == 0, result.stdout[-3000:]
        step_1 = snapshots[1][1]
        expected = spark_thrift_server.table(f"{schema}.orders")[1]
        assert same_rows(types, expected, step_1)
        rows = apply([], seen)
        while not same_rows(types, rows, step_1):
            change = json.loads(follower.stdout.readline())
            assert change["snapshot"] == 4
            rows = apply(rows, [change])
    finally:
        follower.terminate()
        follower.wait(timeout=30)


def test_status_reports_agreement_and_a_disagreement_made_on_purpose(logged, spark_thrift_server):
    root, schema, _, _ = logged

    def status(*args):
        result = subprocess.run([CLI, "status", "--json", "--project-dir", str(root), *args],
                                capture_output=True, text=True, timeout=180)
        assert result.returncode in (0, 1), result.stderr[-3000:]
        (line,) = result.stdout.splitlines()
        return result.returncode, json.loads(line)

    code, orders = status("--verify")
    assert code == 0 and orders["agree"], orders
    assert orders["model"] == "orders" and orders["topic"] == f"orders_{schema}"
    assert orders["table_snapshot"] == orders["log_snapshot"] >= 3 and orders["records"] > 0

    # a row written to the table behind dbt's back: the log no longer replays to the table
    spark_thrift_server.query(f"insert into {schema}.orders values "
                              f"(99, 1.00, 'rogue', timestamp'2024-01-01 00:00:00')")
    code, orders = status()
    assert code == 0, orders  # the metadata still agree ...
    code, orders = status("--verify")
    assert code == 1 and not orders["agree"]  # ... the content does not
    assert "content differs" in orders["problems"][0] and "1 rows only in the table" in orders["problems"][0]

    # a table that claims a snapshot its log never confirmed
    spark_thrift_server.query(f"alter table {schema}.orders set tblproperties "
                              f"('logstore.snapshot.id' = '42')")
    code, orders = status()
    assert code == 1 and any("snapshot 42" in p for p in orders["problems"]), orders
