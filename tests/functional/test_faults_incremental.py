"""Exactly-once under failure, part 3: an incremental model killed between its insert and the
tag that records it; and a record larger than Kafka's limit."""
import json
import uuid

from dbt.adapters.logstore.faults import INCREMENTAL_POINT
from tests.functional.contract import replay_confirmed
from tests.functional.fault_project import dbt, subprocess_project  # noqa: F401


def test_crash_between_an_incremental_insert_and_its_tag(subprocess_project, kafka_bootstrap_servers):
    """The insert happened but the run died before tagging it: the intent (row counts before
    and after) tells the next run that the change is in the table, so it reaches the log."""
    root, suffix = subprocess_project.root, uuid.uuid4().hex[:8]  # unique on a long-lived cluster too
    topic = f"appended_{suffix}"

    def run(step, fault=None):
        return dbt(root, "run", "-s", "appended", "--vars", json.dumps({"step": step, "suffix": suffix}),
                   fault=fault)

    assert run(1).returncode == 0
    assert run(2, fault=INCREMENTAL_POINT).returncode == 75
    recovered = run(3)
    assert recovered.returncode == 0, recovered.stdout[-3000:]
    assert "re-sending change set" in recovered.stdout
    types, table = subprocess_project.rows("appended")
    assert sum(table.values()) == 9  # steps 1, 2 and 3
    assert replay_confirmed(kafka_bootstrap_servers, topic, types, table) == table


def test_record_larger_than_the_limit_fails_before_the_commit(subprocess_project, kafka_bootstrap_servers):
    root, suffix = subprocess_project.root, uuid.uuid4().hex[:8]
    too_big = dbt(root, "run", "-s", "big", "--vars", json.dumps({"suffix": suffix, "size": 2_000_000}))
    out = " ".join(too_big.stdout.split())
    assert too_big.returncode == 1
    assert "Model 'big'" in out and 'row key {"id":1}' in out and "max.request.size" in out
    assert "Nothing was changed" in out
    assert "big" not in subprocess_project.tables()  # never committed
