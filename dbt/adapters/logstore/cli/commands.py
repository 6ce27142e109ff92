"""`dbt-logstore` command: manage the embedded broker, read a logged model's changes, check
that each logged model's table and log agree.

A failure ends with one line on stderr, `error: ...`, saying what failed and what to do. The
arguments are checked before anything connects. Exit code 2: the command line asks for what
cannot be served (bad arguments or --vars, no dbt project, a model that is not logged, a broker
stopped without its --state-dir); 1: it failed (the broker unreachable, a login refused, a topic
missing). `--debug` shows the traceback before that line."""
from __future__ import annotations

import argparse
import signal
import sys
import traceback
from pathlib import Path
from typing import Any, Dict, List, Optional

from dbt.adapters.logstore.__version__ import version as __version__
import dbt.adapters.logstore.cli.reading_commands as reading_commands
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
                    "dbt-logstore tail orders --at-run latest --json   # ./'s model, as its last run left it",
                    "dbt-logstore tail shop.orders --bootstrap-servers 127.0.0.1:9092"))
    tail.add_argument("name", metavar="MODEL|TOPIC",
                      help="a logged model of the dbt project, or a topic with --bootstrap-servers")
    tail.add_argument("--from", dest="start", default="earliest",
                      help="earliest (default), latest, snapshot:N, timestamp:T (epoch ms or "
                           "ISO-8601), latest-full (the table's rows, then its changes), "
                           "latest-generation or generation:N (the log's complete copy of the "
                           "table, then its changes)")
    tail.add_argument("--at-run", default=None, metavar="latest|INVOCATION_ID",
                      help="the model as a dbt run left it: its changes up to the snapshot that "
                           "run's record names (a model of the project; not with --from, --follow)")
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
    tail.set_defaults(func=reading_commands.tail)

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
    status.set_defaults(func=reading_commands.status)
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
