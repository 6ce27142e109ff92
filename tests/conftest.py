import os
import sys
import tempfile
from pathlib import Path

import pytest

pytest_plugins = ["dbt.tests.fixtures.project"]

# A test may start this process's Spark session itself (tests/functional/contract.py spark())
# before dbt does; its Python workers (parallel mirror, logstore_changes tasks) must then run
# this interpreter too, as the adapter arranges for the sessions it starts.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Every Spark driver the tests start, in this process and in the dbt processes they run,
# starts with the tests' Spark defaults, both table formats' jars and a class-data archive
# (tests/spark_jvm.py).
from tests.spark_jvm import configure_test_spark  # noqa: E402

configure_test_spark()


@pytest.fixture(scope="session")
def embedded_broker():
    """The embedded development broker (tansu, memory storage) on a free port for this test
    session: the cheaper broker, for tests that are not about the broker."""
    from dbt.adapters.logstore.cli.broker import EmbeddedBroker, free_port

    with tempfile.TemporaryDirectory(prefix="logstore-broker-") as state_dir:
        broker = EmbeddedBroker(port=free_port(), state_dir=Path(state_dir))
        broker.start()
        try:
            yield broker.bootstrap_servers
        finally:
            broker.stop()


@pytest.fixture(scope="session")
def apache_kafka(tmp_path_factory):
    """Apache Kafka: three KRaft nodes on loopback, replication factor 3, min.insync.replicas 2
    (tests/kafka_cluster.py). `make test` starts one for the whole run and shares it among the
    workers (LOGSTORE_TEST_APACHE_KAFKA); without it, this worker starts its own."""
    from tests.kafka_cluster import ENV_VARIABLE, KafkaCluster

    shared = os.environ.get(ENV_VARIABLE)
    if shared:
        yield shared
        return
    with KafkaCluster(tmp_path_factory.mktemp("apache_kafka")) as cluster:
        yield cluster.bootstrap_servers


@pytest.fixture(scope="module")
def kafka_bootstrap_servers(request):
    """The broker of a test module: LOGSTORE_TEST_BOOTSTRAP_SERVERS if set (your own cluster),
    else Apache Kafka for the modules marked `apache_kafka` (what only a real broker proves:
    the contract, random kills, schema changes, the peers), else the embedded broker."""
    external = os.environ.get("LOGSTORE_TEST_BOOTSTRAP_SERVERS")
    if external:
        return external
    if request.node.get_closest_marker("apache_kafka"):
        return request.getfixturevalue("apache_kafka")
    return request.getfixturevalue("embedded_broker")


@pytest.fixture(scope="session", autouse=True)
def spark_session_dir(tmp_path_factory):
    """One Spark session (and one Derby metastore) serves this process's whole test session,
    whether a dbt run or a test's own query (tests/functional/contract.py spark()) starts it."""
    from tests.functional.contract import SESSION_DIR_VARIABLE

    session_dir = str(tmp_path_factory.mktemp("logstore_spark"))
    os.environ[SESSION_DIR_VARIABLE] = session_dir
    return session_dir


@pytest.fixture(scope="class")
def dbt_profile_target(kafka_bootstrap_servers, spark_session_dir):
    from tests.functional.contract import TEST_SESSION

    return {
        "type": "logstore",
        "method": "session",
        "host": "localhost",
        "threads": 1,
        "kafka_bootstrap_servers": kafka_bootstrap_servers,
        "session_dir": spark_session_dir,
        "server_side_parameters": dict(TEST_SESSION),
    }


# `make test` spreads test files over four workers (pytest-xdist, -n 4 --dist loadfile
# --no-loadscope-reorder), handing each worker the next file in collection order when it
# finishes one. The longest files go first (seconds of a worker in a full run, `--durations`),
# so that none of them starts last while the other workers sit idle.
LONGEST_FIRST = (  # seconds of a worker in a full run on four workers, 2026-11-26 (`--durations`)
    # 400-610 s alone under load 8-15 (2026-11-28): its own 3-node cluster and Thrift Server
    "test_node_restarts",
    "test_table_formats",  # ~870 s: Delta ~520, Iceberg ~340
    "test_standalone_cluster",  # ~1,210 s in the full run of 2026-11-27 04:44 (four tests then, two now)
    "test_faults_random_delta",  # ~660 s
    "test_faults_random_iceberg",  # ~500 s
    "test_faults_generations",  # ~200 s alone, ~410 s under load 10-15 (2026-11-28: 3 JVMs a round)
    "test_faults_random",  # ~440 s
    "test_faults_concurrency",  # ~420 s (2026-11-26 afternoon: a third frozen-owner case)
    "test_schema_changes",  # ~405 s
    "test_options",  # ~330 s
    "test_rebase_readers",  # ~330 s alone on a busy machine (2026-11-28; 730 s under load 20)
    "test_contract",  # ~310 s
    "test_install",  # ~90 s alone, ~315 s in the full run of 2026-11-27 04:44: make wheel, a fresh venv, dbt debug and run
    "test_peer_flink",  # ~300 s
    "test_consuming",  # ~270 s
    "test_reduced_inputs",  # ~225 s
    "test_broker_failure",  # ~220 s
    "test_faults_incremental",  # ~220 s
    "test_apache_kafka",  # ~200 s
    "test_log_life",  # ~200 s alone (its own one-node cluster)
    "test_faults_parallel",  # ~200 s
    "test_faults_late",  # ~190 s
    "test_microbatch",  # ~190 s
    "test_faults_early",  # ~170 s
    "test_live_spark",  # ~140 s
    "test_live_flink",  # ~130 s
    "test_seeds",  # ~125 s
    "test_downstream_thrift",  # ~115 s
    "test_downstream",  # ~100 s
    "test_kafka_security",
    "test_kafka_connect_sink",
    "test_cli_errors",
    "test_snapshots",  # ~60 s
    "test_parallel_mirror",
    "test_adapter_basic",
    "test_thrift",
)


def pytest_collection_modifyitems(items):
    def rank(item) -> int:
        module = item.nodeid.split("::")[0].rsplit("/", 1)[-1][:-3]
        return LONGEST_FIRST.index(module) if module in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the order within a file, and among the rest, is kept
