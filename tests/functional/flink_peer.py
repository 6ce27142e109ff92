"""Apache Flink as a peer reader of dbt-logstore topics: the records are decoded by Flink's own
formats (flink-json's `debezium-json` and `json`), not by this package's code, and the decoded
changelog is applied to a multiset of rows that must equal the Spark table.

Flink runs in its own virtual environment (`make test` creates `.venv-flink` with
apache-flink==2.2.1 and passes its interpreter as LOGSTORE_FLINK_PYTHON), as a subprocess running
tests/peers/flink_decode.py. For test_peer_flink.py Flink does not read Kafka itself
(test_live_flink.py does, with Flink's Kafka connector and `Case(path=None)`): the record values
are written to a file, one per line, and read with the `filesystem` connector and the format
under test, in streaming mode, so the changelog keeps its row kinds (+I, -U, +U, -D). Upsert-kafka's semantics
(value = upsert of its key, null value = delete of its key) are applied here on top of Flink's
`json` decoding of keys and values.

The values Flink decodes come back in one JSON-safe form (see flink_decode.py) and are compared
with the table's rows through tests/functional/contract.py's `canonical`, directed by the Spark
types: decimals by exact value, timestamps as UTC instants at microseconds, timestamp_ntz as
wall clock, binary as base64, maps and structs by key.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import pytest

from tests.functional.contract import Message, _split_top, canonical, confirmed, read_topic

FLINK_PYTHON_ENV = "LOGSTORE_FLINK_PYTHON"
DECODER = Path(__file__).resolve().parents[1] / "peers" / "flink_decode.py"


def flink_python() -> str:
    """The interpreter of the Flink virtual environment, or a test failure that says how to get
    one (these tests are part of the contract: they never skip)."""
    python = os.environ.get(FLINK_PYTHON_ENV)
    if not python:
        pytest.fail(
            f"{FLINK_PYTHON_ENV} is not set: the Flink peer tests need PyFlink in its own virtual "
            "environment. Run them with `make test` (or `make functional`), which creates "
            f".venv-flink with apache-flink==2.2.1 and sets {FLINK_PYTHON_ENV}, or set "
            f"{FLINK_PYTHON_ENV} to the python of a virtual environment with apache-flink==2.2.1 "
            "installed.", pytrace=False)
    if not os.access(python, os.X_OK):
        pytest.fail(f"{FLINK_PYTHON_ENV}={python} is not an executable; run `make test` to create "
                    ".venv-flink, or point it at a python with apache-flink==2.2.1.", pytrace=False)
    return python


# ---------------------------------------------------------------------------------------------
# Types

_FLINK_ATOMIC = {
    "boolean": "BOOLEAN", "tinyint": "TINYINT", "smallint": "SMALLINT", "int": "INT",
    "bigint": "BIGINT", "float": "FLOAT", "double": "DOUBLE", "string": "STRING",
    "binary": "BYTES", "date": "DATE",
    # an instant, as Spark's timestamp is; timestamp_ntz is a wall clock
    "timestamp": "TIMESTAMP_LTZ(6)", "timestamp_ntz": "TIMESTAMP(6)",
}


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def flink_type(spark_type: str) -> str:
    """Flink SQL type of a Spark type string as `DataType.simpleString()` writes it:
    `decimal(12,2)` -> `DECIMAL(12, 2)`, `array<struct<a:int,b:string>>` ->
    `ARRAY<ROW<`a` INT, `b` STRING>>`, `map<string,int>` -> `MAP<STRING, INT>`."""
    t = spark_type.strip()
    lower = t.lower()
    if lower in _FLINK_ATOMIC:
        return _FLINK_ATOMIC[lower]
    match = re.fullmatch(r"decimal\((\d+)\s*,\s*(\d+)\)", lower)
    if match:
        return f"DECIMAL({match.group(1)}, {match.group(2)})"
    if re.fullmatch(r"(var)?char\(\d+\)", lower):
        return "STRING"
    if lower.startswith("array<") and t.endswith(">"):
        return f"ARRAY<{flink_type(t[6:-1])}>"
    if lower.startswith("map<") and t.endswith(">"):
        key, value = _split_top(t[4:-1])
        return f"MAP<{flink_type(key)}, {flink_type(value)}>"
    if lower.startswith("struct<") and t.endswith(">"):
        fields = [f.split(":", 1) for f in _split_top(t[7:-1])]
        return "ROW<" + ", ".join(f"{_quote(n)} {flink_type(s)}" for n, s in fields) + ">"
    raise ValueError(f"no Flink type for the Spark type {spark_type!r}")


def flink_columns(types: Dict[str, str]) -> List[Tuple[str, str]]:
    return [(name, flink_type(t)) for name, t in types.items()]


# ---------------------------------------------------------------------------------------------
# Cases: a file of record values and how Flink reads it

@dataclass
class Case:
    name: str
    format: str  # "debezium-json" or "json"
    columns: List[Tuple[str, str]]  # (name, Flink SQL type)
    path: Optional[str]  # None: `options` are the table's whole WITH clause (e.g. a Kafka source)
    options: Dict[str, str] = field(default_factory=dict)
    primary_key: Sequence[str] = ()
    config: Dict[str, str] = field(default_factory=dict)  # the job's own table settings

    def job(self) -> dict:
        job = {"name": self.name, "format": self.format, "columns": [list(c) for c in self.columns],
               "options": self.options, "primary_key": list(self.primary_key), "config": self.config}
        if self.path is not None:
            job["path"] = self.path
        return job


def write_lines(path: Path, values: Iterable[Optional[bytes]]) -> str:
    """One record value per line; a null value (tombstone) is an empty line, which Flink's
    debezium-json skips like the tombstone it stands for (the harness self-test checks that).
    The values are single-line JSON (control characters are escaped in JSON strings)."""
    with open(path, "wb") as f:
        for value in values:
            if value is not None:
                assert b"\n" not in value and b"\r" not in value, f"a record value spans lines: {value!r}"
                f.write(value)
            f.write(b"\n")
    return str(path)


def debezium_case(name: str, messages: Sequence[Message], types: Dict[str, str], directory: Path,
                  options: Optional[Dict[str, str]] = None) -> Case:
    """The data records' values, tombstones included (as empty lines), for `debezium-json`."""
    path = write_lines(directory / f"{name}.debezium.jsonl", (m.value for m in messages))
    return Case(name, "debezium-json", flink_columns(types), path, dict(options or {}))


