"""The log-system interface: WriteResult, registry."""
import pytest

from dbt.adapters.logstore.log import log_system
from dbt.adapters.logstore.log.log_system import LogSystem, WriteResult, get_log_system, register


def test_write_result_defaults():
    result = WriteResult(topic="t")
    assert result.records == 0
    assert result.offsets == {}


def test_acknowledge_first_offset():
    result = WriteResult(topic="t")
    result.acknowledge(0, 5)
    assert result.offsets == {0: (5, 6)}


def test_acknowledge_tracks_range_per_partition_out_of_order():
    result = WriteResult(topic="t")
    for partition, offset in [(0, 5), (0, 3), (0, 7), (2, 10), (0, 4), (2, 11)]:
        result.acknowledge(partition, offset)
    assert result.offsets == {0: (3, 8), 2: (10, 12)}


def test_acknowledge_repeated_offset_is_idempotent():
    result = WriteResult(topic="t")
    result.acknowledge(1, 0)
    result.acknowledge(1, 0)
    assert result.offsets == {1: (0, 1)}


def test_write_results_do_not_share_offsets():
    a, b = WriteResult(topic="a"), WriteResult(topic="b")
    a.acknowledge(0, 1)
    assert b.offsets == {}


def test_get_log_system_kafka():
    from dbt.adapters.logstore.log.kafka.log_system import KafkaLogSystem

    system = get_log_system("kafka")
    assert isinstance(system, KafkaLogSystem)
    assert isinstance(system, LogSystem)
    assert get_log_system("kafka") is not system  # a fresh instance per call


def test_get_log_system_unknown():
    with pytest.raises(ValueError) as info:
        get_log_system("pulsar")
    assert "'pulsar'" in str(info.value)
    assert "kafka" in str(info.value)  # names the known systems


def test_register_custom_system(monkeypatch):
    monkeypatch.setattr(log_system, "_REGISTRY", dict(log_system._REGISTRY))

    class Custom(LogSystem):
        name = "custom"

        def prepare(self, log):
            return 1

        def check(self, log):
            return []

        def find_confirmation(self, log, table_id, changeset):
            return None

        def open_writer(self, log, writer_id):
            raise NotImplementedError

        def open_reader(self, log):
            raise NotImplementedError

    register("custom", Custom)
    assert isinstance(get_log_system("custom"), Custom)


def test_interfaces_are_abstract():
    with pytest.raises(TypeError):
        LogSystem()
    with pytest.raises(TypeError):
        log_system.LogWriter()


def test_find_confirmation_is_part_of_the_interface(monkeypatch):
    # a log system that cannot answer the recovery question cannot be registered and used
    class WithoutConfirmation(LogSystem):
        name = "partial"

        def prepare(self, log):
            return 1

        def check(self, log):
            return []

        def open_writer(self, log, writer_id):
            raise NotImplementedError

    with pytest.raises(TypeError, match="find_confirmation"):
        WithoutConfirmation()
    assert "find_confirmation" in LogSystem.__abstractmethods__


def test_writer_interface_methods_are_abstract():
    assert log_system.LogWriter.__abstractmethods__ == {"send", "commit", "abort"}


def test_a_log_system_has_a_read_side():
    # a log system that cannot be read serves neither recovery's readers nor consumers
    assert "open_reader" in LogSystem.__abstractmethods__
    assert log_system.LogReader.__abstractmethods__ == {
        "control_records", "end_offsets", "read_range", "feed"}
    assert log_system.LogFeed.__abstractmethods__ == {"poll", "position", "at_end", "close"}


def test_log_records_carry_what_decoding_reads():
    record = log_system.LogRecord(2, 7, b'{"id":1}', None, (("logstore.snapshot", b"3"),))
    from dbt.adapters.logstore.formats import decode_record

    change = decode_record(record, 3)
    assert (change.partition, change.offset, change.key, change.op) == (2, 7, {"id": 1}, "d")
