"""`dbt-logstore` failing as a user meets it, run as a subprocess: each failure ends with one line
on stderr that says what failed and what to do, with no traceback; exit code 2 for a command line
that cannot be served (bad --vars, a model that is not there or not logged), 1 for a failure (no
broker answers, the login is refused, the topic is missing).

The dbt project is only parsed, never run (no Spark session starts): so its logged model's topic
does not exist. The login is refused by a SASL/SCRAM Apache Kafka node of this module's own (the
harness of test_kafka_security.py)."""
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from dbt.adapters.logstore.broker import free_port
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


def dbt_logstore(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)


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
    closed = f"127.0.0.1:{free_port()}"
    line = error_line(dbt_logstore("tail", "shop.orders", "--bootstrap-servers", closed), 1)
    assert f"Kafka at '{closed}': unreachable: no broker answered" in line
    assert "Check kafka.bootstrap.servers" in line


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
