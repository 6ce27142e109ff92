"""The console of a session-method `dbt run` shows dbt's lines and nothing else (issue 44, item
1): Spark's, Hive's and Derby's output, pyspark's query-context log and the stage progress bars
go to logs/dbt-logstore-engine.log; a model whose SQL fails is dbt's error with Spark's one-line
cause, the Java stack trace only in that file. Then the `dbt-logstore` commands that need a
project that has run (issue 44, item 3): `tail | head` ends quietly, Ctrl-C while `tail --from
latest-full` starts Spark prints 'interrupted' and exits 130, and `status` with the broker down
is one sentence without an exception's class or "Nothing was changed.". Each is a subprocess
with its exact output."""
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from dbt.adapters.logstore.cli.broker import free_port
from tests.functional.fault_project import write_project

BIN = Path(sys.executable).parent
ROWS = 3000  # more than a pipe holds of `tail` lines: `tail | head -1` meets a closed pipe
MODELS = {
    "good": "{{ config(materialized='table', unique_key='id', log_system='kafka', "
            "kafka_topic='console_' ~ var('suffix')) }} "
            f"select id, repeat('x', 40) as payload from range({ROWS}) as r(id)",
    "bad_column": "{{ config(materialized='table') }} select no_such_column from range(1)",
    "bad_raise": "{{ config(materialized='table') }} select raise_error('boom') as id from range(2)",
}
# `dbt run`'s whole console, timestamps and durations masked: nothing but dbt's own lines
EXPECTED_RUN = """\
Running with dbt=<v>
Registered adapter: logstore=<v>
Unable to do partial parsing because saved manifest not found. Starting full parse.
Found 3 models, <n> macros

Concurrency: 1 threads (target='dev')

1 of 3 START sql table model {schema}.bad_column ... [RUN]
1 of 3 ERROR creating sql table model {schema}.bad_column ... [ERROR in <t>s]
2 of 3 START sql table model {schema}.bad_raise ... [RUN]
2 of 3 ERROR creating sql table model {schema}.bad_raise ... [ERROR in <t>s]
3 of 3 START sql table model {schema}.good ... [RUN]
3 of 3 OK created sql table model {schema}.good ... [OK, mirrored 3000 records to {topic} (p0:0-2999), snapshot 1, starts generation 1 in <t>s]

Finished running 3 table models in <t> seconds (<t>s).

Completed with 2 errors, 0 partial successes, and 0 warnings:

Failure in model bad_column (models/bad_column.sql)
  Runtime Error in model bad_column (models/bad_column.sql)
  [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name `no_such_column` cannot be resolved. Did you mean one of the following? [`id`]. SQLSTATE: 42703; line <n> pos <n>;

  compiled code at target/compiled/console/models/bad_column.sql

Failure in model bad_raise (models/bad_raise.sql)
  Runtime Error in model bad_raise (models/bad_raise.sql)
  [USER_RAISED_EXCEPTION] boom SQLSTATE: P0001

  compiled code at target/compiled/console/models/bad_raise.sql

Done. PASS=1 WARN=0 ERROR=2 SKIP=0 NO-OP=0 TOTAL=3
"""


def masked(output: str) -> str:
    """dbt's console with what changes from run to run masked."""
    lines = []
    for line in output.splitlines():
        line = re.sub(r"^\d\d:\d\d:\d\d  ", "", line)
        line = re.sub(r"=\d+\.\d+\.\d+", "=<v>", line)
        line = re.sub(r"\d+ macros", "<n> macros", line)
        line = re.sub(r"line \d+ pos \d+", "line <n> pos <n>", line)
        line = re.sub(r"\d+\.\d+s\b", "<t>s", line)
        line = re.sub(r"\d+ hours \d+ minutes and \d+\.\d+ seconds", "<t> seconds", line)
        line = re.sub(r" \.{3,} ", " ... ", line)  # dbt pads to a width
        lines.append(line.rstrip())
    return "\n".join(lines) + "\n"


def command(name: str, *args: str, project: Path) -> list:
    return [str(BIN / name), *args, "--project-dir", str(project), "--profiles-dir", str(project)]


