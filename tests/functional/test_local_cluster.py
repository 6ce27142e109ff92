"""The parallel mirror on a real multi-process Spark: master `local-cluster[2,1,1024]` starts two
executor JVMs with their own Python workers, as on a cluster, so the writer is pickled to them and
imported there from the same environment (nothing installed by hand). One run of a keyed and a
keyless model (each run starts three JVMs, about a minute here; later runs' diffs are Spark SQL
that test_parallel_mirror covers): the confirmed log replays to the table and the snapshot is
confirmed once by the driver, listing the task attempts that wrote it."""
import json
import shutil
import uuid
from pathlib import Path

import pyspark
import pytest

from tests.functional.contract import read_topic, replay_confirmed, wait_for_confirmations
from tests.functional.fault_project import FaultProject, dbt, write_project

pytestmark = pytest.mark.cluster  # make test-cluster

KEYED = """
{{ config(materialized='table', unique_key='id', log_system='kafka', log_system_partitions=3,
          log_mirror_parallelism=2, kafka_topic='cluster_keyed_' ~ var('suffix')) }}
select id, concat('name-', cast(id as string)) as name, case when id % 10 = 0 then 'ten' end as note
from range(500) as r(id)
"""
KEYLESS = """
{{ config(materialized='table', log_system='kafka', log_system_partitions=2,
          log_mirror_parallelism=2, kafka_topic='cluster_bag_' ~ var('suffix')) }}
select id % 7 as k, 'v' as v from range(300) as r(id)
"""


@pytest.fixture(scope="module")
def cluster_project(tmp_path_factory, kafka_bootstrap_servers):
    root = tmp_path_factory.mktemp("local_cluster_project")
    profile = {"server_side_parameters": {
        "spark.master": "local-cluster[2,1,1024]",
        "spark.executor.memory": "512m",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC"}}
    write_project(root, "cluster", kafka_bootstrap_servers, None,
                  models={"keyed": KEYED, "bag": KEYLESS}, profile=profile)
    return FaultProject(root, "cluster", None)


@pytest.fixture
def new_applications():
    """The Spark applications a test starts, by their executor folders: local-cluster's workers
    write them under Spark's home (the pyspark package); they are removed afterwards."""
    work = Path(pyspark.__file__).parent / "work"
    before = set(work.glob("app-*"))
    yield lambda: sorted(set(work.glob("app-*")) - before)
    for app in set(work.glob("app-*")) - before:
        shutil.rmtree(app, ignore_errors=True)


def test_the_parallel_mirror_on_separate_executors(cluster_project, kafka_bootstrap_servers,
                                                   new_applications):
    project, suffix = cluster_project, uuid.uuid4().hex[:8]
    topics = {"keyed": f"cluster_keyed_{suffix}", "bag": f"cluster_bag_{suffix}"}
    run = dbt(project.root, "run", "--vars", json.dumps({"suffix": suffix}))
    assert run.returncode == 0, run.stdout[-3000:]
    for model, topic in topics.items():
        confirmations = wait_for_confirmations(kafka_bootstrap_servers, topic, 1)
        assert [c["snapshot"] for c in confirmations] == [1]
        # the driver confirmed what two Spark tasks wrote, on the executors
        assert sorted(confirmations[-1]["writers"]) == ["task-0.0", "task-1.0"], model
        types, table = project.rows(model)
        assert sum(table.values()) > 0
        assert replay_confirmed(kafka_bootstrap_servers, topic, types, table) == table, model
    # the tasks' records carry their writer; both executors' tasks wrote
    writers = {m.header("logstore.writer") for m in read_topic(kafka_bootstrap_servers, topics["keyed"])}
    assert writers == {"task-0.0", "task-1.0"}
    # and they ran in the executors' processes, not in the driver: the run's executors logged
    # the Python tasks of the mirror
    applications = new_applications()
    assert len(applications) == 1
    for app in applications:
        logs = [p.read_text(errors="replace") for p in app.glob("*/stderr")]
        # a Python task's own line: "Times: total = ..." (Spark 4.1), "Starting Python task
        # execution" (Spark 4.3)
        assert sum("Times: total = " in log or "Starting Python task execution" in log
                   for log in logs) >= 1, app
