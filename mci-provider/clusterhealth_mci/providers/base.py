"""The load-balancer provider contract: what the MCI controller asks of a load balancer.

Karmada's ``multicluster-cloud-provider`` defines ``GetLoadBalancer``,
``EnsureLoadBalancer``, ``UpdateLoadBalancer`` and ``EnsureLoadBalancerDeleted``
per MultiClusterIngress, each taking the Kubernetes object.  Ours take a
*computed*, Kubernetes-free :class:`LoadBalancerSpec` instead: the controller
resolves Services, member clusters, endpoints, blocked clusters (fail-open
included) and weights, so a provider only has to make a load balancer match
a plain description -- and can be tested against a real load balancer
without an API server.

Semantics every provider implements (the fake one included):

- **Blocking is asynchronous and lossless.**  ``ensure``/``update`` return as
  soon as the blocked clusters' endpoints receive no *new* traffic
  (*draining*); requests already in flight finish.  The provider then takes
  them out completely (*maintenance*) once they hold no connection, or after
  ``drain_timeout`` seconds at the latest.  Endpoints that disappear from a
  spec are drained the same way.
- **Unblocking is immediate**: the endpoints take new traffic again when the
  call returns.
- **Weights are per cluster**: a cluster's share of the new requests for a
  backend is proportional to its weight, however many endpoints it has.
- **Status** (:class:`LoadBalancerStatus`) lists, for every backend key of the
  spec, the clusters with at least one endpoint taking new traffic
  (``active``) and those with at least one endpoint still draining
  (``draining``); a cluster can be in both while some of its endpoints are
  being removed.
- ``resync`` makes the load balancer serve exactly the given specs, removing
  everything else; a provider also re-applies its desired state by itself
  when it notices the load balancer lost it (a restart).
- Two MCIs may not claim the same host and path: the second one gets a
  :class:`RouteConflict` and the first keeps serving.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence

PATH_TYPES = ("Exact", "Prefix", "ImplementationSpecific")
"""``networking.k8s.io/v1`` path types (``ImplementationSpecific`` is treated as ``Prefix``)."""
DEFAULT_CLUSTER_WEIGHT = 100
MIN_WEIGHT = 1
MAX_WEIGHT = 256


@dataclasses.dataclass(frozen=True, order=True)
class Endpoint:
    """One backend address in one member cluster."""

    cluster: str
    address: str
    """An IP address."""
    port: int


@dataclasses.dataclass(frozen=True)
class Backend:
    """One backend Service of the MCI (the default backend or a rule path's)."""

    service: str
    """The Service's name (its namespace is the MCI's)."""
    port: str
    """The service port, number or name, as text."""
    endpoints: tuple[Endpoint, ...]
    """Every located endpoint, blocked clusters included."""

    @property
    def key(self) -> str:
        """``<service>:<port>``, the key routes use."""
        return backend_key(self.service, self.port)


@dataclasses.dataclass(frozen=True)
class Route:
    """A host and path sent to one backend."""

    host: str | None
    """``None``: any host; ``*.example.com``: one label in front of ``example.com``."""
    path: str
    """Starts with ``/``; ``/`` for the default backend."""
    path_type: str
    """``Exact``, ``Prefix`` or ``ImplementationSpecific`` (treated as ``Prefix``)."""
    backend: str
    """Key into :attr:`LoadBalancerSpec.backends` (``<service>:<port>``)."""


@dataclasses.dataclass(frozen=True)
class LoadBalancerSpec:
    """Everything a provider needs to serve one MultiClusterIngress."""

    key: str
    """``<namespace>/<name>`` of the MCI."""
    routes: tuple[Route, ...]
    backends: Mapping[str, Backend]
    blocked_clusters: frozenset[str] = frozenset()
    """Clusters that get no new traffic.  The controller has applied fail-open
    already: when every located cluster is blocked it passes an empty set."""
    cluster_weights: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """Per-cluster weight, 1..256; :data:`DEFAULT_CLUSTER_WEIGHT` for clusters not listed."""

    def weight_of(self, cluster: str) -> int:
        """The cluster's weight (the default when not listed)."""
        return self.cluster_weights.get(cluster, DEFAULT_CLUSTER_WEIGHT)


@dataclasses.dataclass(frozen=True)
class LoadBalancerStatus:
    """Where an MCI is served and which clusters take its traffic."""

    ingress: tuple[tuple[str, int], ...]
    """``(ip, port)`` where the MCI is served."""
    active: Mapping[str, tuple[str, ...]]
    """Backend key -> sorted clusters with an endpoint taking new traffic."""
    draining: Mapping[str, tuple[str, ...]]
    """Backend key -> sorted clusters with an endpoint finishing its connections."""


class ProviderError(Exception):
    """The load balancer could not be made to match (the message says why)."""


class InvalidSpec(ProviderError):
    """The spec cannot be served (bad path, unknown backend, weight out of range...)."""


class RouteConflict(ProviderError):
    """A host and path of the spec is already served for another MCI."""

    def __init__(self, message: str, holders: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.holders = tuple(holders)
        """The keys of the MCIs serving the contested hosts and paths."""


class CapacityExceeded(ProviderError):
    """The load balancer has no room left (backend slots or servers per slot)."""

    def __init__(self, message: str, setting: str = "") -> None:
        super().__init__(message)
        self.setting = setting
        """The provider setting to raise (``servers_per_slot``, ``slots``), when one would."""


def resync_each(
    specs: Sequence[LoadBalancerSpec],
    served: Iterable[str],
    drop: Callable[[str], object],
    apply: Callable[[LoadBalancerSpec], object],
) -> ProviderError | None:
    """:meth:`Provider.resync`'s contract on a provider's own desired state.

    Drops every ``served`` key that ``specs`` lack, then applies each spec in key
    order; a spec whose ``apply`` raises :class:`ProviderError` is skipped, not fatal.
    Returns the error naming the skipped specs (the provider raises it once its own
    work is done), or ``None``.
    """
    wanted = {s.key for s in specs}
    for key in sorted(set(served) - wanted):
        drop(key)
    failed: list[str] = []
    for spec in sorted(specs, key=lambda s: s.key):
        try:
            apply(spec)
        except ProviderError as exc:
            failed.append(str(exc))
    return ProviderError("resync skipped: " + " | ".join(failed)) if failed else None


def backend_key(service: str, port: str) -> str:
    """The key of a backend in :attr:`LoadBalancerSpec.backends`."""
    return f"{service}:{port}"


class Provider(abc.ABC):
    """A load balancer serving MultiClusterIngresses."""

    name: str = ""
    """The provider's name (what ``--provider`` selects)."""

    @abc.abstractmethod
    async def get_load_balancer(self, key: str) -> LoadBalancerStatus | None:
        """The status of MCI ``key``, or ``None`` when the provider does not serve it."""

    @abc.abstractmethod
    async def ensure_load_balancer(self, spec: LoadBalancerSpec) -> LoadBalancerStatus:
        """Create or converge the load balancer of ``spec.key``."""

    @abc.abstractmethod
    async def update_load_balancer(self, spec: LoadBalancerSpec) -> LoadBalancerStatus:
        """Converge an existing load balancer (same as ensure for our providers)."""

    @abc.abstractmethod
    async def ensure_load_balancer_deleted(self, key: str) -> None:
        """Stop serving MCI ``key`` (its routes at once, its endpoints after a drain)."""

    @abc.abstractmethod
    async def resync(self, specs: Sequence[LoadBalancerSpec]) -> None:
        """Serve exactly ``specs``: converge them, remove every other MCI.

        Specs that cannot be served are skipped (the others are applied); the
        :class:`ProviderError` raised at the end names them.
        """

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop background work and release connections (the load balancer keeps serving)."""
