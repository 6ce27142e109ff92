"""Generations written under faults (issue 41, item 5): a `dbt run` that writes a generation, and
`dbt run-operation logstore_resnapshot`, are killed with SIGKILL (dbt and its Spark JVM, the
session method: the whole process group) at a random moment; then a normal run must complete.

Each round, on a keyed (two partitions) and a keyless model:
1. a run with the log off that deletes keys and changes every row (the log is lost: the topic
   still holds the earlier log, with keys the table no longer has);
2. a run with `log.on-lost: restart` (a generation with the retraction of those keys) killed at
   random, then the same run again, which must complete;
3. `logstore_resnapshot` of one model killed at random, then a normal run, which must complete.
After each recovery: the package's reader from the earliest offset and from `latest-generation`
replays to each table (read from its files), no snapshot id and no generation number is
confirmed twice in the control topic, generations number up with their snapshots, and the
table's recorded generation (table property logstore.generation, printed by the run's
on-run-end hook) is the control topic's latest.

Rounds: LOGSTORE_KILL_ROUNDS (default 1, as `make test` runs it; more with
`make soak SOAK_TESTS=tests/functional/test_faults_generations.py ROUNDS=N`); the seed:
LOGSTORE_KILL_SEED (default random), printed, and named with every failure.
"""
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from dbt.adapters.logstore.reading.reader import StartPoint, read_changelog
from dbt.adapters.logstore.reading.replay import Replica
from tests.functional.contract import canonical, read_table_files, read_topic
from tests.functional.fault_project import write_project
from tests.functional.test_faults_random import _first_statement_after, _phase

pytestmark = pytest.mark.apache_kafka  # proven on Apache Kafka (tests/kafka_cluster.py)

KEYED = """
{{ config(materialized='table', unique_key='id', log_system=var('log_system', 'kafka'),
          log_on_lost=var('on_lost', 'fail'), log_system_partitions=2,
          kafka_topic='keyed_' ~ var('suffix')) }}
select id, concat('v', cast({{ var('step') }} as string)) as version
from range({{ var('keys') }}) as r(id)
"""
KEYLESS = """
{{ config(materialized='table', log_system=var('log_system', 'kafka'),
          log_on_lost=var('on_lost', 'fail'), log_system_partitions=2,
          kafka_topic='keyless_' ~ var('suffix')) }}
select id % 97 as bucket, {{ var('step') }} as step from range({{ var('keys') }}) as r(id)
"""
MODELS = {"keyed": KEYED, "keyless": KEYLESS}
# the tables' properties after each run (its on-run-end hook), read from its output
PROPERTIES = """
{% macro print_properties() %}
  {% if execute %}
    {% for model in ['keyed', 'keyless'] %}
      {% set props = {} %}
      {% for row in run_query('show tblproperties ' ~ target.schema ~ '.' ~ model) %}
        {% do props.update({row[0]: row[1]}) %}
      {% endfor %}
      {{ log('TABLE-PROPERTIES ' ~ model ~ ' ' ~ tojson(props), info=true) }}
    {% endfor %}
  {% endif %}
{% endmacro %}
"""


def recorded_properties(run_output: str, model: str) -> Dict[str, str]:
    """The table properties the run's on-run-end hook printed (PROPERTIES) for `model`."""
    marker = f"TABLE-PROPERTIES {model} "
    lines = [line.split(marker, 1)[1] for line in run_output.splitlines() if marker in line]
    assert lines, f"the run printed no properties of {model}:\n{run_output[-3000:]}"
    return json.loads(lines[-1])


