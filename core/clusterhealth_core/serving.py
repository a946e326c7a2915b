"""The HTTP endpoints every component serves: ``/metrics``, ``/healthz``, ``/readyz``.

Why our own server: the agent runs on every node against a tight memory
budget, and a general web framework costs more RSS than the whole job (aiohttp
measured +14.6 MiB over asyncio, docs/decisions/0002-http-library.md; httpx,
our client, has no server).  What
Prometheus and kubelet probes need is small, so this is a small HTTP/1.1
server on asyncio streams, made safe to expose on a pod network:

- **Dual-stack by default.**  The default address ``"::"`` means *every
  address*: one IPv6 socket with ``IPV6_V6ONLY`` off, so IPv4 clients connect
  too (as IPv4-mapped addresses).  On a host without IPv6 (the AF_INET6
  socket cannot be made or bound) it falls back to ``0.0.0.0`` and logs it.
  Any other address — IPv4, IPv6 or a host name — is bound exactly as given
  (a name on each address it resolves to, one port).
- **Optional TLS** (:class:`TLSConfig`).  The certificate and key are re-read
  when the files change (a mounted Secret is rotated by kubelet swapping a
  symlink): at most every ``reload_interval`` seconds, a new connection
  checks both files (``stat``) and, if the device, inode, mtime or size differ,
  loads them into a new ``SSLContext``; new connections get it, open ones keep
  theirs, nothing restarts.  A pair that does not load (half-rotated,
  mismatched) is logged and the previous certificate stays in use.
- **Bounded** (:class:`Limits`).  At most ``max_connections`` connections at
  once.  The request line plus headers may take ``max_header_bytes`` (431
  beyond) and must arrive, TLS handshake included, within ``header_timeout``
  (2 s: kubelet and Prometheus send theirs at once); a client slower than that
  is disconnected without an answer.  The whole connection — handshake,
  request, response — has one deadline, ``request_timeout``.
- **Slow clients cannot starve the probes.**  Clients that connect and
  trickle a header byte now and then (slowloris) hold a slot for at most
  ``header_timeout``.  And when a new connection arrives while
  ``max_connections`` are open, the client address holding the most
  connections gives one up: its connection that has waited longest for its
  request head is closed and the newcomer takes the slot, unless the
  newcomer's own address holds as many (then the newcomer is closed at once,
  without a response; so is it when none of that address's connections is
  still waiting for its head).  kubelet probes from the node's address and
  Prometheus scrapes from its pod's, one connection at a time, so a few slow
  clients, however many connections each opens and however fast they come
  back, never keep them out; a flood from more addresses than there are
  slots can (Prometheus and kubelet then try again at their next period).
- **One request per connection.**  Every response says ``Connection: close``;
  Prometheus and kubelet work the same with or without keep-alive, and a
  connection never outlives its request.  Only ``GET`` and ``HEAD`` are
  served (405 with ``Allow`` otherwise); a request body is never read.

The Prometheus registry is passed in (never the global default), and health
is a set of named checks so that ``/readyz?verbose`` says which one fails.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import errno
import logging
import os
import socket
import ssl
import urllib.parse
from collections.abc import Callable
from typing import Any

import prometheus_client

from clusterhealth_core import clock as clocks

log = logging.getLogger(__name__)

Check = Callable[[], tuple[bool, str]]
EVERY_ADDRESS = "::"
"""The default bind address: every IPv6 and IPv4 address (IPv4 only without IPv6)."""

_REASONS = {
    200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
    431: "Request Header Fields Too Large", 500: "Internal Server Error",
    503: "Service Unavailable", 505: "HTTP Version Not Supported",
}
_NO_IPV6 = frozenset({errno.EAFNOSUPPORT, errno.EPROTONOSUPPORT, errno.EADDRNOTAVAIL,
                      errno.ENOPROTOOPT})
_REJECT_LOG_PERIOD = 60.0


class TLSError(ValueError):
    """A certificate or key file is unreadable, malformed, or the two do not match."""


@dataclasses.dataclass(frozen=True)
class TLSConfig:
    """Serve HTTPS with this PEM certificate (chain) and PEM private key."""

    cert_file: str
    key_file: str
    reload_interval: float = 10.0
    """Seconds between checks of the files for a rotation (checked on a new connection)."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one server accepts at most."""

    max_connections: int = 32
    """Connections served at once; more are closed at once without a response."""
    max_header_bytes: int = 8192
    """Request line plus headers; more gets 431."""
    request_timeout: float = 10.0
    """Deadline for a whole connection: TLS handshake, request and response."""
    header_timeout: float = 2.0
    """Deadline for the TLS handshake, request line and headers, from the accept."""


