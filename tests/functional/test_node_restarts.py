"""A Kafka node down never fails a run (issue 42), on a three-node Apache Kafka cluster of this
module's own (tests/kafka_cluster.py: replication 3, min.insync.replicas 2):

- the session method: the first server in kafka_bootstrap_servers SIGKILLed at each
  Kafka-touching step of one logged `dbt run` (held there by LOGSTORE_FAULT_PAUSE_EACH,
  dbt/adapters/logstore/faults.py) and restarted while the run goes on: each model's identity
  checks and topic creation, the writer's start, its records, the confirmation and the
  transaction's commit. Freshly killed, the node is still in the cluster's metadata for seconds:
  a kafka-python client that asks it fails at once (kafka/retrying.py says why), where the run
  must ask another node;
- behind a Spark Thrift Server (local mode, Spark's Kafka source on its class path), the profile's
  client confluent-kafka (`kafka_client: confluent`): the driver's writer (`log.mirror.parallelism:
  1`) with the first bootstrap server killed at its start and at its records; then a generation
  written while it is killed (issue 41, item 5): `logstore_resnapshot` held at its records. It
  completes, the package's reader from the earliest offset and from the latest generation both
  give the table, and no generation number starts twice;
- on a Spark Connect server (the connect method; the driver writes, kafka-python): the first
  bootstrap server SIGKILLed at each Kafka step of the first model's run, as for the session method;
- a rolling restart: while a sequence of runs goes on, every node in turn (the first bootstrap
  server and the active controller among them) is SIGKILLed and restarted, in an order and with
  pauses from LOGSTORE_KILL_SEED (printed); LOGSTORE_CLUSTER_ROUNDS rounds (one in `make test`,
  more under `make soak SOAK_TESTS=tests/functional/test_node_restarts.py`). Runs of the session
  method and runs behind the Thrift Server go on side by side meanwhile; behind the server one
  model has `log.mirror.parallelism` 1 (the driver writes, on confluent-kafka), the other 2
  (Spark's own Kafka writer).

Every run must complete, and after each the contract holds: every snapshot confirmed once, in
order, and the confirmed records replay to the table. Each kill prints the node it hit.
"""
from __future__ import annotations

import os
import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from dbt.adapters.logstore.faults import LOG_CHECKS_POINT
from tests.functional.connect_server import start_connect_server, stop_connect_server
from tests.functional.node_restarts import FIRST, Project, held_run, rolling_restart
from tests.functional.thrift_server import _stop, start_thrift_server
from tests.kafka_cluster import KafkaCluster
from tests.table_formats import JARS

