"""`dbt-logstore` command: manage the embedded broker, read a logged model's changes, check
that each logged model's table and log agree."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Iterator, List, Optional

from dbt.adapters.logstore.broker import (
    DEFAULT_HOST, DEFAULT_PORT, DEFAULT_STATE_DIR, BrokerError, EmbeddedBroker,
)


def _broker(args: argparse.Namespace) -> int:
    broker = EmbeddedBroker(args.host, args.port, Path(args.state_dir))
    try:
        if args.action == "start":
            pid = broker.start()
            print(f"broker running at {broker.bootstrap_servers} (pid {pid}, pid file {broker.pid_file})")
        elif args.action == "stop":
            stopped = broker.stop()
            print(f"broker at {broker.bootstrap_servers} " + ("stopped" if stopped else "was not running"))
        else:
            if broker.running():
                print(f"broker running at {broker.bootstrap_servers} (pid {broker.pid()})")
            else:
                print(f"broker not running at {broker.bootstrap_servers}")
                return 1
    except BrokerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _format_image(image: Optional[dict]) -> str:
    return "-" if image is None else json.dumps(image, ensure_ascii=False, default=str)


def _project(args: argparse.Namespace) -> Any:
    from dbt.adapters.logstore.project import DbtProject

    return DbtProject(args.project_dir, args.profiles_dir, args.target,
                      json.loads(args.vars) if args.vars else None)


def _changes(args: argparse.Namespace) -> Iterator[Any]:
    """The changes `tail` prints: of a logged model of the dbt project (resolved through its
    manifest and profile), or of a topic named with --bootstrap-servers."""
    from dbt.adapters.logstore.reader import ReaderError, StartPoint, hybrid_read, read_changelog

    start = StartPoint.parse(args.start)
    as_topic = args.bootstrap_servers is not None or not (Path(args.project_dir) / "dbt_project.yml").exists()
    if as_topic:
        if start.kind == "latest-full":
            raise ReaderError("--from latest-full reads the table too: name a model of the dbt "
                              "project instead of a topic.")
        yield from read_changelog(args.bootstrap_servers or f"{DEFAULT_HOST}:{DEFAULT_PORT}",
                                  args.name, start=start, follow=args.follow,
                                  normalize=args.normalize, idle_seconds=args.idle_seconds)
        return
    project = _project(args)
    model = project.model(args.name)
    if model is None:
        names = ", ".join(m.name for m in project.logged_models()) or "none"
        raise ReaderError(f"'{args.name}' is not a logged model of the dbt project at "
                          f"{project.project_dir} (logged models: {names}). To read a topic, "
                          f"pass --bootstrap-servers.")
    if start.kind != "latest-full":  # the model's log, on the log system its config names
        yield from read_changelog(model.log, start=start, follow=args.follow,
                                  normalize=args.normalize, idle_seconds=args.idle_seconds,
                                  table=model.table_id)
        return
    with project.connection():
        snapshot, rows = project.snapshot_rows(model)
        yield from hybrid_read(rows, snapshot, model.log, follow=args.follow,
                               normalize=args.normalize, idle_seconds=args.idle_seconds,
                               table=model.table_id)


def _tail(args: argparse.Namespace) -> int:
    from dbt.adapters.logstore.reader import ReaderError

    try:
        if not args.json:
            print(f"{'snap':>4} {'part':>4} {'offset':>6}  op  key / before -> after", flush=True)
        for r in _changes(args):
            if args.json:
                print(json.dumps({"snapshot": r.snapshot, "partition": r.partition,
                                  "offset": r.offset, "key": r.key, "op": r.op,
                                  "before": r.before, "after": r.after},
                                 ensure_ascii=False, default=str), flush=True)
            else:
                print(f"{r.snapshot:>4} {r.partition:>4} {r.offset:>6}  {r.op:<2}  "
                      f"{_format_image(r.key)}  {_format_image(r.before)} -> "
                      f"{_format_image(r.after)}", flush=True)
    except ReaderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # --follow ends with Ctrl-C
        pass
    return 0


def _status(args: argparse.Namespace) -> int:
    from dbt.adapters.logstore.reader import ReaderError
    from dbt.adapters.logstore.status import model_status

    try:
        project = _project(args)
        with project.connection():
            statuses = [model_status(project, m, verify=args.verify) for m in project.logged_models()]
    except ReaderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
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
    return 0 if all(s.agree for s in statuses) else 1


def _num(value: Optional[int]) -> str:
    return "-" if value is None else str(value)


def _project_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--project-dir", default=".", help="the dbt project (default: .)")
    parser.add_argument("--profiles-dir", default=None,
                        help="as dbt: DBT_PROFILES_DIR, the project, then ~/.dbt")
    parser.add_argument("--target", default=None)
    parser.add_argument("--vars", default=None, help="dbt vars, as JSON or YAML")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dbt-logstore", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    broker = sub.add_parser("broker", help="start, stop or check the embedded development broker")
    broker.add_argument("action", choices=["start", "stop", "status"])
    broker.add_argument("--host", default=DEFAULT_HOST)
    broker.add_argument("--port", type=int, default=DEFAULT_PORT)
    broker.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR),
                        help="where the pid file and broker log are kept")
    broker.set_defaults(func=_broker)

    tail = sub.add_parser("tail", help="print a logged model's (or a topic's) committed changes")
    tail.add_argument("name", metavar="MODEL|TOPIC",
                      help="a logged model of the dbt project, or a topic with --bootstrap-servers")
    tail.add_argument("--from", dest="start", default="earliest",
                      help="earliest (default), latest, snapshot:N, timestamp:T (epoch ms or "
                           "ISO-8601), latest-full (the table's rows, then its changes)")
    tail.add_argument("--follow", "-f", action="store_true",
                      help="keep reading new changes (Ctrl-C ends) instead of stopping at the end")
    tail.add_argument("--normalize", action="store_true",
                      help="per key: drop repeats, give updates their before image (upsert and "
                           "eventual logs)")
    tail.add_argument("--bootstrap-servers", default=None,
                      help=f"read NAME as a topic on these servers (default without a project: "
                           f"{DEFAULT_HOST}:{DEFAULT_PORT})")
    tail.add_argument("--json", action="store_true", help="one JSON object per line")
    tail.add_argument("--idle-seconds", type=float, default=1.0,
                      help="without --follow: stop after this long without new records at the end")
    _project_options(tail)
    tail.set_defaults(func=_tail)

    status = sub.add_parser("status", help="each logged model: topic, snapshots, records, and "
                                           "whether table and log agree (exit code 1 if not)")
    status.add_argument("--verify", action="store_true",
                        help="also compare content: replay each log against its table")
    status.add_argument("--json", action="store_true", help="one JSON object per model")
    _project_options(status)
    status.set_defaults(func=_status)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
