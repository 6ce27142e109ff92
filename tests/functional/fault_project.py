"""Helpers of the fault tests: a dbt project run in subprocesses (a crash must kill the dbt
process) against a Spark Thrift Server; tables are read back over thrift."""
import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import pytest
import yaml

from dbt.adapters.logstore.faults import ENV, PAUSE_ENV, SWAP_POINT
from tests.functional.contract import replay_confirmed, rows_state, wait_for_confirmations
from tests.functional.dbt_helpers import servers_from_env
from tests.functional.dbt_process import long_lived
from tests.functional.kills import wait_until_stopped  # noqa: F401 (the freeze tests' import)
from tests.functional.thrift_server import ThriftServer

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


@dataclass
class FaultProject:
    root: Path
    schema: str
    server: Optional[ThriftServer]  # None: the session method, with its own metastore in root

    @property
    def _warehouse(self) -> Path:
        if self.server is not None:
            return self.server.work_dir / "warehouse" / f"{self.schema}.db"
        return self.root / "spark" / "warehouse" / f"{self.schema}.db"

    def table_dir(self, table: str) -> Path:
        return self._warehouse / table

    def rows(self, table: str) -> Tuple[Dict[str, str], Counter]:
        """A table's column types and canonical rows, read over thrift (or, for the session
        method, whose Derby metastore the subprocesses hold, from the table's files)."""
        if self.server is None:
            from tests.functional.contract import canonical, spark

            df = spark().read.parquet(str(self._warehouse / table))
            types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
            return types, Counter(canonical(r.asDict(recursive=True), types) for r in df.collect())
        types, rows = self.server.table(f"{self.schema}.{table}")
        return types, rows_state(types, rows)

    def tables(self) -> set:
        if self.server is None:
            return {p.name for p in self._warehouse.iterdir() if p.is_dir()}
        return {row[1] for row in self.server.query(f"show tables in {self.schema}")}


def write_project(root: Path, schema: str, bootstrap_servers: str, server: Optional[ThriftServer],
                  kafka_properties: Optional[Dict[str, str]] = None,
                  models: Optional[Dict[str, str]] = None,
                  profile: Optional[Dict[str, Any]] = None,
                  project: Optional[Dict[str, Any]] = None) -> None:
    """A dbt project at `root`; `project`: more of dbt_project.yml (e.g. seeds' configs)."""
    (root / "models").mkdir(exist_ok=True)
    for name, sql in (models or {"flaky": MODEL, "big": BIG, "appended": APPENDED}).items():
        (root / "models" / f"{name}.sql").write_text(sql)
    (root / "dbt_project.yml").write_text(yaml.safe_dump(
        {"name": "faults", "version": "1.0", "profile": "faults", "config-version": 2, **(project or {})}))
    if server is None:  # the session method: a Spark JVM in every dbt process
        method = {"method": "session", "session_dir": str(root / "spark"),
                  "server_side_parameters": {"spark.sql.shuffle.partitions": "2",
                                             "spark.sql.session.timeZone": "UTC"}}
    else:
        method = {"method": "thrift", "host": server.host, "port": server.port,
                  "connect_retries": 5, "connect_timeout": 10, "poll_interval": 1}
    (root / "profiles.yml").write_text(yaml.safe_dump({"faults": {"target": "dev", "outputs": {"dev": {
        "type": "logstore", **method, "schema": schema, "threads": 1,
        "kafka_bootstrap_servers": servers_from_env(bootstrap_servers), "kafka_properties": kafka_properties or {},
        **(profile or {})}}}}))


@pytest.fixture(scope="module")
def subprocess_project(tmp_path_factory, kafka_bootstrap_servers, spark_thrift_server) -> FaultProject:
    """The fault tests' dbt project. Its runs are subprocesses (a crash must kill the dbt
    process) against the Spark Thrift Server, which outlives them as a cluster would; each
    module has its own schema there."""
    root = tmp_path_factory.mktemp("faults_project")
    schema = f"faults_{uuid.uuid4().hex[:8]}"
    write_project(root, schema, kafka_bootstrap_servers, spark_thrift_server)
    return FaultProject(root, schema, spark_thrift_server)


