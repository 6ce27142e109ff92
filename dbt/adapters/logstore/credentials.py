"""Profile fields: everything dbt-spark has, plus Kafka defaults and a local session directory.

What each field this adapter adds means (FIELD_DESCRIPTIONS, with `host`, whose default it
changes) is here too: the Configuration page of the documentation is rendered from it and from
the fields' defaults (config/reference.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Optional, Tuple

from dbt.adapters.spark.connections import SparkCredentials
from dbt_common.dataclass_schema import StrEnum


class LogstoreConnectionMethod(StrEnum):
    """dbt-spark's methods, and Spark Connect's (spark/connect.py). Its members equal
    dbt-spark's SparkConnectionMethod members of the same name (both are strings)."""
    THRIFT = "thrift"
    HTTP = "http"
    ODBC = "odbc"
    SESSION = "session"
    CONNECT = "connect"


# Markdown; links are relative to the documentation's pages.
FIELD_DESCRIPTIONS: Dict[str, str] = {
    "kafka_bootstrap_servers": "Kafka servers for logged models that do not set `kafka.bootstrap.servers`.",
    "kafka_properties": (
        "Kafka client properties in Java spelling (`security.protocol`, `sasl.mechanism`, "
        "`sasl.plain.username`, `sasl.plain.password`, `ssl.cafile`, ...), translated to "
        "kafka-python settings. An unknown property is an error. These values are never printed "
        "by `dbt debug` and never stored with a table."),
    "kafka_client": (
        "The client library that writes the records: `kafka-python`, or `confluent` "
        "(confluent-kafka with its bundled librdkafka, several times faster: "
        "`pip install 'dbt-logstore[confluent]'`). Same records, partitions, transactions and "
        "tests. `kafka_properties` are passed to librdkafka, with kafka-python's names for "
        "SASL/SSL files and `max.request.size` translated. Topic management and recovery stay on "
        "kafka-python."),
    "session_dir": "Session method only: where the warehouse and the Derby metastore live.",
    "engine_output": (
        "Session method only: where Spark's, Hive's and Derby's own output goes. `file`: "
        "appended to `dbt-logstore-engine.log` in dbt's log directory (`logs/`), so the console "
        "shows dbt's lines only; `console`: on the console, stage progress bars included, as "
        "plain dbt-spark prints it. A failed statement shows Spark's one-line cause either way; "
        "its whole text (the Java stack trace) is in `logs/dbt.log`, or on the console with "
        "`dbt --debug`."),
    "lock_lease_seconds": (
        "How long a model's run lock lasts without renewal. An expired lock is taken over by the "
        "next run (see [One run at a time](operations.md#one-run-at-a-time-locks-and-leases))."),
    "host": ("dbt-spark requires a host. A local session has no use for one, so it defaults. "
             "`method: connect`: the Spark Connect server's URL, `sc://host:port` (port 15002 "
             "when left out), with Connect's `;token=...;use_ssl=true` parameters when the "
             "server needs them (or the `token` and `use_ssl` fields); the token is never "
             "printed."),
}
# The defaults that are not a constant of the field, as the reference shows them (Markdown).
FIELD_DEFAULTS_SHOWN: Dict[str, str] = {
    "session_dir": "`<project>/<target-path>/logstore_spark`",
    "host": "`localhost` for `method: session`",
}


def masked_host(host: str) -> str:
    """A Spark Connect URL (`sc://host:port/;name=value;...`) with its token parameter's value
    masked, for dbt debug and every message (spark/connect.py)."""
    head, sep, params = host.partition(";")
    if not sep:
        return host
    shown = []
    for part in params.split(";"):
        name, eq, _ = part.partition("=")
        shown.append(f"{name}=***" if eq and name.strip().lower() == "token" else part)
    return head + sep + ";".join(shown)


@dataclass
class LogstoreCredentials(SparkCredentials):
    # dbt-spark's methods and `connect` (Spark Connect: spark/connect.py)
    method: LogstoreConnectionMethod = None  # type: ignore
    # What each field means: FIELD_DESCRIPTIONS above.
    kafka_bootstrap_servers: Optional[str] = None
    # May hold secrets: never listed by `dbt debug`, never stored with a table.
    kafka_properties: Dict[str, str] = field(default_factory=dict)
    kafka_client: str = "kafka-python"
    session_dir: Optional[str] = None  # None: <project>/<target-path>/logstore_spark
    engine_output: str = "file"  # engine_output.py: "file" or "console"
    # The owner renews its lock at every protocol step (run_lock.py).
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

    def connection_info(self, *, with_aliases: bool = False) -> Iterable[Tuple[str, Any]]:
        """What `dbt debug` lists, a Spark Connect URL's token masked."""
        for key, value in super().connection_info(with_aliases=with_aliases):
            yield key, masked_host(value) if key == "host" and isinstance(value, str) else value

    def _connection_keys(self) -> Tuple[str, ...]:
        if self.method == LogstoreConnectionMethod.CONNECT:  # its host is the whole address
            return ("host", "schema", "method", "kafka_bootstrap_servers")
        return super()._connection_keys() + ("method", "kafka_bootstrap_servers", "session_dir")
