"""benchmarks/plots.py: the benchmark's PNG plots, drawn from a results dict or file."""
import copy
import importlib.util
import json
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "bench_plots", Path(__file__).resolve().parents[2] / "benchmarks" / "plots.py")
plots = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plots)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _configuration(kind, client, rows, rate, consistency="transactional", writers=1, ratio=None):
    return {"kind": kind, "client": client, "rows": rows, "consistency": consistency, "writers": writers,
            "broker": "embedded", "records": rows, "seconds": rows / rate, "records_per_s": rate,
            "ratio_to_raw": ratio, "cpu_us_per_record": 10.0}


def _results():
    configurations = []
    for rows in (100_000, 1_000_000):
        for client, raw in (("kafka-python", 8_000.0), ("confluent", 300_000.0)):
            configurations.append(_configuration("raw", client, rows, raw))
            for consistency, writers, share in (("transactional", 1, 0.5), ("eventual", 1, 0.6),
                                                ("transactional", 2, 0.4)):
                configurations.append(_configuration("mirror", client, rows, raw * share, consistency, writers, share))
    bounds = [{"client": c, "rows": r, "broker": "embedded", "cores": 2, "raw_cpu_us_per_record": 10.0,
               "spark_cpu_us_per_record": 15.0, "records_per_s": 80_000.0, "ratio_to_raw": 0.27}
              for c in ("kafka-python", "confluent") for r in (100_000, 1_000_000)]
    rebuilds = [{"rows": rows, "client": "confluent", "records": rows // 100, "with_log_s": 20.0 + i,
                 "without_log_s": 8.0 + i, "mirror_s": 2.0, "ratio": (20.0 + i) / (8.0 + i)}
                for i, rows in enumerate((1_000_000, 10_000_000))]
    return {"date": "2026-11-25 10:00 UTC", "machine": "2 cores, 24 GiB, test", "commit": "abc1234",
            "command": "python benchmarks/mirror.py --quick", "configurations": configurations,
            "rebuilds": rebuilds, "cpu_bounds": bounds, "failures": []}


def _assert_pngs(paths):
    assert len(paths) == 2
    for path in paths:
        data = Path(path).read_bytes()
        assert data[:8] == PNG_SIGNATURE and len(data) > 10_000, path


def _texts(figure):
    return "\n".join(t.get_text() for t in figure.texts)


def _labels(figure):
    return [line.get_label() for ax in figure.axes for line in ax.get_lines()]


def test_writes_both_plots_from_a_dict(tmp_path):
    paths = plots.write_plots(_results(), tmp_path / "out")
    assert [p.name for p in paths] == ["mirror-throughput.png", "rebuild-time.png"]
    _assert_pngs(paths)
    legend = [t.get_text() for t in plots.rebuild_figure(_results()).axes[0].get_legend().get_texts()]
    assert legend == ["run without the log", "run with the log", "mirror step (part of the run with the log)"]


def test_every_series_is_drawn_with_the_date_machine_and_commit():
    figure = plots.throughput_figure(_results())
    assert len(figure.axes) == 2  # a panel per client
    labels = _labels(figure)
    assert sum(label.startswith("raw producer") for label in labels) == 2
    assert sum(label.startswith("CPU bound") for label in labels) == 2
    assert sum(label.startswith("mirror") for label in labels) == 6
    assert "2026-11-25 10:00 UTC · 2 cores, 24 GiB, test · commit abc1234" in _texts(figure)
    assert "Note:" not in _texts(figure)
    assert figure.axes[0].get_xscale() == "log"  # 100k to 1M rows: a decade


def test_a_result_lacking_a_field_skips_that_series_and_says_so(tmp_path):
    results = _results()
    del results["cpu_bounds"], results["commit"]  # as results.json before the bound was recorded
    for rebuild in results["rebuilds"]:
        del rebuild["mirror_s"]
    results["configurations"][0]["records_per_s"] = None  # a configuration skipped
    figure = plots.throughput_figure(results)
    assert not any(label.startswith("CPU bound") for label in _labels(figure))
    assert "CPU bound not drawn" in _texts(figure) and "commit not recorded" in _texts(figure)
    assert "1 configuration(s) without records/s" in _texts(figure)
    rebuild = plots.rebuild_figure(results)
    assert "mirror step" in _texts(rebuild)
    legend = [t.get_text() for t in rebuild.axes[0].get_legend().get_texts()]
    assert legend == ["run without the log", "run with the log"]
    _assert_pngs(plots.write_plots(results, tmp_path))


def test_a_result_without_rebuilds_or_configurations_still_draws(tmp_path):
    results = {"date": "d", "machine": "m", "configurations": [], "failures": []}
    assert "no keyed rebuild" in _texts(plots.rebuild_figure(results))
    _assert_pngs(plots.write_plots(results, tmp_path))


def test_the_command_line_draws_a_saved_result_beside_it(tmp_path):
    saved = tmp_path / "results-quick.json"
    saved.write_text(json.dumps(_results()))
    assert plots.main([str(saved)]) == 0
    _assert_pngs([tmp_path / "plots" / "quick-mirror-throughput.png", tmp_path / "plots" / "quick-rebuild-time.png"])
    assert plots.plot_paths(tmp_path / "results.json")[0] == tmp_path / "plots" / "mirror-throughput.png"


