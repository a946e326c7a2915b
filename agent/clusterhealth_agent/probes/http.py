"""The HTTP probe: does an endpoint on this node's network answer GET with a good status?

The built-in ``kube-proxy`` detector asks kube-proxy's own health endpoint
(``http://<node-ip>:10256/healthz``, 200 while its rules are fresh, 503 when
they are stale); users add their own HTTP probes in the probe configuration.
It reuses the core's HTTP transport (no extra dependency on every node)
with a fresh connection per run, so each run proves a new connection can be
made.
"""

from __future__ import annotations

import ssl
import urllib.parse
from collections.abc import Sequence

import prometheus_client

from clusterhealth_agent.probes import base
from clusterhealth_core.kube import transport

REASON_OK = "HTTPOK"
REASON_STATUS = "HTTPStatus"
REASON_CONNECTION_REFUSED = "ConnectionRefused"
REASON_CONNECTION_FAILED = "ConnectionFailed"

DEFAULT_EXPECT_STATUS: tuple[range | int, ...] = (range(200, 400),)
"""Any 2xx or 3xx, like Kubernetes' httpGet probes."""

_BODY_EXCERPT = 200


class HTTPMetrics:
    """The metric families of the HTTP probes (one instance per registry)."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self.status_code = prometheus_client.Gauge(
            "clusterhealth_agent_http_status_code",
            "HTTP status of the last probe run, by probe (0 when no response).",
            ["probe"],
            registry=registry,
        )


def format_expected(expect_status: Sequence[range | int]) -> str:
    """``200-399`` / ``200, 204`` for messages."""
    parts = [
        f"{item.start}-{item.stop - 1}" if isinstance(item, range) else str(item)
        for item in expect_status
    ]
    return ", ".join(parts)


class HTTPProbe(base.Probe):
    """GET ``url`` and expect a status in ``expect_status``."""

    kind = "http"

    def __init__(
        self,
        name: str,
        condition_type: str,
        url: str,
        expect_status: Sequence[range | int] = DEFAULT_EXPECT_STATUS,
        *,
        metrics: HTTPMetrics,
        insecure_skip_verify: bool = False,
    ) -> None:
        super().__init__(name, condition_type)
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"HTTP probe {name}: {url!r} is not an http(s) URL")
        if not expect_status:
            raise ValueError(f"HTTP probe {name}: no expected status")
        self.url = url
        self.expect_status = tuple(expect_status)
        self.metrics = metrics
        self.insecure_skip_verify = insecure_skip_verify
        self._base = f"{parsed.scheme}://{parsed.netloc}"
        self._target = (parsed.path or "/") + (f"?{parsed.query}" if parsed.query else "")
        self._ssl_context: ssl.SSLContext | None = None
        if parsed.scheme == "https":
            context = ssl.create_default_context()  # the system's CAs
            if insecure_skip_verify:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            self._ssl_context = context

    def expected(self, status: int) -> bool:
        """Whether ``status`` counts as healthy."""
        return any(
            status in item if isinstance(item, range) else status == item
            for item in self.expect_status
        )

    async def check(self) -> base.ProbeResult:
        """One GET on a new connection."""
        http = transport.HttpTransport(
            self._base, self._ssl_context, max_connections=1, user_agent="clusterhealth-agent"
        )
        try:
            response = await http.request(
                "GET", self._target, headers=[("Accept", "*/*"), ("Connection", "close")]
            )
        except transport.TransportError as exc:
            self.metrics.status_code.labels(self.name).set(0)
            reason = (REASON_CONNECTION_REFUSED if transport.refused(exc)
                      else REASON_CONNECTION_FAILED)
            return base.ProbeResult(False, reason, f"GET {self.url}: {exc}")
        except ValueError as exc:  # a status line without a number
            self.metrics.status_code.labels(self.name).set(0)
            return base.ProbeResult(
                False, REASON_CONNECTION_FAILED, f"GET {self.url}: not an HTTP response: {exc}"
            )
        finally:
            await http.close()
        status = response.status
        self.metrics.status_code.labels(self.name).set(status)
        if self.expected(status):
            return base.ProbeResult(True, REASON_OK, f"GET {self.url}: HTTP {status}")
        excerpt = response.body[:_BODY_EXCERPT].decode(errors="replace").strip()
        message = (
            f"GET {self.url}: HTTP {status}, expected {format_expected(self.expect_status)}"
        )
        return base.ProbeResult(
            False, REASON_STATUS, f"{message}: {excerpt}" if excerpt else message
        )
