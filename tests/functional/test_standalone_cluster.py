"""The production shape: a standalone Spark cluster (spark_cluster.py: a master and two
workers, their executors in their own JVMs with their own Python workers), with both of
dbt-spark's methods on it, on Apache Kafka:

- the session method with `spark.master: spark://...`: the parallel mirror's Spark tasks run in
  the executors (pickled there, importing the package from the same environment);
- the thrift method against a Spark Thrift Server that is itself an application of the cluster,
  with Spark's Kafka source on its class path: `log.mirror.parallelism` writes through Spark's
  own Kafka writer in the executors (kafka/spark_writer.py), the records placed as Kafka's
  partitioner places them;

each with a keyed table, a keyless table and a keyed incremental model (and an eventual log behind
the Thrift Server): a first run, the contract checked (the confirmed records replay to the
table); then rounds of random kills on the cluster, an executor JVM or the dbt run killed in the
middle of the keyed model's parallel mirror; the run goes on or the next run recovers, and the
contract holds for every model. Rounds per method: LOGSTORE_CLUSTER_ROUNDS (default 1, as
`make test` runs it: an executor killed under the session method, the dbt run killed behind the
Thrift Server; `make soak` sets more, each kill then chosen at random); the seed:
LOGSTORE_KILL_SEED, printed so a round can be replayed.
"""
import json
import os
import random
import time
import uuid

import pytest
from kafka import KafkaConsumer, TopicPartition

from tests.functional.contract import read_topic, replay_confirmed, wait_for_confirmations
from tests.functional.fault_project import FaultProject, dbt, write_project
from tests.functional.spark_cluster import EXECUTOR_MEMORY, StandaloneCluster
from tests.functional.kills import kill_group
from tests.functional.thrift_server import _stop, start_thrift_server
from tests.table_formats import JARS

from dbt.adapters.logstore.log.kafka.writer import partition_for

pytestmark = [pytest.mark.apache_kafka, pytest.mark.cluster]

KEYED = """
{{ config(materialized='table', unique_key='id', log_system='kafka', log_system_partitions=3,
          log_mirror_parallelism=2, kafka_topic='keyed_' ~ var('suffix')) }}
select id, concat('v', cast((id * {{ var('step') }}) % 7 as string)) as version
from range({{ var('step') }} % 3, {{ var('rows', 400) }}) as r(id)
"""
KEYLESS = """
{{ config(materialized='table', log_system='kafka', log_system_partitions=2,
          log_mirror_parallelism=2, kafka_topic='keyless_' ~ var('suffix')) }}
select id % 7 as k, concat('v', cast({{ var('step') }} as string)) as v
from range(300 + {{ var('step') }}) as r(id)
"""
INCREMENTAL = """
{{ config(materialized='incremental', incremental_strategy='append', log_system='kafka',
          log_system_partitions=2, log_mirror_parallelism=2, kafka_topic='appended_' ~ var('suffix')) }}
select {{ var('step') }} as step, id from range(150) as r(id)
"""
# Spark's Kafka source and its dependencies (`make jars`: jars/spark-kafka/pom.xml)
SPARK_KAFKA_JARS = sorted((JARS / "spark-kafka").glob("*.jar"))
# an eventual log: Spark's writer behind the server (the thrift test's models only)
EVENTUAL = """
{{ config(materialized='table', unique_key='id', log_system='kafka', log_consistency='eventual',
          log_system_partitions=2, log_mirror_parallelism=2, kafka_topic='eventual_' ~ var('suffix')) }}
select id, {{ var('step') }} * (id % 3) as n from range({{ var('step') }} * 10, 500) as r(id)
"""
MODELS = {"keyed": KEYED, "keyless": KEYLESS, "incremental": INCREMENTAL, "eventual": EVENTUAL}
# the session method's eventual logs are its Python tasks with idempotent producers (as in
# test_parallel_mirror); behind the Thrift Server they take Spark's writer, as every consistency
SESSION_MODELS = {k: v for k, v in MODELS.items() if k != "eventual"}
TOPICS = {"keyed": "keyed_", "keyless": "keyless_", "incremental": "appended_", "eventual": "eventual_"}

# each application's share of the cluster: one 1-core executor on each worker
APPLICATION = {"spark.cores.max": "2", "spark.executor.cores": "1",
               "spark.executor.memory": EXECUTOR_MEMORY}


def _session_profile(cluster: StandaloneCluster) -> dict:
    return {"server_side_parameters": {
        "spark.master": cluster.master_url, **APPLICATION,
        "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.shuffle.partitions": "2", "spark.sql.session.timeZone": "UTC"}}


@pytest.fixture(scope="module")
def cluster_thrift(standalone_cluster, tmp_path_factory):
    """A Spark Thrift Server that is an application of the standalone cluster."""
    server = start_thrift_server(tmp_path_factory.mktemp("cluster_thrift"),
                                 master=standalone_cluster.master_url, extra_conf=APPLICATION,
                                 jars=SPARK_KAFKA_JARS)
    try:
        yield server
    finally:
        _stop(server.process)


def _check(project: FaultProject, bootstrap: str, topic: str, at_least: int, model: str) -> list:
    """The model's confirmations (at least `at_least`, numbered from 1 in order), and the
    confirmed records replay to its table."""
    confirmations = wait_for_confirmations(bootstrap, topic, at_least)
    assert len(confirmations) >= at_least, (model, len(confirmations))
    assert [c["snapshot"] for c in confirmations] == list(range(1, len(confirmations) + 1)), model
    types, table = project.rows(model)
    assert sum(table.values()) > 0, model
    assert replay_confirmed(bootstrap, topic, types, table) == table, model
    return confirmations


