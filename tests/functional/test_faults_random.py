"""Crash-proof at any instant: `dbt build` of a logged seed and five logged models (keyed
3-partition table with Debezium's transaction metadata, keyless table in Kafka Connect's schema
envelope that starts a log generation on every run, incremental append, an eventual table written by 2 Spark tasks,
a microbatch model of three daily batches over the seed) is killed with SIGKILL,
its whole process group (dbt and the Spark JVM it started: the session method), at a random
moment; then a normal run recovers. After each round, checked independently of the package's
reader (docs/log-format.md, tests/functional/contract.py):
- the confirmed records replay to each table (read from its files);
- every snapshot is confirmed once, in order;
- the keyed table's BEGIN/END events pair up with its confirmed attempts and count their events;
- each table records the snapshot and end offsets of its log's last confirmation (from the
  run's results, and from the tables' properties every tenth round and at the end);
- nothing of the protocol (`__logstore_*` tables or directories) is left;
- every run record names confirmed snapshots with their confirmations' offsets and
  generations, never going back, and the last one (the recovering run's) names each log's last
  confirmation; a model it built is paired with the input snapshots it was built from;
- a consumer joining two models only at run records (daily and the seed it is built from, each
  read up to the last three records) meets states that belong together: daily holds exactly
  the seed's events it is paired with.

Rounds: LOGSTORE_KILL_ROUNDS (default 1, as `make test` runs it; `make soak ROUNDS=N`); the seed: LOGSTORE_KILL_SEED
(default random), printed with every failure so a round can be replayed.
"""
import json
import os
import random
import re
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List

import pytest

from dbt.adapters.logstore.reading.replay import Replica
from dbt.adapters.logstore.reading.runs import changes_at_run, run_records
from tests.functional.contract import (
    assert_transaction_metadata, canonical, read_table_files, replay_confirmed, wait_for_confirmations,
)
from tests.functional.fault_project import write_project
from tests.functional.kills import kill_group
from tests.table_formats import SESSION_SETTINGS

pytestmark = pytest.mark.apache_kafka  # proven on Apache Kafka (tests/kafka_cluster.py)

# with Debezium's transaction metadata (BEGIN/END checked against the confirmed log)
KEYED = """
{{ config(materialized='table', unique_key='id', log_system='kafka', log_system_partitions=3,
          log_transaction_metadata=true, kafka_topic='keyed_' ~ var('suffix')) }}
select id, concat('v', cast((id * {{ var('step') }}) % 7 as string)) as version
from range({{ var('step') }} % 5, 40 + {{ var('step') }} % 9) as r(id)
"""
# in Kafka Connect's schema envelope; every run starts a new generation of its log first (the
# table's rows: lifecycle/generations.py), so kills land in generations too
KEYLESS = """
{{ config(materialized='table', log_system='kafka', log_system_partitions=2,
          log_format_schema_include=true, kafka_topic='keyless_' ~ var('suffix'),
          log_generation_interval='1 ms') }}
select id % 6 as bucket, cast({{ var('step') }} % 3 as int) as phase
from range(30 + {{ var('step') }} % 4) as r(id)
"""
APPENDED = """
{{ config(materialized='incremental', incremental_strategy='append', log_system='kafka',
          kafka_topic='appended_' ~ var('suffix') ~ var('appended_topic', '')) }}
select {{ var('step') }} as step, id from range(20) as r(id)
"""
EVENTUAL = """
{{ config(materialized='table', unique_key='id', log_system='kafka', log_consistency='eventual',
          log_mirror_parallelism=2, log_system_partitions=2, kafka_topic='eventual_' ~ var('suffix')) }}
select id, {{ var('step') }} % 4 as tier from range({{ var('step') }} % 3, 30) as r(id)
"""
# A run killed in the middle of an incremental insert's job commit (some files renamed into the
# table, not all) leaves a row count that tells nothing: the model goes on with a new
# kafka.topic (docs/architecture.md, "The commit protocol", step 3).
UNDECIDABLE = "whether it happened cannot be told"
# three daily batches a run (WINDOW), each a change set of its own, over the seed's events
DAILY = """
{{ config(materialized='incremental', incremental_strategy='microbatch', event_time='event_at',
          begin='2024-01-01', batch_size='day', partition_by=['day'], unique_key='id',
          log_system='kafka', log_system_partitions=2, kafka_topic='daily_' ~ var('suffix')) }}
select id, event_at, amount, cast(event_at as date) as day from {{ ref('events') }}
"""
WINDOW = ["--event-time-start", "2024-01-01", "--event-time-end", "2024-01-04"]
MODELS = {"keyed": KEYED, "keyless": KEYLESS, "appended": APPENDED, "eventual": EVENTUAL,
          "daily": DAILY}
