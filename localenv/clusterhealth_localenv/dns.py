"""A real DNS server (dnsmasq) on loopback, for tests and the demo.

The agent's headline probe asks whether ``kubernetes.default`` resolves; to
test it honestly -- and to show in the demo what happens when a cluster's
DNS dies -- we need a DNS server that can be stopped and started again on
the same address.  :class:`DnsServer` runs dnsmasq (Debian package
``dnsmasq-base``) answering A/AAAA records for exactly the names it is
given, NXDOMAIN for everything else, and never forwarding anywhere.  The
process dies with its parent (:class:`~clusterhealth_localenv.processes.ManagedProcess`).
"""

from __future__ import annotations

import ipaddress
import os
import pathlib
import pwd
import shutil
import socket
import tempfile
import time
from collections.abc import Mapping

import dns.exception
import dns.message
import dns.query

from clusterhealth_localenv import processes

START_TIMEOUT = 10.0


class DnsServerError(RuntimeError):
    """dnsmasq is missing, or did not start; the message says what to do or quotes its log."""


def find_dnsmasq() -> str:
    """The dnsmasq binary: on ``PATH``, or in the sbin directories (not on a user's PATH)."""
    return processes.find_executable("dnsmasq", "dnsmasq-base", DnsServerError)


def free_udp_tcp_port(host: str, attempts: int = 50) -> int:
    """A port free for both UDP and TCP on ``host`` (DNS uses both)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for _ in range(attempts):
        with socket.socket(family, socket.SOCK_STREAM) as tcp:
            tcp.bind((host, 0))
            port = int(tcp.getsockname()[1])
            with socket.socket(family, socket.SOCK_DGRAM) as udp:
                try:
                    udp.bind((host, port))
                except OSError:
                    continue
                return port
    raise DnsServerError(f"no port free for both UDP and TCP on {host}")


class DnsServer(processes.LocalService):
    """dnsmasq on ``host:port`` answering ``records`` (name -> IPv4 or IPv6 address)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int | None = None,
        records: Mapping[str, str] | None = None,
        *,
        log_dir: pathlib.Path | None = None,
    ) -> None:
        ipaddress.ip_address(host)  # a ValueError for anything but an IP address
        self.host = host
        self.port = port if port is not None else free_udp_tcp_port(host)
        self.records: dict[str, str] = {}
        for name, address in (records or {}).items():
            ipaddress.ip_address(address)
            self.records[name.rstrip(".")] = address
        self._log_dir = log_dir
        self._made_log_dir = False
        """Whether :attr:`log_dir` is a temporary folder of this server's (removed at stop)."""
        self._process: processes.ManagedProcess | None = None

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)``, what a nameserver list takes."""
        return self.host, self.port

    @property
    def running(self) -> bool:
        """Whether dnsmasq is alive."""
        return self._process is not None and self._process.running()

    @property
    def log_path(self) -> pathlib.Path:
        """dnsmasq's log (with every query, for debugging a failed test)."""
        if self._log_dir is None:
            self._log_dir = pathlib.Path(tempfile.mkdtemp(prefix="clusterhealth-dns-"))
            self._made_log_dir = True
        return self._log_dir / f"dnsmasq-{self.host}-{self.port}.log"

    def argv(self) -> list[str]:
        """The dnsmasq command line."""
        argv = [
            find_dnsmasq(),
            "--keep-in-foreground",
            "--conf-file=/dev/null",  # not the machine's /etc/dnsmasq.conf
            "--no-resolv",  # no upstream servers ...
            "--no-hosts",  # ... and not /etc/hosts
            "--local=/#/",  # every other name: NXDOMAIN (not REFUSED)
            "--bind-interfaces",
            f"--listen-address={self.host}",
            f"--port={self.port}",
            "--pid-file=",  # no pid file
            f"--user={pwd.getpwuid(os.geteuid()).pw_name}",  # as root it would switch to nobody
            f"--log-facility={self.log_path}",
            "--log-queries",
        ]
        # --host-record answers exactly the name; --address would answer subdomains too.
        argv += [f"--host-record={name},{address}" for name, address in self.records.items()]
        return argv

    def start(self) -> None:
        """Start dnsmasq and wait until it answers a query (blocking, well under a second)."""
        if self.running:
            return
        process = processes.ManagedProcess(
            f"dnsmasq-{self.host}:{self.port}", self.argv(), self.log_path
        )
        self._process = process
        process.start()
        deadline = time.monotonic() + START_TIMEOUT
        probe = dns.message.make_query("clusterhealth-readiness.invalid.", "A")
        while True:
            if not process.running():
                raise DnsServerError(
                    f"dnsmasq on {self.host}:{self.port} exited with {process.exit_code()}:\n"
                    f"{process.log_tail()}"
                )
            try:
                dns.query.udp(probe, self.host, port=self.port, timeout=0.1)
                return
            except (dns.exception.Timeout, OSError):
                if time.monotonic() >= deadline:
                    process.kill()
                    raise DnsServerError(
                        f"dnsmasq on {self.host}:{self.port} did not answer within "
                        f"{START_TIMEOUT:g}s:\n{process.log_tail()}"
                    ) from None
                time.sleep(0.02)

    def _stopped(self) -> None:
        """The temporary log folder goes with the stopped server (a given ``log_dir`` stays)."""
        if self._made_log_dir and self._log_dir is not None:
            shutil.rmtree(self._log_dir, ignore_errors=True)
            self._log_dir, self._made_log_dir = None, False

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"DnsServer({self.host}:{self.port}, {len(self.records)} records, {state})"