def upsert_cases(name: str, messages: Sequence[Message], types: Dict[str, str],
                 key_columns: Sequence[str], directory: Path,
                 options: Optional[Dict[str, str]] = None) -> Tuple[Case, Case]:
    """Two `json` cases for an upsert log, as Flink's upsert-kafka reads one: every record's key
    over the key columns, and the non-null values over all columns."""
    keys = write_lines(directory / f"{name}.keys.jsonl", (m.key for m in messages))
    values = write_lines(directory / f"{name}.values.jsonl",
                         (m.value for m in messages if m.value is not None))
    key_types = {c: types[c] for c in key_columns}
    return (Case(f"{name}.keys", "json", flink_columns(key_types), keys, dict(options or {})),
            Case(f"{name}.values", "json", flink_columns(types), values, dict(options or {})))


# ---------------------------------------------------------------------------------------------
# Flink's Kafka connector reading a topic itself (test_live_flink.py, test_flink_at_run.py)

KAFKA_CONNECTOR_JAR = (Path(__file__).resolve().parents[2] / ".jars" / "flink-kafka"
                       / "flink-sql-connector-kafka-5.0.0-2.2.jar")


def kafka_connector_jar() -> Path:
    """Flink's Kafka connector jar (`make jars`), or a test failure that says how to get it."""
    if not KAFKA_CONNECTOR_JAR.is_file():
        pytest.fail(f"{KAFKA_CONNECTOR_JAR} is missing: run `make jars` (jars/flink-kafka/pom.xml)",
                    pytrace=False)
    return KAFKA_CONNECTOR_JAR


