"""`dbt-logstore` command: manage the embedded broker, read a logged model's changes, check
that each logged model's table and log agree.

A failure ends with one line on stderr, `error: ...`, saying what failed and what to do. The
arguments are checked before anything connects. Exit code 2: the command line asks for what
cannot be served (bad arguments or --vars, no dbt project, a model that is not logged, a broker
stopped without its --state-dir); 1: it failed (the broker unreachable, a login refused, a topic
missing). `--debug` shows the traceback before that line."""
from __future__ import annotations

import argparse
import itertools
import json
import signal
import sys
import traceback
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from dbt.adapters.logstore.__version__ import version as __version__
from dbt.adapters.logstore.cli.broker import (
    DEFAULT_HOST, DEFAULT_PORT, DEFAULT_STATE_DIR, BrokerError, EmbeddedBroker, listener, port_open,
)

USAGE_ERROR, FAILURE = 2, 1

DESCRIPTION = """Manage the embedded development broker, read a logged model's changes, check that
each logged model's table and log agree.

The arguments are checked before anything connects. A failure ends with one line on stderr,
"error: ...", saying what failed and what to do; --debug shows the traceback before it."""

EXIT_CODES = """exit codes:
  0  done (status: every table agrees with its log; broker status: a broker is running)
  1  failed: the broker unreachable, a login refused, a topic missing (status: a table
     disagrees with its log; broker status: no broker running)
  2  the command line cannot be served: bad arguments or --vars, no dbt project, a model that
     is not logged, broker stop without the --state-dir of the broker on the port"""


from dbt.adapters.logstore.cli.endings import Interrupts, children, interrupted, pipe_closed  # noqa: E402
# the arguments, checked as they are parsed (cli/arguments.py)
from dbt.adapters.logstore.cli.arguments import (  # noqa: E402
    _Parser, bootstrap_servers, host, port, profiles_dir, project_dir, seconds,
)
from dbt.adapters.logstore.reading.replay import GENERATION_STARTS  # noqa: E402


def _broker(args: argparse.Namespace) -> int:
    broker = EmbeddedBroker(args.host, args.port, Path(args.state_dir))
    try:
        if args.action == "start":
            pid = broker.start()
            print(f"broker running at {broker.bootstrap_servers} (pid {pid}, pid file {broker.pid_file})")
        elif args.action == "stop":
            if broker.pid() is None:  # not this state dir's broker: whose is the port?
                broker.stop()  # removes a pid file whose process is gone
                found = listener(broker.port)
                if (found is not None and found.is_broker) or (
                        found is None and port_open(broker.host, broker.port)):
                    print(f"error: no pid file for port {broker.port} in {broker.state_dir}, but "
                          f"{broker.elsewhere(found)}; nothing was stopped.", file=sys.stderr)
                    return USAGE_ERROR
                print(f"broker at {broker.bootstrap_servers} was not running (no pid file in "
                      f"{broker.state_dir}; {broker.elsewhere(found)})")
                return 0
            broker.stop()
            print(f"broker at {broker.bootstrap_servers} stopped")
        else:
            if broker.running():
                print(f"broker running at {broker.bootstrap_servers} (pid {broker.pid()})")
                return 0
            found = listener(broker.port)
            if found is not None and found.is_broker:
                print(f"broker running at {broker.bootstrap_servers} (pid {found.pid}), without a "
                      f"pid file in {broker.state_dir}: {broker.elsewhere(found)}")
                return 0
            print(f"broker not running at {broker.bootstrap_servers} (no pid file in "
                  f"{broker.state_dir}; {broker.elsewhere(found)})")
            return 1
    except BrokerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _format_image(image: Optional[dict]) -> str:
    return "-" if image is None else json.dumps(image, ensure_ascii=False, default=str)


def parse_vars(text: Optional[str]) -> Dict[str, Any]:
    """--vars as dbt takes it (a YAML or JSON dictionary), read by dbt's own parser."""
    if text is None:
        return {}
    from dbt.config.utils import parse_cli_vars
    from dbt.exceptions import OptionNotYamlDictError
    from dbt_common.events import event_manager_client as events
    from dbt_common.events.event_manager import EventManager
    from dbt_common.exceptions import DbtRuntimeError

    from dbt.adapters.logstore.reading.reader import UsageError

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


