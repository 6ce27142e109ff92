"""Schema changes of logged models (docs/log-format.md, "Row images across schema changes"): a
column added to an incremental model (append_new_columns on append, merge and keyless
insert_overwrite models, sync_all_columns), columns added,
dropped, retyped and reordered in `table` models, keyed and keyless; `on_schema_change: ignore`
and `fail`, and a
dropped column under `sync_all_columns`, which Spark refuses for parquet. dbt runs as a user
runs it (subprocesses, over thrift). After each run, for every model:
- the independent replay of the confirmed log (tests/functional/contract.py, which reads an
  image against the table's columns) equals the table;
- `dbt-logstore status --verify` agrees;
and after the last run Flink's debezium-json, with the newest schema declared, decodes every
log into a changelog that ends with the table's rows. A refused change fails its model before
anything is logged, and the table keeps its rows."""
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.functional.contract import confirmed, read_topic, replay, wait_for_confirmations
from tests.functional.fault_project import FaultProject, dbt, write_project
from tests.functional.flink_peer import (
    apply_changelog, canonical_rows, debezium_case, decode_batch, decoded, differences,
)

pytestmark = pytest.mark.apache_kafka  # proven on Apache Kafka (tests/kafka_cluster.py)

CLI = str(Path(sys.executable).parent / "dbt-logstore")


def _config(**options: str) -> str:
    pairs = ", ".join(f"{k}={v}" for k, v in options.items())
    return "{{ config(log_system='kafka', kafka_topic=this.name ~ '_' ~ var('suffix'), " + pairs + ") }}"


# step 1: (id, tag); step 2 adds phase_no; step 3 adds note
APPENDED = _config(materialized="'incremental'", incremental_strategy="'append'",
                   on_schema_change="'append_new_columns'") + """
select id + {{ var('step') }} * 10 as id, 'v' as tag
{% if var('step') >= 2 %}, {{ var('step') }} as phase_no{% endif %}
{% if var('step') >= 3 %}, 'n' as note{% endif %}
from range(3) as r(id)
"""
# keyed merge: new keys and updates of old ones carry the new column
MERGED = _config(materialized="'incremental'", incremental_strategy="'merge'", unique_key="'id'",
                 on_schema_change="'append_new_columns'") + """
select id, concat('s', cast({{ var('step') }} as string)) as tag
{% if var('step') >= 2 %}, {{ var('step') }} * 100 as phase_no{% endif %}
from range({{ var('step') }}, {{ var('step') }} + 3) as r(id)
"""
# keyless insert_overwrite (no partition_by: every row replaced): the deletes of step 2 are
# rendered from the table after dbt added the column, so they carry it as null, and find the
# rows logged without it only by the rule
OVERWRITTEN = _config(materialized="'incremental'", incremental_strategy="'insert_overwrite'",
                      on_schema_change="'append_new_columns'") + """
select id % 3 as k, 'v' as tag {% if var('step') >= 2 %}, {{ var('step') }} as phase_no{% endif %}
from range({{ var('step') }} + 3) as r(id)
"""
# table models, keyed and keyless: step 2 adds a column; step 3 drops `extra`, turns a column
# into a string and moves another first
REBUILT = _config(materialized="'table'", unique_key="'id'") + """
select id,
       {% if var('step') == 3 %} id % 2 = 0 as even, {% endif %}
       {% if var('step') < 3 %} cast(id * 1.5 as decimal(6, 2)) {% else %} concat('#', cast(id as string)) {% endif %} as amount
       {% if var('step') < 3 %}, 'x' as extra{% endif %}
       {% if var('step') == 2 %}, id % 2 = 0 as even{% endif %}
from range(4) as r(id)
"""
BAG = _config(materialized="'table'") + """
select {% if var('step') == 3 %} 'added' as added, cast(id % 2 as string) {% else %} id % 2 {% endif %} as k
       {% if var('step') < 3 %}, 'x' as extra{% endif %}
       {% if var('step') == 2 %}, 'added' as added{% endif %}
from range(3) as r(id)
"""
# `ignore`: the model's new column is left out of the table, and out of the log
IGNORING = _config(materialized="'incremental'", on_schema_change="'ignore'") + """
select id + {{ var('step') }} * 10 as id, 'v' as tag {% if var('step') >= 2 %}, 'new' as added{% endif %}
from range(2) as r(id)
"""
# refused: a new column under `fail`; a dropped column under `sync_all_columns` (step 3)
STRICT = _config(materialized="'incremental'", on_schema_change="'fail'") + """
select id, 'v' as tag {% if var('step') >= 2 %}, 1 as added{% endif %} from range(2) as r(id)
"""
SYNCED = _config(materialized="'incremental'", on_schema_change="'sync_all_columns'") + """
select id + {{ var('step') }} * 10 as id {% if var('step') < 3 %}, 'v' as tag{% endif %}
       {% if var('step') >= 2 %}, 'w' as added{% endif %}
from range(2) as r(id)
"""
MODELS = {"appended": APPENDED, "merged": MERGED, "overwritten": OVERWRITTEN, "rebuilt": REBUILT, "bag": BAG,
          "ignoring": IGNORING, "strict": STRICT, "synced": SYNCED}
