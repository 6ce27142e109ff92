import pytest

from dbt.adapters.logstore.log.kafka.errors import _BRIDGE


@pytest.fixture(autouse=True)
def no_kafka_warnings_of_an_earlier_test():
    """kafka-python's warnings are kept process-wide (kafka/errors.py): each test starts without
    those an earlier test in the same worker left."""
    _BRIDGE.recent.clear()
