"""`dbt-logstore` command: manage the embedded broker, read a topic's changelog."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import List, Optional

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


def _tail(args: argparse.Namespace) -> int:
    from dbt.adapters.logstore.reader import read_changelog

    records = read_changelog(args.bootstrap_servers, args.topic, idle_seconds=args.idle_seconds)
    if args.json:
        for r in records:
            print(json.dumps({"partition": r.partition, "offset": r.offset, "key": r.key, "op": r.op,
                              "before": r.before, "after": r.after}, ensure_ascii=False, default=str))
        return 0
    print(f"{'part':>4} {'offset':>6}  op  key / before -> after")
    for r in records:
        key = _format_image(r.key)
        print(f"{r.partition:>4} {r.offset:>6}  {r.op:<2}  {key}  {_format_image(r.before)} -> {_format_image(r.after)}")
    return 0


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

    tail = sub.add_parser("tail", help="print a topic's changelog from the beginning to its end")
    tail.add_argument("topic")
    tail.add_argument("--bootstrap-servers", default=f"{DEFAULT_HOST}:{DEFAULT_PORT}")
    tail.add_argument("--json", action="store_true", help="one JSON object per line")
    tail.add_argument("--idle-seconds", type=float, default=1.5,
                      help="stop after this long without new records at the end")
    tail.set_defaults(func=_tail)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
