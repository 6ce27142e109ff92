"""`dbt-logstore` failing as a user meets it, run as a subprocess: each failure ends with one line
on stderr that says what failed and what to do, with no traceback; exit code 2 for a command line
that cannot be served (bad arguments or --vars, no dbt project, a model that is not there or not
logged, a broker stopped without its --state-dir), 1 for a failure (no broker answers, the login
is refused, the topic is missing). The arguments are checked before anything connects: those
failures take no broker's timeout.

The dbt project is only parsed, never run (no Spark session starts): so its logged model's topic
does not exist. The login is refused by a SASL/SCRAM Apache Kafka node of this module's own (the
harness of test_kafka_security.py)."""
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from dbt.adapters.logstore.__version__ import version
from dbt.adapters.logstore.cli.broker import free_port, port_open
from tests.functional.fault_project import write_project
from tests.functional.test_kafka_security import sasl_properties
from tests.kafka_cluster import KafkaCluster

CLI = str(Path(sys.executable).parent / "dbt-logstore")
# the logged model's topic takes the `run` var: the topic named in the error shows the --vars
# reached dbt's parse
MODELS = {"orders": "{{ config(materialized='table', unique_key='id', log_system='kafka', "
                    "kafka_topic='cli_errors_' ~ var('suffix') ~ '_' ~ var('run', 'none')) }} "
                    "select 1 as id",
          "plain": "{{ config(materialized='table') }} select 1 as id"}
PASSWORD, WRONG_PASSWORD = "Reader-pw-5e1f3", "Wrong-pw-8a2c6"


def make_project(root: Path, bootstrap_servers: str, **kafka_properties: str) -> Path:
    suffix = uuid.uuid4().hex[:8]  # a topic no earlier run (on a shared broker) created
    write_project(root, f"cli_errors_{suffix}", bootstrap_servers, None, models=MODELS,
                  kafka_properties=kafka_properties, project={"vars": {"suffix": suffix}})
    return root


def dbt_logstore(*args: str, cwd=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env=None if env is None else {**os.environ, **env})


def error_line(result: subprocess.CompletedProcess, exit_code: int) -> str:
    """The one line on stderr of a command that must fail with `exit_code`."""
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-3000:]
    assert result.returncode == exit_code, lines[0]
    print(f"\nexit code {exit_code}: {lines[0]}")
    return lines[0]


@pytest.fixture(scope="module")
def project(tmp_path_factory, kafka_bootstrap_servers) -> Path:
    return make_project(tmp_path_factory.mktemp("cli_errors"), kafka_bootstrap_servers)


@pytest.mark.parametrize("command, bad_vars, what", [
    (["status"], "{run: r1", "is not valid YAML"),
    (["tail", "orders"], "[r1, r2]", "is a list"),
])
def test_bad_vars(project, command, bad_vars, what):
    line = error_line(dbt_logstore(*command, "--project-dir", str(project), "--vars", bad_vars), 2)
    assert f"--vars '{bad_vars}' {what}" in line
    assert "give a YAML or JSON dictionary" in line


def test_unknown_model(project):
    line = error_line(dbt_logstore("tail", "nosuch", "--project-dir", str(project)), 2)
    assert "'nosuch' is not a model of the dbt project" in line and "logged models: orders" in line
    assert "--bootstrap-servers" in line


def test_model_not_logged(project):
    line = error_line(dbt_logstore("tail", "plain", "--project-dir", str(project)), 2)
    assert "Model 'plain' is not logged" in line and "log_system='kafka'" in line


def test_topic_missing(project, kafka_bootstrap_servers):
    """YAML vars, as dbt takes them, name the model's topic."""
    line = error_line(dbt_logstore("tail", "orders", "--project-dir", str(project),
                                   "--vars", "{run: r1}"), 1)
    assert "Topic 'cli_errors_" in line
    assert f"_r1' does not exist on {kafka_bootstrap_servers}" in line
    assert "check the topic name" in line


