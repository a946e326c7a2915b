"""A real HAProxy on loopback, for the MultiClusterIngress provider's tests and the demo.

The HAProxy provider is only proven by driving a real HAProxy: its runtime
API, its draining, what survives a restart (nothing).  :class:`HAProxyServer`
runs ``haproxy -f <cfg> -db`` (Debian package ``haproxy``) in the foreground
with a given configuration, waits until its admin socket answers ``show
info``, and can stop and restart it -- a real restart, so all runtime state
is lost, as in production.  The process dies with its parent
(:class:`~clusterhealth_localenv.processes.ManagedProcess`).

The configuration is passed as text (this package does not know the MCI
layout; ``clusterhealth_mci.providers.haproxy.config`` renders it); the
admin socket is read from its ``stats socket`` line.
"""

from __future__ import annotations

import pathlib
import re
import socket
import time

from clusterhealth_localenv import processes

START_TIMEOUT = 10.0
_STATS_SOCKET = re.compile(r"^\s*stats\s+socket\s+(\S+)", re.MULTILINE)
_TCP = re.compile(r"^(?:ipv4@|ipv6@)?(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:/]+)):(?P<port>\d+)$")


class HAProxyError(RuntimeError):
    """HAProxy is missing, or did not start; the message says what to do or quotes its log."""


def find_haproxy() -> str:
    """The haproxy binary: on ``PATH``, or in the sbin directories (not on a user's PATH)."""
    return processes.find_executable("haproxy", "haproxy", HAProxyError)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at ``host`` right now (bound, then released)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def admin_socket_of(config_text: str) -> str:
    """The first ``stats socket`` address of a configuration (a path or ``ipv4@host:port``)."""
    match = _STATS_SOCKET.search(config_text)
    if match is None:
        raise HAProxyError("the configuration has no 'stats socket' line: nothing to drive it by")
    return match.group(1)


def query(address: str, command: str, timeout: float = 1.0) -> str:
    """Send one runtime API command (non-interactive) and return the whole reply (blocking)."""
    tcp = _TCP.match(address)
    if tcp is not None and "/" not in address:
        host = tcp.group("v6") or tcp.group("host")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        target: str | tuple[str, int] = (host, int(tcp.group("port")))
    else:
        family, target = socket.AF_UNIX, address.removeprefix("unix@")
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(target)
        sock.sendall(command.encode() + b"\n")
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class HAProxyServer(processes.LocalService):
    """``haproxy -f <workdir>/haproxy.cfg -db`` with ``config_text``."""

    def __init__(self, config_text: str, workdir: pathlib.Path, *, name: str = "haproxy") -> None:
        self.config_text = config_text
        self.workdir = pathlib.Path(workdir)
        self.name = name
        self.admin_socket = admin_socket_of(config_text)
        """The runtime API address, as in the configuration (what the provider connects to)."""
        self._process: processes.ManagedProcess | None = None

    @property
    def config_path(self) -> pathlib.Path:
        """Where the configuration is written."""
        return self.workdir / f"{self.name}.cfg"

    @property
    def log_path(self) -> pathlib.Path:
        """HAProxy's output (alerts, and request logs if the configuration asks)."""
        return self.workdir / f"{self.name}.log"

    @property
    def running(self) -> bool:
        """Whether HAProxy is alive."""
        return self._process is not None and self._process.running()

    @property
    def pid(self) -> int | None:
        """The running HAProxy's pid."""
        return self._process.pid if self.running and self._process is not None else None

    def argv(self) -> list[str]:
        """The command line."""
        return [find_haproxy(), "-f", str(self.config_path), "-db"]

    def query(self, command: str, timeout: float = 1.0) -> str:
        """One runtime API command (blocking; for tests and debugging)."""
        return query(self.admin_socket, command, timeout)

    def start(self) -> None:
        """Start HAProxy and wait until its admin socket answers (blocking, well under a second)."""
        if self.running:
            return
        argv = self.argv()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self.config_text)
        process = processes.ManagedProcess(self.name, argv, self.log_path)
        self._process = process
        process.start()
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if not process.running():
                raise HAProxyError(
                    f"haproxy ({self.config_path}) exited with {process.exit_code()}:\n"
                    f"{process.log_tail()}"
                )
            try:
                if f"Pid: {process.pid}" in self.query("show info", timeout=0.5):
                    return
            except OSError:
                pass
            if time.monotonic() >= deadline:
                process.kill()
                raise HAProxyError(
                    f"haproxy's admin socket {self.admin_socket} did not answer within "
                    f"{START_TIMEOUT:g}s:\n{process.log_tail()}"
                )
            time.sleep(0.02)

    def __repr__(self) -> str:
        state = f"running, pid {self.pid}" if self.running else "stopped"
        return f"HAProxyServer({self.config_path}, admin {self.admin_socket}, {state})"
