"""The random-kill test (test_faults_random.py) with every table on Delta, read from its files:
the models whose commits the format makes (FORMAT_MODELS there). A file per format, so that the
suite's workers share them: one round in `make test`, LOGSTORE_KILL_ROUNDS under `make soak`."""
import pytest

from tests.functional.test_faults_random import run_kill_test

pytestmark = pytest.mark.apache_kafka  # proven on Apache Kafka (tests/kafka_cluster.py)


def test_random_kills_on_delta(tmp_path, kafka_bootstrap_servers):
    run_kill_test(tmp_path, kafka_bootstrap_servers, "delta")
