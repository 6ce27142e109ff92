"""The random-kill test (test_faults_random.py: a logged seed, keyed and keyless tables, an
incremental append, an eventual table of two Spark writers, a microbatch model; `dbt build`
killed at a random moment, then recovered and checked) with every table on Iceberg, and on
Delta: their atomic replace, MERGE-less overwrite and version tie recover by the rules of
docs/log-format.md. The tables are read from their files (Delta by path, Iceberg from its
newest metadata file). One round each in `make test`; `make soak` runs LOGSTORE_KILL_ROUNDS."""
import pytest

from tests.functional.test_faults_random import run_kill_test
from tests.table_formats import FORMATS

pytestmark = pytest.mark.apache_kafka  # proven on Apache Kafka (tests/kafka_cluster.py)


@pytest.mark.parametrize("table_format", FORMATS)
def test_random_kills_on(table_format, tmp_path, kafka_bootstrap_servers):
    run_kill_test(tmp_path, kafka_bootstrap_servers, table_format)
