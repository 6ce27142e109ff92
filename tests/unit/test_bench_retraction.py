"""benchmarks/retraction.py: the retraction's figures, read from the run's line in logs/dbt.log."""
import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "bench_retraction", Path(__file__).resolve().parents[2] / "benchmarks" / "retraction.py")
retraction = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(retraction)


def _line(model, generation, keys, offsets, seconds, topic="bench.retraction.kept"):
    # as dbt/adapters/logstore/changes/retraction.py logs it, behind dbt's file log prefix
    return (f"\x1b[0m05:41:07.123456 [info ] [Thread-1 (]: {model}: generation {generation} retracts "
            f"{keys} keys that '{topic}' still holds and the table no longer has (read {offsets} "
            f"offsets in {seconds} s)\n")


def test_the_model_s_last_line_gives_its_figures():
    text = (_line("customers", 2, 5, 100, "0.4") + "other lines\n" + _line("orders", 3, 7, 9, "1.0")
            + _line("customers", 3, 100000, 1000000, "38.2"))
    assert retraction.retraction_line(text, "customers") == {
        "generation": 3, "keys": 100000, "offsets": 1000000, "seconds": 38.2}
    assert retraction.retraction_line(text, "orders")["keys"] == 7


def test_a_run_that_retracted_nothing_has_no_figures():
    text = "customers: starts generation 1\n" + _line("orders", 2, 1, 1, "0.1")
    assert retraction.retraction_line(text, "customers") is None
