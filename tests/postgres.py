"""A throwaway PostgreSQL server on loopback for the tests (the Kafka Connect JDBC sink's target,
tests/kafka_connect.py): Debian's package (`make test` installs `postgresql` if it is missing),
its binaries under /usr/lib/postgresql/<version>/bin, a cluster of its own in a temporary
directory, on a free port, with trust authentication for the `postgres` user, fsync off.

PostgreSQL refuses to run as root: when the tests run as root, initdb and the server run as the
`postgres` user the package creates (the temporary directory is handed to it).

Queries go through the package's own `psql` client (no Python driver): `execute` runs
statements, `rows` returns a query's rows as dicts, decoded from PostgreSQL's own JSON
(`json_agg`), so numerics come back as `Decimal` with their scale, dates and timestamps as
PostgreSQL's ISO text.

    with PostgresServer(tmp_dir) as pg:
        pg.jdbc_url            # jdbc:postgresql://127.0.0.1:<port>/postgres
        pg.execute("create table t (id int primary key)")
        pg.rows("select * from t")

or, from a test, the `postgres_server` fixture (tests/functional/conftest.py).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any, Dict, List, Optional

from tests.kafka_cluster import free_port

USER = "postgres"  # the superuser of the throwaway cluster, and the OS user it runs as under root


def bin_dir() -> Path:
    """The newest PostgreSQL installed from Debian's packages."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"),
                   key=lambda p: int(re.sub(r"\D", "", p.parents[1].name) or 0))
    if not found:
        raise RuntimeError("No PostgreSQL server under /usr/lib/postgresql/*/bin: run `make test` "
                           "(it installs Debian's `postgresql` package), or "
                           "`apt-get install -y postgresql`.")
    return found[-1].parent


def _as_postgres() -> Dict[str, Any]:
    """Popen arguments that run a child as the postgres user when we are root."""
    if os.geteuid() != 0:
        return {}
    return {"user": USER, "group": USER, "extra_groups": []}


