"""The `dbt-logstore` command's arguments, checked as they are parsed (argparse types: one line,
exit code 2), and its parser, whose errors are one line like every other failure's."""
from __future__ import annotations

import argparse
import difflib
import math
import re
import sys
from pathlib import Path
from typing import Any, Iterable, List, NoReturn, Optional

from dbt.adapters.logstore.cli.broker import DEFAULT_HOST

USAGE_ERROR = 2


def bootstrap_servers(text: str) -> str:
    """`host:port[,host:port]`, as Kafka takes it (server_list.py: the profile's
    kafka_bootstrap_servers is checked the same way)."""
    from dbt.adapters.logstore.config.server_list import checked_servers

    try:
        return checked_servers(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def port(text: str) -> int:
    """A TCP port: 1 to 65535."""
    if not (text.strip().isdigit() and 1 <= int(text) <= 65535):
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: give a number from 1 to 65535")
    return int(text)


def host(text: str) -> str:
    """A host name or address to listen on, without a scheme or a port."""
    if not text.strip() or "://" in text or any(c.isspace() for c in text.strip()):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a host: give a host name or an address, e.g. {DEFAULT_HOST}")
    return text.strip()


def seconds(text: str) -> float:
    """A duration in seconds: a finite number, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        what = "negative" if value < 0 else "not a number of seconds"
        raise argparse.ArgumentTypeError(f"{text!r} is {what}: give a number of seconds, 0 or "
                                         f"more (e.g. 0.5)")
    return value


def _directory(text: str, what: str) -> str:
    path = Path(text).expanduser()
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text!r} does not exist: give {what}")
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is not a directory: give {what}")
    return str(path)


def project_dir(text: str) -> str:
    """--project-dir: a directory that exists (whether it holds a dbt project is said later,
    naming the command's alternatives)."""
    return _directory(text, "the directory of a dbt project (the one holding dbt_project.yml)")


def profiles_dir(text: str) -> str:
    """--profiles-dir: a directory that exists."""
    return _directory(text, "the directory holding profiles.yml")


def _closest(word: str, choices: Iterable[str]) -> Optional[str]:
    """The valid name nearest a mistyped one, if one is near enough to be meant."""
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def _known_option(parser: argparse.ArgumentParser, name: str) -> bool:
    """Whether argparse takes `name` as one of the parser's options (a long option also by an
    unambiguous prefix, as argparse does)."""
    options = parser._option_string_actions
    if name in options:
        return True
    if name.startswith("--"):
        return parser.allow_abbrev and any(o.startswith(name) for o in options)
    return name[:2] in options  # -fVALUE


def _subcommands(parser: argparse.ArgumentParser) -> Optional[argparse._SubParsersAction]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


class _Parser(argparse.ArgumentParser):
    """argparse's parser, its errors one line like every other failure's: `error: ...`, exit
    code 2 (argparse's own is two lines, the usage first). A mistyped option or command is named
    with the nearest valid one (argparse would say that COMMAND is missing, or list choices)."""

    _argv: Optional[List[str]] = None

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._argv = list(sys.argv[1:] if args is None else args)  # for error(): the typo
        return super().parse_known_args(args, namespace)

    def _typo(self) -> Optional[str]:
        """The first unknown option or command name of the command line, as an error message."""
        parser: argparse.ArgumentParser = self
        commands = _subcommands(parser)
        for token in self._argv or []:
            if token == "--":
                break
            if token.startswith("-") and len(token) > 1 and not re.match(r"^-\.?\d", token):
                name = token.split("=", 1)[0]
                if _known_option(parser, name):
                    continue
                options = [o for o in parser._option_string_actions if o.startswith("--")]
                near = _closest(name, options)
                if near:
                    return f"unrecognized argument '{name}': did you mean {near}?"
                return f"unrecognized argument '{name}'; see '{parser.prog} --help'."
            if commands is not None:  # the first word before a command's is the command
                if token not in commands.choices:
                    near = _closest(token, commands.choices)
                    if near:
                        return f"unrecognized command '{token}': did you mean {near}?"
                    return (f"unrecognized command '{token}': choose from "
                            f"{', '.join(commands.choices)}; see '{parser.prog} --help'.")
                parser, commands = commands.choices[token], None
        return None

    def error(self, message: str) -> NoReturn:
        typo = self._typo()
        if typo is not None:
            self.exit(USAGE_ERROR, f"error: {typo}\n")
        # argparse says "argument --port: 'x' is ...": the option and its value, as typed
        message = re.sub(r"^argument ([^:]+): (?=')", r"\1 ", message)
        message = re.sub(r"^argument ([^:]+): ", r"\1: ", message).rstrip(".")
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if choice:  # a mistyped word among a few (broker's action): the one meant
            near = _closest(choice[1], re.findall(r"'([^']*)'", choice[2]))
            if near:
                self.exit(USAGE_ERROR, f"error: {message}: did you mean {near}?\n")
        self.exit(USAGE_ERROR, f"error: {message}; see '{self.prog} --help'.\n")
