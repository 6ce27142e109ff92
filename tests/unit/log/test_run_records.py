"""The run record's format (log/run_records.py): what is encoded is decoded the same; a model
without a log carries no snapshot fields; a newer format is refused in plain words."""
import json

import pytest

from dbt.adapters.logstore.log.run_records import NOT_LOGGED, ModelAtRun, RunRecord


def record(**kw):
    models = (ModelAtRun("model.p.b", "b", "changed", topic="s.b", snapshot=3, end_offsets={0: 9, 1: 4},
                         generation=1, table_version=None, changeset="inv"),
              ModelAtRun("model.p.a", "a", NOT_LOGGED))
    return RunRecord(**{"invocation_id": "inv", "project": "p", "schema": "s", "command": "run",
                        "selection": {"select": ["b"]}, "started_at": "t0", "ended_at": "t1",
                        "models": models, "ts_ms": 5, **kw})


def test_encoded_and_decoded_alike():
    key, value = record().encode()
    assert key == b"inv"
    back = RunRecord.decode(value)
    assert back.model("b") == record().model("b") and back.model("model.p.a").did == NOT_LOGGED
    assert [m.name for m in back.logged] == ["b"]
    data = json.loads(value)
    assert data["format"] == 1 and list(data["models"]) == ["model.p.a", "model.p.b"]  # sorted
    assert back.schema == "s"
    assert data["models"]["model.p.a"] == {"name": "a", "did": "not logged"}  # no snapshot fields
    assert data["models"]["model.p.b"]["end_offsets"] == {"0": 9, "1": 4}


def test_a_newer_format_is_refused_and_an_unknown_model_named():
    data = json.loads(record().encode()[1])
    data["format"] = 2
    with pytest.raises(ValueError, match="upgrade dbt-logstore"):
        RunRecord.decode(json.dumps(data).encode())
    with pytest.raises(KeyError, match="names no model 'c'.*a, b"):
        record().model("c")


def test_a_run_topic_per_project_and_target_schema():
    from dbt.adapters.logstore.names import run_topic_for

    assert run_topic_for("shop", "analytics") == "analytics.shop__logstore_runs"
    assert run_topic_for("my shop", "dev_ann") == "dev_ann.my_shop__logstore_runs"  # legal names
