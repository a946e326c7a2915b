"""The HTTP endpoints every component serves: ``/metrics``, ``/healthz``, ``/readyz``.

The Prometheus registry is passed in (never the global default), and health
is a set of named checks so that ``/readyz?verbose`` says which one fails.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import prometheus_client
from aiohttp import web

log = logging.getLogger(__name__)

Check = Callable[[], tuple[bool, str]]


class HealthServer:
    """Serves metrics from ``registry`` and the results of liveness/readiness checks."""

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
        self._runner: web.AppRunner | None = None

    def add_liveness(self, name: str, check: Check) -> None:
        """Register a check for ``/healthz`` (and ``/readyz``)."""
        self._liveness[name] = check

    def add_readiness(self, name: str, check: Check) -> None:
        """Register a check for ``/readyz`` only."""
        self._readiness[name] = check

    @property
    def bound_port(self) -> int:
        """The port actually listened on (useful with ``port=0``)."""
        if self._runner is None:
            raise RuntimeError("server not started")
        for site in self._runner.sites:
            server = getattr(site, "_server", None)
            if server is not None and server.sockets:
                return int(server.sockets[0].getsockname()[1])
        raise RuntimeError("server has no socket")

    async def start(self) -> None:
        """Start listening."""
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        log.info("serving /metrics /healthz /readyz on %s:%s", self.host, self.bound_port)

    async def stop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, request: web.Request) -> web.Response:
        body = prometheus_client.generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST})

    def _report(self, checks: dict[str, Check], request: web.Request) -> web.Response:
        lines = []
        healthy = True
        for name, check in sorted(checks.items()):
            try:
                ok, detail = check()
            except Exception as exc:  # a broken check is a failed check
                ok, detail = False, f"check raised {exc!r}"
            healthy = healthy and ok
            lines.append(f"[{'+' if ok else '-'}]{name} {'ok' if ok else 'failed'}: {detail}")
        verbose = "verbose" in request.query or not healthy
        text = "\n".join(lines) + "\n" if verbose else "ok\n"
        if verbose:
            text += "healthz check passed\n" if healthy else "healthz check failed\n"
        return web.Response(text=text, status=200 if healthy else 503)

    async def _healthz(self, request: web.Request) -> web.Response:
        return self._report(self._liveness, request)

    async def _readyz(self, request: web.Request) -> web.Response:
        return self._report({**self._liveness, **self._readiness}, request)
