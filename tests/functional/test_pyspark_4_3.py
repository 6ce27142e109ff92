"""pyspark 4.3, beside the suite's 4.1.1: the suite runs with constraints.txt's pyspark 4.1.1 (the
newest Spark with Spark's Kafka source, Iceberg and Delta published for it), while `pip install`
without constraints brings the newest pyspark 4, 4.3.0 today. This smoke test runs the adapter as
that install gets it: `make test` builds .venv-pyspark43 (the Makefile: this checkout, editable,
with '[broker]' and pyspark==4.3.0, nothing else pinned), and the test runs that venv's `dbt` and
`dbt-logstore` in subprocesses on a small keyed model, on the session method (Spark 4.3 in each
dbt process) against the embedded broker:

- a first build and a rebuild with an insert, updates and a delete: after each, a consumer that
  reads the topic from the start (read_committed) and applies the confirmed records in order ends
  with exactly the table's rows (the table read from its parquet files with pyarrow, the log by
  tests/functional/contract.py: neither by the package nor by Spark);
- `dbt-logstore status --verify` (the package's replay against the table, read by Spark 4.3)
  says agree;
- `dbt-logstore tail MODEL --json` gives both snapshots' changes.

It fails, never skips, when the venv is missing: `make test` builds it.
"""
import json
import os
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import List

import pyarrow.parquet as pq
import pytest

from tests.functional.contract import replay_confirmed, rows_state, wait_for_confirmations
from tests.functional.fault_project import write_project
from tests.functional.test_install import clean_env

ROOT = Path(__file__).resolve().parents[2]
PYSPARK_VERSION = "4.3.0"
VENV_VARIABLE = "LOGSTORE_PYSPARK43_VENV"  # another venv than .venv-pyspark43 (the Makefile's)
VENV = Path(os.environ.get(VENV_VARIABLE) or ROOT / ".venv-pyspark43")

# Step 1: four customers; step 2: 2 and 4 updated, 3 deleted, 5 inserted.
CUSTOMERS = """
{{ config(materialized='table', unique_key='id', log_system='kafka', log_system_partitions=2) }}
select id, name, cast(amount as decimal(10, 2)) as amount
from values
{% if var('step', 1) == 1 %}
  (1, 'Ada', '10.50'), (2, 'Bo', '0.01'), (3, 'Cy', '7.00'), (4, 'Di', '1.00')
{% else %}
  (1, 'Ada', '10.50'), (2, 'Bo', '2.02'), (4, 'Di Ø', '1.00'), (5, 'Ed', '3.30')
{% endif %}
as t(id, name, amount)
"""
TYPES = {"id": "int", "name": "string", "amount": "decimal(10,2)"}


def venv_bin(name: str) -> str:
    """A program of the pyspark 4.3 venv, or a test failure saying how to build it."""
    path = VENV / "bin" / name
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: this test runs dbt with pyspark {PYSPARK_VERSION} in a "
                    f"virtual environment of its own, which `make test` builds (the Makefile's "
                    f".venv-pyspark43 target: pip install -e '.[broker]' pyspark=={PYSPARK_VERSION}); "
                    f"or set {VENV_VARIABLE} to such a venv.", pytrace=False)
    return str(path)


def run(command: List[str], cwd: Path, expect: int = 0) -> subprocess.CompletedProcess:
    """A command of the venv, in the environment a user has (test_install.clean_env: none of this
    test session's Spark settings, its class-data archive or table-format jars)."""
    started = time.monotonic()
    result = subprocess.run(command, cwd=cwd, env={**clean_env(), "DO_NOT_TRACK": "1"},
                            capture_output=True, text=True, timeout=600)
    print(f"{time.monotonic() - started:6.1f} s  {' '.join(Path(command[0]).name.split() + command[1:3])}")
    if result.returncode != expect:
        lines = [line for line in (result.stdout + result.stderr).splitlines()
                 if not line.lstrip().startswith(("at ", "... "))]
        raise AssertionError(f"{command[:3]}: exit code {result.returncode}, not {expect}:\n"
                             + "\n".join(lines)[-6000:])
    return result


def test_a_keyed_model_on_pyspark_4_3_logs_exactly_its_table(tmp_path, embedded_broker):
    python, dbt, logstore = venv_bin("python"), venv_bin("dbt"), venv_bin("dbt-logstore")
    # the venv runs pyspark 4.3.0, and this checkout's adapter (editable), with dbt-spark 1.11
    found = run([python, "-c", "import pyspark, dbt.adapters.logstore as a, dbt.adapters.spark as s, "
                 "importlib.metadata as m; print(pyspark.__version__, a.__file__, m.version('dbt-spark'), "
                 "m.version('dbt-core'))"], cwd=tmp_path).stdout.split()
    assert found[0] == PYSPARK_VERSION, found
    assert found[1].startswith(str(ROOT / "dbt")), f"the venv's adapter is not this checkout's: {found}"
    assert found[2].startswith("1.11.") and found[3].startswith("1.11."), found

    root = tmp_path / "project"
    root.mkdir()
    schema = f"ps43_{uuid.uuid4().hex[:8]}"
    write_project(root, schema, embedded_broker, None, models={"customers": CUSTOMERS})
    table_dir = root / "spark" / "warehouse" / f"{schema}.db" / "customers"  # write_project's session_dir
    where = ["--project-dir", str(root), "--profiles-dir", str(root)]
    topic = f"{schema}.customers"

    for step, mirrored in ((1, 4), (2, 5)):  # step 2: two updates, a delete (and its tombstone), an insert
        output = run([dbt, "run", "--vars", json.dumps({"step": step}), *where], cwd=root).stdout
        assert f"mirrored {mirrored} records to {topic}" in " ".join(output.split()), output[-3000:]
        confirmations = wait_for_confirmations(embedded_broker, topic, step)
        assert [c["snapshot"] for c in confirmations] == list(range(1, step + 1)), confirmations
        table = rows_state(TYPES, pq.read_table(table_dir).to_pylist())  # the files Spark 4.3 wrote
        assert len(table) == 4
        assert replay_confirmed(embedded_broker, topic, TYPES, table) == table, f"after step {step}"

    status = run([logstore, "status", "--verify", *where], cwd=root).stdout
    line = next((s for s in status.splitlines() if s.startswith("customers ")), "")
    assert line.split()[1:] == [topic, "2", "2", line.split()[4], "agree"], status

    tail = run([logstore, "tail", "customers", "--json", *where], cwd=root).stdout
    changes = [json.loads(s) for s in tail.splitlines() if s.startswith("{")]
    by_snapshot = {n: Counter(c["op"] for c in changes if c["snapshot"] == n) for n in (1, 2)}
    assert by_snapshot == {1: Counter(c=4), 2: Counter(u=2, d=1, c=1)}, tail[-3000:]
    last = {json.dumps(c["key"], sort_keys=True): c for c in changes}
    assert last['{"id": 3}']["op"] == "d" and last['{"id": 4}']["after"]["name"] == "Di Ø", tail[-3000:]
