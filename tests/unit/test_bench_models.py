"""benchmarks/models.py: statements a model counted in dbt.log (split by invocation), and the
table of a model's mean seconds and statements, plain and logged, with their ratios."""
import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "bench_models", Path(__file__).resolve().parents[2] / "benchmarks" / "models.py")
models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(models)

FIRST = "38409954-4910-487e-9395-a30dce4b6f3a"
SECOND = "9a1c2b3d-0000-4000-8000-0123456789ab"


def _header(invocation, time="06:47:35.356864"):
    return f"\n\n============================== {time} | {invocation} ==============================\n"


def _statement(node, sql, project="bench"):
    # as dbt's file log writes a query: the node's line with dbt's query comment, the SQL after it
    return (f'\x1b[0m06:47:36.922132 [debug] [Thread-1 (]: On model.{project}.{node}: /* {{"app": "dbt", '
            f'"dbt_version": "1.11.16", "node_id": "model.{project}.{node}"}} */\n{sql}\n'
            f"\x1b[0m06:47:37.596778 [debug] [Thread-1 (]: SQL status: OK in 0.674 seconds\n")


FAKE_LOG = (
    _header(FIRST)
    + "\x1b[0m06:47:35.4 [info ] [MainThread]: Running with dbt=1.11.16\n"
    + _statement("m01", "create table bench_plain.m01\nusing parquet\nas\nselect id\nfrom range(200) as r(id)")
    + _statement("m01", "show table extended in bench_plain like 'm01'")
    + "\x1b[0m06:47:38.1 [debug] [Thread-1 (]: On model.bench.m01: Close\n"
    + _statement("m02", "create table bench_plain.m02 as select 1")
    + _statement("other", "select 1", project="elsewhere")
    + _header(SECOND, "06:50:01.000001")
    + _statement("m01", "drop table if exists bench_logged.m01__logstore_new purge")
    + _statement("m01", "create table bench_logged.m01__logstore_new as select 1")
    + _statement("m01", "select count(*) from bench_logged.m01__logstore_changes")
    + _statement("keyless", "create table bench_logged.keyless as select 1")
)


def test_dbt_log_is_split_by_invocation():
    parts = models.invocations(FAKE_LOG)
    assert list(parts) == [FIRST, SECOND]
    assert "Running with dbt" in parts[FIRST] and "drop table" not in parts[FIRST]
    assert "m01__logstore_new" in parts[SECOND]


def test_statements_are_counted_per_model_of_the_project():
    parts = models.invocations(FAKE_LOG)
    # the Close line has no query comment; the other project's node is not a model of bench
    assert models.statements(parts[FIRST]) == {"m01": 2, "m02": 1}
    assert models.statements(parts[SECOND]) == {"m01": 3, "keyless": 1}
    assert models.statements(FAKE_LOG, project="elsewhere") == {"other": 1}


def test_no_invocation_header_means_nothing_counted():
    assert models.invocations(_statement("m01", "select 1")) == {}


def _run(method, variant, run, nodes):
    return {"method": method, "variant": variant, "run": run,
            "nodes": {name: {"seconds": s, "statements": n} for name, (s, n) in nodes.items()}}


