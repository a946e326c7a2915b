"""What the load balancer should do for one MultiClusterIngress (pure, table-tested).

Inputs: the MCI's IngressSpec, where each backend Service runs (member
clusters), the ready endpoints of each Service per cluster, and each
cluster's ``remedyActions``.  Outputs: ``status.serviceLocations``,
``status.trafficBlockClusters`` (the located clusters whose remedy actions
contain ``TrafficControl``), whether the MCI fails open, and the provider's
:class:`~clusterhealth_mci.providers.base.LoadBalancerSpec`.

Fail-open: if every located cluster is blocked, blocking would leave the MCI
with no backends at all; the MCI then keeps serving from all of them (the
status still lists the blocked clusters, a ``FailOpen`` condition says why).
``--fail-open=false`` turns this off: the MCI then serves nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from clusterhealth_core.api import groups, mci
from clusterhealth_mci.providers import base

TRAFFIC_CONTROL = groups.ACTION_TRAFFIC_CONTROL
WEIGHTS_ANNOTATION = "clusterhealth.io/cluster-weights"
"""``member1=100,member2=50``: each cluster's share of an MCI's traffic (1-256, default 100)."""

ServiceKey = tuple[str, str]
"""(service name, service port as text: the number or the port name)."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """The decision for one MCI."""

    service_locations: tuple[tuple[str, tuple[str, ...]], ...]
    traffic_block_clusters: tuple[str, ...]
    fail_open: bool
    unsupported: tuple[str, ...]
    """Backends that are not Services (``resource`` backends), by path."""
    spec: base.LoadBalancerSpec
    problems: tuple[str, ...] = ()
    """Input the controller could not use (reported in the MCI's conditions)."""

    def status_fields(self) -> dict[str, object]:
        """``serviceLocations`` and ``trafficBlockClusters`` in wire shape."""
        fields: dict[str, object] = {}
        if self.service_locations:
            fields["serviceLocations"] = [
                {"name": name, **({"clusters": list(clusters)} if clusters else {})}
                for name, clusters in self.service_locations
            ]
        if self.traffic_block_clusters:
            fields["trafficBlockClusters"] = list(self.traffic_block_clusters)
        return fields


def parse_weights(text: str | None) -> dict[str, int]:
    """Read the cluster-weights annotation; raise ValueError naming what is wrong."""
    weights: dict[str, int] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        cluster, sep, value = item.partition("=")
        try:
            weight = int(value)
        except ValueError:
            weight = 0
        if not sep or not cluster.strip() or not 1 <= weight <= 256:
            raise ValueError(f"{WEIGHTS_ANNOTATION}: {item.strip()!r} is not <cluster>=<1-256>")
        weights[cluster.strip()] = weight
    return weights


def port_text(port: mci.ServiceBackendPort) -> str:
    """A backend port as text: its number, else its name."""
    return str(port.number) if port.number is not None else str(port.name or "")


def routes(spec: mci.IngressSpec) -> tuple[list[base.Route], list[ServiceKey], list[str]]:
    """The routes, the Service backends they use (in order, unique), and unsupported paths."""
    found: list[base.Route] = []
    backends: list[ServiceKey] = []
    unsupported: list[str] = []

    def use(backend: mci.IngressBackend, host: str | None, path: str, path_type: str) -> None:
        if backend.service is None:
            unsupported.append(f"{host or '*'}{path}")
            return
        key = (backend.service.name, port_text(backend.service.port))
        if key not in backends:
            backends.append(key)
        found.append(base.Route(host, path, path_type, base.backend_key(*key)))

    for rule in spec.rules:
        if rule.http is None:
            continue
        for http_path in rule.http.paths:
            use(http_path.backend, rule.host, http_path.path or "/", http_path.path_type.value)
    if spec.default_backend is not None:
        use(spec.default_backend, None, "/", mci.PathType.PREFIX.value)
    return found, backends, unsupported


def make_plan(
    key: str,
    spec: mci.IngressSpec,
    located: Mapping[str, Iterable[str]],
    endpoints: Mapping[tuple[str, str, str], Iterable[tuple[str, int]]],
    remedy_actions: Mapping[str, Iterable[str]],
    *,
    fail_open: bool = True,
    weights: Mapping[str, int] | None = None,
) -> Plan:
    """Decide for one MCI.

    ``located``: service name -> clusters running it.  ``endpoints``:
    (cluster, service, port text) -> ready (address, port) pairs.
    ``remedy_actions``: cluster -> its ``status.remedyActions``.
    """
    found, service_keys, unsupported = routes(spec)
    names = sorted({name for name, _ in service_keys})
    locations = tuple((name, tuple(sorted(set(located.get(name, ()))))) for name in names)
    everywhere = {cluster for _, clusters in locations for cluster in clusters}
    blocked = tuple(sorted(
        c for c in everywhere if TRAFFIC_CONTROL in set(remedy_actions.get(c, ())))
    )
    opened = fail_open and bool(everywhere) and set(blocked) == everywhere
    lb_backends = {}
    for name, port in service_keys:
        clusters = dict(locations)[name]
        eps = tuple(sorted(
            base.Endpoint(cluster, address, number)
            for cluster in clusters
            for address, number in endpoints.get((cluster, name, port), ())
        ))
        lb_backends[base.backend_key(name, port)] = base.Backend(name, port, eps)
    lb_spec = base.LoadBalancerSpec(
        key=key,
        routes=tuple(found),
        backends=lb_backends,
        blocked_clusters=frozenset() if opened else frozenset(blocked),
        cluster_weights=dict(weights or {}),
    )
    return Plan(locations, blocked, opened, tuple(unsupported), lb_spec)
