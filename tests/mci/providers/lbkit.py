"""Helpers for the load-balancer provider tests.

Real HTTP backends, clients and steady traffic come from
``clusterhealth_localenv.httpload``; this adds each backend's endpoint in its
cluster, and spec builders for the provider contract.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from clusterhealth_localenv import haproxy, httpload
from clusterhealth_mci.providers import base
from clusterhealth_mci.providers.haproxy import config


@dataclasses.dataclass
class LoadBalancer:
    """A running HAProxy with the MCI layout."""

    server: haproxy.HAProxyServer
    layout: config.HAProxyLayout

    @property
    def port(self) -> int:
        return self.layout.bind_port


class Backend(httpload.Backend):
    """An HTTP backend that knows its endpoint in a cluster."""

    @property
    def endpoint(self) -> base.Endpoint:
        """This backend as an endpoint of its cluster."""
        return base.Endpoint(self.cluster, "127.0.0.1", self.port)


Response = httpload.Response
Client = httpload.Client
Traffic = httpload.Traffic
get = httpload.get


# -- specs ------------------------------------------------------------------------------------


def backend(service: str, port: str, backends: Iterable[Backend]) -> base.Backend:
    return base.Backend(service, port, tuple(sorted(b.endpoint for b in backends)))


def spec(
    key: str,
    routes: Iterable[tuple[str | None, str, str, str]],
    backends: Mapping[str, base.Backend],
    blocked: Iterable[str] = (),
    weights: Mapping[str, int] | None = None,
) -> base.LoadBalancerSpec:
    """``routes``: ``(host, path, path type, backend key)``."""
    return base.LoadBalancerSpec(
        key=key,
        routes=tuple(base.Route(h, p, t, b) for h, p, t, b in routes),
        backends=dict(backends),
        blocked_clusters=frozenset(blocked),
        cluster_weights=dict(weights or {}),
    )


