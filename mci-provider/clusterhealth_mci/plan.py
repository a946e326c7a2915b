"""What the load balancer should do for one MultiClusterIngress (pure, table-tested).

Inputs: the MCI's IngressSpec, where each backend Service runs (member
clusters), the ready endpoints of each Service per cluster, and each
cluster's ``remedyActions``.  Outputs: ``status.serviceLocations``,
``status.trafficBlockClusters`` (the located clusters whose remedy actions
contain ``TrafficControl``), whether the MCI fails open, and the provider's
:class:`~clusterhealth_mci.providers.base.LoadBalancerSpec`.

The spec alone also decides whether an MCI can be served at all and which
hosts and paths it claims (:func:`analyse`); the member Services decide
whether the ports it names exist (:func:`port_problems`).

A backend Service located in no member (not created there, or a typo in its
name) leaves its routes without an endpoint: :attr:`Plan.missing_services`
names it, and the controller reports it (``LoadBalancerReady=False``, reason
``ServiceNotFound``, and a Warning Event) instead of "programmed".

Fail-open: if every located cluster is blocked, blocking would leave the MCI
with no backends at all; the MCI then keeps serving from all of them (the
status still lists the blocked clusters, a ``FailOpen`` condition says why).
``--fail-open=false`` turns this off: the MCI then serves nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from clusterhealth_core.api import groups, mci, wire
from clusterhealth_mci.providers import base
from clusterhealth_mci.providers import plan as routing

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
    missing_ports: tuple[str, ...] = ()
    """Backends whose Service port exists in none of the clusters running the Service."""

    @property
    def missing_services(self) -> tuple[str, ...]:
        """Backend Services that run in no member cluster: their routes can only answer 503."""
        return tuple(name for name, clusters in self.service_locations if not clusters)

    def status_fields(self) -> dict[str, object]:
        """``serviceLocations`` and ``trafficBlockClusters`` in wire shape.

        Within the CRD's ``maxItems``; :meth:`left_out` says what was cut.
        """
        fields: dict[str, object] = {}
        if self.service_locations:
            fields["serviceLocations"] = [
                {"name": name,
                 **({"clusters": list(clusters[:mci.MAX_CLUSTERS])} if clusters else {})}
                for name, clusters in self.service_locations[:mci.MAX_SERVICE_LOCATIONS]
            ]
        if self.traffic_block_clusters:
            fields["trafficBlockClusters"] = list(
                self.traffic_block_clusters[:mci.MAX_CLUSTERS])
        return fields

    def left_out(self) -> list[str]:
        """What :meth:`status_fields` had to leave out of the status lists, described."""
        notes = []
        extra = len(self.service_locations) - mci.MAX_SERVICE_LOCATIONS
        if extra > 0:
            notes.append(f"serviceLocations lists {mci.MAX_SERVICE_LOCATIONS} Services, "
                         f"{extra} more not listed")
        for name, clusters in self.service_locations[:mci.MAX_SERVICE_LOCATIONS]:
            if len(clusters) > mci.MAX_CLUSTERS:
                notes.append(f"serviceLocations of {name} lists {mci.MAX_CLUSTERS} clusters, "
                             f"{len(clusters) - mci.MAX_CLUSTERS} more not listed")
        extra = len(self.traffic_block_clusters) - mci.MAX_CLUSTERS
        if extra > 0:
            notes.append(f"trafficBlockClusters lists {mci.MAX_CLUSTERS} clusters, {extra} "
                         "more blocked but not listed")
        return notes


@dataclasses.dataclass(frozen=True)
class Analysis:
    """What an MCI's spec alone decides (computed once per resourceVersion)."""

    version: str
    """What was analysed: :func:`spec_version` of the object."""
    precedence: tuple[str, str]
    """``(creationTimestamp, namespace/name)``: the smaller one keeps a contested route."""
    error: str = ""
    """Why the spec cannot be served at all (empty: it can)."""
    claims: Mapping[routing.MapEntry, str] = dataclasses.field(default_factory=dict)
    """The route-table entries it needs -> the route that needs it, described."""
    services: frozenset[str] = frozenset()
    """The backend Services it names."""
    model: mci.MultiClusterIngress | None = None