def error_line(exc: BaseException, args: Optional[argparse.Namespace] = None) -> str:
    """The one line a failure ends with: the error's own words (error_wording.py), a topic read
    with --bootstrap-servers called a topic, and no "Nothing was changed." (these commands
    change nothing). An error nobody worded (not the reader's, the project's or dbt's) gets a
    pointer to --debug."""
    from dbt_common.exceptions import DbtBaseException

    from dbt.adapters.logstore.cli.error_wording import own_text, reworded, without_secrets
    from dbt.adapters.logstore.reading.reader import ReaderError

    topic = getattr(args, "name", None) if getattr(args, "bootstrap_servers", None) else None
    text = without_secrets(reworded(own_text(exc), topic, f"Topic '{topic}'" if topic else None))
    if isinstance(exc, (ReaderError, DbtBaseException)):
        return f"error: {text}"
    return f"error: {text} (unexpected; run with --debug for the traceback)"


def exit_code(exc: BaseException) -> int:
    from dbt.adapters.logstore.config.profile_checks import ProfileFieldError
    from dbt.adapters.logstore.reading.reader import UsageError

    return USAGE_ERROR if isinstance(exc, (UsageError, ProfileFieldError)) else FAILURE


def _project(args: argparse.Namespace) -> Any:
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


def _changes(args: argparse.Namespace) -> Iterator[Any]:
    """The changes `tail` prints: of a logged model of the dbt project (resolved through its
    manifest and profile), or of a topic named with --bootstrap-servers. What was asked is
    checked here, before anything is read or printed (so a usage error ends the command
    before its header line); the reading starts at the first next()."""
    from dbt.adapters.logstore.config.address import CLI_SERVERS, with_servers_setting
    from dbt.adapters.logstore.reading.reader import (
        StartPoint, UsageError, hybrid_read, read_changelog, topic_log,
    )

    start = StartPoint.parse(args.start)
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


def _tail(args: argparse.Namespace) -> int:
    changes = _changes(args)  # a usage error ends the command before the header line
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


def _status(args: argparse.Namespace) -> int:
    from dbt.adapters.logstore.reading.status import model_status

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
    parser.add_argument("--project-dir", default=".", type=project_dir,
                        help="the dbt project's directory (default: .)")
    parser.add_argument("--profiles-dir", default=None, type=profiles_dir,
                        help="where profiles.yml is (default, as dbt: DBT_PROFILES_DIR, the "
                             "project, then ~/.dbt)")
    parser.add_argument("--target", default=None,
                        help="the profile's target (default: the profile's own, as dbt)")
    parser.add_argument("--vars", default=None,
                        help="dbt vars, a YAML or JSON dictionary as dbt takes it: '{run: r1}'")