@pytest.fixture(scope="module")
def ran(tmp_path_factory, kafka_bootstrap_servers):
    """A project of a good logged model and two failing ones, run once by `dbt run`."""
    root = tmp_path_factory.mktemp("console")
    suffix = uuid.uuid4().hex[:8]
    schema = f"console_{suffix}"
    write_project(root, schema, kafka_bootstrap_servers, None, models=MODELS,
                  project={"vars": {"suffix": suffix}})
    (root / "dbt_project.yml").write_text((root / "dbt_project.yml").read_text()
                                          .replace("name: faults", "name: console"))
    # a second target: the same tables, a broker that does not answer (given up on after 2 s,
    # not the default 10: the message is the same)
    profiles = yaml.safe_load((root / "profiles.yml").read_text())
    outputs = profiles["faults"]["outputs"]
    outputs["down"] = {**outputs["dev"], "kafka_bootstrap_servers": f"127.0.0.1:{free_port()}",
                       "kafka_properties": {"bootstrap.timeout.ms": "2000"}}
    (root / "profiles.yml").write_text(yaml.safe_dump(profiles))
    env = {**os.environ, "DO_NOT_TRACK": "1"}
    result = subprocess.run(command("dbt", "run", "--no-use-colors", project=root), cwd=root,
                            env=env, capture_output=True, text=True, timeout=300)
    return root, schema, f"console_{suffix}", result


def test_dbt_run_prints_dbt_lines_only(ran):
    root, schema, topic, result = ran
    assert result.stderr == ""
    assert masked(result.stdout) == EXPECTED_RUN.format(schema=schema, topic=topic)
    assert result.returncode == 1
    # what the console did not show went to the engine log: Spark's warnings, the Java trace
    engine_log = (root / "logs" / "dbt-logstore-engine.log").read_text()
    assert "WARN SparkSession: Using an existing Spark session" in engine_log
    assert "\tat org.apache.spark." in engine_log and "USER_RAISED_EXCEPTION" in engine_log
    assert "Booting Derby" in engine_log  # Derby's log, not a derby.log beside the metastore
    assert not (root / "spark" / "derby.log").exists()


def test_tail_into_a_closed_pipe_ends_quietly(ran):
    root, *_ = ran
    result = subprocess.run(" ".join(command("dbt-logstore", "tail", "good", project=root))
                            + " | head -2; echo \"tail: ${PIPESTATUS[0]}\"", shell=True,
                            executable="/bin/bash", cwd=root, capture_output=True, text=True,
                            timeout=120)
    assert result.stderr == ""
    header, first, exit_code = result.stdout.splitlines()
    assert header == "snap part offset  op  key / before -> after"
    assert first.startswith("   1 ")  # snapshot 1's first line
    assert exit_code == "tail: 0"


def test_ctrl_c_while_tail_starts_spark(ran):
    """Ctrl-C reaches the process group, the Spark JVM included: sent once Spark is starting
    (its first line in the engine log)."""
    root, *_ = ran
    engine_log = root / "logs" / "dbt-logstore-engine.log"
    size = engine_log.stat().st_size
    tail = subprocess.Popen(command("dbt-logstore", "tail", "good", "--from", "latest-full",
                                    project=root), cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while engine_log.stat().st_size == size and tail.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(tail.pid, signal.SIGINT)
    started = time.monotonic()
    out, err = tail.communicate(timeout=60)
    assert (tail.returncode, out, err) == (130, "", "interrupted\n")
    assert time.monotonic() - started < 15  # its JVM stopped too (it held stdout open)


def test_status_with_the_broker_down(ran):
    root, *_ = ran
    result = subprocess.run(command("dbt-logstore", "status", "--target", "down", project=root),
                            cwd=root, capture_output=True, text=True, timeout=180)
    profiles = yaml.safe_load((root / "profiles.yml").read_text())
    servers = profiles["faults"]["outputs"]["down"]["kafka_bootstrap_servers"]
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"error: Model 'good': Kafka at '{servers}': unreachable: no broker answered. Check the "
        f"profile's kafka_bootstrap_servers (host and port), the network between dbt and Kafka, "
        f"and security.protocol. (KafkaTimeoutError: Unable to bootstrap from ['{servers}'])\n")