# the models each step refuses, and what the error says
REFUSED = {2: {"strict": "out of sync"}, 3: {"strict": "out of sync",
                                              "synced": "does not support dropping columns"}}


@pytest.fixture(scope="module")
def schema_project(tmp_path_factory, kafka_bootstrap_servers, spark_thrift_server):
    root = tmp_path_factory.mktemp("schema_changes_project")
    schema = f"schemas_{uuid.uuid4().hex[:8]}"
    write_project(root, schema, kafka_bootstrap_servers, spark_thrift_server, models=MODELS)
    return FaultProject(root, schema, spark_thrift_server)


def _status(root: Path, suffix: str) -> dict:
    result = subprocess.run([CLI, "status", "--verify", "--json", "--project-dir", str(root),
                             "--profiles-dir", str(root), "--vars", json.dumps({"step": 1, "suffix": suffix})],
                            capture_output=True, text=True, timeout=300, cwd=root)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines, f"status said nothing:\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
    return {line["model"]: line for line in lines}


def test_schema_changes_keep_every_log_replayable(schema_project, kafka_bootstrap_servers, tmp_path):
    project, suffix = schema_project, uuid.uuid4().hex[:8]
    servers = kafka_bootstrap_servers
    confirmations = {model: 0 for model in MODELS}
    tables = {}
    for step in (1, 2, 3):
        run = dbt(project.root, "run", "--vars", json.dumps({"step": step, "suffix": suffix}))
        refused = REFUSED.get(step, {})
        results = {r["unique_id"].rsplit(".", 1)[-1]: r for r in
                   json.loads((project.root / "target" / "run_results.json").read_text())["results"]}
        assert run.returncode == (1 if refused else 0), run.stdout[-3000:]
        for model in MODELS:
            where = f"step {step}, model {model}"
            topic = f"{model}_{suffix}"
            if model in refused:
                assert results[model]["status"] == "error", where
                assert refused[model] in results[model]["message"], (where, results[model]["message"])
                # nothing logged, the table kept its rows
                assert len(wait_for_confirmations(servers, topic, confirmations[model])) == confirmations[model], where
                assert project.rows(model) == tables[model], where
                # and nothing it staged is left for the next run to drop (__logstore_new, ...)
                left = {t for t in project.tables() if t.startswith(f"{model}__logstore_")}
                assert not left, (where, left)
                continue
            assert results[model]["status"] == "success", (where, results[model]["message"])
            confirmations[model] += 1
            assert len(wait_for_confirmations(servers, topic, confirmations[model])) == confirmations[model], where
            types, table = tables[model] = project.rows(model)
            replayed = replay(confirmed(servers, topic, read_topic(servers, topic)), types)
            assert replayed == table, f"{where}: replay differs: only in log {replayed - table}, only in table {table - replayed}"
        status = _status(project.root, suffix)
        for model in MODELS:
            assert status[model]["agree"], f"step {step}, model {model}: {status[model]['problems']}"
    # the changes reached the tables as described
    assert set(tables["appended"][0]) == {"id", "tag", "phase_no", "note"}
    assert set(tables["rebuilt"][0]) == {"id", "amount", "even"} and tables["rebuilt"][0]["amount"] == "string"
    assert tables["bag"][0] == {"added": "string", "k": "string"}
    assert set(tables["overwritten"][0]) == {"k", "tag", "phase_no"}
    assert set(tables["ignoring"][0]) == {"id", "tag"}
    ignored = read_topic(servers, f"ignoring_{suffix}")
    assert ignored and not any(b'"added"' in (m.value or b"") for m in ignored)  # nor in the log
    assert set(tables["synced"][0]) == {"id", "tag", "added"}
    # Flink's debezium-json, the newest schema declared, replays each log to its table
    cases = {model: debezium_case(model, confirmed(servers, f"{model}_{suffix}",
                                                   read_topic(servers, f"{model}_{suffix}")),
                                  tables[model][0], tmp_path)
             for model in MODELS}
    results = decode_batch(list(cases.values()), tmp_path)
    for model, case in cases.items():
        types, table = tables[model]
        state = apply_changelog(canonical_rows(decoded(results, case), types))
        assert state == table, f"{model}: Flink's changelog does not end with the table's rows:" + differences(state, table)
