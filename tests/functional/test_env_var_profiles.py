"""A project that reads everything it can from the environment, as dbt's docs tell users to
(issue 51, item 1): its profile lives in a `~/.dbt` of its own, found through DBT_PROFILES_DIR
(no --profiles-dir), and reads its servers with env_var() (with and without a default, and from
a DBT_ENV_SECRET_ variable); dbt_project.yml reads a var and a config from the environment; a
model's kafka.topic is an env_var(). `dbt run`, `dbt debug` and every `dbt-logstore` command
read them as dbt does, `--target` picks another output, and the secret's value is never printed.
Each command is a subprocess, as a user runs it (the suite's other projects read their servers
through env_var() too: tests/functional/dbt_helpers.py)."""
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from dbt.adapters.logstore.cli.broker import free_port

BIN = Path(sys.executable).parent
PROJECT = """\
name: env_check
version: '1.0'
config-version: 2
profile: env_check
vars:
  orders_topic: "{{ env_var('LOGSTORE_ENV_PREFIX') }}.orders"
models:
  env_check:
    +log.consistency: "{{ env_var('LOGSTORE_ENV_CONSISTENCY', 'transactional') }}"
"""
MODELS = {
    "customers": "{{ config(materialized='table', unique_key='id', log_system='kafka', "
                 "kafka_topic=env_var('LOGSTORE_ENV_TOPIC')) }} "
                 "select id, concat('c', id) as name from range(5) as r(id)",
    "orders": "{{ config(materialized='table', unique_key='id', log_system='kafka', "
              "kafka_topic=var('orders_topic')) }} select id, id * 10 as amount from range(3) as r(id)",
}
SESSION = """\
      type: logstore
      method: session
      schema: env_check
      session_dir: {session_dir}
      threads: 1
      server_side_parameters:
        spark.sql.shuffle.partitions: "2"
        spark.sql.session.timeZone: "UTC"
"""
PROFILES = """\
env_check:
  target: "{{{{ env_var('LOGSTORE_ENV_TARGET', 'dev') }}}}"
  outputs:
    dev:
{session}      kafka_bootstrap_servers: "{{{{ env_var('LOGSTORE_ENV_SERVERS') }}}}"
    down:
{session}      kafka_bootstrap_servers: "{{{{ env_var('LOGSTORE_ENV_DOWN', '{dead}') }}}}"
      kafka_properties:
        bootstrap.timeout.ms: "2000"
    hidden:
{session}      kafka_bootstrap_servers: "{{{{ env_var('DBT_ENV_SECRET_LOGSTORE_SERVERS') }}}}"
      kafka_properties:
        bootstrap.timeout.ms: "2000"
"""


@pytest.fixture(scope="module")
def env_project(tmp_path_factory, kafka_bootstrap_servers):
    """The project, its ~/.dbt, and the environment a user's shell would have."""
    root = tmp_path_factory.mktemp("env_project")
    home_dbt = tmp_path_factory.mktemp("home") / ".dbt"
    home_dbt.mkdir()
    (root / "models").mkdir()
    for name, sql in MODELS.items():
        (root / "models" / f"{name}.sql").write_text(sql)
    (root / "dbt_project.yml").write_text(PROJECT)
    (home_dbt / "profiles.yml").write_text(PROFILES.format(
        session=SESSION.format(session_dir=root / "spark"), dead=f"127.0.0.1:{free_port()}"))
    prefix = f"env_{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOGSTORE_ENV_", "DBT_ENV_"))}
    env.update({"DBT_PROFILES_DIR": str(home_dbt), "LOGSTORE_ENV_SERVERS": kafka_bootstrap_servers,
                "LOGSTORE_ENV_TOPIC": f"{prefix}.customers", "LOGSTORE_ENV_PREFIX": prefix,
                "DO_NOT_TRACK": "1"})
    return root, env, prefix


