"""Kafka's `bootstrap.servers` checked as Kafka takes it: the one check behind the CLI's
--bootstrap-servers and the profile's kafka_bootstrap_servers (profile_checks.py)."""
from __future__ import annotations

import re

EXAMPLE = "give host:port[,host:port], e.g. 127.0.0.1:9092"


def checked_servers(text: str) -> str:
    """`host:port[,host:port]` (a host name, an IPv4 address or a bracketed IPv6 one, and a
    port from 1 to 65535), spaces around the commas dropped; ValueError says what is wrong
    with `text` (it starts with the value, quoted: the caller puts the setting's name first)."""
    servers = [s.strip() for s in str(text).split(",") if s.strip()]
    if not servers:
        raise ValueError(f"{text!r} is empty: {EXAMPLE}")
    for server in servers:
        scheme = re.match(r"^[A-Za-z][A-Za-z0-9+._-]*://", server)
        if scheme:
            raise ValueError(
                f"{text!r} has a scheme ({scheme.group(0)!r}): give host:port without it, e.g. "
                f"{server[scheme.end():] or '127.0.0.1:9092'}")
        match = re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[^:\s\[\]/]*)(?::(.*))?", server)
        if match is None:
            raise ValueError(f"{server!r} is not host:port: {EXAMPLE}")
        name, number = match.group(1), match.group(2)
        if number is None:
            raise ValueError(f"{server!r} has no port: {EXAMPLE}")
        if not name:
            raise ValueError(f"{server!r} has no host: {EXAMPLE}")
        if not (number.isdigit() and 1 <= int(number) <= 65535):
            raise ValueError(f"{server!r}: the port {number!r} is not a number from 1 to 65535")
    return ",".join(servers)
