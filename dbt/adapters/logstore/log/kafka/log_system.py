"""The Kafka log system: the topics (created, checked), finding an attempt's confirmation after a
crash, a writer per commit on the profile's Kafka client (python_writer, confluent_writer;
their settings in config) and the read side (reading)."""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Optional, Set, Tuple, TypeVar

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.logstore import faults
from dbt.adapters.logstore.spark.catalog import logger
from dbt.adapters.logstore.log.control_records import parse_control_record
from dbt.adapters.logstore.log.kafka.config import KafkaClients, resolve_clients
from dbt.adapters.logstore.log.kafka.errors import (
    bridge_kafka_logs, describe, kafka_failure,
)
from dbt.adapters.logstore.log.kafka.reading import KafkaLogReader, Offsets, partition_offsets
from dbt.adapters.logstore.log.kafka.retrying import closing, retriable, start_client, with_retries
from dbt.adapters.logstore.log.lifecycle.retention import creation_settings
from dbt.adapters.logstore.config.log_config import LogConfig, LogConfigError, control_topic_for
from dbt.adapters.logstore.log.log_system import LogReader, LogState, LogSystem, LogWriter, ReaderError
from dbt.adapters.logstore.names import task_writer_id, transactional_id

bridge_kafka_logs()  # kafka-python's log lines go to dbt's debug log, not the console

# The topic settings that decide what a data topic keeps (LogState.settings).
KEPT_SETTINGS = ("cleanup.policy", "retention.ms", "retention.bytes")
T = TypeVar("T")
_NO_TOPIC_ID = "00000000-0000-0000-0000-000000000000"  # a broker that has no topic ids


def _unreachable(log: LogConfig, clients: KafkaClients, exc: Exception) -> DbtRuntimeError:
    """The log cannot be used: the cause in plain words (errors.py)."""
    return kafka_failure(log.model, clients.servers, exc, setting=clients.setting)