def load_tls_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """A server ``SSLContext`` for the pair, or :class:`TLSError` saying what is wrong."""
    for what, path in (("certificate", cert_file), ("private key", key_file)):
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise TLSError(f"cannot read TLS {what} {path}: {exc.strerror or exc}") from exc
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_file, key_file)
    except ssl.SSLError as exc:
        detail = "they do not match" if "KEY_VALUES_MISMATCH" in str(exc) else str(exc)
        raise TLSError(f"cannot use TLS certificate {cert_file} with key {key_file}: "
                       f"{detail}") from exc
    return context


_Stamp = tuple[tuple[int, int, int, int], ...]


class CertificateReloader:
    """The current TLS context of a server, re-loaded when its files change."""

    def __init__(self, config: TLSConfig, clock: clocks.Clock) -> None:
        self.config = config
        self.clock = clock
        self.reloads = 0
        """How many times a changed pair was loaded (for tests and debugging)."""
        self._stamp = self._stat()
        self._context = load_tls_context(config.cert_file, config.key_file)
        self._checked: float | None = None

    def _stat(self) -> _Stamp:
        stamps = []
        for path in (self.config.cert_file, self.config.key_file):
            st = os.stat(path)  # follows kubelet's ..data symlink to the real file
            stamps.append((st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size))
        return tuple(stamps)

    def context(self) -> ssl.SSLContext:
        """The context for a new connection (checks the files at most every interval)."""
        now = self.clock.monotonic()
        if self._checked is not None and now - self._checked < self.config.reload_interval:
            return self._context
        self._checked = now
        try:
            stamp = self._stat()
        except OSError as exc:
            log.warning("cannot check TLS files for rotation (keeping the current "
                        "certificate): %s", exc)
            return self._context
        if stamp != self._stamp:
            try:
                self._context = load_tls_context(self.config.cert_file, self.config.key_file)
            except TLSError as exc:  # mid-rotation or broken: retried at the next check
                log.warning("keeping the current TLS certificate: %s", exc)
            else:
                self._stamp = stamp
                self.reloads += 1
                log.info("loaded the rotated TLS certificate %s", self.config.cert_file)
        return self._context


def _bind(family: int, address: tuple[Any, ...], dual_stack: bool) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0 if dual_stack else 1)
        sock.bind(address)
    except BaseException:
        sock.close()
        raise
    return sock