def run(root, env, *command, **more_env):
    return subprocess.run([str(BIN / command[0]), *command[1:]], cwd=root, env={**env, **more_env},
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def ran(env_project):
    root, env, prefix = env_project
    result = run(root, env, "dbt", "run", "--no-use-colors")
    assert result.returncode == 0, result.stdout[-3000:]
    return root, env, prefix, result.stdout


def test_dbt_run_logs_to_the_topics_the_environment_names(ran):
    _, _, prefix, output = ran
    assert f"mirrored 5 records to {prefix}.customers" in output
    assert f"mirrored 3 records to {prefix}.orders" in output


def test_status_and_tail_read_the_same_profile_and_project(ran):
    root, env, prefix, _ = ran
    status = run(root, env, "dbt-logstore", "status", "--verify")
    assert status.returncode == 0, status.stderr
    rows = [line.split() for line in status.stdout.splitlines()[1:] if not line.startswith(" ")]
    assert [(r[0], r[1], r[-1]) for r in rows] == [
        ("customers", f"{prefix}.customers", "agree"), ("orders", f"{prefix}.orders", "agree")]
    tail = run(root, env, "dbt-logstore", "tail", "orders", "--json")
    assert tail.returncode == 0, tail.stderr
    assert sorted(line for line in tail.stdout.splitlines() if '"op": "c"' in line).__len__() == 3


def test_dbt_debug_reads_the_profile_from_the_environment(ran):
    root, env, _, _ = ran
    debug = run(root, env, "dbt", "debug")
    assert "All checks passed!" in debug.stdout, debug.stdout[-3000:]
    assert f"Kafka at {env['LOGSTORE_ENV_SERVERS']}: reachable" in debug.stdout, debug.stdout[-3000:]


def test_a_target_from_the_command_line_and_from_the_environment(ran):
    """--target down (its servers: the env_var's default, where no broker listens), and the
    same output chosen by the profile's own env_var() target."""
    root, env, _, _ = ran
    dead = next(line for line in (Path(env["DBT_PROFILES_DIR"]) / "profiles.yml").read_text()
                .splitlines() if "LOGSTORE_ENV_DOWN" in line).split("'")[3]
    for result in (run(root, env, "dbt-logstore", "status", "--target", "down"),
                   run(root, env, "dbt-logstore", "status", LOGSTORE_ENV_TARGET="down")):
        assert (result.returncode, result.stdout) == (1, ""), result.stderr
        assert result.stderr.startswith(f"error: Model 'customers': Kafka at '{dead}': unreachable"), \
            result.stderr


def test_a_variable_without_a_default_that_is_not_set(ran):
    root, env, _, _ = ran
    unset = {k: v for k, v in env.items() if k != "LOGSTORE_ENV_SERVERS"}
    result = run(root, unset, "dbt-logstore", "status")
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert (result.returncode, result.stderr) == (2, (
        f"error: dbt could not read the project at {root} with the profiles in "
        f"{env['DBT_PROFILES_DIR']}: Env var required but not provided: 'LOGSTORE_ENV_SERVERS'\n"))


def test_a_secret_variable_is_never_printed(ran):
    """The servers from a DBT_ENV_SECRET_ variable, where no broker listens: the errors of
    `dbt-logstore status` (with --debug's traceback) and of `dbt run` say what failed with
    the value masked, on the console and in the project's logs."""
    root, env, _, _ = ran
    secret = f"127.0.0.1:{free_port()}"
    status = run(root, env, "dbt-logstore", "--debug", "status", "--target", "hidden",
                 DBT_ENV_SECRET_LOGSTORE_SERVERS=secret)
    assert status.returncode == 1 and "unreachable" in status.stderr, status.stderr
    assert "Kafka at '*****'" in status.stderr, status.stderr
    dbt_run = run(root, env, "dbt", "run", "--target", "hidden", "--no-use-colors",
                  DBT_ENV_SECRET_LOGSTORE_SERVERS=secret)
    assert dbt_run.returncode == 1 and "unreachable" in dbt_run.stdout, dbt_run.stdout[-3000:]
    logs = "".join(p.read_text(errors="replace") for p in (root / "logs").glob("*.log"))
    for where, text in (("status", status.stdout + status.stderr),
                        ("dbt run", dbt_run.stdout + dbt_run.stderr), ("logs/", logs)):
        assert secret not in text, f"{where} printed the secret"
