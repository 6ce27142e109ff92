"""The Spark Connect method (`method: connect`, issue 53) end to end: dbt runs against a real
Spark Connect server (tests/functional/connect_server.py, started from the pyspark wheel, one
for the module) and the suite's Kafka. A seed, a keyed table rebuilt with updates and deletes,
an incremental merge, a snapshot, a model whose change set Spark tasks write (the server's
Python workers, mapInArrow) and a downstream model whose upstream changes Spark tasks read
(mapInPandas): after each build, replaying each topic from the start gives exactly its table,
read back through the server, and `dbt-logstore status --verify` agrees. The first build is a
`dbt` process of its own whose console shows dbt's lines only (no Spark warnings); a profile
whose server does not answer fails with one plain sentence, its token never printed."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt

from dbt.adapters.logstore.cli.broker import free_port
from tests.functional.connect_server import spark_connect_server  # noqa: F401 (fixture)
from tests.functional.contract import assert_contract_rows, changes, new_messages, read_topic
from tests.functional.dbt_helpers import servers_from_env

pytestmark = pytest.mark.apache_kafka

BIN = Path(sys.executable).parent

CUSTOMERS = """
{{ config(materialized='table', unique_key='id', **{'log.system': 'kafka'}) }}
{% set step = var('step', 1) %}
select id, name, cast(amount as decimal(12, 2)) as amount, cast(updated_at as timestamp) as updated_at
from values
{% if step == 1 %}
  (1, 'Ada', '10.50', '2024-01-01 10:00:00'), (2, 'Bjørn', '0.01', '2024-02-29 23:59:59.123456'),
  (3, 'Chen 陈', '99999.99', '1999-12-31 00:00:00')
{% else %}
  (1, 'Ada', '10.50', '2024-01-01 10:00:00'), (2, 'Bjørn Ø', '-0.01', '2024-03-01 00:00:00'),
  (4, 'Dédé 🚀', null, null)
{% endif %}
as t(id, name, amount, updated_at)
"""

# an incremental merge: each run updates some keys and adds others
EVENTS = """
{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id',
          **{'log.system': 'kafka'}) }}
{% set step = var('step', 1) %}
select id, concat('seen-', cast({{ step }} as string)) as state from range({{ step }}, {{ step }} + 3) as r(id)
"""

# the change set written by two Spark tasks on the server (its Python workers)
ORDERS = """
{{ config(materialized='table', unique_key='id', log_system_partitions=2,
          **{'log.system': 'kafka', 'log.mirror.parallelism': 2}) }}
{% set step = var('step', 1) %}
select id, cast(id * {{ step }} as decimal(10, 2)) as amount from range({{ 5 - step }}) as r(id)
"""

# a downstream model: Spark tasks on the server read the upstream topic's partitions
BIG_ORDERS = """
{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id',
          **{'log.system': 'kafka'}) }}
select id, amount * 2 as doubled,
       case when _logstore_op = 'd' or amount < 2 then 'd' else _logstore_op end as _logstore_op
from {{ logstore_changes(ref('orders'), normalize=true) }}
"""

SNAPSHOT = """
{% snapshot customers_history %}
{{ config(strategy='timestamp', unique_key='id', updated_at='updated_at', hard_deletes='invalidate',
          file_format='parquet', log_system='kafka') }}