def dbt(root: Path, *args: str, fault: Optional[str] = None, pause: Optional[str] = None,
        wait: bool = True, new_session: bool = False) -> Any:
    """`dbt <args>`; `fault` names a crash point, `pause` is '<point>:<folder>' (see
    faults.py): a `dbt` process of its own, as is a run not waited for (wait=False returns the
    running Popen; new_session: in a process group of its own, killed whole with the session
    method's Spark JVM). A Thrift Server project's other commands run in a long-lived dbt
    process (dbt_process.py: why), with the exit code and output the `dbt` command gives."""
    env = {k: v for k, v in os.environ.items() if k not in (ENV, PAUSE_ENV)}
    if fault:
        env[ENV] = fault
    if pause:
        env[PAUSE_ENV] = pause
    paths = ["--project-dir", str(root), "--profiles-dir", str(root)]
    command = [str(Path(sys.executable).parent / "dbt"), *args, *paths]
    if not wait:
        return subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=new_session)
    if not (fault or pause) and _on_thrift(root):
        process = long_lived(root, env)
        if process.busy.acquire(blocking=False):  # else another thread's command runs in it
            try:
                code, output = process.run([*args, *paths], timeout=300)
            finally:
                process.busy.release()
            return subprocess.CompletedProcess(command, code, output, "")
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300)


def _on_thrift(root: Path) -> bool:
    """Whether the project's profile (write_project's) reaches Spark over thrift: a session
    project's Derby metastore allows one JVM, so a long-lived one would lock out the runs a
    test starts on its own."""
    try:
        profiles = yaml.safe_load((root / "profiles.yml").read_text())
    except OSError:
        return False
    outputs = [o for p in (profiles or {}).values() if isinstance(p, dict)
               for o in (p.get("outputs") or {}).values()]
    return bool(outputs) and all(o.get("method") == "thrift" for o in outputs)


def crash_and_recover(subprocess_project, kafka_bootstrap_servers, points, suffix):
    """A normal run, then for each point: a run killed there, then a normal run, checked."""
    project = subprocess_project
    root, topic = project.root, f"faults_{suffix}"

    def run(step, fault=None):
        return dbt(root, "run", "-s", "flaky", "--vars", json.dumps({"step": step, "suffix": suffix}),
                   fault=fault)

    def check(expected_confirmations):
        confirmations = wait_for_confirmations(kafka_bootstrap_servers, topic, expected_confirmations)
        types, table = project.rows("flaky")
        assert replay_confirmed(kafka_bootstrap_servers, topic, types, table) == table
        snapshots = [c["snapshot"] for c in confirmations]
        assert snapshots == list(range(1, len(snapshots) + 1)), "each snapshot confirmed once, in order"
        return confirmations

    first = run(1)
    assert first.returncode == 0, first.stdout[-3000:]
    confirmed_so_far = len(check(1))
    step = 1
    for point in points:
        step += 1
        crashed = run(step, fault=point)
        assert crashed.returncode == 75, f"{point}: expected the injected crash\n{crashed.stdout[-2000:]}"
        step += 1
        recovered = run(step)
        assert recovered.returncode == 0, f"after {point}:\n{recovered.stdout[-3000:]}"
        # a change that never reached the table is never confirmed; one that did is confirmed
        # exactly once (by the crashed run or by the recovery), plus the new run's own change
        expected = 1 if point == "before_table_commit" else 2
        confirmations = check(confirmed_so_far + expected)
        assert len(confirmations) == confirmed_so_far + expected, point
        confirmed_so_far = len(confirmations)
        if point in ("before_log_commit", "mid_log_write", "after_table_commit", SWAP_POINT):
            assert "re-sending change set" in recovered.stdout, point
        if point == SWAP_POINT:  # the old table dropped, the new one not yet renamed in
            assert "(a failed run had committed it)" in recovered.stdout
        if point == "after_log_commit":  # confirmed but not recorded with the table: adopted
            assert "already confirmed" in recovered.stdout
        # the crashed run's lock was taken over, and nothing of the protocol is left behind
        assert "taking over the lock of dbt invocation" in recovered.stdout, point
        assert project.tables() == {"flaky"}, point


def wait_until_paused(folder: Path, process: Any, limit: float = 180.0) -> None:
    """Until a run started with pause='<point>:<folder>' (faults.py) holds at its point."""
    import time

    deadline = time.monotonic() + limit
    while not (folder / "reached").exists():
        if process.poll() is not None:
            out = process.stdout.read()
            errors = [line for line in out.splitlines() if "Error" in line or "error" in line]
            pytest.fail(f"the held run ended ({process.returncode}) before its pause point:\n"
                        + "\n".join(errors[:20])[:3000] + "\n...\n" + out[-1500:])
        assert time.monotonic() < deadline, "the held run never reached its pause point"
        time.sleep(0.2)
