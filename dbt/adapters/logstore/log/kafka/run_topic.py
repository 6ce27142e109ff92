"""The project's run topic on Kafka (log/run_records.py has the record's format): created on
first use (one partition: the records' order is the runs' order of ending; kept forever, as a
control topic is: a run record must outlive nothing it names, but readers start from it), a
record written in a transaction of its own, and read back to the end."""
from __future__ import annotations

from typing import Any, Dict, List

from dbt.adapters.logstore.config.log_config import LogConfig, control_topic_for
from dbt.adapters.logstore.log.kafka.config import KafkaClients
from dbt.adapters.logstore.log.kafka.reading import KafkaLogReader
from dbt.adapters.logstore.log.kafka.retrying import closing, start_client, with_retries
from dbt.adapters.logstore.log.log_system import LogRecord
from dbt.adapters.logstore.names import transactional_id

RUN_TOPIC_SETTINGS = {"retention.ms": "-1"}


def create_run_topic(admin: Any, log: LogConfig, topic: str) -> None:
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    if topic in admin.list_topics():
        return
    try:
        admin.create_topics([NewTopic(topic, 1, log.replication, topic_configs=RUN_TOPIC_SETTINGS)])
    except TopicAlreadyExistsError:  # another invocation created it meanwhile
        pass


def write_record(clients: KafkaClients, topic: str, writer_id: str, key: bytes,
                 value: bytes) -> None:
    """One record, committed in its own transaction (a read_committed reader sees it whole or
    not at all; `writer_id` is the invocation's, so a retry of the same invocation's write
    fences the earlier one)."""
    from kafka import KafkaProducer

    config: Dict[str, Any] = dict(clients.producer)
    config.update(enable_idempotence=True, transactional_id=transactional_id(writer_id))

    def attempt() -> None:
        producer = start_client(KafkaProducer, config)
        try:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send(topic, key=key, value=value, partition=0)
            producer.commit_transaction()
        finally:
            closing(producer)

    with_retries(attempt, config, f"writing the run record to {topic}")


def read_records(log: LogConfig, clients: KafkaClients, topic: str,
                 last_only: bool = False) -> List[LogRecord]:
    """The run topic's committed records; with `last_only` the last one, read from near the end
    (a year of hourly runs is thousands of records): the whole topic only when its tail holds
    no committed record."""
    reader = KafkaLogReader(log, clients)
    if last_only:
        tails = reader.tails([topic])
        return (tails[topic] if topic in tails else reader.records_to_end(topic))[-1:]
    return reader.records_to_end(topic)


def control_tails(logs: List[LogConfig], clients: KafkaClients) -> Dict[str, List[LogRecord]]:
    """Per log's topic, the last records of its control topic ([]: none yet): one consumer
    reads the tails of all of them; a control topic whose tail holds no committed record
    (aborted transactions only, or one still open) is read whole."""
    reader = KafkaLogReader(logs[0], clients)
    controls = {control_topic_for(str(log.topic)): str(log.topic) for log in logs}
    tails = reader.tails(sorted(controls))
    return {topic: tails[control] if control in tails else reader.records_to_end(control)
            for control, topic in controls.items()}
