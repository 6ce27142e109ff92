"""The random-kill test (test_faults_random.py: `dbt build` killed at a random moment, then
recovered and checked) with every table on Delta: its atomic replace (a keyed table, a logged
seed), append (an incremental model) and partition overwrite (a microbatch model) and their
version tie recover by the rules of docs/log-format.md (FORMAT_MODELS: the keyless and eventual
models commit their tables as the keyed one does, and run on parquet). The tables are
read from their files. One round in `make test` (a file per format, so that the suite's workers
share them); `make soak SOAK_TESTS=...` runs LOGSTORE_KILL_ROUNDS."""
import pytest

from tests.functional.test_faults_random import run_kill_test

pytestmark = pytest.mark.apache_kafka  # proven on Apache Kafka (tests/kafka_cluster.py)


def test_random_kills_on_delta(tmp_path, kafka_bootstrap_servers):
    run_kill_test(tmp_path, kafka_bootstrap_servers, "delta")