def test_broker_unreachable():
    """The servers came from --bootstrap-servers: the line says to check that option."""
    closed = f"127.0.0.1:{free_port()}"
    result = dbt_logstore("tail", "shop.orders", "--bootstrap-servers", closed)
    line = error_line(result, 1)
    assert result.stdout == ""  # not even the header line before the error
    # the topic is called a topic, not a model
    assert line.startswith(f"error: Topic 'shop.orders': Kafka at '{closed}': unreachable: "
                           f"no broker answered")
    assert "Check --bootstrap-servers (host and port)" in line
    assert "kafka.bootstrap.servers" not in line
    assert line.count("KafkaTimeoutError") == 1  # not 'KafkaTimeoutError: KafkaTimeoutError: ...'


def test_broker_of_the_profile_unreachable(tmp_path):
    """A model whose servers came from the profile's kafka_bootstrap_servers: that is the setting
    the line names."""
    closed = f"127.0.0.1:{free_port()}"
    root = make_project(tmp_path, closed)
    result = dbt_logstore("tail", "orders", "--project-dir", str(root))
    line = error_line(result, 1)
    assert result.stdout == ""
    assert line.startswith(f"error: Model 'orders': Kafka at '{closed}': unreachable")
    assert "Nothing was changed" not in line  # tail changes nothing
    assert "Check the profile's kafka_bootstrap_servers (host and port)" in line
    assert line.count("KafkaTimeoutError") == 1


# the arguments, checked before anything connects (exit code 2, at once)

def fails_at_once(*args: str, cwd=None) -> str:
    started = time.monotonic()
    line = error_line(dbt_logstore(*args, cwd=cwd), 2)
    assert time.monotonic() - started < 30  # no broker's timeout (the unreachable one takes ~15 s)
    return line


@pytest.mark.parametrize("servers, says", [
    ("", "--bootstrap-servers '' is empty: give host:port[,host:port], e.g. 127.0.0.1:9092"),
    ("127.0.0.1:notaport", "--bootstrap-servers '127.0.0.1:notaport': the port 'notaport' is not "
                           "a number from 1 to 65535"),
    ("kafka://127.0.0.1:9092", "--bootstrap-servers 'kafka://127.0.0.1:9092' has a scheme "
                               "('kafka://'): give host:port without it, e.g. 127.0.0.1:9092"),
    ("127.0.0.1", "--bootstrap-servers '127.0.0.1' has no port"),
])
def test_bad_bootstrap_servers(servers, says):
    line = fails_at_once("tail", "shop.orders", "--bootstrap-servers", servers)
    assert line.startswith(f"error: {says}") and line.endswith("see 'dbt-logstore tail --help'.")


@pytest.mark.parametrize("command", [["tail", "orders"], ["status"]])
def test_project_dir_missing(tmp_path, command):
    missing = str(tmp_path / "no_such_project")
    line = fails_at_once(*command, "--project-dir", missing)
    assert f"--project-dir '{missing}' does not exist: give the directory of a dbt project" in line


def test_tail_outside_a_project(tmp_path):
    """`tail customers` where there is no dbt project: said at once, not after a Kafka timeout."""
    line = fails_at_once("tail", "customers", cwd=tmp_path)
    assert f"No dbt project at {tmp_path.resolve()} (no dbt_project.yml)" in line
    assert "'customers'" in line and "--project-dir" in line and "--bootstrap-servers" in line


def test_status_outside_a_project(tmp_path):
    line = fails_at_once("status", cwd=tmp_path)
    assert f"No dbt project at {tmp_path.resolve()} (no dbt_project.yml)" in line
    assert "--project-dir" in line and "--bootstrap-servers" not in line  # status has no such option


@pytest.mark.parametrize("args, says", [
    (["tail", "t", "--bootstrap-servers", "127.0.0.1:9092", "--idle-seconds", "-5"],
     "--idle-seconds '-5' is negative: give a number of seconds, 0 or more"),
    (["broker", "status", "--port", "-1"], "--port '-1' is not a port: give a number from 1 to 65535"),
    (["broker", "start", "--port", "99999"], "--port '99999' is not a port"),
])
def test_bad_numbers(args, says):
    assert says in fails_at_once(*args)


def test_version():
    result = dbt_logstore("--version")
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout == f"dbt-logstore {version}\n"


