"""A real HTTP CONNECT proxy (tinyproxy) on loopback, for the proxy tests of the kube client.

Users reach member API servers through proxies (``HTTPS_PROXY``, a
kubeconfig's ``proxy-url``, Karmada's ``Cluster.spec.proxyURL`` with
``proxyHeader``).  To prove that traffic really went through one, the tests
put a real proxy between a component and an API server and read the proxy's
log.  :class:`TinyProxy` runs ``tinyproxy -d -c <cfg>`` (Debian package
``tinyproxy``) with a generated configuration: it listens on a loopback
address and a free port, accepts clients from loopback only, allows
``CONNECT`` to the given ports (all ports when none are given), optionally
demands HTTP basic authentication (so a test can prove ``proxyHeader``
carried ``Proxy-Authorization``), and logs every ``CONNECT`` to a file that
:meth:`TinyProxy.connect_targets` reads.  The process dies with its parent
(:class:`~clusterhealth_localenv.processes.ManagedProcess`).
"""

from __future__ import annotations

import base64
import ipaddress
import pathlib
import re
import socket
import time
from collections.abc import Sequence

from clusterhealth_localenv import processes

START_TIMEOUT = 10.0
_REQUEST = re.compile(r"Request \(file descriptor \d+\): CONNECT (\S+) HTTP/")
_ESTABLISHED = re.compile(r'Established connection to host "([^"]+)"')
_AUTH_WORD = re.compile(r"^[A-Za-z0-9._~-]+$")


class ProxyError(RuntimeError):
    """tinyproxy is missing, or did not start; the message says what to do or quotes its log."""


def find_tinyproxy() -> str:
    """The tinyproxy binary (``/usr/bin/tinyproxy`` on Debian)."""
    return processes.find_executable("tinyproxy", "tinyproxy", ProxyError)


def free_port(host: str) -> int:
    """A TCP port nothing listens on at ``host`` right now (bound, then released)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class TinyProxy(processes.LocalService):
    """tinyproxy on ``host:port`` allowing ``CONNECT`` to ``connect_ports``."""

    def __init__(
        self,
        workdir: pathlib.Path,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        connect_ports: Sequence[int] = (),
        basic_auth: tuple[str, str] | None = None,
        idle_timeout: int = 600,
        name: str = "tinyproxy",
    ) -> None:
        if not ipaddress.ip_address(host).is_loopback:
            raise ProxyError(f"{host}: the test proxy listens on loopback only")
        if basic_auth is not None and not all(_AUTH_WORD.match(w) for w in basic_auth):
            raise ProxyError("basic_auth: user and password must be plain words")
        self.workdir = pathlib.Path(workdir)
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.connect_ports = tuple(connect_ports)
        self.basic_auth = basic_auth
        self.idle_timeout = idle_timeout
        self.name = name
        self._process: processes.ManagedProcess | None = None

    @property
    def url(self) -> str:
        """``http://host:port``: what ``proxy-url`` / ``HTTPS_PROXY`` take."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def proxy_authorization(self) -> str | None:
        """The ``Proxy-Authorization`` header value that ``basic_auth`` demands."""
        if self.basic_auth is None:
            return None
        user, password = self.basic_auth
        return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    @property
    def config_path(self) -> pathlib.Path:
        """Where the configuration is written."""
        return self.workdir / f"{self.name}.conf"

    @property
    def log_path(self) -> pathlib.Path:
        """tinyproxy's own log (``LogFile``): one line per ``CONNECT``, and more."""
        return self.workdir / f"{self.name}.log"

    @property
    def output_path(self) -> pathlib.Path:
        """The process's stdout/stderr (start-up errors)."""
        return self.workdir / f"{self.name}.out"

    @property
    def running(self) -> bool:
        """Whether tinyproxy is alive."""
        return self._process is not None and self._process.running()

    def config_text(self) -> str:
        """The generated configuration."""
        lines = [
            f"Port {self.port}",
            f"Listen {self.host}",
            f"Timeout {self.idle_timeout}",
            f'LogFile "{self.log_path}"',
            "LogLevel Connect",
            "MaxClients 100",
            "Allow 127.0.0.0/8",
            "Allow ::1",
            "DisableViaHeader Yes",
        ]
        lines += [f"ConnectPort {port}" for port in self.connect_ports]
        if self.basic_auth is not None:
            lines.append(f"BasicAuth {self.basic_auth[0]} {self.basic_auth[1]}")
        return "\n".join(lines) + "\n"

    def argv(self) -> list[str]:
        """The command line (foreground)."""
        return [find_tinyproxy(), "-d", "-c", str(self.config_path)]

    def _answers(self) -> bool:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.2)
            try:
                sock.connect((self.host, self.port))
            except OSError:
                return False
        return True

    def start(self) -> None:
        """Start tinyproxy and wait until it accepts connections (blocking)."""
        if self.running:
            return
        argv = self.argv()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self.config_text())
        process = processes.ManagedProcess(self.name, argv, self.output_path)
        self._process = process
        process.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not self._answers():
            if not process.running():
                raise ProxyError(
                    f"tinyproxy ({self.config_path}) exited with {process.exit_code()}:\n"
                    f"{process.log_tail()}\n{self._log_tail()}"
                )
            if time.monotonic() >= deadline:
                process.kill()
                raise ProxyError(
                    f"tinyproxy on {self.host}:{self.port} did not accept connections within "
                    f"{START_TIMEOUT:g}s:\n{self._log_tail()}"
                )
            time.sleep(0.02)

    def _log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def _log_tail(self, lines: int = 20) -> str:
        return "\n".join(self._log_text().splitlines()[-lines:])

    def connect_targets(self) -> list[str]:
        """Every ``CONNECT`` target (``host:port``) asked for so far, oldest first.

        Refused ones (a port not allowed, no or wrong credentials) are listed too:
        tinyproxy logs the request before it checks it.
        """
        return _REQUEST.findall(self._log_text())

    def established_hosts(self) -> list[str]:
        """The hosts tinyproxy opened a connection to for an accepted CONNECT, oldest first."""
        return _ESTABLISHED.findall(self._log_text())

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"TinyProxy({self.url}, ports {list(self.connect_ports) or 'all'}, {state})"
