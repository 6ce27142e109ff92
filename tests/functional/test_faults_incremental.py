"""Exactly-once under failure, part 3: an incremental model killed between its insert and the
tag that records it, or inside the insert; and a record larger than Kafka's limit."""
import json
import shutil
import uuid
from collections import Counter

from dbt.adapters.logstore.faults import INCREMENTAL_POINT, INTENT_POINT
from tests.functional.contract import canonical, read_table_files, replay_confirmed, spark
from tests.functional.fault_project import APPENDED, dbt, subprocess_project, write_project  # noqa: F401
from tests.table_formats import SESSION_SETTINGS


def test_crash_between_an_incremental_insert_and_its_tag(subprocess_project, kafka_bootstrap_servers):
    """The insert happened but the run died before tagging it: the intent (row counts before
    and after) tells the next run that the change is in the table, so it reaches the log."""
    root, suffix = subprocess_project.root, uuid.uuid4().hex[:8]  # unique on a long-lived cluster too
    topic = f"appended_{suffix}"

    def run(step, fault=None):
        return dbt(root, "run", "-s", "appended", "--vars", json.dumps({"step": step, "suffix": suffix}),
                   fault=fault)

    assert run(1).returncode == 0
    assert run(2, fault=INCREMENTAL_POINT).returncode == 75
    recovered = run(3)
    assert recovered.returncode == 0, recovered.stdout[-3000:]
    assert "re-sending change set" in recovered.stdout
    types, table = subprocess_project.rows("appended")
    assert sum(table.values()) == 9  # steps 1, 2 and 3
    assert replay_confirmed(kafka_bootstrap_servers, topic, types, table) == table


def test_crash_between_an_incremental_insert_and_its_tag_on_delta(tmp_path, kafka_bootstrap_servers):
    """On Delta the intent records the table's version and no row counts (a version that moved
    took the whole commit; each count was a Spark job): the next run still finds the insert
    happened, and its change reaches the log once. (The session method, the table read from
    its files: the dbt processes hold the metastore.)"""
    root, suffix = tmp_path / "delta_project", uuid.uuid4().hex[:8]
    root.mkdir()
    schema = f"incremental_delta_{suffix}"
    write_project(root, schema, kafka_bootstrap_servers, None, models={"appended": APPENDED},
                  profile={"server_side_parameters": {"spark.sql.shuffle.partitions": "2",
                                                      "spark.sql.session.timeZone": "UTC",
                                                      **SESSION_SETTINGS["delta"]}},
                  project={"models": {"+file_format": "delta"}})

    def run(step, fault=None):
        return dbt(root, "run", "-s", "appended", "--vars", json.dumps({"step": step, "suffix": suffix}),
                   fault=fault)

    assert run(1).returncode == 0
    assert run(2, fault=INCREMENTAL_POINT).returncode == 75
    log = (root / "logs" / "dbt.log").read_text()
    intent = next(line for line in log.splitlines() if "logstore.changeset.intent" in line)
    assert "'logstore.intent.table_state' = 'version:" in intent and "rows_before" not in intent, intent
    recovered = run(3)
    assert recovered.returncode == 0, recovered.stdout[-3000:]
    assert "re-sending change set" in recovered.stdout
    df = read_table_files(root / "spark" / "warehouse" / f"{schema}.db" / "appended", "delta")
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    table = Counter(canonical(r.asDict(recursive=True), types) for r in df.collect())
    assert sum(table.values()) == 9  # steps 1, 2 and 3
    assert replay_confirmed(kafka_bootstrap_servers, f"appended_{suffix}", types, table) == table


def test_an_insert_killed_inside_its_job_commit(subprocess_project, kafka_bootstrap_servers, tmp_path):
    """Spark killed inside an INSERT leaves the files its tasks committed in the table's
    `_temporary/0` (no reader sees them; found by the random-kill soak: the next INSERT's job
    commit merged them in, so the killed run's rows reached the table and never the log), and,
    killed among the job commit's renames, some of them in the table itself. Recovery removes
    the first; the second makes the row count tell nothing, which fails clearly, and the remedy
    the error names (a new topic) works."""
    root, suffix = subprocess_project.root, uuid.uuid4().hex[:8]

    def run(step, topic, fault=None):
        return dbt(root, "run", "-s", "appended", "--vars",
                   json.dumps({"step": step, "suffix": suffix + topic}), fault=fault)

    assert run(11, "").returncode == 0
    before = sum(subprocess_project.rows("appended")[1].values())  # the module's earlier tests' too
    assert run(12, "", fault=INTENT_POINT).returncode == 75  # its intent recorded, its insert not begun
    table_dir = subprocess_project.table_dir("appended")
    staged = sorted(subprocess_project.table_dir("appended__logstore_new").glob("part-*"))
    assert staged, "the killed run staged its rows"
    task_output = table_dir / "_temporary" / "0" / "task_202611230000_0001_m_000000"
    task_output.mkdir(parents=True)
    for part in staged:  # step 12's rows, committed by their task, not by the job
        shutil.copy(part, task_output / part.name)
    # and one of step 12's three rows renamed into the table before the kill
    spark().createDataFrame([(12, 0)], "step int, id bigint").coalesce(1).write.parquet(str(tmp_path / "p"))
    (partial,) = (tmp_path / "p").glob("part-*.parquet")
    shutil.copy(partial, table_dir / "part-00000-00000000-0000-0000-0000-000000000012-c000.snappy.parquet")

    stuck = run(13, "")
    assert stuck.returncode != 0
    assert f"the table holds {before + 1} rows, and the commit would have taken it from {before} to " \
           f"{before + 3} rows, so whether it happened cannot be told. Give the model a new " \
           f"'kafka.topic'" in stuck.stdout
    assert "_temporary, if present: the uncommitted output" in stuck.stdout
    assert not (table_dir / "_temporary").exists()

    moved = run(14, "_2")  # the remedy: a new topic, which starts with the table's rows
    assert moved.returncode == 0, moved.stdout[-3000:]
    types, table = subprocess_project.rows("appended")
    assert sum(table.values()) == before + 1 + 3  # step 14's rows, the partly committed row of step 12
    assert sum(1 for row in table if '"step": "12"' in row) == 1, table  # not the rest of step 12
    assert replay_confirmed(kafka_bootstrap_servers, f"appended_{suffix}_2", types, table) == table


def test_record_larger_than_the_limit_fails_before_the_commit(subprocess_project, kafka_bootstrap_servers):
    root, suffix = subprocess_project.root, uuid.uuid4().hex[:8]
    too_big = dbt(root, "run", "-s", "big", "--vars", json.dumps({"suffix": suffix, "size": 2_000_000}))
    out = " ".join(too_big.stdout.split())
    assert too_big.returncode == 1
    assert "Model 'big'" in out and 'row key {"id":1}' in out and "max.request.size" in out
    assert "Nothing was changed" in out
    assert "big" not in subprocess_project.tables()  # never committed
    # nor is anything the refused run staged left in the schema
    assert not [t for t in subprocess_project.tables() if t.startswith("big__logstore_")]