def kafka_options(topic: str, bootstrap: str, isolation: str = "read_committed") -> Dict[str, str]:
    """A `debezium-json` Kafka source as docs/consumers.md ("Flink") gives it, bounded."""
    return {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": bootstrap,
            "properties.isolation.level": isolation, "scan.startup.mode": "earliest-offset",
            "format": "debezium-json",
            # up to each partition's end as the job starts: the job ends
            "scan.bounded.mode": "latest-offset"}


def upsert_kafka_options(topic: str, bootstrap: str) -> Dict[str, str]:
    """An `upsert-kafka` source (a model with `log.format: json`), bounded; upsert-kafka always
    starts at the earliest offset (it has no scan.startup.mode)."""
    return {"connector": "upsert-kafka", "topic": topic, "properties.bootstrap.servers": bootstrap,
            "properties.isolation.level": "read_committed", "key.format": "json",
            "value.format": "json", "scan.bounded.mode": "latest-offset"}


def kafka_case(name: str, types: Dict[str, str], options: Dict[str, str],
               primary_key: Sequence[str] = ()) -> Case:
    """A case whose `options` are the whole WITH clause of a Kafka (or upsert-kafka) table."""
    return Case(name, options.get("format") or options["value.format"], flink_columns(types), None,
                options, primary_key)


def errors_of(results: Dict[str, dict]) -> str:
    """Flink's text of every failed case of a batch, empty when none failed."""
    return "\n".join(f"--- {name}:\n{r['error']}" for name, r in results.items() if "error" in r)


# ---------------------------------------------------------------------------------------------
# dbt models whose rows depend on var('step'), and their confirmed log

def _literal(value, spark_type: str) -> str:
    """Spark SQL for a value: text literals cast to the type, or an expression given as ('sql', text)."""
    if value is None:
        return f"cast(null as {spark_type})"
    if isinstance(value, tuple):
        return f"cast({value[1]} as {spark_type})"
    return f"cast('{value}' as {spark_type})"


def model_sql(config: str, columns: Dict[str, str], steps: Dict[int, List[dict]]) -> str:
    """A model whose rows depend on var('step'): each step's rows as a `union all` of selects."""
    branches = []
    for i, (step, rows) in enumerate(steps.items()):
        selects = [
            "select " + ", ".join(f"{_literal(row.get(c), t)} as {c}" for c, t in columns.items())
            for row in rows
        ]
        branches.append(("{% if" if i == 0 else "{% elif") + f" var('step') == {step} %}}\n"
                        + "\nunion all\n".join(selects))
    return "{{ config(" + config + ") }}\n" + "\n".join(branches) + "\n{% endif %}\n"


def sql(text: str):
    return ("sql", text)