def _examples(description: str, *lines: str) -> Dict[str, Any]:
    """A subcommand's help: what it does and its exit codes first, examples at the end, laid out
    as written."""
    return {"description": description,
            "epilog": "examples:\n" + "\n".join(f"  {line}" for line in lines),
            "formatter_class": argparse.RawDescriptionHelpFormatter}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dbt-logstore", description=DESCRIPTION, epilog=EXIT_CODES,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"dbt-logstore {__version__}",
                        help="print the version of dbt-logstore and exit")
    debug_help = "on failure, show the traceback before the error line"
    parser.add_argument("--debug", action="store_true", help=debug_help)
    # also after the subcommand; SUPPRESS keeps a --debug given before it
    debug = _Parser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=debug_help)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    broker = sub.add_parser(
        "broker", parents=[debug], help="start, stop or check the embedded development broker",
        **_examples("Start, stop or check the embedded development broker (tansu, memory\n"
                    "storage; the broker extra), for development and tests.\n\n"
                    "exit codes: 0 done (status: running); 1 failed (status: not running);\n"
                    "2 bad arguments, or stop without the --state-dir of the broker on the port",
                    "dbt-logstore broker start --port 9092   # a broker at 127.0.0.1:9092",
                    "dbt-logstore broker stop --port 9092    # stop it"))
    broker.add_argument("action", choices=["start", "stop", "status"],
                        help="start: in the background (nothing if already running); stop: the "
                             "broker of the pid file; status: running or not")
    broker.add_argument("--host", default=DEFAULT_HOST, type=host,
                        help=f"the address it listens on (default: {DEFAULT_HOST})")
    broker.add_argument("--port", type=port, default=DEFAULT_PORT,
                        help=f"the port it listens on (default: {DEFAULT_PORT}); stop and status "
                             f"find the broker by it")
    broker.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR),
                        help="where the pid file and broker log are kept (default: "
                             "LOGSTORE_STATE_DIR, else ~/.dbt-logstore); give stop and status "
                             "the one start had")
    broker.set_defaults(func=_broker)

    tail = sub.add_parser(
        "tail", parents=[debug], help="print a logged model's (or a topic's) committed changes",
        **_examples("Print the committed changes of a logged model of the dbt project, or of a\n"
                    "topic (with --bootstrap-servers).\n\n"
                    "op: c created, u updated, d deleted, r a row of a complete copy of the\n"
                    "table: a generation's rows, as the log carries them, or with --from\n"
                    "latest-full the table's own rows, read from the table (so part and\n"
                    "offset -1), before the log's changes after that snapshot; g a generation\n"
                    "starts (the log re-based on its table): the rows before it are superseded.\n\n"
                    "exit codes: 0 done; 1 failed (the broker unreachable, a login refused, the\n"
                    "topic missing); 2 bad arguments or --vars, no dbt project, a model that is\n"
                    "not logged",
                    "dbt-logstore tail orders --from snapshot:3 --json   # a model of ./",
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
    tail.add_argument("--bootstrap-servers", default=None, type=bootstrap_servers,
                      metavar="HOST:PORT[,HOST:PORT]",
                      help=f"read the name as a topic on these Kafka servers (the embedded "
                           f"broker: {DEFAULT_HOST}:{DEFAULT_PORT}), not as a model")
    tail.add_argument("--json", action="store_true", help="one JSON object per line")
    tail.add_argument("--idle-seconds", type=seconds, default=1.0,
                      help="without --follow: stop after this many seconds without new records "
                           "at the end (default: 1; 0 or more)")
    _project_options(tail)
    tail.set_defaults(func=_tail)

    status = sub.add_parser(
        "status", parents=[debug], help="each logged model: topic, snapshots, records, and "
                                        "whether table and log agree (exit code 1 if not)",
        **_examples("Each logged model of the dbt project: its topic, the table's and the log's\n"
                    "snapshots, the records, and whether table and log agree.\n\n"
                    "exit codes: 0 every table agrees with its log; 1 one does not, or a failure\n"
                    "(the broker unreachable, a login refused); 2 bad arguments or --vars, no dbt\n"
                    "project",
                    "dbt-logstore status --verify   # also replay each log against its table",
                    "dbt-logstore status --json --target prod --vars '{run: r1}'"))
    status.add_argument("--verify", action="store_true",
                        help="also compare content: replay each log against its table")
    status.add_argument("--json", action="store_true", help="one JSON object per model")
    _project_options(status)
    status.set_defaults(func=_status)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)  # bad arguments: one line (_Parser.error), exit code 2
    usual = signal.signal(signal.SIGINT, Interrupts.handle)
    before = children()  # an interrupt stops only the processes this command started
    try:
        if hasattr(args, "vars"):
            args.vars = parse_vars(args.vars)
        return args.func(args)
    except KeyboardInterrupt:
        return interrupted(before)
    except BrokenPipeError:
        return pipe_closed()
    except Exception as exc:
        if Interrupts.seen:
            return interrupted(before)
        if args.debug:
            from dbt.adapters.logstore.cli.error_wording import without_secrets
            print(without_secrets(traceback.format_exc()), end="", file=sys.stderr)
        print(error_line(exc, args), file=sys.stderr)
        return exit_code(exc)
    finally:
        signal.signal(signal.SIGINT, usual)
        Interrupts.seen = False


if __name__ == "__main__":
    sys.exit(main())