def listen_sockets(host: str, port: int) -> list[socket.socket]:
    """Bound (not yet listening) sockets for ``host``: see the module docstring."""
    if host == EVERY_ADDRESS:
        try:
            return [_bind(socket.AF_INET6, ("::", port), dual_stack=True)]
        except OSError as exc:
            if exc.errno not in _NO_IPV6:
                raise
            log.warning("no IPv6 on this host (%s): serving on 0.0.0.0 (IPv4) only", exc)
            host = "0.0.0.0"
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        seen: set[tuple[int, object]] = set()
        for family, _, _, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            if sockets:  # every address of a name on the one port (also when port=0)
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            sockets.append(_bind(family, tuple(address), dual_stack=False))
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class _Reject(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class HealthServer:
    """Serves metrics from ``registry`` and the results of liveness/readiness checks."""

    def __init__(
        self,
        registry: prometheus_client.CollectorRegistry,
        *,
        host: str = EVERY_ADDRESS,
        port: int = 10358,
        tls: TLSConfig | None = None,
        limits: Limits | None = None,
        clock: clocks.Clock | None = None,
    ) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self.tls = tls
        self.limits = limits or Limits()
        self.clock = clock or clocks.Clock()
        self.rejected = 0
        """Connections closed at once because ``max_connections`` were open and busy."""
        self.evicted = 0
        """Connections still waiting for their request head, closed to let a new one in."""
        self.slow = 0
        """Connections closed because their request head took over ``header_timeout``."""
        self._liveness: dict[str, Check] = {}
        self._readiness: dict[str, Check] = {}
        self._servers: list[asyncio.Server] = []
        self._certificates: CertificateReloader | None = None
        self._open: dict[asyncio.StreamWriter, str] = {}
        """Open connections and their client's address."""
        self._heading: dict[asyncio.StreamWriter, None] = {}
        """Connections still reading their request head, the longest waiting first."""
        self._per_address: collections.Counter[str] = collections.Counter()
        self._rejects_logged: float | None = None

    def add_liveness(self, name: str, check: Check) -> None:
        """Register a check for ``/healthz`` (and ``/readyz``)."""
        self._liveness[name] = check

    def add_readiness(self, name: str, check: Check) -> None:
        """Register a check for ``/readyz`` only."""
        self._readiness[name] = check

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """Every ``(address, port)`` listened on."""
        return [(str(s.getsockname()[0]), int(s.getsockname()[1]))
                for server in self._servers for s in server.sockets]

    @property
    def bound_port(self) -> int:
        """The port actually listened on (useful with ``port=0``)."""
        addresses = self.addresses
        if not addresses:
            raise RuntimeError("server not started")
        return addresses[0][1]

    @property
    def active_connections(self) -> int:
        """Connections being served now."""
        return len(self._open)

    async def start(self) -> None:
        """Start listening (raises :class:`TLSError` or ``OSError`` when it cannot)."""
        if self.tls is not None:
            self._certificates = CertificateReloader(self.tls, self.clock)
        limit = self.limits.max_header_bytes + 2
        try:
            for sock in listen_sockets(self.host, self.port):
                self._servers.append(await asyncio.start_server(
                    self._handle, sock=sock, limit=limit, backlog=128))
        except BaseException:
            await self.stop()
            raise
        scheme = "https" if self.tls else "http"
        log.info("serving /metrics /healthz /readyz over %s on %s", scheme,
                 ", ".join(f"[{a}]:{p}" if ":" in a else f"{a}:{p}" for a, p in self.addresses))

    async def stop(self) -> None:
        """Stop listening."""
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        for server in servers:
            await server.wait_closed()

    def _log_pressure(self) -> None:
        now = self.clock.monotonic()
        if self._rejects_logged is None or now - self._rejects_logged >= _REJECT_LOG_PERIOD:
            self._rejects_logged = now
            log.warning("%d connections open (the limit): %d waiting for a request head were "
                        "closed for new ones, %d new ones closed at once (busy), %d closed for "
                        "taking over %.1fs to send a request head, so far", len(self._open),
                        self.evicted, self.rejected, self.slow, self.limits.header_timeout)

    def _make_room(self, address: str) -> bool:
        """Free a slot for a new connection from ``address`` (False: close the newcomer)."""
        if len(self._open) < self.limits.max_connections:
            return True
        busiest = max(self._per_address, key=lambda a: self._per_address[a])
        victim = None
        if self._per_address[address] < self._per_address[busiest]:
            victim = next((w for w in self._heading if self._open[w] == busiest), None)
        if victim is None:
            self.rejected += 1
            self._log_pressure()
            return False
        self._forget(victim)
        self.evicted += 1
        self._log_pressure()
        victim.transport.abort()
        return True

    def _forget(self, writer: asyncio.StreamWriter) -> None:
        address = self._open.pop(writer, None)
        self._heading.pop(writer, None)
        if address is not None:
            self._per_address[address] -= 1
            if not self._per_address[address]:
                del self._per_address[address]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        if not self._make_room(address):
            writer.transport.abort()
            return
        self._open[writer] = address
        self._per_address[address] += 1
        self._heading[writer] = None
        try:
            async with asyncio.timeout(self.limits.request_timeout):
                request = await self._read_in_time(reader, writer)
                if writer not in self._heading:
                    return  # closed to let a newer connection in: nothing to answer
                self._heading.pop(writer)
                await self._serve_one(writer, request)
                writer.close()  # TLS: close_notify, then wait for the client's
                await writer.wait_closed()
        except (OSError, TimeoutError):
            pass  # the client went away, was too slow, or spoke no TLS: nothing to answer
        finally:
            self._forget(writer)
            with contextlib.suppress(Exception):
                writer.transport.abort()  # at once, whatever state it is in

    async def _read_in_time(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            ) -> tuple[str, urllib.parse.SplitResult] | _Reject:
        """TLS handshake and request head within ``header_timeout`` (a rejection to answer)."""
        try:
            async with asyncio.timeout(self.limits.header_timeout):
                if self._certificates is not None:
                    # first thing, before any await: nothing is read from the plain socket
                    await writer.start_tls(self._certificates.context())
                try:
                    return await self._read_head(reader)
                except _Reject as reject:
                    return reject
        except TimeoutError:
            self.slow += 1
            raise

    async def _serve_one(self, writer: asyncio.StreamWriter,
                         request: tuple[str, urllib.parse.SplitResult] | _Reject) -> None:
        method = "GET"
        try:
            if isinstance(request, _Reject):
                raise request
            method, target = request
            try:
                status, content_type, body = self.respond(method, target.path, target.query)
            except Exception:  # a broken collector: answer, log, keep serving
                log.exception("cannot answer %s %s", method, target.path)
                raise _Reject(500) from None
        except _Reject as reject:
            status, content_type = reject.status, "text/plain"
            body = f"{_REASONS[status].lower()}\n".encode()
        extra = "Allow: GET, HEAD\r\n" if status == 405 else ""
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            f"{extra}Connection: close\r\n\r\n"
        )
        writer.write(head.encode("latin-1") + (body if method != "HEAD" else b""))
        await writer.drain()

    async def _read_head(self, reader: asyncio.StreamReader,
                         ) -> tuple[str, urllib.parse.SplitResult]:
        """Read the request line and headers within the size limit."""
        budget = self.limits.max_header_bytes
        lines: list[bytes] = []
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.LimitOverrunError:
                raise _Reject(431) from None
            except asyncio.IncompleteReadError as exc:
                if not exc.partial and not lines:
                    raise ConnectionResetError("closed before a request") from None
                raise _Reject(400) from None
            budget -= len(line)
            if budget < 0:
                raise _Reject(431)
            if line in (b"\r\n", b"\n"):
                if lines:
                    break
                continue  # tolerate empty lines before the request line (RFC 9112 2.2)
            lines.append(line)
        parts = lines[0].decode("latin-1").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            raise _Reject(400)
        if not parts[2].startswith("HTTP/1."):
            raise _Reject(505)
        try:
            return parts[0], urllib.parse.urlsplit(parts[1])
        except ValueError:  # e.g. an unbalanced "[" in the target
            raise _Reject(400) from None

    def respond(self, method: str, path: str, query: str = "") -> tuple[int, str, bytes]:
        """Status, content type and body for one request (no I/O: easy to test)."""
        if method not in ("GET", "HEAD"):
            return 405, "text/plain", b"method not allowed\n"
        verbose = "verbose" in urllib.parse.parse_qs(query, keep_blank_values=True)
        if path == "/metrics":
            return 200, prometheus_client.CONTENT_TYPE_LATEST, prometheus_client.generate_latest(
                self.registry
            )
        if path in ("/healthz", "/livez"):
            return self._report(self._liveness, verbose)
        if path == "/readyz":
            return self._report({**self._liveness, **self._readiness}, verbose)
        return 404, "text/plain", b"not found\n"

    @staticmethod
    def _report(checks: dict[str, Check], verbose: bool) -> tuple[int, str, bytes]:
        lines = []
        healthy = True
        for name, check in sorted(checks.items()):
            try:
                ok, detail = check()
            except Exception as exc:  # a broken check is a failed check
                ok, detail = False, f"check raised {exc!r}"
            healthy = healthy and ok
            lines.append(f"[{'+' if ok else '-'}]{name} {'ok' if ok else 'failed'}: {detail}")
        if verbose or not healthy:
            text = "\n".join([*lines, "check passed" if healthy else "check failed"]) + "\n"
        else:
            text = "ok\n"
        return (200 if healthy else 503), "text/plain; charset=utf-8", text.encode()
