"""Probes that ask the member cluster's API server: is it ready, and is CoreDNS?

``APIServerProbe`` reads ``/readyz`` (the API server's own aggregate of its
health checks: etcd, informers, post-start hooks) and quotes the failed
checks.  ``CoreDNSProbe`` counts the ready endpoints behind the cluster DNS
Service in its EndpointSlices, which is what kube-proxy routes DNS traffic
to.  Neither retries: a probe reports what it sees now, and the runner's
deadline bounds it.
"""

from __future__ import annotations

from typing import Any

from clusterhealth_agent.probes import base
from clusterhealth_core import retry
from clusterhealth_core.kube import client, errors, resources

REASON_APISERVER_READY = "APIServerReady"
REASON_APISERVER_NOT_READY = "APIServerNotReady"
REASON_APISERVER_UNREACHABLE = "APIServerUnreachable"
REASON_ENDPOINTS_READY = "EndpointsReady"
REASON_NO_READY_ENDPOINTS = "NoReadyEndpoints"
REASON_NO_ENDPOINTS = "NoEndpoints"
REASON_API_ERROR = "APIError"

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
_MAX_MESSAGE = 1000


def failed_checks(body: Any) -> list[str]:
    """The ``[-]name failed: ...`` lines of a ``/readyz`` or ``/livez`` body."""
    if not isinstance(body, str):
        return []
    return [line[3:].strip() for line in body.splitlines() if line.startswith("[-]")]


class APIServerProbe(base.Probe):
    """GET ``/readyz`` on the member API server; ready when it answers 200 ``ok``."""

    kind = "apiserver"

    def __init__(
        self,
        name: str,
        condition_type: str,
        api: client.ApiClient,
        *,
        request_timeout: float | None = None,
    ) -> None:
        super().__init__(name, condition_type)
        self.api = api
        self.request_timeout = request_timeout

    async def check(self) -> base.ProbeResult:
        """One ``/readyz`` request, not retried."""
        server = self.api.credentials.server
        try:
            body = await self.api.request(
                "GET", "/readyz", backoff=retry.NO_RETRY, timeout=self.request_timeout
            )
        except errors.Unreachable as exc:
            return base.ProbeResult(False, REASON_APISERVER_UNREACHABLE, str(exc))
        except errors.ApiError as exc:
            failed = failed_checks(exc.body)
            detail = "; ".join(failed) if failed else exc.message
            return base.ProbeResult(
                False, REASON_APISERVER_NOT_READY,
                f"{server}/readyz: {exc.status}: {detail}"[:_MAX_MESSAGE],
            )
        text = body.strip() if isinstance(body, str) else body
        if text == "ok":
            return base.ProbeResult(True, REASON_APISERVER_READY, f"{server}/readyz: ok")
        return base.ProbeResult(
            False, REASON_APISERVER_NOT_READY,
            f"{server}/readyz: 200 but not ok: {text!r}"[:_MAX_MESSAGE],
        )


def _endpoint_ready(endpoint: dict[str, Any]) -> bool:
    # EndpointConditions.ready: "nil should be interpreted as true".
    ready = (endpoint.get("conditions") or {}).get("ready")
    return ready is None or ready is True


class CoreDNSProbe(base.Probe):
    """Ready when the cluster DNS Service has at least one ready endpoint."""

    kind = "coredns"

    def __init__(
        self,
        name: str,
        condition_type: str,
        api: client.ApiClient,
        *,
        namespace: str = "kube-system",
        service: str = "kube-dns",
        request_timeout: float | None = None,
    ) -> None:
        super().__init__(name, condition_type)
        self.api = api
        self.namespace = namespace
        self.service = service
        self.request_timeout = request_timeout

    async def check(self) -> base.ProbeResult:
        """List the Service's EndpointSlices once and count ready endpoints."""
        service = f"{self.namespace}/{self.service}"
        try:
            listing = await self.api.request(
                "GET",
                resources.ENDPOINT_SLICES.path(namespace=self.namespace),
                params={"labelSelector": f"{SERVICE_NAME_LABEL}={self.service}"},
                backoff=retry.NO_RETRY,
                timeout=self.request_timeout,
            )
        except errors.Unreachable as exc:
            return base.ProbeResult(False, REASON_APISERVER_UNREACHABLE, str(exc))
        except errors.ApiError as exc:
            return base.ProbeResult(
                False, REASON_API_ERROR, f"listing EndpointSlices of {service}: {exc}"
            )
        slices = (listing.get("items") or []) if isinstance(listing, dict) else []
        if not slices:
            return base.ProbeResult(
                False, REASON_NO_ENDPOINTS, f"service {service} has no EndpointSlice"
            )
        # A dual-stack Service lists each pod once per address family: count pods once.
        ready_by_key: dict[str, bool] = {}
        for item in slices:
            for endpoint in item.get("endpoints") or []:
                ref = endpoint.get("targetRef") or {}
                key = ref.get("uid") or ",".join(endpoint.get("addresses") or [])
                ready_by_key[key] = ready_by_key.get(key, False) or _endpoint_ready(endpoint)
        total = len(ready_by_key)
        ready = sum(ready_by_key.values())
        if total == 0:
            return base.ProbeResult(
                False, REASON_NO_ENDPOINTS, f"the EndpointSlices of {service} list no endpoint"
            )
        message = f"{ready} of {total} endpoints of {service} ready"
        if ready == 0:
            return base.ProbeResult(False, REASON_NO_READY_ENDPOINTS, message)
        return base.ProbeResult(True, REASON_ENDPOINTS_READY, message)