@pytest.mark.parametrize("command, says", [
    ([], ["exit codes:", "--version", "--debug"]),
    (["broker"], ["exit codes:", "start: in the background", "--host HOST  ", "--port PORT  ",
                  "where the pid file and broker log are kept"]),
    (["tail"], ["exit codes:", "--bootstrap-servers HOST:PORT", "--target TARGET  "]),
    (["status"], ["exit codes:", "--project-dir PROJECT_DIR", "--target TARGET  "]),
])
def test_help(command, says):
    result = dbt_logstore(*command, "--help")
    assert result.returncode == 0 and result.stderr == ""
    for text in says:
        assert text in result.stdout, text


def test_broker_stop_and_status_without_its_state_dir(tmp_path):
    """A broker started with --state-dir, then stopped or asked about without it: the command
    finds the broker on the port and names the --state-dir to pass; nothing is stopped."""
    port, started_in = str(free_port()), tmp_path / "started_in"
    default = {"LOGSTORE_STATE_DIR": str(tmp_path / "default")}  # the default state dir, empty
    started = dbt_logstore("broker", "start", "--port", port, "--state-dir", str(started_in))
    assert started.returncode == 0, started.stderr
    try:
        line = error_line(dbt_logstore("broker", "stop", "--port", port, env=default), 2)
        assert f"no pid file for port {port} in {tmp_path / 'default'}" in line
        assert f"an embedded broker started with --state-dir {started_in} serves port {port}" in line
        assert f"pass --state-dir {started_in}; nothing was stopped." in line
        assert port_open("127.0.0.1", int(port))

        status = dbt_logstore("broker", "status", "--port", port, env=default)
        assert status.returncode == 0 and status.stderr == ""
        assert status.stdout.startswith(f"broker running at 127.0.0.1:{port} (pid ")
        assert f"pass --state-dir {started_in}" in status.stdout
        print(f"\n{line}\n{status.stdout.strip()}")
    finally:
        stopped = dbt_logstore("broker", "stop", "--port", port, "--state-dir", str(started_in))
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert not port_open("127.0.0.1", int(port))


@pytest.fixture(scope="module")
def sasl_kafka(tmp_path_factory):
    with KafkaCluster(tmp_path_factory.mktemp("sasl_kafka"), nodes=1,
                      sasl_users={"reader": PASSWORD}) as cluster:
        yield cluster


def test_authentication_failed(tmp_path, sasl_kafka):
    root = make_project(tmp_path, sasl_kafka.bootstrap_servers,
                        **sasl_properties("reader", WRONG_PASSWORD))
    result = dbt_logstore("tail", "orders", "--project-dir", str(root))
    line = error_line(result, 1)
    assert "Model 'orders'" in line and "authentication failed" in line
    assert "sasl.plain.password" in line
    assert WRONG_PASSWORD not in result.stdout + result.stderr


# a Spark session booting the session method's Derby metastore, as a running `dbt run` holds it
HOLD_METASTORE = """
import sys, time
from pyspark.sql import SparkSession
from dbt.adapters.logstore.connections import session_defaults
builder = SparkSession.builder.master("local[1]").enableHiveSupport()
for key, value in session_defaults(sys.argv[1]).items():
    builder = builder.config(key, value)
builder.getOrCreate().sql("show databases").collect()
print("holding", flush=True)
time.sleep(300)
"""


def test_status_while_another_process_holds_the_metastore(tmp_path, kafka_bootstrap_servers):
    root = make_project(tmp_path, kafka_bootstrap_servers)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_METASTORE, str(root / "spark")],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        started = time.monotonic()
        result = dbt_logstore("status", "--project-dir", str(root))
        line = error_line(result, 1)
        assert "in use by another process" in line and str(root / "spark" / "metastore_db") in line
        assert "does not exist" not in line
        assert time.monotonic() - started < 60  # no metastore retries (3 min before)
    finally:
        holder.kill()
        holder.wait()


# every profile field, checked before anything connects, by every command (issue 44, item 2)

PROFILE = "Field {field} of the profile 'faults' (target 'dev'): "


