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
    from tests.functional.dbt_helpers import servers_from_env

    return {
        "type": "logstore",
        "method": "session",
        "host": "localhost",
        "threads": 1,
        "kafka_bootstrap_servers": servers_from_env(kafka_bootstrap_servers),
        "session_dir": spark_session_dir,
        "server_side_parameters": dict(TEST_SESSION),
    }


# `make test` spreads test files over four workers (pytest-xdist, -n 4 --dist loadfile
# --no-loadscope-reorder), handing each worker the next file in collection order when it
# finishes one. The longest files go first (seconds of a worker in a full run, `--durations`),
# so that none of them starts last while the other workers sit idle.
LONGEST_FIRST = (  # seconds of a worker in the full run of 2026-11-28 12:12 (junit times)
    "test_table_formats",  # 1,132 s: Delta 555, Iceberg 512 (history checks since cut)
    "test_standalone_cluster",  # 1,007 s: session 523, thrift 448
    "test_log_life",  # 681 s, ten tests (its own one-node cluster)
    "test_schema_changes",  # 624 s
    "test_faults_random",  # 602 s
    "test_node_restarts",  # 591 s (its own 3-node cluster and Thrift Server)
    "test_faults_concurrency",  # 567 s
    "test_faults_random_delta",  # 558 s (six models then, four since)
    "test_rebase_readers",  # 516 s (a plain reader stuck 300 s; fixed since)
    "test_faults_random_iceberg",  # 428 s (six models then, four since)
    "test_faults_generations",  # 403 s
    "test_options",  # 366 s
    "test_cli_errors",  # 308 s, thirty tests
    "test_consuming",  # 286 s
    "test_peer_flink",  # 283 s
    "test_apache_kafka",  # 275 s
    "test_broker_failure",  # 271 s
    "test_contract",  # 240 s
    "test_faults_early",  # 219 s
    "test_downstream_thrift",  # 205 s
    "test_install",  # 203 s: make wheel, a fresh venv, dbt debug and run
    "test_connect_faults",  # 160-210 s alone (2026-11-29): its own Spark Connect server
    "test_faults_late",  # 183 s
    "test_microbatch",  # 180 s
    "test_reduced_inputs",  # 177 s
    "test_faults_incremental",  # 176 s
    "test_live_spark",  # 168 s
    "test_faults_parallel",  # 155 s
    "test_live_flink",  # 153 s
    "test_connect",  # 122 s alone (2026-11-29): its own Spark Connect server
    "test_seeds",  # 115 s
    "test_downstream",  # 106 s
    "test_config_errors",  # 98 s
    "test_pyspark_4_3",  # 90 s alone (2026-11-29): dbt on pyspark 4.3 in .venv-pyspark43
    "test_kafka_connect_sink",  # 88 s
    "test_console",  # 81 s
    "test_snapshots",  # 79 s
    "test_adapter_basic",  # 75 s
    "test_kafka_security",  # 70 s
    "test_kafka_versions",  # 70 s alone (2026-11-29): its own 3-node Apache Kafka 3.9 cluster
)


def pytest_collection_modifyitems(items):
    def rank(item) -> int:
        module = item.nodeid.split("::")[0].rsplit("/", 1)[-1][:-3]
        return LONGEST_FIRST.index(module) if module in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the order within a file, and among the rest, is kept