def _records_so_far(bootstrap: str, topic: str) -> int:
    """Records on the topic, committed or not (a transaction in progress counts)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_uncommitted")
    try:
        parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or []]
        return sum(consumer.end_offsets(parts).values()) if parts else 0
    finally:
        consumer.close()


@pytest.mark.parametrize("method", ["session", "thrift"])
def test_the_contract_and_random_kills_on_the_cluster(method, standalone_cluster, kafka_bootstrap_servers,
                                                      tmp_path_factory, request):
    """One project per method (one Spark application's start-up less than a test each):

    - a first run of every model, without faults: the contract for each, and who wrote the
      records: the session's Python tasks (the executors' logs show them), or behind the Thrift
      Server Spark's Kafka writer, once (its first try), the keyed records in the partitions
      Kafka's partitioner gives their keys;
    - then each round (LOGSTORE_CLUSTER_ROUNDS): a run of every model at the next step, the keyed
      one on more rows (the session method's Python tasks on 20,000, Spark's faster writer on
      100,000), with a kill once its first records are on the topic plus a random delay: of one
      of the run's executor JVMs (Spark runs the lost task again; the run goes on) or of the dbt
      run itself (the next run recovers; behind the Thrift Server the killed run's INSERT may go
      on). The first round kills an executor under the session method and dbt behind the Thrift
      Server; later ones choose at random. Then the contract for every model."""
    rounds = int(os.environ.get("LOGSTORE_CLUSTER_ROUNDS") or 1)
    seed = int(os.environ.get("LOGSTORE_KILL_SEED") or random.SystemRandom().randrange(1 << 30))
    print(f"random kills on the standalone cluster, {method} method: seed {seed}, {rounds} rounds "
          f"(LOGSTORE_KILL_SEED={seed} replays them)")
    rng = random.Random(f"{seed}-{method}")
    server = request.getfixturevalue("cluster_thrift") if method == "thrift" else None
    models = MODELS if server else SESSION_MODELS
    root = tmp_path_factory.mktemp(f"cluster_{method}")
    schema = f"cluster_{uuid.uuid4().hex[:8]}"
    write_project(root, schema, kafka_bootstrap_servers, server, models=models,
                  profile=None if server else _session_profile(standalone_cluster))
    project, suffix, bootstrap = FaultProject(root, schema, server), uuid.uuid4().hex[:8], kafka_bootstrap_servers
    topics = {model: TOPICS[model] + suffix for model in models}

    run = dbt(root, "run", "--vars", json.dumps({"step": 1, "suffix": suffix}))
    assert run.returncode == 0, run.stdout[-3000:]
    first = {model: _check(project, bootstrap, topic, 1, model)[-1] for model, topic in topics.items()}
    if server is None:  # the driver confirmed what the Spark tasks wrote, in the executors
        for model, confirmation in first.items():
            assert confirmation["writers"] and all(w.startswith("task-") for w in confirmation["writers"]), model
        assert any("Times: total = " in log or "Starting Python task execution" in log
                   for log in standalone_cluster.executor_logs())
    else:  # Spark's Kafka writer wrote every change set (transactional and eventual), once
        for model, confirmation in first.items():
            assert list(confirmation["writers"]) == ["spark-kafka.0"], (model, confirmation)
        records = read_topic(bootstrap, topics["keyed"])
        assert records and all(m.partition == partition_for(m.key, [0, 1, 2]) for m in records)

    snapshots = {model: 1 for model in models}
    for n in range(rounds):
        victim = ("executor" if server is None else "dbt") if n == 0 else rng.choice(("executor", "dbt"))
        delay = rng.uniform(0.0, 0.5)
        context = f"{method} round {n + 1}: {victim} killed {delay:.2f} s into the mirror (seed {seed})"
        print(context)
        variables = json.dumps({"step": n + 2, "suffix": suffix, "rows": 100000 if server else 20000})
        before = _records_so_far(bootstrap, topics["keyed"])
        run = dbt(root, "run", "--vars", variables, wait=False, new_session=True)
        deadline = time.monotonic() + 240
        while _records_so_far(bootstrap, topics["keyed"]) <= before and run.poll() is None:
            assert time.monotonic() < deadline, f"{context}: the mirror never started"
            time.sleep(0.1)
        time.sleep(delay)
        if victim == "executor":
            assert run.poll() is None, f"{context}: the run ended before its executor was killed"
            standalone_cluster.kill_executor(rng, thrift=server is not None)
            output, _ = run.communicate(timeout=300)
            assert run.returncode == 0, f"{context}: the run did not survive its executor\n{output[-3000:]}"
        else:
            kill_group(run, f"{context}: the dbt run")
            recovered = dbt(root, "run", "--vars", variables)
            assert recovered.returncode == 0, f"{context}: recovery failed\n{recovered.stdout[-3000:]}"
        confirmed = {model: _check(project, bootstrap, topic, snapshots[model] + 1, model)
                     for model, topic in topics.items()}  # every model logged this step (a rerun may add one)
        snapshots = {model: len(confirmations) for model, confirmations in confirmed.items()}
        print(f"{context}: confirmed by {[sorted(c.get('writers') or []) for c in confirmed['keyed'][1:]]}")
        assert project.tables() == set(models), f"{context}: a change, staging or lock table left behind"
    writers = {m.header("logstore.writer") for m in read_topic(bootstrap, topics["keyed"])}
    if server is None:
        assert len(writers) >= 2 and all(w.startswith("task-") for w in writers), writers
    else:
        assert writers and all(w.startswith("spark-kafka.") for w in writers), writers