def confirmed_log(bootstrap: str, topic: str, snapshots: int, timeout_seconds: float = 60.0) -> List[Message]:
    """The confirmed data records (contract.confirmed) once all `snapshots` confirmations and
    all their records are readable: commit markers land asynchronously after a run."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        confirmations = [json.loads(m.value) for m in
                         read_topic(bootstrap, topic + "__logstore_commits")]
        messages = confirmed(bootstrap, topic, read_topic(bootstrap, topic))
        expected = sum(c["records"] for c in confirmations)
        if len(confirmations) >= snapshots and len(messages) == expected:
            return messages
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}: {len(confirmations)} of {snapshots} confirmations, "
                                 f"{len(messages)} of {expected} confirmed records readable")
        time.sleep(0.3)


# ---------------------------------------------------------------------------------------------
# Running Flink

# PyFlink's gateway JVM (JVM_ARGS, pyflink_gateway_server.py) starts as the suite's other JVMs
# do, with the C1 compiler and the serial collector: its jobs are small and short. A decoder's
# start and six small decodes took 11 CPU-seconds against 19 with Java's defaults, side by side
# (2026-11-29, tests/flink_jvm_cost.py).
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _environment(jvm_options: str = JVM_OPTIONS) -> Dict[str, str]:
    env = dict(os.environ)
    env["TZ"] = "UTC"
    env.pop("PYTHONPATH", None)  # the Flink venv's own packages only
    env.pop("PYSPARK_PYTHON", None)
    env["JVM_ARGS"] = " ".join(filter(None, [jvm_options, env.get("JVM_ARGS")]))
    return env


def _log_tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class FlinkDecoder:
    """One Flink process (one JVM, one mini cluster) for many batches of cases: it starts at
    once in the background (10-20 s) and serves `decode` calls until `close`."""

    def __init__(self, directory: Path, python: Optional[str] = None, jars: Sequence[str] = (),
                 jvm_options: str = JVM_OPTIONS):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._log_path = self.directory / "flink.log"
        self._log = open(self._log_path, "wb")
        self._batches = 0
        jar_args = [arg for jar in jars for arg in ("--jar", str(jar))]
        self._process = subprocess.Popen(
            [python or flink_python(), str(DECODER), *jar_args, "--serve"], stdin=subprocess.PIPE,
            stdout=self._log, stderr=subprocess.STDOUT, cwd=str(self.directory),
            env=_environment(jvm_options), start_new_session=True)  # its own group: close() ends the JVM too

    def decode(self, cases: Sequence[Case], timeout_seconds: float = 300.0) -> Dict[str, dict]:
        """Each case's result: {"rows": [[kind, values], ...]} or {"error": Flink's text}."""
        self._batches += 1
        job = self.directory / f"job-{self._batches}.json"
        result = self.directory / f"result-{self._batches}.json"
        job.write_text(json.dumps([c.job() for c in cases], ensure_ascii=False), encoding="utf-8")
        try:
            self._process.stdin.write(f"{job}\t{result}\n".encode())
            self._process.stdin.flush()
        except OSError:
            pass  # it died: said below
        deadline = time.monotonic() + timeout_seconds
        while not result.exists():
            if self._process.poll() is not None:
                raise AssertionError(f"the Flink decoder exited ({self._process.returncode}):\n"
                                     + _log_tail(self._log_path))
            if time.monotonic() > deadline:
                raise AssertionError(f"the Flink decoder gave no result in {timeout_seconds} s:\n"
                                     + _log_tail(self._log_path))
            time.sleep(0.1)
        return json.loads(result.read_text(encoding="utf-8"))

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                self._process.stdin.close()  # end of jobs: the decoder stops its cluster and exits
                self._process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
        else:
            try:  # the JVM, should it have outlived the python that started it
                os.killpg(self._process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._log.close()


def decode_batch(cases: Sequence[Case], directory: Path, python: Optional[str] = None,
                 timeout_seconds: float = 600.0) -> Dict[str, dict]:
    """One Flink process for one batch: job file in, result file out."""
    directory = Path(directory)
    job, result = directory / "job.json", directory / "result.json"
    job.write_text(json.dumps([c.job() for c in cases], ensure_ascii=False), encoding="utf-8")
    done = subprocess.run([python or flink_python(), str(DECODER), str(job), str(result)],
                          capture_output=True, text=True, env=_environment(),
                          timeout=timeout_seconds, start_new_session=True)
    if done.returncode != 0 or not result.exists():
        raise AssertionError(f"the Flink decoder failed ({done.returncode}):\n"
                             + (done.stdout + done.stderr)[-4000:])
    return json.loads(result.read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------------------------
# Applying what Flink decoded

def decoded(results: Dict[str, dict], case: Case) -> List[Tuple[str, Dict[str, object]]]:
    """(row kind, {column: value as Flink decoded it}) of a case, or an assertion error that
    carries Flink's own text."""
    result = results.get(case.name)
    assert result is not None, f"Flink returned nothing for {case.name}"
    assert "error" not in result, f"Flink ({case.format}) failed to decode {case.name}:\n{result['error']}"
    names = [c for c, _ in case.columns]
    rows = []
    for kind, values in result["rows"]:
        assert len(values) == len(names), f"{case.name}: {len(values)} values for {names}"
        rows.append((kind, dict(zip(names, values))))
    return rows