SEED = "events"  # a logged seed, keyed; its CSV changes with every step
PROJECT = {"seeds": {"faults": {SEED: {"+log_system": "kafka", "+unique_key": "id",
                                       "+event_time": "event_at",
                                       "+kafka_topic": SEED + "_{{ var('suffix') }}",
                                       "+column_types": {"event_at": "timestamp"}}}}}
# On Iceberg and Delta (test_faults_random_iceberg.py, _delta.py), the models whose commits the
# format makes and ties to its versions, recovered by docs/log-format.md's rules: a table's
# atomic replace (keyed, and the seed's), an append (appended) and a partition overwrite
# (daily's batches).
# The keyless and eventual models commit their tables the keyed model's way; what is theirs (a
# generation, Spark tasks writing the log) does not depend on the format, and the parquet
# run has them.
FORMAT_MODELS = ("keyed", "appended", "daily")


def models_on(table_format: str) -> Dict[str, str]:
    """The models the random-kill project builds on `table_format`."""
    names = MODELS if table_format == "parquet" else FORMAT_MODELS
    return {name: MODELS[name] for name in names}


def _events_csv(step: int) -> str:
    """The seed's rows at a step: some change, some go, some come back, over three days."""
    rows = ["id,event_at,amount"]
    for i in range(12):
        if (i + step) % 5 != 0:
            rows.append(f"{i},2024-01-0{1 + i % 3} {i % 24:02d}:00:00,{(i * step) % 7}")
    return "\n".join(rows) + "\n"


def _dbt_command(root: Path, variables: Dict) -> List[str]:
    # four threads: the models' runs (and their deaths) interleave in one Spark session
    return [str(Path(sys.executable).parent / "dbt"), "build", "--threads", "4", *WINDOW, "--vars",
            json.dumps(variables), "--project-dir", str(root), "--profiles-dir", str(root)]


def _run_results(root: Path) -> Dict[str, Dict]:
    """What the last run recorded with each table: its snapshot and end offsets (the same
    step writes them to the table's properties)."""
    results = json.loads((root / "target" / "run_results.json").read_text())["results"]
    return {r["unique_id"].rsplit(".", 1)[-1]: r["adapter_response"] for r in results}


def _status(root: Path, variables: Dict) -> List[Dict]:
    """`dbt-logstore status`: each table's recorded snapshot and offsets next to its log's."""
    cli = str(Path(sys.executable).parent / "dbt-logstore")
    result = subprocess.run([cli, "status", "--json", "--project-dir", str(root), "--profiles-dir",
                             str(root), "--vars", json.dumps(variables)],
                            capture_output=True, text=True, timeout=300, cwd=root)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines, f"dbt-logstore status said nothing:\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
    return lines


def _phase(root: Path) -> str:
    """Where the killed run was: the last statement or step dbt logged."""
    log = (root / "logs" / "dbt.log")
    if not log.exists():
        return "starting (no log yet)"
    text = log.read_text(errors="replace")[-20000:]
    text = text[text.rfind("Running with dbt"):] if "Running with dbt" in text else text
    steps = re.findall(r"(create table \S+|alter table \S+ (?:set|rename)|drop table if exists \S+"
                       r"|insert into \S+|mirrored \d+ records|re-sending change set|taking over the lock"
                       r"|Concurrency: |Registered adapter|starts its log)", text)
    return steps[-1] if steps else "starting dbt"


