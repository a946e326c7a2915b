"""An in-memory provider with the real one's semantics, for the controller's unit tests.

:class:`FakeProvider` validates, routes (:mod:`~clusterhealth_mci.providers.plan`),
detects route conflicts, blocks, drains and weighs exactly like the HAProxy
provider, without a load balancer.  It records every call, can be told to
fail, and lets a test decide when drains finish: by hand
(:meth:`FakeProvider.finish_drains`), at once (``immediate_drain=True``), or
after ``drain_timeout`` on the injected clock (checked on every call and by
:meth:`FakeProvider.poll`).

Karmada's own fake provider ignores ``trafficBlockClusters``; this one
does not, so controller tests can assert what a real load balancer would do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from clusterhealth_core import clock as clocks
from clusterhealth_mci.providers import base, plan

DEFAULT_INGRESS = (("192.0.2.10", 80),)
"""A documentation address (RFC 5737): where fake load balancers say they serve."""


@dataclasses.dataclass
class _Served:
    """One MCI's desired spec and its endpoints' states (removed ones too, while draining)."""

    spec: base.LoadBalancerSpec
    states: dict[str, dict[base.Endpoint, str]]


@dataclasses.dataclass(frozen=True)
class Call:
    """One recorded provider call."""

    method: str
    argument: object


class FakeProvider(base.Provider):
    """The load balancer as a few dictionaries."""

    name = "fake"

    def __init__(
        self,
        *,
        drain_timeout: float = 30.0,
        clock: clocks.Clock | None = None,
        immediate_drain: bool = False,
        ingress: tuple[tuple[str, int], ...] = DEFAULT_INGRESS,
    ) -> None:
        self.drain_timeout = drain_timeout
        self.clock = clock or clocks.Clock()
        self.immediate_drain = immediate_drain
        self.ingress = ingress
        self.calls: list[Call] = []
        """Every call, in order."""
        self.transitions: list[tuple[str, str, base.Endpoint, str]] = []
        """``(mci, backend, endpoint, new state)`` for every state change."""
        self.closed = False
        self._served: dict[str, _Served] = {}
        self._deleted: dict[str, dict[str, dict[base.Endpoint, str]]] = {}
        self._owners: dict[plan.MapEntry, str] = {}
        self._drain_since: dict[tuple[str, str, base.Endpoint], float] = {}
        self._errors: list[Exception] = []

    # -- test controls ---------------------------------------------------------------------

    def fail_next(self, error: Exception, times: int = 1) -> None:
        """Make the next ``times`` calls raise ``error`` (before doing anything)."""
        self._errors.extend([error] * times)

    def calls_of(self, method: str) -> list[object]:
        """The arguments of the recorded calls to ``method``."""
        return [c.argument for c in self.calls if c.method == method]

    def endpoint_state(self, key: str, backend: str, endpoint: base.Endpoint) -> str:
        """``ready``, ``drain`` or ``maint`` (also for unknown endpoints)."""
        served = self._served.get(key)
        states = served.states if served is not None else self._deleted.get(key, {})
        return states.get(backend, {}).get(endpoint, plan.MAINT)

    def draining(self) -> list[tuple[str, str, base.Endpoint]]:
        """Every endpoint still draining, deleted MCIs' included, sorted."""
        return sorted(
            (key, backend, endpoint)
            for key, states in self._all_states()
            for backend, endpoints in states.items()
            for endpoint, state in endpoints.items()
            if state == plan.DRAIN
        )

    def finish_drains(self, key: str | None = None, cluster: str | None = None) -> int:
        """Let draining endpoints (of ``key``, of ``cluster``) reach maintenance; how many did."""
        done = 0
        for mci, backend, endpoint in self.draining():
            if (key is None or mci == key) and (cluster is None or endpoint.cluster == cluster):
                self._to_maint(mci, backend, endpoint)
                done += 1
        self._forget_drained()
        return done

    async def poll(self) -> None:
        """Finish the drains whose ``drain_timeout`` has passed (every call does this too)."""
        now = self.clock.monotonic()
        for (mci, backend, endpoint), since in list(self._drain_since.items()):
            if now - since >= self.drain_timeout:
                self._to_maint(mci, backend, endpoint)
        self._forget_drained()

    def route(self, host: str | None, path: str) -> tuple[str, str] | None:
        """``(mci key, backend key)`` a request goes to, or ``None`` (the 503)."""
        entries: dict[plan.MapEntry, tuple[str, str]] = {}
        for key, served in self._served.items():
            for entry, backend in plan.route_entries(served.spec).items():
                if self._owners.get(entry) == key:
                    entries[entry] = (key, backend)
        return plan.resolve(entries, host, path)

    def serving(self, host: str | None, path: str) -> dict[base.Endpoint, int]:
        """The endpoints taking new requests for ``host`` and ``path``, with their weights."""
        target = self.route(host, path)
        if target is None:
            return {}
        key, backend_key = target
        served = self._served[key]
        weights = plan.server_weights(served.spec, served.spec.backends[backend_key])
        return {e: w for e, w in weights.items()
                if served.states[backend_key].get(e) == plan.READY}

    # -- the provider ----------------------------------------------------------------------

    async def get_load_balancer(self, key: str) -> base.LoadBalancerStatus | None:
        """The status of ``key`` (``None`` if not served)."""
        await self._begin("get_load_balancer", key)
        served = self._served.get(key)
        if served is None:
            return None
        return plan.status_of(served.spec, self.ingress, served.states)

    async def ensure_load_balancer(self, spec: base.LoadBalancerSpec) -> base.LoadBalancerStatus:
        """Converge ``spec``."""
        await self._begin("ensure_load_balancer", spec)
        return self._apply(spec)

    async def update_load_balancer(self, spec: base.LoadBalancerSpec) -> base.LoadBalancerStatus:
        """Converge ``spec``."""
        await self._begin("update_load_balancer", spec)
        return self._apply(spec)

    async def ensure_load_balancer_deleted(self, key: str) -> None:
        """Drop ``key``'s routes; its endpoints drain."""
        await self._begin("ensure_load_balancer_deleted", key)
        self._delete(key)

    async def resync(self, specs: Sequence[base.LoadBalancerSpec]) -> None:
        """Serve exactly ``specs``."""
        await self._begin("resync", tuple(specs))
        error = base.resync_each(specs, self._served, self._delete, self._apply)
        if error is not None:
            raise error

    async def close(self) -> None:
        """Nothing to release; recorded."""
        self.calls.append(Call("close", None))
        self.closed = True

    # -- internals -------------------------------------------------------------------------

    async def _begin(self, method: str, argument: object) -> None:
        self.calls.append(Call(method, argument))
        if self._errors:
            raise self._errors.pop(0)
        await self.poll()

    def _all_states(self) -> list[tuple[str, dict[str, dict[base.Endpoint, str]]]]:
        return [(k, s.states) for k, s in self._served.items()] + list(self._deleted.items())

    def _set(self, key: str, states: dict[str, dict[base.Endpoint, str]], backend: str,
             endpoint: base.Endpoint, state: str) -> None:
        if states.setdefault(backend, {}).get(endpoint) == state:
            return
        states[backend][endpoint] = state
        self.transitions.append((key, backend, endpoint, state))
        if state == plan.DRAIN:
            self._drain_since[(key, backend, endpoint)] = self.clock.monotonic()
        else:
            self._drain_since.pop((key, backend, endpoint), None)

    def _stop(self, key: str, states: dict[str, dict[base.Endpoint, str]], backend: str,
              endpoint: base.Endpoint) -> None:
        """Take an endpoint out: drain it if it takes traffic (or at once, if so configured)."""
        current = states.get(backend, {}).get(endpoint, plan.MAINT)
        if current == plan.READY:
            self._set(key, states, backend, endpoint,
                      plan.MAINT if self.immediate_drain else plan.DRAIN)
        elif current != plan.DRAIN:
            self._set(key, states, backend, endpoint, plan.MAINT)

    def _to_maint(self, key: str, backend: str, endpoint: base.Endpoint) -> None:
        served = self._served.get(key)
        states = served.states if served is not None else self._deleted.get(key)
        if states is not None:
            self._set(key, states, backend, endpoint, plan.MAINT)

    def _forget_drained(self) -> None:
        """Drop endpoints (and deleted MCIs) that are out and no longer wanted."""
        for served in self._served.values():
            for backend, endpoints in list(served.states.items()):
                wanted = served.spec.backends.get(backend)
                keep = set(wanted.endpoints) if wanted is not None else set()
                for endpoint, state in list(endpoints.items()):
                    if endpoint not in keep and state == plan.MAINT:
                        del endpoints[endpoint]
                if not endpoints and wanted is None:
                    del served.states[backend]
        for key, states in list(self._deleted.items()):
            if all(s == plan.MAINT for endpoints in states.values() for s in endpoints.values()):
                del self._deleted[key]

    def _apply(self, spec: base.LoadBalancerSpec) -> base.LoadBalancerStatus:
        plan.validate(spec)
        entries = plan.route_entries(spec)
        clash = plan.route_conflict(self._owners, spec.key, entries)
        if clash is not None:
            raise clash
        for entry, owner in list(self._owners.items()):
            if owner == spec.key and entry not in entries:
                del self._owners[entry]
        for entry in entries:
            self._owners[entry] = spec.key
        previous = self._served.get(spec.key)
        states = previous.states if previous is not None else self._deleted.pop(spec.key, {})
        for backend_key, backend in spec.backends.items():
            for endpoint in sorted(set(backend.endpoints)):
                if endpoint.cluster in spec.blocked_clusters:
                    self._stop(spec.key, states, backend_key, endpoint)
                else:
                    self._set(spec.key, states, backend_key, endpoint, plan.READY)
        for backend_key, endpoints in states.items():
            wanted = spec.backends.get(backend_key)
            keep = set(wanted.endpoints) if wanted is not None else set()
            for endpoint in sorted(set(endpoints) - keep):
                self._stop(spec.key, states, backend_key, endpoint)
        self._served[spec.key] = _Served(spec, states)
        self._forget_drained()
        return plan.status_of(spec, self.ingress, states)

    def _delete(self, key: str) -> None:
        served = self._served.pop(key, None)
        for entry, owner in list(self._owners.items()):
            if owner == key:
                del self._owners[entry]
        if served is None:
            return
        for backend, endpoints in served.states.items():
            for endpoint in sorted(endpoints):
                self._stop(key, served.states, backend, endpoint)
        self._deleted[key] = served.states
        self._forget_drained()