MODEL = """
{{{{ config(materialized='table', {key}log_system='kafka', log_system_partitions=3,
          log_system_replication=3, kafka_topic='{name}_' ~ var('suffix'){more}) }}}}
select id, concat('v', cast({{{{ var('step') }}}} as string)) as version
from range({{{{ var('rows', 3000) }}}}) as r(id)
"""
MODELS = {
    "accounts": MODEL.format(key="unique_key='id', ", name="accounts", more=""),
    # first built in run 2, after a kill: its identity checks and its topics' creation
    "fresh": MODEL.format(key="", name="fresh", more=", enabled=(var('step') | int) >= 2"),
}
# Behind the Thrift Server: the driver writes one (confluent-kafka, the profile's client), Spark's
# Kafka writer the other
THRIFT_MODELS = {
    "driven": MODEL.format(key="unique_key='id', ", name="driven", more=", log_mirror_parallelism=1"),
    "sparked": MODEL.format(key="unique_key='id', ", name="sparked", more=", log_mirror_parallelism=2"),
}
# The steps of a run after which it talks to Kafka next, each held while the first node is
# killed: a model's identity checks and topic creation (each model's: the second's topics are
# new); the writer's start (producer, transaction, partitions); its records; the confirmation
# and the commit. The first model's steps, then the second's checks.
KILL_AT = (LOG_CHECKS_POINT, "after_table_commit", "mid_log_write", "before_log_commit")
KILLS = [*KILL_AT, LOG_CHECKS_POINT]
# Spark's Kafka source and its dependencies (`make jars`: jars/spark-kafka/pom.xml)
SPARK_KAFKA_JARS = sorted((JARS / "spark-kafka").glob("*.jar"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Three nodes of this module's own: its tests kill them."""
    kafka = KafkaCluster(tmp_path_factory.mktemp("restarted_kafka"), nodes=3)
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture(scope="module")
def thrift_server(tmp_path_factory):
    """A Thrift Server in local mode (cheaper than a standalone cluster) with Spark's Kafka
    source, started in the background at the module's start (its start-up overlaps the session
    method's tests, which mostly wait for held runs and restarted nodes): a future of it."""
    starting = ThreadPoolExecutor(max_workers=1, thread_name_prefix="thrift-server")
    future = starting.submit(start_thrift_server, tmp_path_factory.mktemp("restarts_thrift"),
                             jars=SPARK_KAFKA_JARS)
    try:
        yield future
    finally:
        starting.shutdown(wait=True)
        if future.exception() is None:
            _stop(future.result().process)


@pytest.fixture(scope="module")
def project(cluster, thrift_server, tmp_path_factory):
    made = Project(tmp_path_factory.mktemp("restarts_project"), cluster, MODELS, {"fresh": 2})
    made.run("run 1")
    made.check("run 1")
    return made


@pytest.fixture(scope="module")
def thrift_project(cluster, thrift_server, tmp_path_factory):
    """Behind the Thrift Server; the profile's client is confluent-kafka. Its first run is
    test_the_confluent_writer_with_the_first_bootstrap_server_killed's."""
    return Project(tmp_path_factory.mktemp("restarts_thrift_project"), cluster, THRIFT_MODELS,
                   {}, server=thrift_server.result(timeout=600), profile={"kafka_client": "confluent"})


@pytest.fixture
def connect_project(cluster, tmp_path_factory):
    """On a Spark Connect server of its own (the connect method), stopped after its one test, so
    that the module's later tests (the rolling restart) have the machine as before."""
    server = start_connect_server(tmp_path_factory.mktemp("restarts_connect"))
    try:
        made = Project(tmp_path_factory.mktemp("restarts_connect_project"), cluster,
                       {"accounts": MODELS["accounts"]}, {}, server=server,
                       profile={"method": "connect", "host": server.url})
        made.method = "connect"
        yield made
    finally:
        stop_connect_server(server)


def test_the_first_bootstrap_server_killed_at_each_kafka_step_of_a_connect_run(connect_project, tmp_path):
    _, killed = held_run(connect_project, tmp_path, KILL_AT)
    connect_project.check(f"connect run {connect_project.step}, node {FIRST} killed at {', '.join(killed)}")


def test_the_first_bootstrap_server_killed_at_each_kafka_step_of_a_run(project, tmp_path):
    _, killed = held_run(project, tmp_path, KILLS)
    project.check(f"run {project.step}, node {FIRST} killed at {', '.join(killed)}")


def test_the_confluent_writer_with_the_first_bootstrap_server_killed(thrift_project, tmp_path):
    """The driver's confluent-kafka producer started, then writing, with node 1 just killed (the
    model's first run: its topics are new)."""
    held_run(thrift_project, tmp_path, ["after_table_commit", "mid_log_write"], "run", "-s", "driven")
    thrift_project.check(f"thrift run {thrift_project.step}, node {FIRST} killed", models=["driven"])


def test_a_generation_written_while_the_first_bootstrap_server_is_killed(thrift_project, tmp_path):
    """`logstore_resnapshot` of the driver-written model (confluent-kafka) held at its records."""
    project = thrift_project
    before = project.check_generations("before logstore_resnapshot", "driven")
    assert before, "the log has no generation yet"
    output, killed = held_run(project, tmp_path, ["mid_log_write"], "run-operation",
                              "logstore_resnapshot", "--args", "{model: driven}")
    assert "started a new generation" in output, output[-2000:]
    context = f"logstore_resnapshot of driven, node {FIRST} killed at {killed[0]}"
    project.check(context, models=["driven"])
    after = project.check_generations(context, "driven")
    assert after[:-1] == before and after[-1] > max(before, default=0), \
        f"{context}: no new generation: {before}, then {after}"


def test_a_rolling_restart_during_runs_on_both_methods(project, thrift_project):
    """One roll of the nodes per round, runs of the session method and behind the Thrift Server
    (parallelism 1 and 2) going on side by side meanwhile."""
    rounds = int(os.environ.get("LOGSTORE_CLUSTER_ROUNDS") or 1)
    seed = int(os.environ.get("LOGSTORE_KILL_SEED") or random.SystemRandom().randrange(1 << 30))
    print(f"rolling restarts of the Kafka cluster: seed {seed}, {rounds} rounds "
          f"(LOGSTORE_KILL_SEED={seed} replays them)")
    rolling_restart([project, thrift_project], rounds, seed)
