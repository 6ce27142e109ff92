"""The `dbt-logstore` commands that read logs: `tail` (a logged model's or a topic's committed
changes, from a start point or as of a run) and `status` (does each table agree with its log).
What they print is here; the command line itself is commands.py's."""
from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import Any, Iterator, Optional

from dbt.adapters.logstore.cli.broker import DEFAULT_HOST, DEFAULT_PORT
from dbt.adapters.logstore.reading.replay import GENERATION_STARTS


def _format_image(image: Optional[dict]) -> str:
    return "-" if image is None else json.dumps(image, ensure_ascii=False, default=str)


def project_of(args: argparse.Namespace) -> Any:
    from dbt.adapters.logstore.reading.project import DbtProject

    # what Spark, its JVM and Derby print goes to the project's log directory, not the terminal
    engine_log = Path(args.project_dir) / "logs" / "dbt-logstore-engine.log"
    project = DbtProject(args.project_dir, args.profiles_dir, args.target, args.vars,
                         engine_log=engine_log)
    # every profile field, as `dbt run` and `dbt debug` check it, before the project is parsed
    from dbt.adapters.logstore.config.profile_checks import check_project_profile

    check_project_profile(project.project_dir, project.profiles_dir, project.target, project.vars)
    return project


def has_project(project_dir: str) -> bool:
    return (Path(project_dir) / "dbt_project.yml").is_file()


def changes_of(args: argparse.Namespace) -> Iterator[Any]:
    """The changes `tail` prints: of a logged model of the dbt project (resolved through its
    manifest and profile), or of a topic named with --bootstrap-servers. What was asked is
    checked here, before anything is read or printed (so a usage error ends the command
    before its header line); the reading starts at the first next()."""
    from dbt.adapters.logstore.config.address import CLI_SERVERS, with_servers_setting
    from dbt.adapters.logstore.reading.reader import (
        StartPoint, UsageError, hybrid_read, read_changelog, topic_log,
    )

    start = StartPoint.parse(args.start)
    if args.at_run is not None and (start.kind != "earliest" or args.follow):
        raise UsageError("--at-run reads a model from its log's start up to a run: it takes "
                         "neither --from nor --follow.")
    if args.at_run is not None and args.bootstrap_servers is not None:
        raise UsageError("--at-run reads a model of the dbt project (its run records are the "
                         "project's): name a model instead of a topic.")
    if args.bootstrap_servers is not None:  # a topic
        if start.kind == "latest-full":
            raise UsageError("--from latest-full reads the table too: name a model of the dbt "
                             "project instead of a topic.")
        log = with_servers_setting(topic_log(args.bootstrap_servers, args.name), CLI_SERVERS)
        return read_changelog(log, start=start, follow=args.follow, normalize=args.normalize,
                              idle_seconds=args.idle_seconds)
    if not has_project(args.project_dir):
        raise UsageError(f"No dbt project at {Path(args.project_dir).resolve()} (no "
                         f"dbt_project.yml) to find the model '{args.name}' in: run the command "
                         f"in the project's directory or pass --project-dir, or read a topic of "
                         f"that name with --bootstrap-servers HOST:PORT "
                         f"(e.g. {DEFAULT_HOST}:{DEFAULT_PORT}).")
    project = project_of(args)
    model = project.model(args.name)
    if model is None:
        logged = ", ".join(m.name for m in project.logged_models()) or "none"
        if project.has_loggable(args.name):
            raise UsageError(f"Model '{args.name}' is not logged (logged models: {logged}): "
                             f"set log_system='kafka' in its config and run it, or name a "
                             f"logged model.")
        raise UsageError(f"'{args.name}' is not a model of the dbt project at "
                         f"{project.project_dir} (logged models: {logged}): check the name, or "
                         f"pass --bootstrap-servers to read a topic of that name.")
    if args.at_run is not None:  # the model as of a run (its run record's snapshot)
        return changes_at_run(project, model, args.at_run)
    if start.kind != "latest-full":  # the model's log, on the log system its config names
        return read_changelog(model.log, start=start, follow=args.follow,
                              normalize=args.normalize, idle_seconds=args.idle_seconds,
                              table=model.table_id)

    def table_then_log() -> Iterator[Any]:
        with project.connection():
            snapshot, rows = project.snapshot_rows(model)
            yield from hybrid_read(rows, snapshot, model.log, follow=args.follow,
                                   normalize=args.normalize, idle_seconds=args.idle_seconds,
                                   table=model.table_id)

    return table_then_log()


def changes_at_run(project: Any, model: Any, invocation: str) -> Iterator[Any]:
    """`model`'s changes up to the snapshot the run record of `invocation` ('latest' or an
    invocation id) names for it (reading/runs.py)."""
    from dbt.adapters.logstore.reading import runs

    record = runs.find_run(model.log, *project.run_topic_parts, invocation)
    return runs.changes_at_run(model.log, record, model.name, table=model.table_id)


def tail(args: argparse.Namespace) -> int:
    changes = changes_of(args)  # a usage error ends the command before the header line
    first = next(changes, None)  # the read is open (or failed) before anything is printed
    if not args.json:
        print(f"{'snap':>4} {'part':>4} {'offset':>6}  op  key / before -> after", flush=True)
    if first is None:
        return 0
    try:
        for r in itertools.chain([first], changes):
            if args.json:
                print(json.dumps({"snapshot": r.snapshot, "partition": r.partition,
                                  "offset": r.offset, "key": r.key, "op": r.op,
                                  "before": r.before, "after": r.after},
                                 ensure_ascii=False, default=str), flush=True)
            else:
                what = (f"generation {r.generation} starts: rows changed before it are superseded"
                        if r.op == GENERATION_STARTS else f"{_format_image(r.key)}  "
                        f"{_format_image(r.before)} -> {_format_image(r.after)}")
                print(f"{r.snapshot:>4} {r.partition:>4} {r.offset:>6}  {r.op:<2}  {what}", flush=True)
    except KeyboardInterrupt:  # --follow ends with Ctrl-C, once its changes are printing
        if not args.follow:
            raise
    return 0


def status(args: argparse.Namespace) -> int:
    from dbt.adapters.logstore.reading.status import model_status

    project = project_of(args)
    with project.connection():
        statuses = [model_status(project, m, verify=args.verify) for m in project.logged_models()]
    if args.json:
        for s in statuses:
            print(json.dumps(s.as_dict(), default=str))
    else:
        print(f"{'model':<24} {'topic':<28} {'table':>5} {'log':>5} {'records':>8}  state")
        for s in statuses:
            state = "agree" if s.agree else "DISAGREE: " + "; ".join(s.problems)
            print(f"{s.model:<24} {s.topic:<28} {_num(s.table_snapshot):>5} "
                  f"{_num(s.log_snapshot):>5} {s.records:>8}  {state}")
            if s.table_offsets:
                print(f"{'':<24} offsets after snapshot {s.table_snapshot}: {s.table_offsets}")
            if s.generation is not None:
                start = s.start or "none (no complete copy of the table is left in the log)"
                print(f"{'':<24} generation {s.generation}; a consumer reaches the table from: {start}")
            for warning in s.warnings:
                print(f"{'':<24} warning: {warning}")
    return 0 if all(s.agree for s in statuses) else 1


def _num(value: Optional[int]) -> str:
    return "-" if value is None else str(value)


