"""The HAProxy provider: converge a running HAProxy to the desired MCIs, never dropping a request.

The provider keeps the desired state in memory -- the specs, which backend
slot serves each (MCI, backend Service), which server of the slot serves
each endpoint -- and a cache of what HAProxy has (map entries, server
address/weight/state), read once and then kept up to date with every
command it sends.  Every call converges HAProxy to the desired state, in an
order that never leaves a request without a server:

1. record new slot owners in ``slots.map``;
2. bring up the servers that must take traffic (address, weight, ``ready``);
3. point the route maps at their slots (``add``/``set``, then ``del``);
4. put the servers that must stop into ``drain`` (new requests go
   elsewhere, in-flight ones finish);
5. free the slots nothing routes to any more once their servers are out.

A background task polls the draining servers' current sessions (``show
stat``) and moves each to ``maint`` once it has none (after a short grace),
or once ``drain_timeout`` has passed; in-flight requests are never cut, not
even then.

HAProxy's runtime changes are lost when it restarts, so every call (and a
monitor every ``monitor_interval`` seconds) compares ``show info``'s ``Pid``
and ``Start_time_sec`` with what it saw before, and re-applies everything
to a new process.  Slots and servers are kept across restarts, so the
restored HAProxy is exactly the one that was lost.  A restarted *provider*
adopts the running HAProxy's slots (from ``slots.map``) and servers (by
address) instead of moving traffic; until its first :meth:`resync` it
leaves alone what it does not know, afterwards it removes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable, Collection, Sequence

from clusterhealth_core import clock as clocks
from clusterhealth_mci.providers import base, plan
from clusterhealth_mci.providers.haproxy import config as layouts
from clusterhealth_mci.providers.haproxy import runtime

log = logging.getLogger(__name__)

DRAIN_GRACE = 0.05
"""A draining server must look idle this long after it began draining before it is taken
out: a request the balancer picked it for just before the drain is counted by then."""
UNSET_ADDRESS = "0.0.0.0"


@dataclasses.dataclass
class _Server:
    """What HAProxy has for one server (the cache)."""

    address: str
    port: int
    mode: str
    weight: int


@dataclasses.dataclass
class _Observed:
    """What HAProxy has: map -> key -> values, and (slot, number) -> server."""

    maps: dict[str, dict[str, set[str]]]
    servers: dict[tuple[int, int], _Server]


@dataclasses.dataclass
class _Slot:
    """One backend slot: whom it serves, and which server serves which endpoint."""

    index: int
    mci: str
    backend: str
    servers: dict[int, base.Endpoint] = dataclasses.field(default_factory=dict)
    releasing: bool = False
    """No longer wanted: its servers drain, then the slot is free again."""

    @property
    def owner(self) -> str:
        """The ``slots.map`` value: ``<mci>|<backend>``."""
        return f"{self.mci}|{self.backend}"


class HAProxyProvider(base.Provider):
    """MCIs served by one HAProxy laid out by :mod:`~clusterhealth_mci.providers.haproxy.config`."""

    name = "haproxy"

    def __init__(
        self,
        socket_address: str,
        config: layouts.HAProxyLayout,
        drain_timeout: float = 30.0,
        clock: clocks.Clock | None = None,
        *,
        poll_interval: float = 0.1,
        monitor_interval: float | None = 5.0,
        command_timeout: float = 5.0,
        fence: Callable[[], None] | None = None,
    ) -> None:
        self.layout = config
        self._exact_map, self._prefix_map = config.exact_map, config.prefix_map
        self._slots_map = config.slots_map
        self.drain_timeout = drain_timeout
        self.clock = clock or clocks.Clock()
        self.poll_interval = poll_interval
        self.monitor_interval = monitor_interval
        self.client = runtime.RuntimeClient(socket_address, timeout=command_timeout, guard=fence)
        """``fence``: the leader-election fence, asked before every command that changes HAProxy."""
        self.restarts_detected = 0
        """HAProxy processes replaced under the provider (each one re-applied)."""
        self.drain_timeouts = 0
        """Servers moved to maintenance with connections still open."""
        self._specs: dict[str, base.LoadBalancerSpec] = {}
        self._entries: dict[str, dict[plan.MapEntry, str]] = {}
        """MCI -> its route entries (entry -> backend key), owned ones only."""
        self._owners: dict[plan.MapEntry, str] = {}
        self._slots: dict[int, _Slot] = {}
        self._slot_of: dict[tuple[str, str], int] = {}
        self._adoptable: dict[tuple[str, str], int] = {}
        self._drain_since: dict[tuple[int, int], float] = {}
        self._observed: _Observed | None = None
        self._instance: tuple[str, str] | None = None
        self._authoritative = False
        self._lock = asyncio.Lock()
        self._drainer: asyncio.Task[None] | None = None
        self._monitor: asyncio.Task[None] | None = None
        self._closed = False

    # -- the provider ----------------------------------------------------------------------

    async def get_load_balancer(self, key: str) -> base.LoadBalancerStatus | None:
        """The status of ``key`` from HAProxy's current server states."""
        async with self._operation():
            spec = self._specs.get(key)
            if spec is None:
                return None
            await self._refresh_servers(
                [i for (mci, _), i in self._slot_of.items() if mci == key])
            return self._status(spec)

    async def ensure_load_balancer(self, spec: base.LoadBalancerSpec) -> base.LoadBalancerStatus:
        """Serve ``spec`` (create or converge); blocked clusters are draining on return."""
        async with self._operation():
            self._accept(spec)
            await self._converge({spec.key})
            return self._status(spec)

    async def update_load_balancer(self, spec: base.LoadBalancerSpec) -> base.LoadBalancerStatus:
        """Same as :meth:`ensure_load_balancer`."""
        return await self.ensure_load_balancer(spec)

    async def ensure_load_balancer_deleted(self, key: str) -> None:
        """Remove ``key``'s routes now; its servers drain and its slots are freed after."""
        async with self._operation():
            self._forget(key)
            await self._converge({key})

    async def resync(self, specs: Sequence[base.LoadBalancerSpec]) -> None:
        """Re-read HAProxy and make it serve exactly ``specs`` (everything else is removed)."""
        async with self._operation():
            await self._load()
            error = base.resync_each(specs, self._specs, self._forget, self._accept)
            self._authoritative = True
            self._adoptable.clear()
            await self._converge()
        if error is not None:
            raise error

    async def close(self) -> None:
        """Stop the background tasks and close the runtime API connection."""
        self._closed = True
        for task in (self._drainer, self._monitor):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._drainer = self._monitor = None
        await self.client.close()

    # -- inspection (tests, debugging) -----------------------------------------------------

    def slot_of(self, key: str, backend: str) -> str | None:
        """The backend name serving ``backend`` of MCI ``key``, if any."""
        index = self._slot_of.get((key, backend))
        return self.layout.slot_name(index) if index is not None else None

    def draining(self) -> list[tuple[str, str]]:
        """``(backend, server)`` of every server still draining, sorted."""
        return sorted((self.layout.slot_name(i), self.layout.server_name(n))
                      for i, n in self._drain_since)

    def slots_in_use(self) -> int:
        """Slots serving or still releasing."""
        return len(self._slots)

    # -- operations ------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _operation(self) -> AsyncIterator[None]:
        """Serialize, notice a restarted HAProxy before and after, drop the cache on errors."""
        if self._closed:
            raise base.ProviderError("the HAProxy provider is closed")
        async with self._lock:
            self._start_monitor()
            try:
                await self._sync()
                seen = self.client.connections
                yield
                for _ in range(3):  # a new connection during the call may be a new HAProxy
                    if self.client.connections == seen:
                        break
                    seen = self.client.connections
                    await self._sync()
            except runtime.RuntimeApiError:
                self._observed = None
                raise

    async def _sync(self) -> None:
        info = await self.client.show_info()
        instance = (info.get("Pid", ""), info.get("Start_time_sec", ""))
        if self._instance is not None and instance != self._instance:
            self.restarts_detected += 1
            log.warning("HAProxy at %s restarted (pid %s -> %s): re-applying %d MCIs",
                        self.client.address, self._instance[0], instance[0], len(self._specs))
            self._observed = None
        self._instance = instance
        if self._observed is None:
            await self._load()
            await self._converge()

    async def _load(self) -> None:
        """Read HAProxy's maps and servers into the cache; learn adoptable slots."""
        layout = self.layout
        servers: dict[tuple[int, int], _Server] = {}
        for state in await self.client.show_servers_state():
            index = layout.slot_index(state.backend)
            number = layout.server_number(state.server)
            if index is not None and number is not None:
                servers[(index, number)] = _Server(state.address, state.port, state.mode,
                                                   state.weight)
        expected = layout.slots * layout.servers_per_slot
        if len(servers) != expected:
            raise base.ProviderError(
                f"HAProxy at {self.client.address} has {len(servers)} MCI slot servers, the "
                f"layout {expected} ({layout.slots} slots x {layout.servers_per_slot}): deploy "
                "the configuration rendered by clusterhealth_mci.providers.haproxy.config")
        maps: dict[str, dict[str, set[str]]] = {}
        for name in layout.map_files:
            entries: dict[str, set[str]] = {}
            try:
                listed = await self.client.show_map(name)
            except runtime.RuntimeConnectionError:
                raise
            except runtime.RuntimeApiError as exc:
                raise base.ProviderError(
                    f"HAProxy at {self.client.address} has no map {name} ({exc}): deploy the "
                    "configuration rendered by clusterhealth_mci.providers.haproxy.config "
                    "with the same HAProxyLayout") from exc
            for entry in listed:
                entries.setdefault(entry.key, set()).add(entry.value)
            maps[name] = entries
        self._observed = _Observed(maps, servers)
        # Drain timers survive a re-read, except for servers no longer draining (a restart).
        for slot_server in list(self._drain_since):
            if servers[slot_server].mode != plan.DRAIN:
                del self._drain_since[slot_server]
        self._adoptable.clear()
        if not self._authoritative:
            for slot_name, owners in maps[self._slots_map].items():
                index = layout.slot_index(slot_name)
                if index is None or index in self._slots or len(owners) != 1:
                    continue
                mci, sep, backend = next(iter(owners)).partition("|")
                if sep:
                    self._adoptable[(mci, backend)] = index

    async def _refresh_servers(self, indexes: Sequence[int]) -> None:
        observed = self._cache()
        for index in indexes:
            for state in await self.client.show_servers_state(self.layout.slot_name(index)):
                number = self.layout.server_number(state.server)
                if number is not None:
                    observed.servers[(index, number)] = _Server(
                        state.address, state.port, state.mode, state.weight)

    def _cache(self) -> _Observed:
        if self._observed is None:
            raise base.ProviderError("internal: HAProxy's state was not read")
        return self._observed

    # -- desired state ---------------------------------------------------------------------

    def _accept(self, spec: base.LoadBalancerSpec) -> None:
        """Check ``spec`` and make it the desired state of its MCI (slots included)."""
        plan.validate(spec)
        limit = self.layout.servers_per_slot
        for key, wanted in spec.backends.items():
            if len(set(wanted.endpoints)) > limit:
                raise base.CapacityExceeded(
                    f"{spec.key}: backend {key} has {len(set(wanted.endpoints))} endpoints, "
                    f"a slot holds {limit} servers (HAProxyLayout.servers_per_slot)",
                    setting="servers_per_slot")
        entries = plan.route_entries(spec)
        clash = plan.route_conflict(self._owners, spec.key, entries)
        if clash is not None:
            raise clash
        missing = [b for b in sorted(spec.backends) if (spec.key, b) not in self._slot_of]
        releasing = {(s.mci, s.backend): s for s in self._slots.values() if s.releasing}
        fresh = [b for b in missing if (spec.key, b) not in releasing
                 and self._adoptable.get((spec.key, b)) is None]
        free = self._free_slots() if fresh else []
        if len(fresh) > len(free):
            raise base.CapacityExceeded(
                f"{spec.key}: needs {len(fresh)} more backend slots, {len(free)} free of "
                f"{self.layout.slots} (HAProxyLayout.slots)", setting="slots")
        # Commit.
        for (mci, backend), index in list(self._slot_of.items()):
            if mci == spec.key and backend not in spec.backends:
                self._slots[index].releasing = True
                del self._slot_of[(mci, backend)]
        for backend in missing:
            revived = releasing.get((spec.key, backend))
            adopted = self._adoptable.pop((spec.key, backend), None)
            if revived is not None:
                revived.releasing = False
                index = revived.index
            elif adopted is not None:
                index = adopted
                self._slots[index] = _Slot(index, spec.key, backend)
            else:
                index = free.pop(0)
                self._slots[index] = _Slot(index, spec.key, backend)
            self._slot_of[(spec.key, backend)] = index
        for entry, owner in list(self._owners.items()):
            if owner == spec.key and entry not in entries:
                del self._owners[entry]
        for entry in entries:
            self._owners[entry] = spec.key
        self._entries[spec.key] = entries
        self._specs[spec.key] = spec

    def _forget(self, key: str) -> None:
        self._specs.pop(key, None)
        self._entries.pop(key, None)
        for entry, owner in list(self._owners.items()):
            if owner == key:
                del self._owners[entry]
        for (mci, backend), index in list(self._slot_of.items()):
            if mci == key:
                self._slots[index].releasing = True
                del self._slot_of[(mci, backend)]

    def _busy_slots(self) -> set[int]:
        """Slots HAProxy uses: a server not in maintenance, or named in a map."""
        observed = self._cache()
        busy = {i for (i, _), server in observed.servers.items() if server.mode != plan.MAINT}
        for entries in observed.maps.values():
            for key, values in entries.items():
                for name in (key, *values):
                    index = self.layout.slot_index(name)
                    if index is not None:
                        busy.add(index)
        return busy

    def _free_slots(self) -> list[int]:
        taken = set(self._slots) | set(self._adoptable.values()) | self._busy_slots()
        return [i for i in range(self.layout.slots) if i not in taken]

    def _status(self, spec: base.LoadBalancerSpec) -> base.LoadBalancerStatus:
        observed = self._cache()
        states: dict[str, dict[base.Endpoint, str]] = {}
        for backend in spec.backends:
            index = self._slot_of[(spec.key, backend)]
            states[backend] = {endpoint: observed.servers[(index, number)].mode
                               for number, endpoint in self._slots[index].servers.items()}
        return plan.status_of(spec, self.layout.ingress, states)

    # -- convergence -----------------------------------------------------------------------

    async def _converge(self, only: Collection[str] | None = None) -> None:
        """Send the commands that make HAProxy match the desired state, in a lossless order.

        ``only``: converge the slots of these MCIs, plus every slot being released or with
        a draining server (``None``: everything -- after a (re)load and on resync).
        """
        observed = self._cache()
        layout = self.layout
        if self._authoritative and only is None:
            for index in sorted(self._busy_slots() - set(self._slots)):
                self._slots[index] = _Slot(index, "", "", releasing=True)
        draining = {index for index, _ in self._drain_since}
        slots = [slot for index, slot in sorted(self._slots.items())
                 if only is None or slot.releasing or slot.mci in only or index in draining]
        # 1. Slot owners.
        owners = observed.maps[self._slots_map]
        for slot in slots:
            if slot.mci:  # not a foreign slot being cleaned up
                await self._set_entry(self._slots_map, owners, layout.slot_name(slot.index),
                                      slot.owner)
        # Plan the servers.
        start: list[tuple[int, int, base.Endpoint, int]] = []
        stop: list[tuple[int, int, base.Endpoint | None]] = []
        for slot in slots:
            index = slot.index
            spec = None if slot.releasing else self._specs.get(slot.mci)
            backend = spec.backends.get(slot.backend) if spec is not None else None
            wanted = set(backend.endpoints) if backend is not None else set()
            weights = plan.server_weights(spec, backend) if spec and backend else {}
            for number, endpoint in list(slot.servers.items()):
                if endpoint not in wanted and observed.servers[(index, number)].mode == plan.MAINT:
                    del slot.servers[number]
            for endpoint in sorted(wanted - set(slot.servers.values())):
                slot.servers[await self._pick_server(slot, endpoint, wanted)] = endpoint
            for number in range(1, layout.servers_per_slot + 1):
                assigned = slot.servers.get(number)
                if assigned is None or assigned not in wanted:
                    if observed.servers[(index, number)].mode != plan.MAINT:
                        stop.append((index, number, None))
                elif spec is not None and assigned.cluster not in spec.blocked_clusters:
                    start.append((index, number, assigned, weights[assigned]))
                else:
                    stop.append((index, number, assigned))
        # 2. Servers that take traffic.
        for index, number, endpoint, weight in start:
            await self._start_server(index, number, endpoint, weight)
        # 3. Routes.
        for map_name in (self._exact_map, self._prefix_map):
            await self._converge_routes(map_name)
        # 4. Servers that stop.
        for index, number, kept in stop:
            await self._stop_server(index, number, kept)
        # 5. Free the slots that are done.
        routed = {v for m in (self._exact_map, self._prefix_map)
                  for values in observed.maps[m].values() for v in values}
        for slot in slots:
            name = layout.slot_name(slot.index)
            if not slot.releasing or name in routed:
                continue
            if all(observed.servers[(slot.index, n)].mode == plan.MAINT
                   for n in range(1, layout.servers_per_slot + 1)):
                if name in owners:
                    await self.client.del_map(self._slots_map, name)
                    del owners[name]
                del self._slots[slot.index]
        if self._drain_since:
            self._start_drainer()

    async def _pick_server(self, slot: _Slot, endpoint: base.Endpoint,
                           wanted: set[base.Endpoint]) -> int:
        """A server of ``slot`` for a new ``endpoint``: one at its address, else a free one."""
        observed = self._cache()
        free = [n for n in range(1, self.layout.servers_per_slot + 1) if n not in slot.servers]

        def rank(number: int) -> tuple[int, int]:
            server = observed.servers[(slot.index, number)]
            same = (server.address, server.port) == (endpoint.address, endpoint.port)
            if same and server.mode != plan.MAINT:
                return 0, number  # already serving it (a restarted provider adopting)
            if same:
                return 1, number
            if server.mode == plan.MAINT:
                return 2, number
            return 9, number  # an unknown server still taking traffic: drain it first
        usable = sorted((rank(n), n) for n in free)
        if usable and usable[0][0][0] < 9:
            return usable[0][1]
        # Full: take a server whose endpoint is being removed, cutting its drain short.
        for number, assigned in sorted(slot.servers.items()):
            if assigned not in wanted:
                del slot.servers[number]
                await self._set_mode(slot.index, number, plan.MAINT)
                log.warning("%s: no free server for %s:%s, removed endpoint %s:%s taken out "
                            "before its drain ended", self.layout.slot_name(slot.index),
                            endpoint.address, endpoint.port, assigned.address, assigned.port)
                return number
        raise base.CapacityExceeded(
            f"{self.layout.slot_name(slot.index)}: no server left for {endpoint}",
            setting="servers_per_slot")

    async def _start_server(self, index: int, number: int, endpoint: base.Endpoint,
                            weight: int) -> None:
        server = self._cache().servers[(index, number)]
        backend, name = self.layout.slot_name(index), self.layout.server_name(number)
        if (server.address, server.port) != (endpoint.address, endpoint.port):
            await self.client.set_server_addr(backend, name, endpoint.address, endpoint.port)
            server.address, server.port = endpoint.address, endpoint.port
        if server.weight != weight:
            await self.client.set_server_weight(backend, name, weight)
            server.weight = weight
        await self._set_mode(index, number, plan.READY)

    async def _stop_server(self, index: int, number: int, kept: base.Endpoint | None) -> None:
        """Drain a server taking traffic; keep a blocked endpoint's address for a quick unblock."""
        server = self._cache().servers[(index, number)]
        if kept is not None and server.mode == plan.MAINT \
                and (server.address, server.port) != (kept.address, kept.port):
            await self.client.set_server_addr(self.layout.slot_name(index),
                                              self.layout.server_name(number),
                                              kept.address, kept.port)
            server.address, server.port = kept.address, kept.port
        if server.mode == plan.READY:
            await self._set_mode(index, number, plan.DRAIN)
        elif server.mode == plan.DRAIN:
            self._drain_since.setdefault((index, number), self.clock.monotonic())

    async def _set_mode(self, index: int, number: int, mode: str) -> None:
        server = self._cache().servers[(index, number)]
        if server.mode != mode:
            await self.client.set_server_state(self.layout.slot_name(index),
                                               self.layout.server_name(number), mode)
            server.mode = mode
        if mode == plan.DRAIN:
            self._drain_since.setdefault((index, number), self.clock.monotonic())
        else:
            self._drain_since.pop((index, number), None)

    async def _converge_routes(self, map_name: str) -> None:
        observed = self._cache().maps[map_name]
        kind = plan.EXACT if map_name == self._exact_map else plan.PREFIX
        desired: dict[str, str] = {}
        for key, entries in self._entries.items():
            for entry, backend in entries.items():
                if entry.map == kind:
                    desired[entry.key] = self.layout.slot_name(self._slot_of[(key, backend)])
        for key, value in sorted(desired.items()):
            await self._set_entry(map_name, observed, key, value)
        ours = {self.layout.slot_name(i) for i in self._slots}
        for key, values in sorted(observed.items()):
            if key not in desired and (self._authoritative or values & ours):
                await self.client.del_map(map_name, key)
                del observed[key]

    async def _set_entry(self, map_name: str, observed: dict[str, set[str]], key: str,
                         value: str) -> None:
        current = observed.get(key)
        if current == {value}:
            return
        if current is None:
            await self.client.add_map(map_name, key, value)
        else:
            await self.client.set_map(map_name, key, value)
        observed[key] = {value}

    # -- background ------------------------------------------------------------------------

    def _start_drainer(self) -> None:
        if self._closed or (self._drainer is not None and not self._drainer.done()):
            return
        self._drainer = asyncio.get_running_loop().create_task(
            self._drain_loop(), name="haproxy-provider-drain")

    def _start_monitor(self) -> None:
        if self.monitor_interval is None or self._closed:
            return
        if self._monitor is None or self._monitor.done():
            self._monitor = asyncio.get_running_loop().create_task(
                self._monitor_loop(), name="haproxy-provider-monitor")

    async def _drain_loop(self) -> None:
        """Move draining servers to maintenance once idle (or timed out); ends when none is left.

        While HAProxy cannot be reached it retries with a growing pause (up to 5 s).
        """
        failures = 0
        while True:
            await self.clock.sleep(min(5.0, self.poll_interval * 2 ** min(failures, 8)))
            try:
                async with self._operation():
                    if not self._drain_since:
                        self._drainer = None
                        return
                    await self._drain_tick()
                    await self._converge(())
                    if failures:
                        log.info("draining on HAProxy %s resumed", self.client.address)
                    failures = 0
                    if not self._drain_since:
                        self._drainer = None
                        return
            except base.ProviderError as exc:
                if self._closed:
                    return
                failures += 1
                (log.warning if failures == 1 else log.debug)(
                    "draining on HAProxy %s: %s (retrying)", self.client.address, exc)

    async def _drain_tick(self) -> None:
        now = self.clock.monotonic()
        by_slot: dict[int, list[int]] = {}
        for index, number in self._drain_since:
            by_slot.setdefault(index, []).append(number)
        for index, numbers in sorted(by_slot.items()):
            rows = {row.name: row
                    for row in await self.client.show_stat_servers(self.layout.slot_name(index))}
            for number in sorted(numbers):
                since = self._drain_since.get((index, number))
                if since is None or now - since < DRAIN_GRACE:
                    continue
                row = rows.get(self.layout.server_name(number))
                idle = row is None or (row.sessions == 0 and row.queued == 0)
                if not idle and now - since < self.drain_timeout:
                    continue
                if not idle:
                    self.drain_timeouts += 1
                    log.warning("%s/%s still has %d sessions after the %gs drain timeout: "
                                "taken out of the load balancer anyway (its requests go on)",
                                self.layout.slot_name(index), self.layout.server_name(number),
                                row.sessions if row else 0, self.drain_timeout)
                await self._set_mode(index, number, plan.MAINT)

    async def _monitor_loop(self) -> None:
        """Notice a restarted HAProxy between calls and restore it."""
        interval = self.monitor_interval or 5.0
        while not self._closed:
            await self.clock.sleep(interval)
            try:
                async with self._operation():
                    pass
            except base.ProviderError as exc:
                log.warning("HAProxy at %s: %s", self.client.address, exc)