def _first_statement_after(root: Path) -> float:
    """Seconds from dbt's start to its first SQL statement in the last run's log (before it:
    Python and Spark starting up, where a kill finds nothing of a model to break)."""
    text = (root / "logs" / "dbt.log").read_text(errors="replace")
    text = text[text.rfind("Running with dbt") - 40:]
    stamps = re.findall(r"(\d\d):(\d\d):(\d\d\.\d+) \[\w+ *\] \[[^\]]*\]: (Running with dbt|On model\.)", text)
    seconds = [int(h) * 3600 + int(m) * 60 + float(sec) for h, m, sec, _ in stamps]
    return max(0.0, seconds[1] - seconds[0]) if len(seconds) > 1 else 0.0


class RandomKills:
    def __init__(self, root: Path, schema: str, bootstrap: str, seed: int, table_format: str = "parquet"):
        self.root, self.schema, self.bootstrap = root, schema, bootstrap
        self.table_format = table_format
        self.logged = (*models_on(table_format), SEED)
        self.suffix = uuid.uuid4().hex[:8]
        self.random = random.Random(seed)
        self.seed = seed
        self.step = 0
        self.appended_topic = ""  # a new one after an undecidable incremental commit
        self.report: List[str] = []

    @property
    def variables(self) -> Dict:
        return {"step": self.step, "suffix": self.suffix, "appended_topic": self.appended_topic}

    def topic(self, model: str) -> str:
        return f"{model}_{self.suffix}" + (self.appended_topic if model == "appended" else "")

    @property
    def warehouse(self) -> Path:
        return self.root / "spark" / "warehouse" / f"{self.schema}.db"

    def run(self, kill_after: float = None) -> subprocess.CompletedProcess:
        self.step += 1
        (self.root / "seeds").mkdir(exist_ok=True)
        (self.root / "seeds" / f"{SEED}.csv").write_text(_events_csv(self.step))
        command = _dbt_command(self.root, self.variables)
        if kill_after is None:
            return subprocess.run(command, cwd=self.root, capture_output=True, text=True, timeout=600)
        (self.root / "logs" / "dbt.log").unlink(missing_ok=True)
        process = subprocess.Popen(command, cwd=self.root, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            process.wait(timeout=kill_after)
            return subprocess.CompletedProcess(command, process.returncode, "", "")
        except subprocess.TimeoutExpired:
            if process.poll() is not None:  # it ended just now, before the kill
                return subprocess.CompletedProcess(command, process.returncode, "", "")
            kill_group(process)  # dbt and its Spark JVM, at once (asserted killed)
            return None

    def rows(self, model: str):
        df = read_table_files(self.warehouse / model, self.table_format)
        types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
        return types, Counter(canonical(r.asDict(recursive=True), types) for r in df.collect())

    def check(self, context: str, read_tables: bool = False) -> None:
        """The contract after a successful run. The tables' recorded snapshot and offsets come
        from the run's results (every step changes every model), and with `read_tables` from
        the tables' own properties (`dbt-logstore status`: a Spark JVM more, so at the end)."""
        recorded = _run_results(self.root)
        status = {s["model"]: s for s in _status(self.root, self.variables)} if read_tables else {}
        for model in self.logged:
            topic = self.topic(model)
            where = f"{context}, model {model} on {self.table_format} (seed {self.seed})"
            # a microbatch model's result carries no adapter response (dbt's, per model, not
            # per batch): its snapshot is checked from its table's properties, with read_tables
            snapshot = recorded[model].get("log_snapshot")
            offsets = recorded[model].get("log_end_offsets")
            if read_tables:
                assert status[model]["agree"], f"{where}: {status[model]['problems']}"
                snapshot, offsets = status[model]["table_snapshot"], status[model]["table_offsets"]
            confirmations = wait_for_confirmations(self.bootstrap, topic, snapshot or 1)
            snapshots = [c["snapshot"] for c in confirmations]
            first = 1 if topic == f"{model}_{self.suffix}" else snapshots[0]  # a new topic goes on
            assert snapshots == list(range(first, first + len(snapshots))), \
                f"{where}: each snapshot confirmed once, in order: {snapshots}"
            assert len({c["changeset"] for c in confirmations}) == len(confirmations), \
                f"{where}: a change set confirmed twice"
            if snapshot is not None:
                assert snapshot == snapshots[-1], f"{where}: table at {snapshot}, log at {snapshots[-1]}"
                assert offsets == confirmations[-1]["end_offsets"], f"{where}: {offsets}"
            types, table = self.rows(model)
            # read again while it differs: the last commit's markers land after the run ends
            replayed = replay_confirmed(self.bootstrap, topic, types, table, timeout_seconds=15)
            assert replayed == table, (f"{where}: replay differs\n only in log: {replayed - table}\n"
                                       f" only in table: {table - replayed}")
            if model == "keyed":
                assert_transaction_metadata(self.bootstrap, topic, topic + ".transaction", where)
        left = sorted(p.name for p in self.warehouse.iterdir() if "__logstore_" in p.name)
        assert not left, f"{context} (seed {self.seed}): left behind: {left}"
        self.check_run_records(context)

    def check_join_at(self, record: Any, where: str) -> bool:
        """A consumer that joins two models only at a run record, from outside (each topic read
        by the package's reader up to the record's snapshot): daily, built from the seed's
        events, holds exactly the events of the seed it is paired with, wherever the run that
        wrote the record was killed and recovered."""
        daily = record.model("daily") if "daily" in self.logged else None
        if daily is None or daily.did not in ("changed", "unchanged") or daily.snapshot is None:
            return False  # failed or not built by that run: the record pairs it with what it was

        def rows_at(model: str) -> Counter:
            replica = Replica()
            for change in changes_at_run(self.bootstrap, record, model):
                replica.apply(change)
            return Counter(json.dumps([row["id"], str(row["event_at"]), row["amount"]])
                           for row in replica.rows())

        joined, events = rows_at("daily"), rows_at(SEED)
        assert joined == events, (f"{where}: run {record.invocation_id} pairs daily@{daily.snapshot} "
                                  f"with {SEED}@{record.model(SEED).snapshot}, which it was not built "
                                  f"from: only in daily {joined - events}, only in {SEED} {events - joined}")
        return True

    def check_run_records(self, context: str) -> None:
        """Every run record (the killed runs' too, if written before the kill) names each
        logged model at a confirmed snapshot with that confirmation's end offsets and change
        set, no model's snapshot goes back from one record to the next, and the last record
        (the recovering run's) names each model's last confirmation: a consumer that joins the
        models only at run records meets states the tables had together, never a half run."""
        where = f"{context} (seed {self.seed})"
        records = run_records(self.bootstrap, "faults", self.schema)
        assert records, f"{where}: no run record"
        confirmed = {model: {c["snapshot"]: c for c in wait_for_confirmations(self.bootstrap, self.topic(model), 1)}
                     for model in self.logged}
        newest: Dict[str, int] = {}
        checked_pairs: List[str] = []
        for record in records:
            for model in self.logged:
                at = record.model(model)
                if at.topic != self.topic(model) or at.snapshot is None:
                    continue  # the appended model's earlier topic (an undecidable commit)
                confirmation = confirmed[model].get(at.snapshot)
                assert confirmation is not None, f"{where}: run {record.invocation_id} names {model}@{at.snapshot}, not confirmed"
                assert ({str(p): o for p, o in at.end_offsets.items()}, at.changeset, at.generation or 1) == \
                    (confirmation["end_offsets"], confirmation["changeset"], confirmation.get("generation") or 1), \
                    f"{where}: {model}@{at.snapshot}"  # the generation too (one model starts one every run)
                assert at.snapshot >= newest.get(model, 0), f"{where}: {model} went back at run {record.invocation_id}"
                newest[model] = at.snapshot
                # a model this run built is paired with the inputs it was built from (daily
                # with the seed's snapshot it read): a join at the record meets states that
                # belong together; a change set re-sent by recovery names no inputs
                for read in (confirmation.get("inputs") or []) if at.did == "changed" else []:
                    paired = record.model(read["name"]).snapshot
                    assert read["snapshot"] is None or read["snapshot"] == paired, \
                        f"{where}: run {record.invocation_id} pairs {model}@{at.snapshot} with {read['name']}@{paired}, built from @{read['snapshot']}"
                    checked_pairs.append(model)
        assert "daily" not in self.logged or "daily" in checked_pairs, f"{where}: no pair checked"
        joined = [record for record in records[-3:] if self.check_join_at(record, where)]
        assert "daily" not in self.logged or joined, f"{where}: no join checked at the last records"
        last = records[-1]
        for model in self.logged:
            assert last.model(model).snapshot == max(confirmed[model]), \
                f"{where}: the last run record names {model}@{last.model(model).snapshot}, its log is at {max(confirmed[model])}"


def kill_rounds(root: Path, schema: str, bootstrap: str, rounds: int, seed: int,
                report_file: Path = None, table_format: str = "parquet") -> List[str]:
    kills = RandomKills(root, schema, bootstrap, seed, table_format)
    started = time.monotonic()
    first = kills.run()
    assert first.returncode == 0, f"first run (seed {seed}):\n{first.stdout[-3000:]}"
    normal = time.monotonic() - started
    # kills land from shortly before the first statement to past the usual end of a run
    earliest = max(0.5, _first_statement_after(root) - 1.0)
    kills.check("after the first run")
    for number in range(1, rounds + 1):
        delay = kills.random.uniform(earliest, normal * 1.1)
        killed = kills.run(kill_after=delay)
        phase = "finished before the kill" if killed is not None else _phase(root)
        recovered = kills.run()
        line = f"round {number}: kill at {delay:.1f} s ({phase})"
        undecidable = recovered.returncode != 0 and UNDECIDABLE in recovered.stdout
        if undecidable:  # the documented case (killed among the file renames of a job commit)
            kills.appended_topic = f"_{number}"  # and its documented remedy: a new topic
            recovered = kills.run()
        assert recovered.returncode == 0, f"{line}, seed {seed}: recovery failed\n{recovered.stdout[-4000:]}"
        actions = [a for a in ("taking over the lock", "re-sending change set", "already confirmed",
                               "putting", "removing") if a in recovered.stdout]
        if undecidable:
            actions.insert(0, "undecidable incremental commit, moved to a new topic")
        kills.report.append(f"{line}; recovery: {', '.join(actions) or 'nothing to do'}")
        kills.check(line, read_tables=number == rounds or number % 10 == 0)
        if report_file is not None:  # round by round, so a long soak shows its progress
            with open(report_file, "a") as out:
                out.write(kills.report[-1] + "; checked\n")
    return kills.report


def run_kill_test(root: Path, bootstrap: str, table_format: str = "parquet") -> None:
    """The rounds the environment asks for, on tables of `table_format` (with its session
    settings, tests/table_formats.py), reported to LOGSTORE_KILL_REPORT if set."""
    rounds = int(os.environ.get("LOGSTORE_KILL_ROUNDS", "1"))  # make test: one; make soak: many
    seed = int(os.environ.get("LOGSTORE_KILL_SEED") or random.SystemRandom().randrange(1 << 30))
    print(f"random kills on {table_format}: seed {seed}, {rounds} rounds "
          f"(LOGSTORE_KILL_SEED={seed} replays them)")
    schema = f"kills_{uuid.uuid4().hex[:8]}"
    profile, project = None, PROJECT
    if table_format != "parquet":
        profile = {"server_side_parameters": {"spark.sql.shuffle.partitions": "2",
                                              "spark.sql.session.timeZone": "UTC",
                                              **SESSION_SETTINGS[table_format]}}
        project = {"models": {"+file_format": table_format},
                   "seeds": {"faults": {**PROJECT["seeds"]["faults"], "+file_format": table_format}}}
    write_project(root, schema, bootstrap, None, models=models_on(table_format), profile=profile,
                  project=project)
    out = os.environ.get("LOGSTORE_KILL_REPORT")
    if out:
        with open(out, "a") as report_file:
            report_file.write(f"{table_format}: seed {seed}, {rounds} rounds\n")
    report = kill_rounds(root, schema, bootstrap, rounds, seed, Path(out) if out else None,
                         table_format)
    print("\n".join(report))


def test_random_kills(tmp_path, kafka_bootstrap_servers):
    run_kill_test(tmp_path, kafka_bootstrap_servers)
