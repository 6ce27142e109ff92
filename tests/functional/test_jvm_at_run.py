"""A JVM reader of a run record reads each model as its table was at that run (log format section
9; docs/consumers.md, "Several models at one run"): the page's Java recipe, docs/recipes/
RunCut.java, run as a single-file source program on Kafka's own jars (kafka-clients'
`KafkaConsumer`, jackson-databind), reads the project's run topic `read_committed` to its end,
takes the latest record (or an invocation's), then reads one model's topic from offset 0 of
each partition up to the record's `end_offsets` (assign() and seek, no group) and prints each
value. Replayed, the printed change events must give exactly the table's rows at that run.

Two keyed models over two partitions each, two runs (every row changes, keys go and come):
each model read at the first run's invocation is its table after the first run, though the
second run's records follow in the topic; read at the latest record, its table now (so the
check can fail: the two differ). And the page shows the file as it is, so the recipe users copy
is the one run here.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import List, Optional

import pytest
from dbt.tests.util import run_dbt

from dbt.adapters.logstore.names import run_topic_for
from dbt.adapters.logstore.reading.runs import run_at, run_records
from tests.functional.contract import Message, replay, table_state
from tests.functional.cut_models import MODELS
from tests.functional.dbt_helpers import last_invocation, project_name
from tests.kafka_cluster import JARS

pytestmark = pytest.mark.apache_kafka  # read_committed against Apache Kafka's transactions

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "docs" / "recipes" / "RunCut.java"
PAGE = ROOT / "docs" / "consumers.md"

def java() -> str:
    found = shutil.which("java")
    if found is None:
        pytest.fail("no `java` on PATH: the JVM recipe (docs/recipes/RunCut.java) needs Java 17 "
                    "or later (Debian: apt-get install openjdk-17-jre-headless)")
    if not any(JARS.glob("kafka-clients-*.jar")) or not any(JARS.glob("jackson-databind-*.jar")):
        pytest.fail(f"no kafka-clients or jackson-databind jar in {JARS}: run `make jars`")
    return found


def run_cut(bootstrap: str, run_topic: str, model: str, invocation: Optional[str] = None) -> List[str]:
    """The recipe's output lines: `java -cp '<kafka libs>/*' RunCut.java ...`, as the page says."""
    command = [java(), "-cp", str(JARS / "*"), str(RECIPE), bootstrap, run_topic, model]
    done = subprocess.run(command + ([invocation] if invocation else []),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stderr[-3000:]}"
    return done.stdout.splitlines()


def messages_of(lines: List[str]) -> List[Message]:
    """The printed values as records to replay, keyed by the row's key (`id`) as the topic's
    keys are. A `null` is the tombstone that repeats the delete event before it (for
    compaction): nothing of its own to apply."""
    out, deletes = [], 0
    for offset, line in enumerate(lines):
        if line == "null":
            continue
        event = Message(0, offset, None, line.encode()).envelope
        deletes += event["op"] == "d"
        row = event["after"] if event["op"] != "d" else event["before"]
        out.append(Message(0, offset, json.dumps(row["id"]).encode(), line.encode()))
    assert lines.count("null") <= deletes, "a tombstone that follows no delete"
    return out


def test_the_page_shows_the_recipe_as_it_is():
    blocks = re.findall(r"^```java\n(.*?)^```$", PAGE.read_text(), re.S | re.M)
    assert RECIPE.read_text() in blocks, (
        f"{PAGE.name} must show {RECIPE.relative_to(ROOT)} whole, as a ```java block")


class TestJvmAtRun:
    @pytest.fixture(scope="class")
    def models(self):
        return {f"{name}.sql": text for name, text in MODELS.items()}

    def test_the_java_recipe_reads_the_tables_at_a_run(self, project, kafka_bootstrap_servers):
        java()  # before any dbt run: no java is a failure that says so
        bootstrap, schema = kafka_bootstrap_servers, project.test_schema
        run_topic = run_topic_for(project_name(project), schema)
        tables, records = {}, {}
        for step in (1, 2):
            run_dbt(["run", "--vars", f"{{step: {step}}}"])
            records[step] = run_at(run_records(bootstrap, project_name(project), schema),
                                   last_invocation(project))
            tables[step] = {model: table_state(records[step].model(model).topic) for model in MODELS}

        for model in MODELS:
            assert len(records[1].model(model).end_offsets) == 2, "the first run left a partition empty"
            for step, invocation in ((1, records[1].invocation_id), (2, None)):  # 2: the latest
                types, table = tables[step][model]
                assert table != tables[3 - step][model][1], f"{model}: the two runs left the same rows"
                lines = run_cut(bootstrap, run_topic, model, invocation)
                replayed = replay(messages_of(lines), types)
                assert replayed == table, (
                    f"RunCut.java's {model} at run {step} ({invocation or 'latest'}: end offsets "
                    f"{records[step].model(model).end_offsets}) is not the table after run {step}:"
                    f"\n only in the output: {replayed - table}\n only in the table: {table - replayed}")
