"""What PyFlink's JVM options cost the suite, side by side: a Flink decoder (tests/functional/
flink_peer.py) started, one debezium-json case decoded six times, and closed, with the JVM options
the suite gives it (the C1 compiler, the serial collector) and with Java's defaults, alternating.

    LOGSTORE_FLINK_PYTHON=.venv-flink/bin/python .venv/bin/python -m tests.flink_jvm_cost [ROUNDS]

prints the CPU-seconds of the decoder's processes (Python and the JVM) and the wall time of each
try (docs/contributing.md, "How the suite is run", quotes it).
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import psutil

from tests.functional.flink_peer import JVM_OPTIONS, Case, FlinkDecoder, flink_python

ROWS = ('{"before":null,"after":{"id":1,"v":"x"},"op":"c"}\n'
        '{"before":{"id":1,"v":"x"},"after":{"id":1,"v":"y"},"op":"u"}\n')


def _children_cpu() -> float:
    return sum(sum(child.cpu_times()[:2]) for child in psutil.Process().children(recursive=True))


def one_try(directory: Path, suite_options: bool) -> tuple:
    """(CPU-seconds, wall seconds) of a decoder's start, six decodes and close."""
    data = directory / "case.jsonl"
    data.write_text(ROWS)
    case = Case("case", "debezium-json", [("id", "BIGINT"), ("v", "STRING")], str(data))
    started = time.monotonic()
    decoder = FlinkDecoder(directory / "flink", flink_python(),
                           jvm_options=JVM_OPTIONS if suite_options else "")
    try:
        for _ in range(6):
            result = decoder.decode([case])
            assert result["case"].get("rows"), result
        cpu = _children_cpu()  # before close: the JVM's time is read while it lives
    finally:
        decoder.close()
    return cpu, time.monotonic() - started


def main(rounds: int = 2) -> None:
    for n in range(rounds):
        for suite_options in (True, False):
            with tempfile.TemporaryDirectory(prefix="flink-jvm-") as directory:
                cpu, wall = one_try(Path(directory), suite_options)
            label = "C1 + serial GC" if suite_options else "Java's defaults"
            print(f"round {n + 1}, {label:15}: {cpu:5.1f} CPU-s, {wall:5.1f} s", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