class GenerationKills:
    def __init__(self, root: Path, schema: str, bootstrap: str, seed: int) -> None:
        self.root, self.schema, self.bootstrap, self.seed = root, schema, bootstrap, seed
        self.random = random.Random(seed)
        self.suffix = uuid.uuid4().hex[:8]
        self.step, self.keys = 1, 4000
        self.report: List[str] = []

    def variables(self, **more) -> Dict:
        return {"step": self.step, "keys": self.keys, "suffix": self.suffix, **more}

    def command(self, *args: str) -> List[str]:
        return [str(Path(sys.executable).parent / "dbt"), *args, "--project-dir", str(self.root),
                "--profiles-dir", str(self.root)]

    def dbt(self, *args: str, kill_after: Optional[float] = None) -> Optional[subprocess.CompletedProcess]:
        """`dbt <args>` to its end, or killed (its process group) after `kill_after` seconds:
        then None, unless it ended first."""
        command = self.command(*args)
        if kill_after is None:
            return subprocess.run(command, cwd=self.root, capture_output=True, text=True, timeout=600)
        (self.root / "logs" / "dbt.log").unlink(missing_ok=True)
        process = subprocess.Popen(command, cwd=self.root, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            process.wait(timeout=kill_after)
            return subprocess.CompletedProcess(command, process.returncode, "", "")
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # dbt and its Spark JVM, at once
            process.wait()
            return None

    def run(self, context: str, **more) -> subprocess.CompletedProcess:
        done = self.dbt("run", "--vars", json.dumps(self.variables(**more)))
        assert done.returncode == 0, f"{context} (seed {self.seed}): the run failed\n{done.stdout[-4000:]}"
        return done

    def table(self, model: str) -> Counter:
        df = read_table_files(self.root / "spark" / "warehouse" / f"{self.schema}.db" / model)
        types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
        self.types = types
        return Counter(canonical(r.asDict(recursive=True), types) for r in df.collect())

    def reading(self, topic: str, start) -> Counter:
        replica = Replica()
        for change in read_changelog(self.bootstrap, topic, start=start):
            replica.apply(change)
        return Counter(canonical(row, self.types) for row in replica.rows())

    def check(self, context: str, run_output: str) -> None:
        for model in MODELS:
            where = f"{context}, model {model} (seed {self.seed})"
            topic = f"{model}_{self.suffix}"
            table = self.table(model)
            for start in ("earliest", StartPoint("latest-generation")):
                deadline = time.monotonic() + 15  # the last commit's markers land after the run
                while (got := self.reading(topic, start)) != table and time.monotonic() < deadline:
                    time.sleep(0.5)
                assert got == table, (f"{where}: reading from {start} differs\n only in the log: "
                                      f"{sorted((got - table).elements())[:10]}\n only in the table: "
                                      f"{sorted((table - got).elements())[:10]}")
            confirmations = [json.loads(m.value) for m in read_topic(self.bootstrap, topic + "__logstore_commits")]
            snapshots = [c["snapshot"] for c in confirmations]
            assert len(snapshots) == len(set(snapshots)), f"{where}: a snapshot confirmed twice: {snapshots}"
            starts = [(c["snapshot"], c["generation"]) for c in confirmations if "generation_start" in c]
            numbers = [g for _, g in sorted(starts)]
            assert numbers == sorted(set(numbers)), f"{where}: generations (snapshot, number): {starts}"
            recorded = recorded_properties(run_output, model)
            assert int(recorded["logstore.generation"]) == numbers[-1], \
                f"{where}: the table records generation {recorded['logstore.generation']}, the log {starts}"

    def kill_and_recover(self, context: str, args: List[str], earliest: float, latest: float,
                         **recovery_variables) -> None:
        delay = self.random.uniform(earliest, latest)
        killed = self.dbt(*args, kill_after=delay)
        phase = "finished before the kill" if killed is not None else _phase(self.root)
        line = f"{context}: kill at {delay:.1f} s ({phase})"
        self.step += 1
        recovered = self.run(line, **recovery_variables)
        actions = [a for a in ("taking over the lock", "re-sending change set", "already confirmed",
                               "starts generation", "putting", "removing") if a in recovered.stdout]
        self.report.append(f"{line}; recovery: {', '.join(actions) or 'nothing to do'}")
        self.check(line, recovered.stdout)

    def round(self, number: int, earliest: float, normal: float) -> None:
        # the log is lost: a run with it off deletes keys and changes every row
        self.step += 1
        self.keys -= self.random.randrange(100, 400)
        self.run(f"round {number}: the log off", log_system="none")
        self.step += 1
        restart = ["run", "--vars", json.dumps(self.variables(on_lost="restart"))]
        # kills land from shortly before the first statement to past the usual end of a run
        self.kill_and_recover(f"round {number}, restart", restart, earliest, normal * 1.1,
                              on_lost="restart")
        model = self.random.choice(list(MODELS))
        resnapshot = ["run-operation", "logstore_resnapshot", "--args", json.dumps({"model": model}),
                      "--vars", json.dumps(self.variables())]
        # an operation builds no model and ends well before a run (with a run's window, seed
        # 20261128 on a loaded machine: finished before its kill at 256 s)
        self.kill_and_recover(f"round {number}, logstore_resnapshot {model}", resnapshot,
                              earliest, earliest + (normal - earliest) * 0.7)


def test_generations_killed_at_random(tmp_path, kafka_bootstrap_servers):
    rounds = int(os.environ.get("LOGSTORE_KILL_ROUNDS", "1"))  # make test: one; make soak: many
    seed = int(os.environ.get("LOGSTORE_KILL_SEED") or random.SystemRandom().randrange(1 << 30))
    print(f"generation kills: seed {seed}, {rounds} rounds (LOGSTORE_KILL_SEED={seed} replays them)")
    schema = f"generations_{uuid.uuid4().hex[:8]}"
    write_project(tmp_path, schema, kafka_bootstrap_servers, None, models=MODELS,
                  project={"on-run-end": ["{{ print_properties() }}"]})
    (tmp_path / "macros").mkdir(exist_ok=True)
    (tmp_path / "macros" / "print_properties.sql").write_text(PROPERTIES)
    kills = GenerationKills(tmp_path, schema, kafka_bootstrap_servers, seed)
    started = time.monotonic()
    first = kills.run("the first run")
    normal = time.monotonic() - started
    earliest = max(0.5, _first_statement_after(tmp_path) - 1.0)
    kills.check("after the first run", first.stdout)
    report_file = os.environ.get("LOGSTORE_KILL_REPORT")
    if report_file:
        with open(report_file, "a") as out:
            out.write(f"generations: seed {seed}, {rounds} rounds\n")
    for number in range(1, rounds + 1):
        kills.round(number, earliest, normal)
        if report_file:  # round by round, so a long soak shows its progress
            with open(report_file, "a") as out:
                out.write("\n".join(kills.report[-2:]) + "; checked\n")
    print("\n".join(kills.report))