select * from {{ ref('customers') }} where updated_at is not null
{% endsnapshot %}
"""

PRICES = {1: "id,name,price\n1,tea,2.5\n2,cake,4.0\n3,soup,6.25\n",
          2: "id,name,price\n1,tea,2.75\n3,soup,6.25\n5,pie,3.0\n"}

LOGGED = ("customers", "events", "orders", "big_orders", "customers_history", "prices")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
DBT_LINE = re.compile(r"\d\d:\d\d:\d\d ")  # dbt's lines start with the time


def _not_dbt(console):
    """The console's lines that are not dbt's (Spark's, pyspark's or gRPC's)."""
    lines = (ANSI.sub("", line) for line in console.splitlines())
    return [line for line in lines if line.strip() and not DBT_LINE.match(line)]


def _dbt(project, *args, profile_dir=None):
    """A `dbt` command in a process of its own: its whole console output."""
    command = [str(BIN / "dbt"), *args, "--project-dir", str(project.project_root),
               "--profiles-dir", str(profile_dir or project.profiles_dir)]
    return subprocess.run(command, cwd=project.project_root, capture_output=True, text=True,
                          timeout=300, env={**os.environ})


def _topic(project, name):
    return f"{project.test_schema}.{name}"


class TestConnectMethod:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, kafka_bootstrap_servers, spark_connect_server):
        return {
            "type": "logstore",
            "method": "connect",
            "host": spark_connect_server.url,
            "threads": 2,
            "kafka_bootstrap_servers": servers_from_env(kafka_bootstrap_servers),
            "server_side_parameters": {"spark.sql.session.timeZone": "UTC"},
        }

    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.sql": CUSTOMERS, "events.sql": EVENTS, "orders.sql": ORDERS,
                "big_orders.sql": BIG_ORDERS,
                "seeds.yml": "seeds:\n  - name: prices\n    config:\n      unique_key: id\n"}

    @pytest.fixture(scope="class")
    def seeds(self):
        return {"prices.csv": PRICES[1]}

    @pytest.fixture(scope="class")
    def snapshots(self):
        return {"customers_history.sql": SNAPSHOT}

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"seeds": {"+log_system": "kafka"}}

    def _check(self, project, server, servers):
        """Every logged table equals the replay of its topic; returns the topics' records."""
        logs = {}
        for name in LOGGED:
            relation = _topic(project, name)
            types, rows = server.table(relation)
            logs[name] = assert_contract_rows(servers, relation, types, rows, relation)
        return logs

    def _step(self, project, step):
        (Path(project.project_root) / "seeds" / "prices.csv").write_text(PRICES[step])
        run_dbt(["build", "--vars", json.dumps({"step": step})])

    def test_every_materialization_through_connect(self, project, spark_connect_server,
                                                   kafka_bootstrap_servers):
        server, servers = spark_connect_server, kafka_bootstrap_servers
        # first build: a dbt process of its own, whose console shows dbt's lines only
        done = _dbt(project, "build", "--vars", json.dumps({"step": 1}))
        console = done.stdout + done.stderr
        assert done.returncode == 0, console
        assert "Completed successfully" in console, console
        assert not _not_dbt(console), console
        assert "Warning" not in console, console
        assert server.token not in console, console
        log1 = self._check(project, server, servers)
        assert [m.envelope["op"] for m in log1["customers"]] == ["c", "c", "c"]
        assert len(log1["orders"]) == 4 and len(log1["big_orders"]) == 2  # ids 2, 3 of 0..3

        # the parallel mirror's records came from Spark tasks on the server: task writers
        confirmation = json.loads(
            read_topic(servers, _topic(project, "orders") + "__logstore_commits")[-1].value)
        assert confirmation.get("writers"), confirmation

        # rebuild: id 2 updated, id 3 deleted, id 4 inserted; the merge updates and adds keys
        self._step(project, 2)
        log2 = self._check(project, server, servers)
        new = {m.key.decode(): m.envelope["op"] if m.value else "d"
               for m in changes(new_messages(log2["customers"], log1["customers"]))}
        assert new == {'{"id":2}': "u", '{"id":3}': "d", '{"id":4}': "c"}, new
        merged = [m.envelope["op"] for m in changes(new_messages(log2["events"], log1["events"]))]
        assert sorted(merged) == ["c", "u", "u"], merged
        seeded = sorted(m.envelope["op"] if m.value else "d"
                        for m in changes(new_messages(log2["prices"], log1["prices"])))
        assert seeded == ["c", "d", "u"], seeded

        history = [m.envelope["op"] for m in changes(new_messages(log2["customers_history"],
                                                                   log1["customers_history"]))]
        assert sorted(history) == ["c", "u", "u"], history  # 2's new version, 2's and 3's closed
        # dbt-logstore status --verify, a process of its own: every table agrees with its log
        done = subprocess.run(
            [str(BIN / "dbt-logstore"), "status", "--verify", "--json", "--project-dir",
             str(project.project_root), "--profiles-dir", str(project.profiles_dir)],
            cwd=project.project_root, capture_output=True, text=True, timeout=300)
        statuses = {line["model"]: line for line in map(
            json.loads, (line for line in done.stdout.splitlines() if line.startswith("{")))}
        assert done.returncode == 0 and sorted(statuses) == sorted(LOGGED), done.stdout + done.stderr
        assert all(status["agree"] for status in statuses.values()), statuses
        assert not _not_dbt(done.stderr), done.stderr

        # the protocol finished: no change table or staged table left on the server
        tables = {row[1] for row in server.query(f"show tables in {project.test_schema}")
                  if not row[2]}
        assert tables == set(LOGGED), tables

    def _run_with(self, project, tmp_path, **target):
        """`dbt run` of one model in a process of its own, with a profile of `target`'s fields:
        its console on one line."""
        profile = {"test": {"target": "default", "outputs": {"default": {
            "type": "logstore", "method": "connect", "schema": project.test_schema,
            "threads": 1, "kafka_bootstrap_servers": "127.0.0.1:9", **target}}}}
        (tmp_path / "profiles.yml").write_text(json.dumps(profile))
        done = _dbt(project, "run", "--select", "customers", profile_dir=tmp_path)
        assert done.returncode != 0, done.stdout + done.stderr
        return " ".join((done.stdout + done.stderr).split())

    def test_a_setting_the_session_cannot_take_is_named(self, project, spark_connect_server,
                                                       tmp_path):
        console = self._run_with(project, tmp_path, host=spark_connect_server.url,
                                 server_side_parameters={"spark.sql.warehouse.dir": "/elsewhere"})
        assert ("Field server_side_parameters of the profile 'test' (target 'default'): "
                "spark.sql.warehouse.dir is a setting a Spark Connect session cannot change "
                "([CANNOT_MODIFY_STATIC_CONFIG]") in console, console
        assert spark_connect_server.token not in console, console

    def test_a_wrong_token_is_refused_in_words(self, project, spark_connect_server, tmp_path):
        url = spark_connect_server.url.split(";token=")[0] + ";token=not-the-token"
        console = self._run_with(project, tmp_path, host=url)
        assert (f"The Spark Connect server at {url.split('/;')[0]} refused the session: Invalid "
                f"authentication token (the profile's token field, or ;token=... in its host)."
                ) in console, console
        assert "not-the-token" not in console, console

    def test_server_not_answering(self, project, tmp_path):
        """A profile whose server is not running: one plain sentence naming its URL (the
        token masked), nothing changed, and quickly (no ten minutes of gRPC retries)."""
        port = free_port()
        console = self._run_with(project, tmp_path, host=f"sc://localhost:{port}/;token=s3cr3t-t0ken")
        assert f"no Spark Connect server answered at sc://localhost:{port} (Connection refused)" in console, console
        assert "s3cr3t" not in console, console
        assert "Traceback" not in console and "Warning" not in console, console