def canonical_rows(rows: Iterable[Tuple[str, Dict[str, object]]],
                   types: Dict[str, str]) -> List[Tuple[str, str]]:
    """(row kind, canonical row) in contract.py's form, which the table's rows also take."""
    return [(kind, canonical(row, types)) for kind, row in rows]


def apply_changelog(rows: Iterable[Tuple[str, str]]) -> Counter:
    """The multiset a changelog ends with: +I and +U add a row, -U and -D remove one equal row,
    which must be there."""
    state: Counter = Counter()
    for i, (kind, row) in enumerate(rows):
        if kind in ("+I", "+U"):
            state[row] += 1
        elif kind in ("-U", "-D"):
            assert state[row] > 0, f"Flink's changelog retracts a row it never emitted (#{i} {kind}): {row}"
            state[row] -= 1
            if not state[row]:
                del state[row]
        else:
            raise AssertionError(f"unknown row kind {kind!r}")
    return state


def state_and_kinds(results: Dict[str, dict], case: Case, types: Dict[str, str]) -> Tuple[Counter, List[str]]:
    """The multiset a case's changelog ends with, and its row kinds in order."""
    rows = canonical_rows(decoded(results, case), types)
    return apply_changelog(rows), [kind for kind, _ in rows]


def expected_kinds(messages: Sequence[Message]) -> List[str]:
    """The row kinds Flink's debezium-json must make of the records: c -> +I, u -> -U +U,
    d -> -D, a tombstone -> nothing."""
    kinds = {"c": ["+I"], "r": ["+I"], "u": ["-U", "+U"], "d": ["-D"]}
    out: List[str] = []
    for m in messages:
        if m.value is not None:
            out.extend(kinds[json.loads(m.value)["op"]])
    return out


def apply_upsert(messages: Sequence[Message], keys: Sequence[Tuple[str, Dict[str, object]]],
                 values: Sequence[Tuple[str, Dict[str, object]]], key_columns: Sequence[str],
                 types: Dict[str, str]) -> Counter:
    """Flink upsert-kafka's semantics over Flink's `json` decoding: in record order, a value is
    the new row of its key, a null value deletes its key. `keys` are the decoded keys of all
    records, `values` the decoded non-null values, in order (from `upsert_cases`)."""
    assert len(keys) == len(messages), f"Flink decoded {len(keys)} keys of {len(messages)} records"
    present = [m for m in messages if m.value is not None]
    assert len(values) == len(present), f"Flink decoded {len(values)} rows of {len(present)} values"
    key_types = {c: types[c] for c in key_columns}
    state: Dict[str, str] = {}
    rows = iter(values)
    for m, (_, key_row) in zip(messages, keys):
        key = canonical(key_row, key_types)
        if m.value is None:
            assert key in state, f"a tombstone deletes the key {key}, which has no row"
            del state[key]
            continue
        _, row = next(rows)
        row_key = canonical(row, key_types)
        assert row_key == key, f"the record's key {key} is not its value's key {row_key}"
        state[key] = canonical(row, types)
    return Counter(state.values())


def differences(decoded: Counter, table: Counter) -> str:
    return (f"\n only in Flink's state: {sorted((decoded - table).elements())}"
            f"\n only in the table:     {sorted((table - decoded).elements())}")
