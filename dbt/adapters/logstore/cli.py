"""`dbt-logstore` command: manage the embedded broker, read a logged model's changes, check
that each logged model's table and log agree.

A failure ends with one line on stderr, `error: ...`, saying what failed and what to do. Exit code
2: the command line asks for what cannot be served (bad arguments or --vars, a model that is not
logged); 1: it failed (the broker unreachable, a login refused, a topic missing). `--debug`
shows the traceback before that line."""
from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

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


USAGE_ERROR, FAILURE = 2, 1


def parse_vars(text: Optional[str]) -> Dict[str, Any]:
    """--vars as dbt takes it (a YAML or JSON dictionary), read by dbt's own parser."""
    if text is None:
        return {}
    from dbt.config.utils import parse_cli_vars
    from dbt.exceptions import OptionNotYamlDictError
    from dbt_common.events import event_manager_client as events
    from dbt_common.events.event_manager import EventManager
    from dbt_common.exceptions import DbtRuntimeError

    from dbt.adapters.logstore.reader import UsageError

    # dbt's parser also prints a note of its own on stdout; a manager without loggers keeps
    # it quiet, the error below says more
    usual = events.get_event_manager()
    events.ctx_set_event_manager(EventManager())
    try:
        return parse_cli_vars(text)
    except OptionNotYamlDictError as exc:
        what = "empty" if exc.var_type is type(None) else f"a {exc.var_type.__name__}"
    except DbtRuntimeError:
        what = "not valid YAML"
    finally:
        events.ctx_set_event_manager(usual)
    raise UsageError(f"--vars {text!r} is {what}: give a YAML or JSON dictionary, as to dbt "
                     f"(--vars '{{run: r1}}' or --vars '{{\"run\": \"r1\"}}').")


def error_line(exc: BaseException) -> str:
    """The one line a failure ends with. The reader's and the project's errors are worded for
    the user already; anything else is unexpected, so it is named with a pointer to --debug."""
    from dbt.adapters.logstore.reader import ReaderError

    text = " ".join(str(exc).split())  # dbt's errors span lines
    if isinstance(exc, ReaderError):
        return f"error: {text}"
    return f"error: {type(exc).__name__}: {text} (run with --debug for the traceback)"


def exit_code(exc: BaseException) -> int:
    from dbt.adapters.logstore.reader import UsageError

    return USAGE_ERROR if isinstance(exc, UsageError) else FAILURE


def _project(args: argparse.Namespace) -> Any:
    from dbt.adapters.logstore.project import DbtProject

    return DbtProject(args.project_dir, args.profiles_dir, args.target, args.vars)


def _changes(args: argparse.Namespace) -> Iterator[Any]:
    """The changes `tail` prints: of a logged model of the dbt project (resolved through its
    manifest and profile), or of a topic named with --bootstrap-servers."""
    from dbt.adapters.logstore.reader import StartPoint, UsageError, hybrid_read, read_changelog

    start = StartPoint.parse(args.start)
    as_topic = args.bootstrap_servers is not None or not (Path(args.project_dir) / "dbt_project.yml").exists()
    if as_topic:
        if start.kind == "latest-full":
            raise UsageError("--from latest-full reads the table too: name a model of the dbt "
                             "project instead of a topic.")
        yield from read_changelog(args.bootstrap_servers or f"{DEFAULT_HOST}:{DEFAULT_PORT}",
                                  args.name, start=start, follow=args.follow,
                                  normalize=args.normalize, idle_seconds=args.idle_seconds)
        return
    project = _project(args)
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
    except KeyboardInterrupt:  # --follow ends with Ctrl-C
        pass
    return 0


def _status(args: argparse.Namespace) -> int:
    from dbt.adapters.logstore.status import model_status

    project = _project(args)
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


def _project_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--project-dir", default=".", help="the dbt project (default: .)")
    parser.add_argument("--profiles-dir", default=None,
                        help="as dbt: DBT_PROFILES_DIR, the project, then ~/.dbt")
    parser.add_argument("--target", default=None)
    parser.add_argument("--vars", default=None,
                        help="dbt vars, a YAML or JSON dictionary as dbt takes it: '{run: r1}'")


def _examples(*lines: str) -> Dict[str, Any]:
    """A subcommand's help ends with examples, laid out as written."""
    return {"epilog": "examples:\n" + "\n".join(f"  {line}" for line in lines),
            "formatter_class": argparse.RawDescriptionHelpFormatter}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dbt-logstore", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    debug_help = "on failure, show the traceback before the error line"
    parser.add_argument("--debug", action="store_true", help=debug_help)
    # also after the subcommand; SUPPRESS keeps a --debug given before it
    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=debug_help)
    sub = parser.add_subparsers(dest="command", required=True)

    broker = sub.add_parser(
        "broker", parents=[debug], help="start, stop or check the embedded development broker",
        **_examples("dbt-logstore broker start --port 9092   # a broker at 127.0.0.1:9092",
                    "dbt-logstore broker stop --port 9092    # stop it"))
    broker.add_argument("action", choices=["start", "stop", "status"])
    broker.add_argument("--host", default=DEFAULT_HOST)
    broker.add_argument("--port", type=int, default=DEFAULT_PORT)
    broker.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR),
                        help="where the pid file and broker log are kept")
    broker.set_defaults(func=_broker)

    tail = sub.add_parser(
        "tail", parents=[debug], help="print a logged model's (or a topic's) committed changes",
        **_examples("dbt-logstore tail orders --from snapshot:3 --json   # a model of ./",
                    "dbt-logstore tail shop.orders --bootstrap-servers 127.0.0.1:9092"))
    tail.add_argument("name", metavar="MODEL|TOPIC",
                      help="a logged model of the dbt project, or a topic with --bootstrap-servers")
    tail.add_argument("--from", dest="start", default="earliest",
                      help="earliest (default), latest, snapshot:N, timestamp:T (epoch ms or "
                           "ISO-8601), latest-full (the table's rows, then its changes), "
                           "latest-generation or generation:N (the log's complete copy of the "
                           "table, then its changes)")
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

    status = sub.add_parser(
        "status", parents=[debug], help="each logged model: topic, snapshots, records, and "
                                        "whether table and log agree (exit code 1 if not)",
        **_examples("dbt-logstore status --verify   # also replay each log against its table",
                    "dbt-logstore status --json --target prod --vars '{run: r1}'"))
    status.add_argument("--verify", action="store_true",
                        help="also compare content: replay each log against its table")
    status.add_argument("--json", action="store_true", help="one JSON object per model")
    _project_options(status)
    status.set_defaults(func=_status)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)  # bad arguments: argparse's usage line, exit code 2
    try:
        if hasattr(args, "vars"):
            args.vars = parse_vars(args.vars)
        return args.func(args)
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        print(error_line(exc), file=sys.stderr)
        return exit_code(exc)


if __name__ == "__main__":
    sys.exit(main())
