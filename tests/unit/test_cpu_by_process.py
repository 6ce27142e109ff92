"""tests/cpu_by_process.py names each of the suite's processes by its command line."""
import sys

import pytest

from tests.cpu_by_process import kind_of, main

CASES = [
    ("java -Xms64m -cp /x/.jars/kafka/kafka_2.13.jar kafka.Kafka /t/node-1/server.properties", "Kafka broker"),
    ("java -cp /p/jars/* org.apache.spark.deploy.SparkSubmit --class "
     "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2 spark-internal", "Spark Thrift Server"),
    ("java -cp /p/jars/* org.apache.spark.deploy.SparkSubmit --properties-file "
     "/w/tests/spark-conf/spark-defaults.conf pyspark-shell", "Spark driver"),
    ("java org.apache.spark.executor.CoarseGrainedExecutorBackend --driver-url x", "Spark executor"),
    ("/w/.venv/bin/python /w/.venv/bin/dbt run --project-dir /tmp/pytest-of-root/p0", "dbt command"),
    ("/w/.venv/bin/python -c import json, sys\nfrom dbt.cli.main import dbtRunner", "dbt (long-lived process)"),
    ("/w/.venv/bin/python /w/.venv/bin/dbt-logstore status --json", "dbt-logstore command"),
    ("/w/.venv/bin/python -u -c import sys;exec(eval(sys.stdin.readline()))", "pytest worker"),
    ("/usr/bin/sleep 1", "other: sleep"),
]


@pytest.mark.parametrize("command_line,kind", CASES)
def test_each_process_gets_its_kind(command_line, kind):
    assert kind_of(command_line) == kind


def test_a_command_is_run_and_its_exit_code_kept(capsys):
    assert main([sys.executable, "-c", "import sys; sum(range(10**6)); sys.exit(3)"], every=0.05) == 3
    assert "CPU-seconds in" in capsys.readouterr().out
