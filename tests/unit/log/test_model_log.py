"""One log system per model run (log_system.ModelLog): the adapter's run state looks the model's
log system up once, the Kafka system resolves its clients' settings and address once, and no
module of the stages below the adapter looks either up again."""
import ast
from pathlib import Path

from dbt.adapters.logstore.commit.model_run import ModelRunState
from dbt.adapters.logstore.config.log_config import LogConfig
from dbt.adapters.logstore.log import log_system
from dbt.adapters.logstore.log.kafka import config as kafka_config
from dbt.adapters.logstore.log.kafka.log_system import KafkaLogSystem
from dbt.adapters.logstore.log.log_system import LogSystem, ModelLog, register

PACKAGE = Path(__file__).resolve().parents[3] / "dbt" / "adapters" / "logstore"
LOOKUPS = {"get_log_system", "open_model_log", "resolve_clients", "client_config", "servers_setting"}
# where a lookup may happen: the adapter's run state, the commands' and the reader's entries, the
# log system that resolves its own settings, and the fallback for a change set written alone
# (the Kafka clients resolve their own settings only when a test builds one alone)
ALLOWED = {"commit/model_run.py", "impl.py", "reading/status.py", "reading/reader.py", "reading/runs.py",
           "log/log_system.py", "log/kafka/log_system.py", "log/kafka/config.py",
           "log/kafka/reading.py", "log/kafka/python_writer.py", "log/kafka/confluent_writer.py",
           "commit/snapshots.py", "config/address.py",
           "connections.py"}  # dbt debug's one check of the profile's log


def counting_system():
    """A log system that counts how often it is made (its abstract methods do nothing)."""
    made = []
    body = {name: (lambda self, *args: None) for name in LogSystem.__abstractmethods__}
    system = type("Counting", (LogSystem,), {
        **body, "name": "counting", "__init__": lambda self: made.append(self),
        "open_reader": lambda self, log: ("reader of", log.topic)})
    return system, made


def test_a_model_run_looks_its_log_system_up_once(monkeypatch):
    monkeypatch.setattr(log_system, "_REGISTRY", dict(log_system._REGISTRY))
    system, made = counting_system()
    register("counting", system)
    state = ModelRunState()
    first = LogConfig(model="m", system="counting", topic="t", bootstrap_servers="b:9092")
    shaped = LogConfig(model="m", system="counting", topic="t", bootstrap_servers="b:9092",
                       unique_key=("id",))  # a continuing log's stored shape: other options
    logs = [state.model_log(log) for log in (first, first, shaped, first, shaped)]
    assert len(made) == 1
    assert {id(log.system) for log in logs} == {id(logs[0].system)}
    assert logs[2].config is shaped and logs[3].config is first
    assert logs[2].open_reader() == ("reader of", "t")


def test_another_run_looks_it_up_again(monkeypatch):
    monkeypatch.setattr(log_system, "_REGISTRY", dict(log_system._REGISTRY))
    system, made = counting_system()
    register("counting", system)
    log = LogConfig(model="m", system="counting", topic="t", bootstrap_servers="b:9092")
    ModelRunState().model_log(log)
    ModelRunState().model_log(log)
    assert len(made) == 2


def test_the_kafka_system_resolves_its_clients_once_per_log(monkeypatch):
    calls = []
    resolve = kafka_config.resolve_clients
    monkeypatch.setattr("dbt.adapters.logstore.log.kafka.log_system.resolve_clients",
                        lambda log: calls.append(log) or resolve(log))
    log = LogConfig(model="m", system="kafka", topic="t", bootstrap_servers="b1:9092,b2:9092",
                    client_properties={"security.protocol": "SSL"})
    model_log = ModelLog(log, KafkaLogSystem())
    readers = [model_log.open_reader(), model_log.open_reader(), model_log.with_config(log).open_reader()]
    assert len(calls) == 1
    assert readers[0].config["bootstrap_servers"] == ["b1:9092", "b2:9092"]
    assert readers[0].config["security_protocol"] == "SSL"
    other = LogConfig(model="m", system="kafka", topic="t", bootstrap_servers="b3:9092")
    assert model_log.with_config(other).open_reader().config["bootstrap_servers"] == ["b3:9092"]
    assert len(calls) == 2  # another address: resolved for it


def calls_of(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in LOOKUPS:
                yield name, node.lineno


def test_no_stage_below_the_adapter_looks_the_log_system_up_again():
    found = {str(p.relative_to(PACKAGE)): list(calls_of(p)) for p in PACKAGE.rglob("*.py")}
    assert found["commit/model_run.py"]  # the test reads what it means to
    stray = [f"{path}:{line} calls {name}" for path, calls in sorted(found.items())
             if path not in ALLOWED for name, line in calls]
    assert not stray, "; ".join(stray)