class PostgresServer:
    """One PostgreSQL cluster in `base_dir` (a new temporary directory by default, removed at
    stop), listening on 127.0.0.1 only. Under root, a `base_dir` of your own is handed to the
    postgres user, and its parents must let that user through: pytest's tmp_path (under a 0700
    /tmp/pytest-of-root) does not."""

    def __init__(self, base_dir: Optional[Path] = None, port: Optional[int] = None) -> None:
        self._own_dir = base_dir is None
        self.base_dir = Path(base_dir) if base_dir is not None else Path(
            tempfile.mkdtemp(prefix="logstore-postgres-"))
        self.port = port or free_port()
        self.bin = bin_dir()
        self.data_dir = self.base_dir / "data"
        self.log = self.base_dir / "postgres.log"
        self.process: Optional[subprocess.Popen] = None

    # -- addresses --------------------------------------------------------------------------
    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def user(self) -> str:
        return USER

    def jdbc_url(self, database: str = "postgres") -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{database}"

    # -- life -------------------------------------------------------------------------------
    def start(self, timeout_seconds: float = 60.0) -> "PostgresServer":
        self.base_dir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.base_dir, USER, USER)
        run_as = _as_postgres()
        subprocess.run(
            [str(self.bin / "initdb"), "-D", str(self.data_dir), "-U", USER, "-A", "trust",
             "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"],
            check=True, capture_output=True, text=True, timeout=120, cwd=self.base_dir, **run_as)
        out = open(self.log, "ab")
        try:
            self.process = subprocess.Popen(
                [str(self.bin / "postgres"), "-D", str(self.data_dir), "-p", str(self.port),
                 "-c", f"listen_addresses={self.host}",
                 "-c", "unix_socket_directories=",  # TCP only: no socket in /var/run/postgresql
                 "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                 "-c", "TimeZone=UTC", "-c", "max_connections=50", "-c", "shared_buffers=32MB"],
                stdout=out, stderr=subprocess.STDOUT, cwd=self.base_dir, start_new_session=True,
                **run_as)
        finally:
            out.close()
        self._wait_until_ready(timeout_seconds)
        return self

    def _wait_until_ready(self, timeout_seconds: float) -> None:
        deadline = time.monotonic() + timeout_seconds
        last = ""
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"PostgreSQL exited ({self.process.returncode}) at start:\n"
                                   f"{self.log_tail()}")
            ready = subprocess.run(
                [str(self.bin / "pg_isready"), "-h", self.host, "-p", str(self.port), "-U", USER,
                 "-d", "postgres", "-t", "2"], capture_output=True, text=True)
            if ready.returncode == 0:
                return
            last = ready.stdout.strip() or ready.stderr.strip()
            time.sleep(0.2)
        raise RuntimeError(f"PostgreSQL on port {self.port} not ready after {timeout_seconds:.0f} s "
                           f"({last}):\n{self.log_tail()}")

    def stop(self) -> None:
        """A fast shutdown (SIGINT: sessions ended, a checkpoint, exit), else SIGKILL; then the
        directory is removed if this server made it."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> "PostgresServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # -- queries ----------------------------------------------------------------------------
    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run `sql` (one or more statements) with psql; its unaligned, tuples-only output.
        A failing statement raises, with psql's message."""
        done = subprocess.run(
            [str(self.bin / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
             "-h", self.host, "-p", str(self.port), "-U", USER, "-d", database, "-f", "-"],
            input=sql, capture_output=True, text=True, timeout=60,
            env={**os.environ, "PGCONNECT_TIMEOUT": "10", "PGTZ": "UTC"})
        if done.returncode != 0:
            raise RuntimeError(f"psql failed ({done.returncode}): {done.stderr.strip()}\nSQL: {sql}")
        return done.stdout

    def execute(self, sql: str, database: str = "postgres") -> None:
        self.psql(sql, database)

    def rows(self, query: str, database: str = "postgres") -> List[Dict[str, Any]]:
        """The rows of `query` (one SELECT, no trailing semicolon) as dicts in its order, through
        json_agg: numbers as Decimal (scale kept), null as None, other values as PostgreSQL's
        JSON text of them (dates `2024-05-01`, timestamptz `2024-05-01T10:00:00.123456+00:00`)."""
        text = self.psql(f"select coalesce(json_agg(q), '[]'::json) from ({query}) q", database)
        return json.loads(text, parse_float=Decimal, parse_int=int)

    def scalar(self, query: str, database: str = "postgres") -> Optional[str]:
        """The first column of the first row of `query`, as psql prints it (None if no row)."""
        out = self.psql(query, database).splitlines()
        return out[0] if out else None

    def create_database(self, name: str) -> str:
        """A new database; its JDBC URL."""
        self.execute(f'create database "{name}"')
        return self.jdbc_url(name)

    def column_types(self, table: str, database: str = "postgres",
                     schema: str = "public") -> Dict[str, str]:
        """{column: its SQL type as PostgreSQL spells it (format_type: `numeric(10,2)`,
        `timestamp(6) with time zone`, ...)} of a table."""
        rows = self.rows(
            "select a.attname as name, format_type(a.atttypid, a.atttypmod) as type "
            "from pg_attribute a join pg_class c on c.oid = a.attrelid "
            "join pg_namespace n on n.oid = c.relnamespace "
            f"where c.relname = '{table}' and n.nspname = '{schema}' "
            "and a.attnum > 0 and not a.attisdropped order by a.attnum", database)
        return {r["name"]: r["type"] for r in rows}

    def primary_key(self, table: str, database: str = "postgres",
                    schema: str = "public") -> List[str]:
        rows = self.rows(
            "select a.attname as name from pg_index i "
            "join pg_attribute a on a.attrelid = i.indrelid and a.attnum = any(i.indkey) "
            f"where i.indrelid = '\"{schema}\".\"{table}\"'::regclass and i.indisprimary "
            "order by array_position(i.indkey::int2[], a.attnum)", database)
        return [r["name"] for r in rows]
