"""Profile fields: everything dbt-spark has, plus Kafka defaults and a local session directory."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from dbt.adapters.spark.connections import SparkCredentials


@dataclass
class LogstoreCredentials(SparkCredentials):
    # Default Kafka servers for models that log and do not set kafka.bootstrap.servers.
    kafka_bootstrap_servers: Optional[str] = None
    # Kafka client properties (security.protocol, sasl.*, ssl.*). May hold secrets: never
    # listed by `dbt debug`, never stored with a table.
    kafka_properties: Dict[str, str] = field(default_factory=dict)
    # The Kafka client library: kafka-python (default) or confluent (confluent-kafka, with its
    # bundled librdkafka: pip install 'dbt-logstore[confluent]').
    kafka_client: str = "kafka-python"
    # session method: where the local warehouse and Derby metastore live
    # (default: <project>/<target-path>/logstore_spark).
    session_dir: Optional[str] = None
    # How long a model's run lock lasts without renewal; the owner renews it at every protocol
    # step, and a lock whose lease expired is taken over by the next run (run_lock.py).
    lock_lease_seconds: float = 600

    @classmethod
    def __pre_deserialize__(cls, data: Any) -> Any:
        data = super().__pre_deserialize__(data)
        # A local session needs no host; dbt-spark insists on one, so give it a placeholder.
        if data.get("method") == "session" and not data.get("host"):
            data["host"] = "localhost"
        return data

    @property
    def type(self) -> str:
        return "logstore"

    def _connection_keys(self) -> Tuple[str, ...]:
        return super()._connection_keys() + ("method", "kafka_bootstrap_servers", "session_dir")
