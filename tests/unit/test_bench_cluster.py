"""benchmarks/cluster.py: how a configuration's result is classified, and results.json's "cluster"."""
import json

from benchmarks import cluster, tables

ROWS = 200_000
SPARK_WRITER_SQL = "thrift, 2 tasks (Spark's writer)"


def _result(records=ROWS, topic=ROWS, confirmed_by=None):
    return {"records": records, "topic_records": topic, "confirmed_by": confirmed_by}


def test_a_configuration_whose_records_are_the_change_set_is_measured():
    assert cluster.classify(_result(confirmed_by=[]), ROWS, "thrift, 1 writer") == {}
    assert cluster.classify(_result(confirmed_by=["spark-kafka.1"]), ROWS, SPARK_WRITER_SQL) == {}


def test_the_cursor_after_spark_s_writer_fell_back_and_is_not_a_failure():
    for confirmed_by in ([], None):  # the control record says so, or (not read) the topic's count does
        verdict = cluster.classify(_result(topic=2 * ROWS, confirmed_by=confirmed_by), ROWS, SPARK_WRITER_SQL)
        assert verdict["fell_back"] is True and "failed" not in verdict
        assert "end offsets lag" in verdict["note"] and "400,000 records, of which 200,000 confirmed" in verdict["note"]


def test_more_records_than_confirmed_elsewhere_or_too_few_fail():
    failing = [(_result(topic=2 * ROWS, confirmed_by=[]), "thrift, 1 writer"),  # no Spark writer to fall back from
               (_result(topic=2 * ROWS, confirmed_by=["spark-kafka.2"]), SPARK_WRITER_SQL),  # Spark's writer confirmed
               (_result(records=ROWS - 1, topic=2 * ROWS, confirmed_by=[]), SPARK_WRITER_SQL),
               (_result(topic=ROWS - 5), "session, 1 writer")]
    for result, name in failing:
        verdict = cluster.classify(result, ROWS, name)
        assert verdict["failed"] is True and "expected" in verdict["error"], (name, result)


def test_the_table_marks_a_fallback_and_says_why():
    entry = {"configuration": SPARK_WRITER_SQL, "broker": "embedded", "records": ROWS, "seconds": 4.0,
             "records_per_s": 50_000.0, "topic_records": 2 * ROWS, "fell_back": True, "note": "why"}
    lines = cluster.table([entry])
    assert lines[1].endswith("400,000 *")
    assert lines[-1] == f"* {SPARK_WRITER_SQL} @embedded: fell back to the cursor: why"


def test_the_cluster_result_is_stored_in_results_json_and_a_mirror_rewrite_keeps_it(tmp_path):
    results = tmp_path / "results.json"
    mirror = {"date": "d", "configurations": [{"kind": "raw"}], "failures": []}
    results.write_text(json.dumps(mirror, indent=1) + "\n")
    tables.store_in(results, "cluster", {"executor_cores": 2, "configurations": []})
    assert json.loads(results.read_text()) == {**mirror, "cluster": {"executor_cores": 2, "configurations": []}}
    assert results.read_text().endswith("}\n")
    assert tables.kept(results) == {"cluster": {"executor_cores": 2, "configurations": []}}
    assert tables.kept(tmp_path / "missing.json") == {}