def describe_route(route: base.Route) -> str:
    """``host/path (PathType)`` as the user wrote it (``*`` for any host)."""
    return f"{route.host or '*'}{route.path} ({route.path_type})"


def spec_version(obj: Mapping[str, Any]) -> str:
    """The ``generation`` (it changes with the spec, not with the status).

    Without one, the ``resourceVersion``.
    """
    metadata = obj.get("metadata") or {}
    generation = metadata.get("generation")
    return f"g{generation}" if generation is not None else str(
        metadata.get("resourceVersion", ""))


def analyse(key: str, obj: Mapping[str, Any]) -> Analysis:
    """Parse and check the spec; list the host+path entries it claims."""
    metadata = obj.get("metadata") or {}
    version = spec_version(obj)
    precedence = (str(metadata.get("creationTimestamp", "")), key)
    try:
        model = mci.MultiClusterIngress.from_dict(obj)
    except wire.ValidationError as exc:
        return Analysis(version, precedence, error=f"the spec is not valid: {exc}")
    found, service_keys, _ = routes(model.spec)
    skeleton = base.LoadBalancerSpec(key=key, routes=tuple(found), backends={
        base.backend_key(*k): base.Backend(k[0], k[1], ()) for k in service_keys})
    try:
        routing.validate(skeleton)
    except base.InvalidSpec as exc:
        text = str(exc)
        return Analysis(version, precedence, error=text.removeprefix(f"{key}: "), model=model)
    claims: dict[routing.MapEntry, str] = {}
    for route in found:
        single = dataclasses.replace(skeleton, routes=(route,))
        for entry in routing.route_entries(single):
            claims.setdefault(entry, describe_route(route))
    return Analysis(version, precedence, claims=claims,
                    services=frozenset(name for name, _ in service_keys), model=model)


def port_problems(
    service_keys: Sequence[ServiceKey],
    located: Mapping[str, Iterable[str]],
    ports: Mapping[tuple[str, str], Sequence[tuple[str, int]] | None],
) -> tuple[list[str], list[str]]:
    """Backends naming a Service port that does not exist: ``(fatal, partial)``.

    ``ports``: (cluster, service) -> the Service's ports there as (name,
    number), ``None`` where the Service is not known.  Fatal: the port exists
    in none of the clusters where the Service is known (every request would
    get 503).  Partial: some of those clusters lack it (they get none of the
    backend's traffic).
    """
    fatal: list[str] = []
    partial: list[str] = []
    for name, port in service_keys:
        known: dict[str, Sequence[tuple[str, int]]] = {}
        for cluster in sorted(set(located.get(name, ()))):
            found = ports.get((cluster, name))
            if found is not None:
                known[cluster] = found
        lacking = [c for c, entries in known.items() if not _has_port(entries, port)]
        if not lacking:
            continue
        what = f"port {port}" if port.isdigit() else f"port named {port!r}"
        if len(lacking) == len(known):
            offered = sorted({_port_text(e) for c in lacking for e in known[c]})
            fatal.append(f"Service {name} has no {what} in {', '.join(lacking)} (its ports: "
                         f"{', '.join(offered) or 'none'})")
        else:
            partial.append(f"Service {name} has no {what} in {', '.join(lacking)}, which "
                           "get none of its traffic")
    return fatal, partial


def _has_port(entries: Sequence[tuple[str, int]], port: str) -> bool:
    return any((str(number) == port) if port.isdigit() else (name == port)
               for name, number in entries)


def _port_text(entry: tuple[str, int]) -> str:
    name, number = entry
    return f"{number}/{name}" if name else str(number)


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
