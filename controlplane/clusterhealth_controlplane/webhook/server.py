"""The webhook's HTTPS endpoint: AdmissionReviews answered with aiohttp, certificates rotated.

Why aiohttp here, when :mod:`clusterhealth_core.serving` is a small server of our own:
that one answers GET only, never reads a body and closes every connection; the API
server POSTs every policy write here and keeps its connections open, which is what
aiohttp's server does well (it is already a dependency: our kube client's transport).
The health server of :mod:`clusterhealth_core.serving` still serves ``/healthz``,
``/readyz`` and ``/metrics`` on their own port, as for every component.

**One path**, :data:`PATH`, POST only (405 otherwise): an AdmissionReview in, an
AdmissionReview out (:mod:`.decision`); a body that is not one gets 400 with the
reason. **The body is bounded**: one over :attr:`WebhookServer.max_body_bytes` gets 413
and a message saying both sizes; when its ``Content-Length`` says so, before a byte of it
is read, and a chunked one is dropped as soon as it passes the limit, so a large body
costs at most the limit in memory.

**The certificate rotates without a restart.** The cert and key are files (a Secret
mounted in the pod; kubelet updates it by swapping a symlink, so both change at once).
:class:`clusterhealth_core.serving.CertificateReloader` checks them at most every
``reload_interval`` and loads a changed pair into a new ``SSLContext`` (a pair that
does not load is logged and the previous one kept). The listening context has a
``sni_callback``, which OpenSSL calls during every handshake, with or without SNI
(the API server sends none to an IP address): it switches the connection to the
current context. New connections get the new certificate; open ones keep theirs.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl

from aiohttp import web

from clusterhealth_controlplane.webhook import decision
from clusterhealth_controlplane.webhook import metrics as webhook_metrics
from clusterhealth_core import clock as clocks
from clusterhealth_core import serving

log = logging.getLogger(__name__)

PATH = "/default-tolerations"
"""Where the MutatingWebhookConfiguration sends both policy kinds."""
MAX_BODY_BYTES = 8 * 1024 * 1024
"""An UPDATE's review holds the object twice; the API server takes 3 MiB per object."""


class WebhookServer:
    """Answers admission reviews over HTTPS on ``host``:``port`` until stopped."""

    def __init__(self, defaults: decision.Defaults, tls: serving.TLSConfig,
                 metrics: webhook_metrics.WebhookMetrics, *, host: str = serving.EVERY_ADDRESS,
                 port: int = 8443, clock: clocks.Clock | None = None,
                 max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.defaults = defaults
        self.tls = tls
        self.metrics = metrics
        self.host = host
        self.port = port
        self.clock = clock or clocks.Clock()
        self.max_body_bytes = max_body_bytes
        self._certificates: serving.CertificateReloader | None = None
        self._runner: web.AppRunner | None = None
        self._sockets: list[socket.socket] = []

    @property
    def bound_port(self) -> int:
        """The port listened on (useful with ``port=0``)."""
        if not self._sockets:
            raise RuntimeError("webhook server not started")
        return int(self._sockets[0].getsockname()[1])

    @property
    def serving(self) -> bool:
        """Whether it is listening."""
        return self._runner is not None

    def ready(self) -> tuple[bool, str]:
        """The health server's readiness check."""
        if self._runner is None:
            return False, "not listening yet"
        return True, f"serving {PATH} over HTTPS on port {self.bound_port}"

    async def start(self) -> None:
        """Load the certificate and listen (:class:`serving.TLSError` or ``OSError``)."""
        self._certificates = serving.CertificateReloader(self.tls, self.clock)
        listening = self._certificates.context()
        listening.sni_callback = self._pick_certificate
        app = web.Application(client_max_size=self.max_body_bytes)
        app.router.add_post(PATH, self._review)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            self._sockets = serving.listen_sockets(self.host, self.port)
            for sock in self._sockets:
                await web.SockSite(runner, sock, ssl_context=listening).start()
        except BaseException:
            await runner.cleanup()
            for sock in self._sockets:
                sock.close()
            self._sockets = []
            raise
        self._runner = runner
        log.info("serving admission reviews on %s over HTTPS, port %d", PATH, self.bound_port)

    async def stop(self) -> None:
        """Stop listening and close the connections."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        sockets, self._sockets = self._sockets, []
        for sock in sockets:
            sock.close()

    async def serve_until_cancelled(self) -> None:
        """Keep serving (after :meth:`start`) until cancelled, then stop."""
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

    def _pick_certificate(self, connection: ssl.SSLObject | ssl.SSLSocket,
                          server_name: str | None, listening: ssl.SSLContext) -> None:
        """OpenSSL's servername callback: the connection gets the current certificate."""
        assert self._certificates is not None
        try:
            before = self._certificates.reloads
            current = self._certificates.context()
            if self._certificates.reloads != before:
                self.metrics.certificate_reloads.inc()
            if current is not listening:
                connection.context = current
        except Exception:  # never fail a handshake over the check: keep what it has
            log.exception("cannot switch the connection to the current certificate")

    def _too_large(self, size: int | None) -> web.Response:
        self.metrics.count("", decision.TOO_LARGE)
        if size is not None:
            message = (f"the AdmissionReview of {size} bytes is over this webhook's limit of "
                       f"{self.max_body_bytes} bytes; nothing of it was read")
        else:
            message = (f"the AdmissionReview is over this webhook's limit of "
                       f"{self.max_body_bytes} bytes; it was read up to the limit and dropped")
        log.warning("refused a request to %s: %s", PATH, message)
        response = web.Response(status=413, text=f"{message}\n")
        response.force_close()  # the rest of the body is not waited for
        return response

    async def _review(self, request: web.Request) -> web.Response:
        started = self.clock.monotonic()
        if request.content_length is not None and request.content_length > self.max_body_bytes:
            return self._too_large(request.content_length)
        try:
            body = await request.read()
            answer, admission, outcome = decision.admit(body, self.defaults)
        except web.HTTPRequestEntityTooLarge:
            return self._too_large(None)
        except decision.InvalidReview as exc:
            self.metrics.count("", decision.INVALID)
            log.warning("refused a request to %s that is no AdmissionReview: %s", PATH, exc)
            return web.Response(status=400, text=f"{exc}\n")
        self.metrics.count(admission.kind, outcome.result)
        self.metrics.duration.observe(self.clock.monotonic() - started)
        if outcome.warnings:
            log.warning("%s %s: %s", admission.operation, admission.kind or "object",
                        "; ".join(outcome.warnings))
        return web.json_response(answer)