def test_a_single_row_count_is_not_on_a_log_axis():
    results = copy.deepcopy(_results())
    results["configurations"] = [c for c in results["configurations"] if c["rows"] == 100_000]
    results["cpu_bounds"] = []
    figure = plots.throughput_figure(results)
    assert figure.axes[0].get_xscale() == "linear"
    assert "no CPU bound in this result" in _texts(figure)


def test_the_cpu_bound_the_benchmark_records_is_drawn(monkeypatch):
    from benchmarks import mirror_results as mirror

    monkeypatch.setattr(mirror.os, "cpu_count", lambda: 2)
    results = _results()
    saved = [{k: v for k, v in b.items() if k != "mirrors"}
             for b in mirror.cpu_bounds(results["configurations"], {100_000: 15.0, 1_000_000: 15.0})]
    # 2 cores / (10 + 15) us = 80,000 records/s, per client and row count; JSON-serialisable
    assert [b["records_per_s"] for b in saved] == [80_000.0] * 4
    results["cpu_bounds"] = json.loads(json.dumps(saved))
    figure = plots.throughput_figure(results)
    bounds = [line for ax in figure.axes for line in ax.get_lines() if line.get_label().startswith("CPU bound")]
    assert [list(line.get_ydata()) for line in bounds] == [[80_000.0, 80_000.0]] * 2


def _cluster_results():
    def entry(name, kind, rate, broker="apache", **more):
        return {"configuration": name, "broker": broker, "kind": kind, "rows": 200_000, "records": 200_000,
                "records_per_s": rate, "ratio_to_spark_writer": rate / 40_000.0, "topic_records": 200_000, **more}

    configurations = [entry("session, 1 writer", "session", 25_000.0),
                      entry("Spark writer (DataFrame)", "spark", 40_000.0),
                      entry("thrift, 2 tasks (Spark's writer)", "thrift", 30_000.0)]
    configurations += [dict(c, broker="embedded") for c in configurations]
    configurations[-1].update(fell_back=True, topic_records=400_000, note="the cursor wrote the change set again")
    configurations[3] = {"configuration": "session, 1 writer", "broker": "embedded", "kind": "session",
                         "rows": 200_000, "failed": True, "error": "RuntimeError: exit 1"}
    return {"date": "2026-11-27 04:38 UTC", "machine": "2 cores, 24 GiB, Linux", "rows": 200_000,
            "cluster": "standalone: master + 2 workers of 1 core", "executor_cores": 2,
            "command": "python benchmarks/cluster.py --brokers embedded,apache", "configurations": configurations}


def test_a_cluster_result_draws_its_bars_per_broker(tmp_path):
    results = _cluster_results()
    assert plots.is_cluster_result(results) and not plots.is_cluster_result(_results())
    figure = plots.cluster_figure(results)
    assert [ax.get_title(loc="left") for ax in figure.axes] == ["embedded broker (tansu)", "Apache Kafka, 3 nodes"]
    embedded = figure.axes[0]
    assert len(embedded.patches) == 2  # the failed configuration has no bar
    assert [p.get_hatch() for p in embedded.patches] == [None, "///"]  # the fallback is hatched
    texts = [t.get_text() for t in embedded.texts]
    assert texts[0] == "failed" and texts[-1] == "30.0k/s  ×0.75  (fell back)"
    assert "200,000 rows" in _texts(figure) and "--brokers embedded,apache" in _texts(figure)
    path = plots.write_cluster_plot(results, tmp_path)
    assert path == tmp_path / "cluster-throughput.png"
    assert path.read_bytes()[:8] == PNG_SIGNATURE


def _png_texts(data: bytes) -> dict:
    """The tEXt chunks of a PNG file."""
    texts, at = {}, 8
    while at < len(data):
        length, kind = int.from_bytes(data[at:at + 4], "big"), data[at + 4:at + 8]
        if kind == b"tEXt":
            key, _, value = data[at + 8:at + 8 + length].partition(b"\0")
            texts[key.decode("latin-1")] = value.decode("latin-1")
        at += 12 + length
    return texts


def test_each_plot_records_its_smallest_text_for_the_width_it_is_drawn_at(tmp_path):
    """The site's layout test reads it: 8.5 points at DPI 200 are 23.6 pixels of the file, 11.8 CSS
    pixels on the Performance page's 748-pixel column at 1280."""
    paths = plots.write_plots(_results(), tmp_path) + [plots.write_cluster_plot(_cluster_results(), tmp_path)]
    for path in paths:
        data = path.read_bytes()
        width = int.from_bytes(data[16:20], "big")
        assert width == round(plots.WIDTH_IN * plots.DPI), path
        smallest = float(_png_texts(data)[plots.MIN_TEXT_KEY])
        assert smallest == 23.6, path
        assert smallest * 748 / width >= 11, path


def test_the_command_line_recognises_a_cluster_result(tmp_path):
    for name, png in (("results-cluster.json", "cluster-throughput.png"),
                      ("results-cluster-quick.json", "quick-cluster-throughput.png")):
        saved = tmp_path / name
        saved.write_text(json.dumps(_cluster_results()))
        assert plots.main([str(saved)]) == 0
        assert (tmp_path / "plots" / png).read_bytes()[:8] == PNG_SIGNATURE
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == ["cluster-throughput.png",
                                                                      "quick-cluster-throughput.png"]
