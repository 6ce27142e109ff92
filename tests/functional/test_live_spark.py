"""Spark Structured Streaming follows live dbt-logstore topics with Spark's own Kafka source
(spark-sql-kafka-0-10, `make jars`): tests/peers/spark_kafka_follow.py, the recipe of docs/consumers.md,
runs in its own Spark session (the jars go in when a session starts; this process's session is
dbt's, started without them) and, after the dbt runs, catches up from its checkpoint
(`availableNow`) and applies the changes in `foreachBatch`; its table must then equal dbt's.
Its first catch-up reads two runs at once, so a key's create and update, or create, delete and
tombstone, land in one micro-batch and only Kafka's order within the key gets them right."""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt

from tests.functional.contract import read_topic, rows_state, table_state

pytestmark = pytest.mark.apache_kafka  # Spark's Kafka source against Apache Kafka

ROOT = Path(__file__).resolve().parents[2]
FOLLOWER = ROOT / "tests" / "peers" / "spark_kafka_follow.py"
JARS = ROOT / ".jars" / "spark-kafka"

MODEL = """
{{{{ config(materialized='table', {config}) }}}}
{{% set step = var('step', 1) %}}
select id, name, cast(amount as decimal(12, 2)) as amount, cast(day as date) as day,
       cast(at as timestamp) as at
from values
{{% if step == 1 %}}
{rows[0]}
{{% elif step in (2, 3) %}}
{rows[1]}
{{% else %}}
{rows[2]}
{{% endif %}}
as t(id, name, amount, day, at)
"""

KEYED_ROWS = (
    """(1, 'Ada', '10.50', '2024-01-01', '2024-01-01 10:00:00'),
       (2, 'Bjørn', '0.01', '2024-02-29', '2024-02-29 23:59:59.123456'),
       (3, 'Chen 陈', '99999.99', '1999-12-31', '1970-01-01 00:00:00')""",
    # 2 updated, 3 deleted, 4 and 5 created
    """(1, 'Ada', '10.50', '2024-01-01', '2024-01-01 10:00:00'),
       (2, 'Bjørn Ø', '-0.01', '2024-03-01', '2024-03-01 00:00:00.000001'),
       (4, 'Dédé 🚀', null, null, null),
       (5, 'Eve', '0.00', '2000-01-01', '2030-06-30 12:34:56.5')""",
    # 1 deleted, 3 back, 4 updated from nulls, 6 created with a null name
    """(2, 'Bjørn Ø', '-0.01', '2024-03-01', '2024-03-01 00:00:00.000001'),
       (3, 'Chen again', '1.00', '1999-12-31', '1970-01-01 00:00:00'),
       (4, 'Dédé 🚀', '7.25', '2024-07-04', '2024-07-04 04:04:04'),
       (5, 'Eve', '0.00', '2000-01-01', '2030-06-30 12:34:56.5'),
       (6, null, '1', '2024-01-01', '2024-01-01 00:00:00')""",
)

KEYLESS_ROWS = (  # duplicates: a delete removes one of equal rows
    """(1, 'a', '1.00', '2024-01-01', '2024-01-01 00:00:00'),
       (1, 'a', '1.00', '2024-01-01', '2024-01-01 00:00:00'),
       (2, 'b', '2.00', '2024-01-02', '2024-01-02 00:00:00.5')""",
    """(1, 'a', '1.00', '2024-01-01', '2024-01-01 00:00:00'),
       (2, 'b', '2.00', '2024-01-02', '2024-01-02 00:00:00.5'),
       (2, 'b', '2.00', '2024-01-02', '2024-01-02 00:00:00.5'),
       (3, null, null, null, null)""",
    """(2, 'b', '2.00', '2024-01-02', '2024-01-02 00:00:00.5'),
       (3, null, null, null, null),
       (4, 'd', '4.00', '2024-01-04', '2024-01-04 04:00:00'),
       (4, 'd', '4.00', '2024-01-04', '2024-01-04 04:00:00'),
       (4, 'd', '4.00', '2024-01-04', '2024-01-04 04:00:00')""",
)

MODELS = {  # name: (config, rows, log.format)
    "keyed": ("unique_key='id', **{'log.system': 'kafka', 'log.system.partitions': 3}",
              KEYED_ROWS, "debezium-json"),
    "keyless": ("**{'log.system': 'kafka', 'log.system.partitions': 2}", KEYLESS_ROWS,
                "debezium-json"),
    "upserts": ("unique_key='id', **{'log.system': 'kafka', 'log.system.partitions': 2, "
                "'log.format': 'json'}", KEYED_ROWS, "json"),
}


def _run(step):
    return run_dbt(["run", "--vars", f"{{step: {step}}}"])