@pytest.mark.parametrize("command, field, value, says", [
    (["status"], "kafka_bootstrap_servers", "127.0.0.1:90x2",
     "'127.0.0.1:90x2': the port '90x2' is not a number from 1 to 65535."),
    (["tail", "orders"], "kafka_properties", {"lingr.ms": "5"},
     "unknown Kafka client property 'lingr.ms': kafka-python has no such property. Did you "
     "mean 'linger.ms'?"),
])
def test_a_bad_profile_field(tmp_path, command, field, value, says):
    """Two fields, from each command (every field's sentence: unit/test_profile_checks.py)."""
    servers = value if field == "kafka_bootstrap_servers" else "127.0.0.1:9092"
    root = make_project(tmp_path, servers)
    if field != "kafka_bootstrap_servers":
        profiles = yaml.safe_load((root / "profiles.yml").read_text())
        profiles["faults"]["outputs"]["dev"][field] = value
        (root / "profiles.yml").write_text(yaml.safe_dump(profiles))
    result = dbt_logstore(*command, "--project-dir", str(root))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"error: {PROFILE.format(field=field)}{says}\n"


def dbt(*args: str, root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(CLI).parent / "dbt"), *args, "--no-use-colors",
                           "--project-dir", str(root), "--profiles-dir", str(root)],
                          capture_output=True, text=True, timeout=300, cwd=root,
                          env={**os.environ, "DO_NOT_TRACK": "1"})


def test_dbt_run_and_debug_check_the_profile_before_spark(tmp_path):
    """The same sentence from `dbt run` (was: 'invalid literal for int()' 40 s later, once
    Spark had started) and `dbt debug`."""
    root = make_project(tmp_path, "127.0.0.1:90x2")
    sentence = (PROFILE.format(field="kafka_bootstrap_servers")
                + "'127.0.0.1:90x2': the port '90x2' is not a number from 1 to 65535.")
    run = dbt("run", root=root)
    assert run.returncode == 2 and run.stderr == ""
    assert masked_tail(run.stdout, 3) == ["Encountered an error:", "Runtime Error", f"  {sentence}"]
    assert not (root / "logs" / "dbt-logstore-engine.log").exists()  # no Spark started
    debug = dbt("debug", root=root)
    assert debug.returncode == 1 and debug.stderr == ""
    assert f"  >Runtime Error\n  {sentence}\n" in debug.stdout


def masked_tail(output: str, count: int) -> list:
    """The last `count` lines of dbt's console, without their timestamps."""
    return [re.sub(r"^\d\d:\d\d:\d\d  ", "", line) for line in output.splitlines()[-count:]]


# unknown config keys: where each was set (issue 44, item 3)

TYPOS = {
    "a": "{{ config(materialized='table', log_system='kafka', "
         "**{'kafka.propertes.acks': 'all'}) }} select 1 as id",
    "b": "{{ config(materialized='table', log_system='kafka') }} select 1 as id",
    "c": "{{ config(materialized='table', log_system='kafka') }} select 1 as id",
}


def test_a_typo_is_named_with_the_place_it_was_set(tmp_path):
    write_project(tmp_path, "typos", "127.0.0.1:9092", None, models=TYPOS,
                  project={"models": {"faults": {"c": {"+log.consistensy": "eventual"}}}})
    (tmp_path / "models" / "schema.yml").write_text(
        "version: 2\nmodels:\n  - name: b\n    config:\n      kafka_topc: x\n")
    parse = dbt("parse", root=tmp_path)
    assert parse.returncode == 2 and parse.stderr == ""
    assert masked_tail(parse.stdout, 6) == [
        "Encountered an error:",
        "Runtime Error",
        "  3 models have an invalid log configuration:",
        "  - Model 'a': unknown config key 'kafka.propertes.acks' (config() in models/a.sql, and "
        "kafka-python has no property 'propertes.acks'). Did you mean 'kafka.acks'?",
        "  - Model 'b': unknown config key 'kafka_topc' (models/schema.yml). Did you mean "
        "'kafka_topic'?",
        "  - Model 'c': unknown config key 'log.consistensy' (dbt_project.yml). Did you mean "
        "'log.consistency'?",
    ]
