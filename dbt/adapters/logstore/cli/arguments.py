"""The `dbt-logstore` command's arguments, checked as they are parsed (argparse types: one line,
exit code 2), and its parser, whose errors are one line like every other failure's."""
from __future__ import annotations

import argparse
import math
import re
from pathlib import Path
from typing import NoReturn

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


class _Parser(argparse.ArgumentParser):
    """argparse's parser, its errors one line like every other failure's: `error: ...`, exit
    code 2 (argparse's own is two lines, the usage first)."""

    def error(self, message: str) -> NoReturn:
        # argparse says "argument --port: 'x' is ...": the option and its value, as typed
        message = re.sub(r"^argument ([^:]+): (?=')", r"\1 ", message)
        message = re.sub(r"^argument ([^:]+): ", r"\1: ", message).rstrip(".")
        self.exit(USAGE_ERROR, f"error: {message}; see '{self.prog} --help'.\n")
