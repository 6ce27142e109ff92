"""Helpers of the fault tests: a dbt project run in subprocesses (a crash must kill the process,
so these runs use their own Spark metastore; their tables are read from their files)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dbt.adapters.logstore.faults import ENV
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




def crash_and_recover(subprocess_project, kafka_bootstrap_servers, points, suffix):
    """A normal run, then for each point: a run killed there, then a normal run, checked."""
    root = subprocess_project
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
    confirmed_so_far = len(check())
    step = 1
    for point in points:
        step += 1
        crashed = run(step, fault=point)
        assert crashed.returncode == 75, f"{point}: expected the injected crash\n{crashed.stdout[-2000:]}"
        step += 1
        recovered = run(step)
        assert recovered.returncode == 0, f"after {point}:\n{recovered.stdout[-3000:]}"
        confirmations = check()
        # a change that never reached the table is never confirmed; one that did is confirmed
        # exactly once (by the crashed run or by the recovery), plus the new run's own change
        expected = 1 if point == "before_table_commit" else 2
        assert len(confirmations) == confirmed_so_far + expected, point
        confirmed_so_far = len(confirmations)
        if point in ("before_log_commit", "mid_log_write", "after_table_commit"):
            assert "re-sending change set" in recovered.stdout, point
        if point == "after_log_commit":  # confirmed but not recorded with the table: adopted
            assert "already confirmed" in recovered.stdout
