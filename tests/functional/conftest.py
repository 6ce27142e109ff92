import pytest

# The Spark Thrift Server fixture (session-scoped; started only by tests that ask for it).
from tests.functional.thrift_server import spark_thrift_server  # noqa: F401


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