class SparkFollower:
    """tests/peers/spark_kafka_follow.py as a subprocess: one Spark JVM for the whole test."""

    def __init__(self, directory: Path, job: dict):
        self.directory = directory
        job_path = directory / "job.json"
        job_path.write_text(json.dumps({**job, "directory": str(directory)}))
        self.log_path = directory / "follower.log"
        self._log = open(self.log_path, "w")
        self._process = subprocess.Popen(
            [sys.executable, str(FOLLOWER), str(job_path)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._log, cwd=str(directory), text=True,
            start_new_session=True)  # its own process group: the JVM goes with it on a kill

    def sync(self, timeout_seconds: float = 300.0) -> dict:
        self._process.stdin.write("sync\n")
        self._process.stdin.flush()
        ready, _, _ = select.select([self._process.stdout], [], [], timeout_seconds)
        line = self._process.stdout.readline() if ready else ""
        if not line:
            raise AssertionError(f"the Spark follower gave no answer in {timeout_seconds} s:\n"
                                 + self.log_path.read_text()[-5000:])
        answer = json.loads(line)
        assert answer["ok"], "the Spark follower failed:\n" + answer["error"]
        return answer["models"]

    def rows(self, name: str) -> list:
        return [json.loads(line, parse_float=Decimal)
                for part in sorted((self.directory / name / "result").glob("part-*.json"))
                for line in part.read_text().splitlines() if line.strip()]

    def close(self):
        try:
            self._process.stdin.close()  # end of input: the follower stops Spark and exits
            self._process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
        finally:
            self._process.stdout.close()
            self._log.close()


class TestSparkStructuredStreamingFollowsTheLog:
    @pytest.fixture(scope="class")
    def models(self):
        return {f"{name}.sql": MODEL.format(config=config, rows=rows)
                for name, (config, rows, _) in MODELS.items()}

    def test_follower_table_equals_the_table(self, project, kafka_bootstrap_servers, tmp_path):
        jars = sorted(str(j) for j in JARS.glob("*.jar"))
        assert any("spark-sql-kafka-0-10" in j for j in jars), \
            f"Spark's Kafka source is not in {JARS}: run `make jars`"
        relations = {name: f"{project.test_schema}.{name}" for name in MODELS}

        _run(1)
        schemas = {name: table_state(relation)[0] for name, relation in relations.items()}
        job = {"bootstrap_servers": kafka_bootstrap_servers, "jars": jars, "models": [
            {"name": name, "topic": relations[name], "format": fmt, "keyed": name != "keyless",
             "columns": list(schemas[name].items())}
            for name, (_, _, fmt) in MODELS.items()]}
        follower = SparkFollower(tmp_path, job)  # its JVM starts while dbt runs step 2
        try:
            _run(2)
            read = self._caught_up(follower, relations, schemas)

            _run(3)  # the same rows: nothing logged, nothing read
            assert self._caught_up(follower, relations, schemas) == dict.fromkeys(MODELS, 0)

            _run(4)
            step4 = self._caught_up(follower, relations, schemas)
            assert all(step4.values()), step4
        finally:
            follower.close()
        for name, relation in relations.items():
            values = [m.value for m in read_topic(kafka_bootstrap_servers, relation)]
            # Spark's source read each committed record once, tombstones included
            assert read[name] + step4[name] == len(values), (name, read[name], step4[name])
            # what it applied: events (a tombstone after each keyed delete), or rows and
            # tombstones; so its table came from Spark's decoding of both kinds of record
            if MODELS[name][2] == "json":
                assert None in values and all(b'"op"' not in v for v in values if v), name
            else:
                ops = {json.loads(v)["op"] for v in values if v}
                assert ops == ({"c", "d"} if name == "keyless" else {"c", "u", "d"}), (name, ops)
                assert (None in values) == (name != "keyless"), name

    @staticmethod
    def _caught_up(follower, relations, schemas, timeout_seconds=60.0):
        """Sync until every follower table equals its dbt table: a transaction's commit
        markers land after the producer's commit returns, so a read_committed reader right
        after a run may see less than was committed. Returns the records read per model."""
        read = dict.fromkeys(relations, 0)
        deadline = time.monotonic() + timeout_seconds
        while True:
            for name, r in follower.sync().items():
                read[name] += r["records"]
            differ = {}
            for name, relation in relations.items():
                _, table = table_state(relation)
                followed = rows_state(schemas[name], follower.rows(name))
                if followed != table:
                    differ[name] = (f"only in Spark's: {followed - table}, "
                                    f"only in the table: {table - followed}")
            if not differ:
                return read
            if time.monotonic() > deadline:
                raise AssertionError(f"Spark's follower differs from the tables: {differ}")
            time.sleep(0.5)