def test_the_table_gives_a_model_s_mean_and_the_ratios():
    runs = [
        _run("session", "plain", 0, {"m01": (1.0, 4), "m02": (2.0, 6), "incremental_merge": (1.0, 5),
                                     "keyless": (1.0, 4), "warmup": (9.0, 9)}),
        _run("session", "logged", 0, {"m01": (4.0, 30), "m02": (5.0, 32), "incremental_merge": (4.0, 30),
                                      "keyless": (3.0, 20)}),
        _run("session", "logged", 1, {"m01": (6.0, 40), "m02": (6.0, 40), "incremental_merge": (8.0, 45),
                                      "keyless": (3.0, 22)}),
        _run("session", "plain", 1, {"m01": (2.0, 5), "m02": (2.0, 5), "incremental_merge": (2.0, 9),
                                     "keyless": (1.5, 4)}),
        _run("thrift", "plain", 0, {"m01": (2.0, 4)}),
        _run("thrift", "logged", 0, {"m01": (5.0, 28)}),
    ]
    rows = models.summarize(runs)
    assert [(r["method"], r["case"]) for r in rows] == [
        ("session", "first build"), ("session", "rebuild"), ("session", "incremental merge"),
        ("session", "keyless rebuild"), ("thrift", "first build")]
    first = rows[0]  # the incremental and keyless models' first builds and the warm-up are not in it
    assert first["models"] == 2
    assert first["plain_s"] == pytest.approx(1.5) and first["logged_s"] == pytest.approx(4.5)
    assert first["added_s"] == pytest.approx(3.0) and first["ratio_s"] == pytest.approx(3.0)
    assert first["plain_statements"] == pytest.approx(5) and first["logged_statements"] == pytest.approx(31)
    assert first["ratio_statements"] == pytest.approx(6.2)
    merge = rows[2]
    assert (merge["plain_s"], merge["logged_s"], merge["ratio_s"]) == (2.0, 8.0, 4.0)
    assert merge["ratio_statements"] == pytest.approx(5.0)
    assert rows[3]["ratio_s"] == pytest.approx(2.0)

    text = models.table(rows).splitlines()
    assert text[0].split()[:3] == ["method", "case", "models"]
    assert text[1].split() == ["session", "first", "build", "2", "1.50", "4.50", "+3.00", "3.00",
                               "5.0", "31.0", "6.20"]
    assert len(text) == 1 + len(rows)
    page = models.markdown(rows).splitlines()
    assert page[1] == "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    assert page[2] == "| session | first build | 2 | 1.50 | 4.50 | +3.00 | 3.00 | 5.0 | 31.0 | 6.20 |"


def test_a_case_measured_by_one_variant_only_is_left_out():
    runs = [_run("session", "plain", 0, {"m01": (1.0, 4)}), _run("session", "logged", 1, {"m01": (1.0, 4)})]
    assert models.summarize(runs) == []


def test_the_run_records_write_read_from_the_invocations_part_of_dbt_log():
    part = ("12:00:01  Running with dbt\n"
            "12:00:09  run record of 9a1c written to bench_logged.bench__logstore_runs in 0.153 s: "
            "14 logged models, 14 changed\n")
    assert models.run_record_seconds(part) == 0.153
    assert models.run_record_seconds("12:00:01  Running with dbt\n") is None
    runs = [{"method": "session", "variant": "logged", "run_record_s": 0.2},
            {"method": "session", "variant": "logged", "run_record_s": 0.1},
            {"method": "session", "variant": "plain", "run_record_s": None}]
    summary = models.run_record_summary(runs)
    assert summary["session"]["each_s"] == [0.2, 0.1] and abs(summary["session"]["mean_s"] - 0.15) < 1e-9


def test_the_downstream_models_rebuild_is_its_own_case():
    assert models.case_of(models.DOWNSTREAM, 0) is None
    assert models.case_of(models.DOWNSTREAM, 1) == "rebuild, 2 logged inputs"
    assert "ref('m01')" in models.models(3, 10)[models.DOWNSTREAM]


def test_invocation_summary_gives_each_runs_whole_seconds_and_their_ratio():
    from benchmarks.models import invocation_summary

    runs = [{"method": "session", "variant": "plain", "run": 0, "invocation_s": 10.0},
            {"method": "session", "variant": "logged", "run": 0, "invocation_s": 25.0},
            {"method": "session", "variant": "logged", "run": 1, "invocation_s": 20.0},
            {"method": "thrift", "variant": "plain", "run": 0}]  # an older result: no seconds
    assert invocation_summary(runs) == {
        "session": {"0": {"plain": 10.0, "logged": 25.0, "ratio": 2.5}, "1": {"logged": 20.0}}}
