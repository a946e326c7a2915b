"""Pure planning shared by the providers: validation, the route table, server weights.

Both providers must route and weigh exactly alike, or the controller's unit
tests (on the fake) would prove nothing about production (on HAProxy).  So
the rules live here once, as functions without I/O:

- :func:`validate` rejects what no provider can serve;
- :func:`route_entries` turns routes into the entries of two lookup tables,
  ``exact`` and ``prefix``, keyed by ``<host><path>`` (any-host routes: by
  ``<path>`` alone, wildcard hosts: by ``*.<domain><path>``);
- :func:`resolve` looks a request up the way HAProxy's frontend does
  (:mod:`clusterhealth_mci.providers.haproxy.config` renders the same order);
- :func:`server_weights` spreads each cluster's weight over its endpoints.

Kubernetes' path matching (``networking.k8s.io/v1``): ``Exact`` matches the
path only; ``Prefix`` matches element-wise (``/foo`` matches ``/foo`` and
``/foo/bar`` but not ``/foobar``, a trailing ``/`` is ignored), the longest
match wins and ``Exact`` wins over ``Prefix`` at equal length.  A Prefix
``/foo`` therefore becomes the exact entry ``/foo`` plus the prefix entry
``/foo/`` (longest-prefix lookup); ``/`` becomes the prefix entry ``/``.
Host-specific routes are tried before wildcard-host routes, and those
before any-host routes (the MCI's default backend is an any-host Prefix
``/``); a request matching nothing gets the load balancer's 503.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Iterable, Mapping
from typing import TypeVar

from clusterhealth_mci.providers import base

EXACT = "exact"
PREFIX = "prefix"
MAPS = (EXACT, PREFIX)
READY = "ready"
"""An endpoint taking new traffic."""
DRAIN = "drain"
"""An endpoint taking no new traffic, its connections finishing."""
MAINT = "maint"
"""An endpoint out of the load balancer."""

_BAD_SEQUENCES = ("//", "/./", "/../", "%2f", "%2F")
_BAD_SUFFIXES = ("/..", "/.")
_REGEX = re.compile(r"[\^$()\[\]{}*+?|\\]")
"""Characters that make an ImplementationSpecific path look like a regular expression or a
glob (``/api/.*``, ``/static/*``): matched as a Prefix they would never match what was meant."""
_HOST = re.compile(r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_PATH = re.compile(r"^/[!-~]*$")  # printable ASCII, no space: map keys are space-separated
_NAME = re.compile(r"^[!-~]+$")
_PORT_SUFFIX = re.compile(r":[0-9]+$")
_FIRST_LABEL = re.compile(r"^[^.]+")

V = TypeVar("V")


@dataclasses.dataclass(frozen=True, order=True)
class MapEntry:
    """One key of one lookup table (``exact`` or ``prefix``)."""

    map: str
    key: str


def normalize_host(host: str | None) -> str:
    """A route's host as a key prefix: lower case; ``""`` for any host."""
    return (host or "").lower()


def validate(spec: base.LoadBalancerSpec) -> None:
    """Raise :class:`~clusterhealth_mci.providers.base.InvalidSpec` unless ``spec`` is servable."""
    problems: list[str] = []
    if not _NAME.match(spec.key) or "|" in spec.key:
        problems.append(f"MCI key {spec.key!r} must be printable ASCII without spaces or '|'")
    for name, backend in spec.backends.items():
        if not _NAME.match(name) or "|" in name:
            problems.append(f"backend key {name!r} must be printable ASCII without spaces or '|'")
        for endpoint in backend.endpoints:
            try:
                ipaddress.ip_address(endpoint.address)
            except ValueError:
                problems.append(f"backend {name}: {endpoint.address!r} is not an IP address")
            if not 0 < endpoint.port < 65536:
                problems.append(f"backend {name}: endpoint port {endpoint.port} out of range")
            if not endpoint.cluster:
                problems.append(f"backend {name}: endpoint {endpoint.address} has no cluster")
    for route in spec.routes:
        where = f"route {route.host or '*'}{route.path}"
        if route.backend not in spec.backends:
            problems.append(f"{where}: unknown backend {route.backend!r}")
        if route.path_type not in base.PATH_TYPES:
            problems.append(f"{where}: path type {route.path_type!r} not one of {base.PATH_TYPES}")
        if not _PATH.match(route.path):
            problems.append(f"{where}: the path must start with '/' and be printable ASCII "
                            "without spaces")
        problems += _path_problems(where, route)
        if route.host is not None and not _HOST.match(route.host.lower()):
            problems.append(f"{where}: {route.host!r} is not a DNS name (or '*.' + a DNS name)")
    for cluster, weight in spec.cluster_weights.items():
        if not base.MIN_WEIGHT <= weight <= base.MAX_WEIGHT:
            problems.append(f"cluster {cluster}: weight {weight} not in "
                            f"{base.MIN_WEIGHT}..{base.MAX_WEIGHT}")
    if problems:
        raise base.InvalidSpec(f"{spec.key}: " + "; ".join(problems))


def _path_problems(where: str, route: base.Route) -> list[str]:
    """Kubernetes' Ingress path rules, and the paths matching as a Prefix would betray."""
    found = []
    if route.path_type in ("Exact", "Prefix"):
        # What the Ingress API refuses for these types (requests are matched as sent, so
        # such a path would never match a normalised request path).
        found += [f"{where}: a {route.path_type} path must not contain {seq!r}"
                  for seq in _BAD_SEQUENCES if seq in route.path]
        found += [f"{where}: a {route.path_type} path cannot end with {suffix!r}"
                  for suffix in _BAD_SUFFIXES if route.path.endswith(suffix)]
    elif route.path_type == "ImplementationSpecific" and _REGEX.search(route.path):
        found.append(f"{where}: this load balancer matches ImplementationSpecific paths as "
                     "Prefix, and this one looks like a regular expression or a glob, which "
                     "it cannot serve; write the longest literal prefix with pathType Prefix "
                     "(for example /static for /static/*)")
    return found


def route_entries(spec: base.LoadBalancerSpec) -> dict[MapEntry, str]:
    """The lookup-table entries of ``spec``: entry -> backend key.

    Within one spec the first route for a host and path wins, and an
    ``Exact`` route wins over the exact entry a ``Prefix`` route implies.
    """
    exact: dict[str, str] = {}
    implied: dict[str, str] = {}
    prefix: dict[str, str] = {}
    for route in spec.routes:
        host = normalize_host(route.host)
        if route.path_type == "Exact":
            exact.setdefault(host + route.path, route.backend)
            continue
        path = route.path.rstrip("/")
        prefix.setdefault(f"{host}{path}/", route.backend)
        if path:
            implied.setdefault(host + path, route.backend)
    entries = {MapEntry(EXACT, k): v for k, v in {**implied, **exact}.items()}
    entries.update({MapEntry(PREFIX, k): v for k, v in prefix.items()})
    return entries


def request_host(host_header: str | None) -> str | None:
    """A request's Host header as HAProxy's frontend keys it: lower case, without port."""
    if host_header is None:
        return None
    return _PORT_SUFFIX.sub("", host_header.lower())


def lookup_keys(host_header: str | None, path: str) -> list[MapEntry]:
    """The entries a request tries, in order (the first one found wins)."""
    keys: list[MapEntry] = []
    host = request_host(host_header)
    if host is not None:
        wildcard = _FIRST_LABEL.sub("*", host, count=1)
        for prefix in (host, wildcard):
            keys += [MapEntry(EXACT, prefix + path), MapEntry(PREFIX, prefix + path)]
    keys += [MapEntry(EXACT, path), MapEntry(PREFIX, path)]
    return keys


def resolve(entries: Mapping[MapEntry, V], host_header: str | None, path: str) -> V | None:
    """What ``entries`` route a request to (``None``: the load balancer's 503)."""
    prefixes = sorted((e.key for e in entries if e.map == PREFIX), key=len, reverse=True)
    for wanted in lookup_keys(host_header, path):
        if wanted.map == EXACT:
            if wanted in entries:
                return entries[wanted]
            continue
        for key in prefixes:  # longest prefix first, as HAProxy's map_beg tree does
            if wanted.key.startswith(key):
                return entries[MapEntry(PREFIX, key)]
    return None


def conflicts(
    owners: Mapping[MapEntry, str], spec_key: str, entries: Iterable[MapEntry]
) -> list[str]:
    """The entries of ``spec_key`` already owned by another MCI, described."""
    found = []
    for entry in sorted(entries):
        owner = owners.get(entry)
        if owner is not None and owner != spec_key:
            found.append(f"{entry.map} {entry.key!r} is served for {owner}")
    return found


def route_conflict(
    owners: Mapping[MapEntry, str], spec_key: str, entries: Iterable[MapEntry]
) -> base.RouteConflict | None:
    """The error for ``spec_key`` claiming entries another MCI owns (``None``: no clash)."""
    wanted = sorted(entries)
    clash = conflicts(owners, spec_key, wanted)
    if not clash:
        return None
    holders = sorted({owners[e] for e in wanted if owners.get(e) not in (None, spec_key)})
    return base.RouteConflict(f"{spec_key}: " + "; ".join(clash), holders)


def server_weights(spec: base.LoadBalancerSpec, backend: base.Backend) -> dict[base.Endpoint, int]:
    """A weight (1..256) per endpoint, so that each cluster's share follows its weight.

    A cluster's weight is divided among its endpoints, then everything is
    scaled so that the largest endpoint weight is 256 (the most precision
    HAProxy's integer weights allow); nothing goes below 1.
    """
    per_cluster: dict[str, int] = {}
    for endpoint in set(backend.endpoints):
        per_cluster[endpoint.cluster] = per_cluster.get(endpoint.cluster, 0) + 1
    if not per_cluster:
        return {}
    share = {c: spec.weight_of(c) / n for c, n in per_cluster.items()}
    scale = base.MAX_WEIGHT / max(share.values())
    return {e: max(base.MIN_WEIGHT, min(base.MAX_WEIGHT, round(share[e.cluster] * scale)))
            for e in set(backend.endpoints)}


def status_of(
    spec: base.LoadBalancerSpec,
    ingress: tuple[tuple[str, int], ...],
    states: Mapping[str, Mapping[base.Endpoint, str]],
) -> base.LoadBalancerStatus:
    """The status of ``spec`` from each endpoint's state (:data:`READY`, :data:`DRAIN`...).

    ``states`` is backend key -> endpoint -> state and may include endpoints
    being removed (no longer in the spec) while they drain.
    """
    active: dict[str, tuple[str, ...]] = {}
    draining: dict[str, tuple[str, ...]] = {}
    for key in spec.backends:
        endpoint_states = states.get(key, {})
        active[key] = tuple(sorted({e.cluster for e, s in endpoint_states.items() if s == READY}))
        draining[key] = tuple(sorted({e.cluster for e, s in endpoint_states.items() if s == DRAIN}))
    return base.LoadBalancerStatus(ingress=ingress, active=active, draining=draining)