def _with_admin(log: LogConfig, clients: KafkaClients, conversation: Callable[[Any], T],
                doing: str) -> T:
    """One conversation on its own admin client, tried again while a node is down
    (retrying.with_retries); kafka-python's errors in plain words."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    config = clients.admin

    def attempt() -> T:
        admin = start_client(KafkaAdminClient, config)
        try:
            return conversation(admin)
        finally:
            closing(admin)

    try:
        return with_retries(attempt, config, doing)
    except KafkaError as exc:
        raise _unreachable(log, clients, exc) from exc


class KafkaLogSystem(LogSystem):
    """One instance serves one model's run (log_system.ModelLog): the clients' settings of its
    log are resolved once, on first use, and every conversation of the run starts from them."""

    name = "kafka"

    def __init__(self) -> None:
        self._resolved: Dict[Tuple[Any, ...], KafkaClients] = {}

    def clients(self, log: LogConfig) -> KafkaClients:
        """`log`'s address and client settings (config.resolve_clients), once per address."""
        key = (log.model, str(log.bootstrap_servers), log.client, getattr(log, "servers_setting", None),
               tuple(sorted((str(k), str(v)) for k, v in log.client_properties.items())))
        if key not in self._resolved:
            self._resolved[key] = resolve_clients(log)
        return self._resolved[key]

    def prepare(self, log: LogConfig) -> int:
        return _with_admin(log, self.clients(log), lambda admin: self._prepare(log, admin),
                           "creating the topics")

    def _prepare(self, log: LogConfig, admin: Any) -> int:
        from kafka.admin import NewTopic
        from kafka.errors import TopicAlreadyExistsError

        existing = self._partition_count(admin, str(log.topic))
        if existing is None:
            try:
                # settings that keep the contract, under the model's own (lifecycle/retention.py)
                admin.create_topics([NewTopic(str(log.topic), log.partitions, log.replication,
                                              topic_configs=creation_settings(log))])
                existing = log.partitions
            except TopicAlreadyExistsError:  # created concurrently: fine
                existing = self._partition_count(admin, str(log.topic))
        if self._partition_count(admin, control_topic_for(str(log.topic))) is None:
            try:
                # kept forever: a confirmation must outlive the records it confirms
                admin.create_topics([NewTopic(control_topic_for(str(log.topic)), 1,
                                              log.replication,
                                              topic_configs={"retention.ms": "-1"})])
            except TopicAlreadyExistsError:
                pass
        transactions = log.transaction_topic  # Debezium's BEGIN/END, one partition as Debezium's
        if transactions and self._partition_count(admin, transactions) is None:
            try:
                admin.create_topics([NewTopic(transactions, 1, log.replication)])
            except TopicAlreadyExistsError:
                pass
        if existing is not None and existing < log.partitions:
            raise LogConfigError(
                f"Model '{log.model}': topic '{log.topic}' has {existing} partitions but "
                f"'log.system.partitions' is {log.partitions}. Allowed: at most the topic's "
                f"partition count (growing a topic would move keys between partitions)."
            )
        return int(existing or log.partitions)

    def observe(self, log: LogConfig, control_created: bool = False) -> LogState:
        faults.maybe_crash(faults.LOG_CHECKS_POINT)
        topic, control = str(log.topic), control_topic_for(str(log.topic))

        def described(admin: Any) -> Tuple[Any, Set[str], Dict[str, Any], Dict[str, str], Offsets]:
            existing = set(admin.list_topics())
            descriptions = admin.describe_topics(
                [t for t in (topic, control) if t in existing]) if {topic, control} & existing else []
            partitions = [p["partition_index"] for d in descriptions if d["name"] == topic
                          for p in d.get("partitions") or ()]
            return (admin.describe_cluster().get("cluster_id"), existing,
                    {d["name"]: _topic_id(d) for d in descriptions},
                    self._settings(admin, topic) if topic in existing else {},
                    partition_offsets(admin, topic, partitions))

        cluster_id, existing, ids, settings, (starts, ends) = _with_admin(
            log, self.clients(log), described, "describing the topics")
        reader = self.open_reader(log)
        try:
            # a control topic created by this run a moment ago is empty: not read (its empty
            # polls are most of a first build's Kafka time)
            records = reader.control_records() if control in existing and not control_created else []
        except ReaderError as exc:  # already in plain words, naming the model
            raise DbtRuntimeError(str(exc)) from exc
        return LogState(cluster_id=cluster_id or None, topic_exists=topic in existing,
                        topic_id=ids.get(topic), control_topic_exists=control in existing,
                        control_topic_id=ids.get(control), start_offsets=starts, end_offsets=ends,
                        settings=settings, control_records=tuple(records),
                        control_held_back=reader.held_back)

    @staticmethod
    def _settings(admin: Any, topic: str) -> Dict[str, str]:
        """The topic's KEPT_SETTINGS as the broker applies them ({} where it reports none)."""
        from kafka.admin import ConfigResource, ConfigResourceType
        from kafka.errors import KafkaError

        try:
            described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)],
                                               config_filter="all")
        except (KafkaError, NotImplementedError) as exc:  # a broker without DescribeConfigs
            if retriable(exc):
                raise  # a node down, not an answer: the conversation is tried again
            return {}
        found: Dict[str, str] = {}
        for key, data in _config_entries(described, topic):
            if key in KEPT_SETTINGS:
                value = data.get("value") if isinstance(data, dict) else data
                if value is not None:
                    found[key] = str(value)
        return found

    def check(self, log: LogConfig) -> "list[str]":
        from kafka.admin import NewTopic
        from kafka.errors import KafkaError, TopicAlreadyExistsError

        def checked(admin: Any) -> "list[str]":
            try:
                topics = admin.list_topics()
                lines = [f"Kafka at {log.bootstrap_servers}: reachable ({len(topics)} topics)"]
                probe = "dbt-logstore-debug-probe"
                try:  # validate_only: a broker that honours it creates nothing
                    admin.create_topics([NewTopic(probe, 1, 1)], validate_only=True)
                    lines.append("Kafka topics: creatable")
                except TopicAlreadyExistsError:
                    lines.append("Kafka topics: creatable")
                if probe in admin.list_topics():  # a broker that ignored validate_only
                    admin.delete_topics([probe])
                return lines
            except KafkaError as exc:
                if retriable(exc):
                    raise  # a node down: the next try asks another
                raise DbtRuntimeError(
                    f"Kafka at '{log.bootstrap_servers}' is reachable but refused a check: "
                    f"{describe(exc)}") from exc

        return _with_admin(log, self.clients(log), checked, "checking the cluster")

    @staticmethod
    def _partition_count(admin: Any, topic: str) -> Optional[int]:
        if topic not in admin.list_topics():
            return None
        (description,) = admin.describe_topics([topic])
        return len(description["partitions"])

    def find_confirmation(self, log: LogConfig, table_id: str, changeset: str) -> Optional[Dict[str, Any]]:
        from kafka.errors import KafkaError

        try:
            if log.transactional:
                # Fence the crashed writer first: its open transaction is aborted, so it can
                # neither commit later nor hold back read_committed readers of the control topic.
                # The writers of a parallel mirror (Spark tasks) are fenced too.
                config = self.clients(log).producer
                for writer_id in [table_id] + [task_writer_id(table_id, i) for i in range(log.parallelism)
                                               if log.parallelism > 1]:
                    with_retries(lambda: _fence(config, transactional_id(writer_id)), config,
                                 "fencing the crashed writer")
        except KafkaError as exc:
            raise _unreachable(log, self.clients(log), exc) from exc
        try:
            records = self.open_reader(log).control_records()
        except ReaderError as exc:  # already in plain words, naming the model
            raise DbtRuntimeError(str(exc)) from exc
        found = None
        for record in records:  # the last matching attempt: a retry's confirmation is later
            value = parse_control_record(record.value)
            if value.get("table") == table_id and value.get("changeset") == changeset:
                found = value
        return found

    def open_writer(self, log: LogConfig, writer_id: str) -> LogWriter:
        if log.client == "confluent":
            from dbt.adapters.logstore.log.kafka.confluent_writer import ConfluentLogWriter

            return ConfluentLogWriter(log, writer_id, self.clients(log))
        from dbt.adapters.logstore.log.kafka.python_writer import KafkaLogWriter

        return KafkaLogWriter(log, writer_id, self.clients(log))

    def open_reader(self, log: LogConfig) -> LogReader:
        return KafkaLogReader(log, self.clients(log))

    def write_run_record(self, log: LogConfig, topic: str, writer_id: str, key: bytes,
                         value: bytes) -> None:
        from kafka.errors import KafkaError

        from dbt.adapters.logstore.log.kafka import run_topic

        _with_admin(log, self.clients(log), lambda admin: run_topic.create_run_topic(admin, log, topic),
                    "creating the run topic")
        try:
            run_topic.write_record(self.clients(log), topic, writer_id, key, value)
        except KafkaError as exc:
            raise _unreachable(log, self.clients(log), exc) from exc

    def control_tails(self, logs: Any) -> Dict[str, Any]:
        from dbt.adapters.logstore.log.kafka import run_topic

        found: Dict[str, Any] = {}
        by_cluster: Dict[Tuple[Any, ...], list] = {}
        for log in logs:  # one consumer per cluster and client settings (usually one)
            clients = self.clients(log)
            by_cluster.setdefault((clients.servers, repr(sorted(clients.consumer.items()))), []).append(log)
        for group in by_cluster.values():
            try:
                found.update(run_topic.control_tails(group, self.clients(group[0])))
            except ReaderError as exc:  # already in plain words
                raise DbtRuntimeError(str(exc)) from exc
        return found

    def run_records(self, log: LogConfig, topic: str, last_only: bool = False) -> "list[Any]":
        from dbt.adapters.logstore.log.kafka import run_topic

        try:
            return run_topic.read_records(log, self.clients(log), topic, last_only)
        except ReaderError as exc:  # already in plain words
            raise DbtRuntimeError(str(exc)) from exc

    def sql_tasks(self, log: LogConfig, query: Any, changes_relation: str,
                  sink_relation: str) -> Optional[Any]:
        from dbt.adapters.logstore.log.kafka.spark_writer import SparkKafkaTasks, refusal

        instead = "streaming the change set through the cursor"
        why = refusal(log)
        if why is not None:
            logger.info(f"{log.model}: {instead}, not Spark's Kafka writer: {why}")
            return None
        tasks = SparkKafkaTasks(log, query, changes_relation, sink_relation,
                                lambda: self.open_reader(log).offsets()[1])
        if not tasks.available():
            message = (f"Model '{log.model}': Spark's Kafka writer needs Spark's Kafka data "
                       f"source (the spark-sql-kafka-0-10 jar and its dependencies, "
                       f"docs/operations.md); {instead} instead")
            logger.warning(message)
            return None
        return tasks


def _fence(config: Dict[str, Any], transactional: str) -> None:
    """Abort the open transaction of `transactional` (a new epoch of it: init_transactions)."""
    from kafka import KafkaProducer

    fence = start_client(KafkaProducer, config, transactional_id=transactional)
    try:
        fence.init_transactions()
    finally:
        fence.close()


def _topic_id(description: Dict[str, Any]) -> Optional[str]:
    value = description.get("topic_id")
    return None if value is None or str(value) == _NO_TOPIC_ID else str(value)


def _config_entries(described: Any, topic: str) -> Iterable[Any]:
    """(key, data) of describe_configs' answer for one topic, whichever shape the client gives."""
    if isinstance(described, dict):
        entries = (described.get("topic") or {}).get(topic) or {}
        return entries.items() if isinstance(entries, dict) else []
    return []
