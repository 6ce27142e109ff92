"""Exactly-once under failure: the dbt process is killed at each step of the commit protocol
(LOGSTORE_FAULT_INJECT, see dbt/adapters/logstore/faults.py), then a normal run follows. After
every normal run the log, read by the rules of docs/log-format.md, replays to the table, no
change is lost and none is delivered twice. dbt runs in subprocesses here, because a crash must
kill the process, so they use their own Spark metastore; the tables are read from their files."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dbt.adapters.logstore.faults import ENV, INCREMENTAL_POINT, POINTS
from tests.functional.contract import confirmed, read_topic, replay, spark

# A keyless log: a change delivered twice would leave an extra row, so replay catches it.
MODEL = """
{{ config(materialized='table', log_system='kafka', kafka_topic='faults_' ~ var('suffix')) }}
select id, concat('v', cast({{ var('step') }} as string)) as version
from range({{ var('step') }} % 4 + 2) as r(id)
"""
APPENDED = """
{{ config(materialized='incremental', incremental_strategy='append', log_system='kafka',
          kafka_topic='appended_' ~ var('suffix')) }}
select {{ var('step') }} as step, id from range(3) as r(id)
"""
BIG = """
{{ config(materialized='table', unique_key='id', log_system='kafka', kafka_topic='big_' ~ var('suffix')) }}
select 1 as id, repeat('x', {{ var('size', 10) }}) as payload
"""


@pytest.fixture(scope="module")
def subprocess_project(tmp_path_factory, kafka_bootstrap_servers):
    root = tmp_path_factory.mktemp("faults_project")
    (root / "models").mkdir()
    (root / "models" / "flaky.sql").write_text(MODEL)
    (root / "models" / "big.sql").write_text(BIG)
    (root / "models" / "appended.sql").write_text(APPENDED)
    (root / "dbt_project.yml").write_text(yaml.safe_dump(
        {"name": "faults", "version": "1.0", "profile": "faults", "config-version": 2}))
    (root / "profiles.yml").write_text(yaml.safe_dump({"faults": {"target": "dev", "outputs": {"dev": {
        "type": "logstore", "method": "session", "schema": "faults", "threads": 1,
        "kafka_bootstrap_servers": kafka_bootstrap_servers,
        "session_dir": str(root / "spark"),
        "server_side_parameters": {"spark.sql.shuffle.partitions": "2",
                                   "spark.sql.session.timeZone": "UTC"}}}}}))
    return root


def dbt(root: Path, *args: str, fault: str = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if fault:
        env[ENV] = fault
    command = [str(Path(sys.executable).parent / "dbt"), *args, "--project-dir", str(root),
               "--profiles-dir", str(root)]
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300)


def table_rows(root: Path, table: str):
    df = spark().read.parquet(str(root / "spark" / "warehouse" / "faults.db" / table))
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    from collections import Counter
    from tests.functional.contract import canonical
    return types, Counter(canonical(r.asDict(recursive=True), types) for r in df.collect())


def test_crash_at_every_step_then_recover(subprocess_project, kafka_bootstrap_servers):
    root, suffix = subprocess_project, "x"
    topic = f"faults_{suffix}"

    def run(step, fault=None):
        return dbt(root, "run", "-s", "flaky", "--vars", json.dumps({"step": step, "suffix": suffix}),
                   fault=fault)

    def check():
        types, table = table_rows(root, "flaky")
        delivered = confirmed(kafka_bootstrap_servers, topic, read_topic(kafka_bootstrap_servers, topic))
        assert replay(delivered, types) == table
        confirmations = [json.loads(m.value) for m in read_topic(kafka_bootstrap_servers, topic + "__logstore_commits")]
        snapshots = [c["snapshot"] for c in confirmations]
        assert snapshots == list(range(1, len(snapshots) + 1)), "each snapshot confirmed once, in order"
        return confirmations

    first = run(1)
    assert first.returncode == 0, first.stdout[-3000:]
    check()
    step = 1
    for point in POINTS:
        step += 1
        crashed = run(step, fault=point)
        assert crashed.returncode == 75, f"{point}: expected the injected crash\n{crashed.stdout[-2000:]}"
        step += 1
        recovered = run(step)
        assert recovered.returncode == 0, f"after {point}:\n{recovered.stdout[-3000:]}"
        confirmations = check()
        if point == "before_table_commit":  # that change never reached the table: never logged
            assert all(c["changeset"] for c in confirmations)
        if point in ("before_log_commit", "mid_log_write", "after_table_commit"):
            assert "re-sending change set" in recovered.stdout, point
        if point == "after_log_commit":  # confirmed but not recorded with the table: adopted
            assert "already confirmed" in recovered.stdout


def test_crash_between_an_incremental_insert_and_its_tag(subprocess_project, kafka_bootstrap_servers):
    """The insert happened but the run died before tagging it: the intent (row counts before
    and after) tells the next run that the change is in the table, so it reaches the log."""
    root, topic = subprocess_project, "appended_z"

    def run(step, fault=None):
        return dbt(root, "run", "-s", "appended", "--vars", json.dumps({"step": step, "suffix": "z"}),
                   fault=fault)

    assert run(1).returncode == 0
    assert run(2, fault=INCREMENTAL_POINT).returncode == 75
    recovered = run(3)
    assert recovered.returncode == 0, recovered.stdout[-3000:]
    assert "re-sending change set" in recovered.stdout
    types, table = table_rows(root, "appended")
    assert sum(table.values()) == 9  # steps 1, 2 and 3
    delivered = confirmed(kafka_bootstrap_servers, topic, read_topic(kafka_bootstrap_servers, topic))
    assert replay(delivered, types) == table


def test_record_larger_than_the_limit_fails_before_the_commit(subprocess_project, kafka_bootstrap_servers):
    root = subprocess_project
    ok = dbt(root, "run", "-s", "big", "--vars", json.dumps({"suffix": "y", "size": 10}))
    assert ok.returncode == 0, ok.stdout[-3000:]
    too_big = dbt(root, "run", "-s", "big", "--vars", json.dumps({"suffix": "y", "size": 2_000_000}))
    out = " ".join(too_big.stdout.split())
    assert too_big.returncode == 1
    assert "Model 'big'" in out and 'row key {"id":1}' in out and "max.request.size" in out
    _, table = table_rows(root, "big")
    assert len(next(iter(table))) < 1000  # the table still holds the small row
