"""The HAProxy provider against a real HAProxy and real HTTP backends on loopback.

What only a real load balancer can show: no request fails while a cluster
is blocked under load, weights shape real traffic, a drain that takes too
long is cut short, a restarted HAProxy is restored exactly, a restarted
provider adopts HAProxy's state without moving traffic, and the route table
HAProxy evaluates is the one :mod:`~clusterhealth_mci.providers.plan` defines.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable

import lbkit
import pytest

import testkit
from clusterhealth_mci.providers import base, plan
from clusterhealth_mci.providers.haproxy import provider, runtime

log = logging.getLogger(__name__)

HOST = "shop.example.com"
MakeBackend = Callable[..., Awaitable[lbkit.Backend]]
MakeProvider = Callable[..., provider.HAProxyProvider]


def web(backends: list[lbkit.Backend], blocked: tuple[str, ...] = (),
        weights: dict[str, int] | None = None, key: str = "shop/web",
        host: str = HOST) -> base.LoadBalancerSpec:
    return lbkit.spec(key, [(host, "/", "Prefix", "web:80")],
                      {"web:80": lbkit.backend("web", "80", backends)},
                      blocked=blocked, weights=weights)


def server_states(lb: lbkit.LoadBalancer) -> list[tuple[str, str, str, int, str, int]]:
    """Every slot server that is not pristine: (backend, server, address, port, mode, weight)."""
    states = runtime.parse_servers_state(lb.server.query("show servers state"))
    return sorted((s.backend, s.server, s.address, s.port, s.mode, s.weight) for s in states
                  if s.backend.startswith("mci_slot_") and s.address != "0.0.0.0")


def map_entries(lb: lbkit.LoadBalancer) -> dict[str, set[tuple[str, str]]]:
    return {name: {(e.key, e.value) for e in runtime.parse_map(lb.server.query(f"show map {name}"))}
            for name in lb.layout.map_files}


async def test_block_under_load_drops_no_request(
    lb: lbkit.LoadBalancer, backends: MakeBackend, provider_for: MakeProvider,
) -> None:
    member1 = [await backends("m1-a", "member1"), await backends("m1-b", "member1")]
    member2 = [await backends("m2-a", "member2"), await backends("m2-b", "member2")]
    p = provider_for(drain_timeout=10.0)
    await p.ensure_load_balancer(web(member1 + member2))
    traffic = lbkit.Traffic(lb.port, HOST, "/orders", clients=4, slow_every=4, slow_delay=0.3)
    traffic.start()
    try:
        await traffic.wait_for(60)
        # Block while slow requests are in flight on member2.
        await testkit.eventually(lambda: sum(b.in_flight for b in member2) >= 1, timeout=10,
                                 interval=0.02)
        in_flight = sum(b.in_flight for b in member2)
        started = time.monotonic()
        status = await p.update_load_balancer(web(member1 + member2, blocked=("member2",)))
        returned = time.monotonic()
        assert status.active == {"web:80": ("member1",)}
        assert status.draining == {"web:80": ("member2",)}
        await testkit.eventually(lambda: not p.draining(), timeout=10, interval=0.02)
        drained = time.monotonic()
        served_by_member2 = sum(b.requests for b in member2)
        await traffic.wait_for(100)
        # No request sent after the call returned reached member2, none at all once drained;
        # the requests in flight there finished.
        names2 = {b.name for b in member2}
        assert not [t for t, name in traffic.answers if name in names2 and t > returned]
        assert sum(b.requests for b in member2) == served_by_member2
        assert all(b.in_flight == 0 for b in member2)
        modes = {s[4] for s in server_states(lb) if s[3] in {b.port for b in member2}}
        assert modes == {"maint"}
        # Unblocking is immediate.
        unblocked = time.monotonic()
        await p.update_load_balancer(web(member1 + member2))
        await traffic.wait_for(100)
        assert sum(traffic.count(b.name, since=unblocked) for b in member2) > 0
        assert sum(traffic.count(b.name, since=unblocked) for b in member1) > 0
    finally:
        await traffic.stop()
    assert traffic.failures == []
    log.info("block: update returned in %.1f ms with %d requests in flight on member2; drained "
             "(all in maint) %.0f ms after it returned; %d requests, 0 failed",
             (returned - started) * 1000, in_flight, (drained - returned) * 1000,
             len(traffic.answers))


async def test_weights_shape_traffic(
    lb: lbkit.LoadBalancer, backends: MakeBackend, provider_for: MakeProvider,
) -> None:
    a, b = await backends("m1-a", "member1"), await backends("m2-a", "member2")
    p = provider_for()
    await p.ensure_load_balancer(web([a, b], weights={"member1": 150, "member2": 50}))
    client = lbkit.Client(lb.port)
    try:
        names = [(await client.get(HOST, "/")).backend for _ in range(200)]
        assert 0.65 <= names.count("m1-a") / 200 <= 0.85
        # A cluster's weight is shared by its endpoints: two in member1, one in member2.
        a2 = await backends("m1-b", "member1")
        await p.update_load_balancer(web([a, a2, b]))
        names = [(await client.get(HOST, "/")).backend for _ in range(200)]
        assert 0.4 <= names.count("m2-a") / 200 <= 0.6
        assert names.count("m1-a") > 0 and names.count("m1-b") > 0
    finally:
        await client.close()


async def test_drain_timeout_takes_a_busy_server_out(
    lb: lbkit.LoadBalancer, backends: MakeBackend, provider_for: MakeProvider,
) -> None:
    fast, slow = await backends("m1-a", "member1"), await backends("m2-a", "member2")
    p = provider_for(drain_timeout=0.5)
    await p.ensure_load_balancer(web([slow]))
    held = asyncio.get_running_loop().create_task(lbkit.get(lb.port, HOST, "/?delay=4"))
    try:
        await testkit.eventually(lambda: slow.in_flight == 1, timeout=5, interval=0.02)
        began = time.monotonic()
        status = await p.update_load_balancer(web([fast, slow], blocked=("member2",)))
        assert status.draining == {"web:80": ("member2",)}
        await testkit.eventually(lambda: not p.draining(), timeout=5, interval=0.02)
        assert time.monotonic() - began >= 0.5
        assert p.drain_timeouts == 1
        assert slow.in_flight == 1  # taken out of the load balancer, not cut
        assert [s[4] for s in server_states(lb) if s[3] == slow.port] == ["maint"]
        assert (await lbkit.get(lb.port, HOST, "/")).backend == "m1-a"
        response = await asyncio.wait_for(held, 10)
        assert (response.status, response.backend) == (200, "m2-a")
    finally:
        held.cancel()


async def test_restarted_haproxy_is_restored_by_the_monitor(
    lb: lbkit.LoadBalancer, backends: MakeBackend, provider_for: MakeProvider,
) -> None:
    a, b = await backends("m1-a", "member1"), await backends("m2-a", "member2")
    api = await backends("api", "member1")
    p = provider_for(monitor_interval=0.2)
    spec = lbkit.spec("shop/web", [(HOST, "/", "Prefix", "web:80"),
                                   (HOST, "/api", "Exact", "api:80")],
                      {"web:80": lbkit.backend("web", "80", [a, b]),
                       "api:80": lbkit.backend("api", "80", [api])},
                      blocked=("member2",), weights={"member1": 90})
    await p.ensure_load_balancer(spec)
    await testkit.eventually(lambda: not p.draining(), timeout=5, interval=0.02)
    servers, maps = server_states(lb), map_entries(lb)
    assert len(servers) == 3 and sum(len(m) for m in maps.values()) == 4

    await lb.server.restart_async()
    restarted = time.monotonic()

    async def serving() -> bool:
        return (await lbkit.get(lb.port, HOST, "/")).status == 200
    await testkit.eventually(serving, timeout=10, interval=0.02)
    log.info("restart: traffic back %.0f ms after HAProxy answered again",
             (time.monotonic() - restarted) * 1000)
    await p.get_load_balancer("shop/web")  # waits for the monitor's re-apply to finish
    assert p.restarts_detected == 1
    assert server_states(lb) == servers  # the same slots, servers, addresses, weights, states
    assert map_entries(lb) == maps
    assert (await lbkit.get(lb.port, HOST, "/api")).backend == "api"
    await p.update_load_balancer(dataclasses.replace(spec, blocked_clusters=frozenset()))
    assert {(await lbkit.get(lb.port, HOST, "/")).backend for _ in range(4)} == {"m1-a", "m2-a"}


async def test_restart_is_noticed_by_the_next_call(
    lb: lbkit.LoadBalancer, backends: MakeBackend, provider_for: MakeProvider,
) -> None:
    a = await backends("m1-a", "member1")
    p = provider_for()  # no monitor
    status = await p.ensure_load_balancer(web([a]))
    await lb.server.stop_async()
    with pytest.raises(base.ProviderError):
        await p.get_load_balancer("shop/web")
    await lb.server.start_async()
    assert (await lbkit.get(lb.port, HOST, "/")).status == 503  # runtime state is gone
    assert await p.get_load_balancer("shop/web") == status
    assert p.restarts_detected == 1
    assert (await lbkit.get(lb.port, HOST, "/")).backend == "m1-a"


async def test_delete_frees_the_slot(
    lb: lbkit.LoadBalancer, backends: MakeBackend, provider_for: MakeProvider,
) -> None:
    a = await backends("m1-a", "member1")
    p = provider_for()
    await p.ensure_load_balancer(web([a]))
    assert p.slot_of("shop/web", "web:80") == "mci_slot_0"
    assert (await lbkit.get(lb.port, HOST, "/")).backend == "m1-a"
    await p.ensure_load_balancer_deleted("shop/web")
    assert (await lbkit.get(lb.port, HOST, "/")).status == 503
    await testkit.eventually(lambda: p.slots_in_use() == 0, timeout=5, interval=0.02)
    assert map_entries(lb) == {name: set() for name in lb.layout.map_files}
    assert {s[4] for s in server_states(lb)} == {"maint"}
    # The freed slot serves the next MCI.
    await p.ensure_load_balancer(web([a], key="blog/web", host="blog.example.com"))
    assert p.slot_of("blog/web", "web:80") == "mci_slot_0"


async def test_restarted_provider_adopts_haproxy_state(
    lb: lbkit.LoadBalancer, backends: MakeBackend, provider_for: MakeProvider,
) -> None:
    a, b = await backends("m1-a", "member1"), await backends("m2-a", "member2")
    old = provider_for()
    await old.ensure_load_balancer(lbkit.spec("blog/web", [("blog.example.com", "/", "Prefix",
                                                            "web:80")],
                                              {"web:80": lbkit.backend("web", "80", [b])}))
    await old.ensure_load_balancer(web([a, b]))
    await old.close()
    servers = server_states(lb)
    traffic = lbkit.Traffic(lb.port, HOST, "/", clients=2)
    traffic.start()
    try:
        await traffic.wait_for(20)
        new = provider_for()
        status = await new.ensure_load_balancer(web([a, b]))  # before resync: adopt, touch nothing
        assert status.active == {"web:80": ("member1", "member2")}
        assert (await lbkit.get(lb.port, "blog.example.com", "/")).backend == "m2-a"
        await new.resync([web([a, b])])  # now authoritative: blog/web goes
        await traffic.wait_for(20)
    finally:
        await traffic.stop()
    assert traffic.failures == []
    assert not [c for c in new.client.history if c.startswith("set server mci_slot_1/")]
    assert new.slot_of("shop/web", "web:80") == "mci_slot_1"
    assert (await lbkit.get(lb.port, "blog.example.com", "/")).status == 503
    await testkit.eventually(lambda: new.slots_in_use() == 1, timeout=5, interval=0.02)
    assert [s for s in server_states(lb) if s[0] == "mci_slot_1"] == \
        [s for s in servers if s[0] == "mci_slot_1"]


async def test_capacity_limits(
    lb_factory: Callable[..., Awaitable[lbkit.LoadBalancer]], backends: MakeBackend,
    provider_factory: MakeProvider,
) -> None:
    lb = await lb_factory(slots=2, servers_per_slot=2)
    p = provider_factory(lb)
    made = [await backends(f"b{i}", f"member{i}") for i in range(3)]
    with pytest.raises(base.CapacityExceeded, match="3 endpoints, a slot holds 2") as caught:
        await p.ensure_load_balancer(web(made))
    assert caught.value.setting == "servers_per_slot"
    three = lbkit.spec("shop/web", [(HOST, f"/{i}", "Prefix", f"s{i}:80") for i in range(3)],
                       {f"s{i}:80": lbkit.backend(f"s{i}", "80", [made[i]]) for i in range(3)})
    with pytest.raises(base.CapacityExceeded, match="slots") as caught:
        await p.ensure_load_balancer(three)
    assert caught.value.setting == "slots"
    assert await p.get_load_balancer("shop/web") is None
    assert map_entries(lb) == {name: set() for name in lb.layout.map_files}


async def test_haproxy_routes_like_the_plan(
    lb: lbkit.LoadBalancer, backends: MakeBackend, provider_for: MakeProvider,
) -> None:
    """Every case of the shared route table, through the real frontend rules."""
    routes = [(HOST, "/", "Prefix", "front:80"), (HOST, "/api", "Prefix", "api:80"),
              (HOST, "/api/v2/", "Prefix", "api2:80"), (HOST, "/health", "Exact", "health:80"),
              (HOST, "/api/v2", "Exact", "exactv2:80"), ("*.example.com", "/", "Prefix", "wild:80"),
              (None, "/status", "Exact", "status:80"), (None, "/", "Prefix", "default:80")]
    made = {key: await backends(key.split(":")[0], "member1") for *_, key in routes}
    spec = lbkit.spec("shop/all", routes,
                      {k: lbkit.backend(k.split(":")[0], "80", [b]) for k, b in made.items()})
    await provider_for().ensure_load_balancer(spec)
    entries = plan.route_entries(spec)
    cases = [(HOST, "/"), (HOST, "/index.html"), (HOST, "/api"), (HOST, "/api/"), (HOST, "/api/x"),
             (HOST, "/apix"), (HOST, "/api/v2"), (HOST, "/api/v2/x"), (HOST, "/health"),
             (HOST, "/health/x"), ("SHOP.Example.com:8080", "/api"), ("blog.example.com", "/x"),
             ("a.blog.example.com", "/x"), ("example.com", "/x"), ("other.org", "/status"),
             ("other.org", "/status/x"), (None, "/x"), (HOST, "/api?x=/health")]
    for host, path in cases:
        expected = plan.resolve(entries, host, path.split("?")[0])
        response = await lbkit.get(lb.port, host, path)
        wanted = expected.split(":")[0] if expected else None
        assert response.backend == wanted, (host, path)
