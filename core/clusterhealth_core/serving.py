"""The HTTP endpoints every component serves: ``/metrics``, ``/healthz``, ``/readyz``.

The Prometheus registry is passed in (never the global default), and health
is a set of named checks so that ``/readyz?verbose`` says which one fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import urllib.parse
from collections.abc import Callable

import prometheus_client

log = logging.getLogger(__name__)

Check = Callable[[], tuple[bool, str]]
_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


class HealthServer:
    """Serves metrics from ``registry`` and the results of liveness/readiness checks.

    A deliberately tiny HTTP/1.0-style server on asyncio streams: one request
    per connection, GET only, which is all Prometheus and kubelet probes need.
    """

    def __init__(
        self,
        registry: prometheus_client.CollectorRegistry,
        *,
        host: str = "0.0.0.0",
        port: int = 10358,
    ) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self._liveness: dict[str, Check] = {}
        self._readiness: dict[str, Check] = {}
        self._server: asyncio.Server | None = None

    def add_liveness(self, name: str, check: Check) -> None:
        """Register a check for ``/healthz`` (and ``/readyz``)."""
        self._liveness[name] = check

    def add_readiness(self, name: str, check: Check) -> None:
        """Register a check for ``/readyz`` only."""
        self._readiness[name] = check

    @property
    def bound_port(self) -> int:
        """The port actually listened on (useful with ``port=0``)."""
        if self._server is None or not self._server.sockets:
            raise RuntimeError("server not started")
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        """Start listening."""
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        log.info("serving /metrics /healthz /readyz on %s:%s", self.host, self.bound_port)

    async def stop(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(10):
                request_line = await reader.readline()
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
            parts = request_line.decode("latin-1").split()
            if len(parts) < 2:
                return
            method, target = parts[0], urllib.parse.urlsplit(parts[1])
            status, content_type, body = self.respond(method, target.path, target.query)
            head = (
                f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\n"
                f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n"
            )
            writer.write(head.encode("latin-1") + (body if method != "HEAD" else b""))
            await writer.drain()
        except (OSError, TimeoutError, UnicodeDecodeError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

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
