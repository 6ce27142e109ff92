"""The run topic's read side (log/kafka/run_topic.py): the last record alone is read from near
the topic's end, and from the whole topic only when that tail holds no committed record."""
from dbt.adapters.logstore.log.kafka import run_topic


class Reader:
    def __init__(self, tail, whole):
        self.tail, self.whole, self.calls = tail, whole, []

    def __call__(self, log, clients):
        return self

    def tails(self, topics):
        self.calls.append("tails")
        return {topics[0]: self.tail} if self.tail is not None else {}

    def records_to_end(self, topic):
        self.calls.append("whole")
        return self.whole


def test_the_last_record_from_the_tail_else_the_whole_topic(monkeypatch):
    reader = Reader(["r7", "r8"], ["r1", "r8"])
    monkeypatch.setattr(run_topic, "KafkaLogReader", reader)
    assert run_topic.read_records(None, None, "runs", last_only=True) == ["r8"]
    assert reader.calls == ["tails"]
    reader = Reader(None, ["r1", "r2"])  # the tail holds aborted or open transactions only
    monkeypatch.setattr(run_topic, "KafkaLogReader", reader)
    assert run_topic.read_records(None, None, "runs", last_only=True) == ["r2"]
    assert run_topic.read_records(None, None, "runs") == ["r1", "r2"]
    assert reader.calls == ["tails", "whole", "whole"]
    reader = Reader([], [])  # no record yet
    monkeypatch.setattr(run_topic, "KafkaLogReader", reader)
    assert run_topic.read_records(None, None, "runs", last_only=True) == []
