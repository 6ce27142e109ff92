"""benchmarks/report.py: a result's tables as the Performance page shows them, and the docs hook
that puts them in place of `<!-- bench: FILE -->`."""
import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


report = _module("bench_report", ROOT / "benchmarks" / "report.py")
hook = _module("benchmarks_hook", ROOT / "docs" / "hooks" / "benchmarks.py")

RAW = {"kind": "raw", "client": "confluent", "rows": 1_000_000, "consistency": "transactional", "writers": 1,
       "records_per_s": 200_000.0, "ratio_to_raw": None, "cpu_us_per_record": 8.0, "driver_mb": 120.0,
       "jvm_mb": None, "transactions": None, "longest_transaction_s": None}
MIRROR = dict(RAW, kind="mirror", records_per_s=70_000.0, ratio_to_raw=0.35, cpu_us_per_record=26.4,
              driver_mb=283.0, jvm_mb=1227.0, transactions=1, longest_transaction_s=13.1)
EVENTUAL = dict(MIRROR, consistency="eventual", writers=2, records_per_s=80_000.0, ratio_to_raw=0.4,
                transactions=None, longest_transaction_s=None)
RESULT = {"date": "2026-11-26 12:00 UTC", "machine": "2 cores, 24 GiB", "commit": "abc1234",
          "command": "python benchmarks/mirror.py --quick", "configurations": [RAW, MIRROR, EVENTUAL],
          "rebuilds": [{"rows": 1_000_000, "client": "confluent", "records": 10_000, "with_log_s": 25.17,
                        "without_log_s": 7.6, "mirror_s": 2.44, "ratio": 3.31}],
          "cpu_bounds": [{"client": "confluent", "rows": 1_000_000, "broker": "embedded", "cores": 2,
                          "raw_cpu_us_per_record": 8.0, "spark_cpu_us_per_record": 12.0,
                          "records_per_s": 100_000.0, "ratio_to_raw": 0.5}],
          "failures": []}


def _rows(text, first_cell):
    return [[cell.strip() for cell in line.strip("|").split("|")]
            for line in text.splitlines() if line.startswith(f"| {first_cell}")]


def test_provenance_names_date_machine_commit_and_command():
    line = report.markdown(RESULT).splitlines()[0]
    assert line == ("**2026-11-26 12:00 UTC**, 2 cores, 24 GiB, commit `abc1234`: "
                    "`python benchmarks/mirror.py --quick`")


def test_a_row_per_configuration_with_its_figures():
    text = report.markdown(RESULT)
    raw, = _rows(text, "raw producer")
    assert raw == ["raw producer (client alone)", "1,000,000", "200,000", "1.00", "8.0", "120", "-", "-"]
    transactional, = _rows(text, "mirror transactional")
    assert transactional[2:] == ["70,000", "0.35", "26.4", "283", "1,227", "1 (13.1)"]
    eventual, = _rows(text, "mirror eventual, 2 tasks")
    assert eventual[-1] == "-"  # no Kafka transactions in eventual mode


def test_the_cpu_bound_and_the_best_mirror_against_it():
    bound, = _rows(report.markdown(RESULT), "confluent | embedded")
    assert bound == ["confluent", "embedded", "1,000,000", "8.0", "12.0", "100,000", "0.50", "0.80"]


def test_rebuilds_and_a_table_per_client_and_broker():
    text = report.markdown(RESULT)
    assert _rows(text, "1,000,000 | confluent | 10,000") == [
        ["1,000,000", "confluent", "10,000", "25.2", "7.6", "3.31", "2.4"]]
    assert text.count("| configuration |") == 1 and "**confluent**" in text
    two = report.markdown(dict(RESULT, configurations=[RAW, dict(MIRROR, broker="apache"),
                                                       dict(RAW, client="kafka-python")]))
    assert two.count("| configuration |") == 3
    assert ["**confluent**", "**confluent, on apache**", "**kafka-python**"] == [
        line for line in two.splitlines() if line.startswith("**") and line.endswith("**")]


def test_an_older_result_without_cpu_commit_or_rebuilds_still_renders():
    old = {"date": "2026-11-24", "machine": "2 cores", "command": "x", "rebuilds": [],
           "configurations": [{k: v for k, v in MIRROR.items() if k != "cpu_us_per_record"}]}
    text = report.markdown(old)
    assert "commit not recorded" in text
    assert "CPU µs/record, " not in text and "Keyed rebuild" not in text
    assert _rows(text, "mirror transactional")[0][4] == "-"


def _page(src_uri):
    return SimpleNamespace(file=SimpleNamespace(src_uri=src_uri))


def test_the_hook_replaces_each_marker_with_the_files_tables(tmp_path, monkeypatch):
    (tmp_path / "r.json").write_text(json.dumps(RESULT))
    monkeypatch.setattr(hook, "ROOT", tmp_path)
    out = hook.on_page_markdown("# P\n\n<!-- bench: r.json -->\n\nafter\n", _page("performance.md"), None, None)
    assert "<!-- bench:" not in out and "| mirror transactional, 1 writer | 1,000,000 |" in out
    assert out.endswith("after\n")
    assert hook.on_page_markdown("<!-- bench: r.json -->", _page("index.md"), None, None) == "<!-- bench: r.json -->"
    with pytest.raises(ValueError, match="missing.json"):
        hook.on_page_markdown("<!-- bench: missing.json -->", _page("performance.md"), None, None)


def test_every_marker_of_the_performance_page_names_a_results_file():
    page = (ROOT / "docs" / "performance.md").read_text()
    paths = hook.MARKER.findall(page)
    assert "benchmarks/results.json" in paths
    for path in paths:
        assert (ROOT / path).is_file(), path


def test_the_performance_page_shows_no_machine_or_commit_contributing_does(tmp_path, monkeypatch):
    """Performance says what a run costs; the machine's kernel string and the commit of each
    figure are in Contributing (`<!-- bench-runs -->`), a line per results file."""
    (tmp_path / "r.json").write_text(json.dumps(RESULT))
    monkeypatch.setattr(hook, "ROOT", tmp_path)
    monkeypatch.setattr(hook, "BENCHMARKS", tmp_path)
    page = hook.on_page_markdown("<!-- bench: r.json -->", _page("performance.md"), None, None)
    assert "abc1234" not in page and "2 cores" not in page and "mirror.py" not in page
    runs = hook.on_page_markdown("x\n\n<!-- bench-runs -->\n", _page("contributing.md"), None, None)
    assert runs == ("x\n\n- `benchmarks/r.json`: 2026-11-26 12:00 UTC, 2 cores, 24 GiB, commit "
                    "`abc1234`; `python benchmarks/mirror.py --quick`\n")
    with pytest.raises(ValueError, match="bench-runs"):
        hook.on_page_markdown("no marker", _page("contributing.md"), None, None)


def test_a_machine_recorded_as_a_dict_is_its_values():
    line = report.run_line("r.json", {"machine": {"cpus": 2, "platform": "Linux"}, "commit": "1dd5d6c"})
    assert line == "`r.json`: date not recorded, cpus 2, platform Linux, commit `1dd5d6c`"
