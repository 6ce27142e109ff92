"""`python benchmarks/mirror.py --check`: which target a results file meets, misses or lacks."""
import pytest

from benchmarks import harness
from benchmarks import mirror_results as mirror


def _mirror(client, rows, ratio, consistency="transactional", writers=1, driver_mb=100.0):
    return {"kind": "mirror", "client": client, "rows": rows, "consistency": consistency,
            "writers": writers, "ratio_to_raw": ratio, "driver_mb": driver_mb}


def _all_met():
    configurations = []
    for client in ("kafka-python", "confluent"):
        for rows in (100_000, 1_000_000, 10_000_000):
            for consistency in ("transactional", "eventual"):
                configurations.append(_mirror(client, rows, 0.95, consistency))
            configurations.append(_mirror(client, rows, 0.95, writers=2, driver_mb=110.0))
    rebuilds = [{"rows": 1_000_000, "ratio": 1.6}, {"rows": 10_000_000, "ratio": 1.9}]
    return {"date": "d", "machine": "m", "configurations": configurations, "rebuilds": rebuilds}


def test_every_target_met(capsys):
    assert mirror.check(_all_met()) == 0
    assert "MISSED" not in capsys.readouterr().out


@pytest.mark.parametrize("change, target", [
    (lambda r: r["configurations"][0].update(ratio_to_raw=0.5), "at 100k rows"),
    (lambda r: r["rebuilds"][1].update(ratio=2.1), "rebuild 10M"),
    (lambda r: r["configurations"][-1].update(driver_mb=140.0), "driver peak RSS"),
    (lambda r: r["configurations"].__setitem__(
        slice(None), [c for c in r["configurations"] if c["client"] != "confluent"]),
     "confluent, 1 writer, 1M rows, transactional"),
])
def test_a_missed_or_missing_target_fails_and_is_named(change, target, capsys):
    results = _all_met()
    change(results)
    assert mirror.check(results) == 1
    failing = [line for line in capsys.readouterr().out.splitlines()
               if "MISSED" in line or "NOT MEASURED" in line]
    assert failing and all(target in line for line in failing[:1])


def test_a_failed_configuration_fails_the_check(capsys):
    results = _all_met()
    assert mirror.check(results) == 0
    results["failures"] = [{"configuration": "rebuild 10000000 build", "error": "TaskResultLost"}]
    assert mirror.check(results) == 1
    assert "FAILED       rebuild 10000000 build: TaskResultLost" in capsys.readouterr().out


def test_cpu_budget_bounds_the_mirror_by_the_cores(monkeypatch):
    monkeypatch.setattr(mirror.os, "cpu_count", lambda: 2)
    raw = {"kind": "raw", "client": "confluent", "rows": 1000, "consistency": "transactional",
           "writers": 1, "records_per_s": 300_000.0, "cpu_us_per_record": 6.0}
    mirrored = {**raw, "kind": "mirror", "records_per_s": 100_000.0, "cpu_us_per_record": 19.0}
    [line] = mirror.cpu_budget([raw, mirrored], {1000: 4.0})
    # 2 cores / (6 + 4) us = 200,000 records/s: two thirds of the raw producer's 300,000
    assert "at most 200,000 records/s = x0.67" in line
    assert mirror.cpu_budget([raw, mirrored], {}) == []  # no Spark-side figure: no bound


def test_busy_clock_counts_this_machines_cpu():
    clock = harness.BusyClock()
    clock.start()
    sum(i * i for i in range(2_000_000))  # about a tenth of a second of one core
    clock.stop()
    assert 0.02 < clock.seconds < 10
