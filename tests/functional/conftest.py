import pytest

# The Spark Thrift Server fixture (session-scoped; started only by tests that ask for it).
from tests.functional.thrift_server import spark_thrift_server  # noqa: F401
# The standalone Spark cluster (module-scoped; started only by tests that ask for it).
from tests.functional.spark_cluster import standalone_cluster  # noqa: F401


@pytest.fixture(scope="module")
def flink_decoder(tmp_path_factory):
    """One Flink process (tests/functional/flink_peer.py) for a module's checks: it starts in the
    background while the module's first dbt runs go on."""
    from tests.functional.flink_peer import FlinkDecoder, flink_python

    decoder = FlinkDecoder(tmp_path_factory.mktemp("flink"), flink_python())
    try:
        yield decoder
    finally:
        decoder.close()


@pytest.fixture(scope="module")
def flink_kafka_decoder(tmp_path_factory):
    """The same with Flink's Kafka connector jar (`make jars`), for jobs that read topics
    themselves (flink_peer.kafka_case)."""
    from tests.functional.flink_peer import FlinkDecoder, flink_python, kafka_connector_jar

    decoder = FlinkDecoder(tmp_path_factory.mktemp("flink"), flink_python(), jars=[kafka_connector_jar()])
    try:
        yield decoder
    finally:
        decoder.close()


@pytest.fixture(scope="module")
def postgres_server():
    """A throwaway PostgreSQL server on loopback for the module (tests/postgres.py)."""
    from tests.postgres import PostgresServer

    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="module")
def kafka_connect(kafka_bootstrap_servers, request):
    """A Kafka Connect worker (standalone, Debezium's JDBC sink in its plugin.path) on the
    module's broker (tests/kafka_connect.py). When a test of the module failed, its files
    (connect.log) are kept and their directory printed."""
    from tests.kafka_connect import KafkaConnectWorker

    failed_before = request.session.testsfailed
    with KafkaConnectWorker(kafka_bootstrap_servers) as worker:
        yield worker
        if request.session.testsfailed > failed_before:
            worker.failed = True
