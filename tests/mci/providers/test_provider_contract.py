"""One table of provider semantics, run against the fake provider and a real HAProxy.

The controller's unit tests run on :class:`FakeProvider`; these tests prove
that what they would observe (routing, blocking, draining, status, errors)
is what a real HAProxy driven by :class:`HAProxyProvider` does.  On HAProxy,
"who answers" is measured with real HTTP requests.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable

import lbkit
import pytest

import testkit
from clusterhealth_mci.providers import base, fake
from clusterhealth_mci.providers.haproxy import provider as haproxy_provider

HOST = "shop.example.com"


class Harness(abc.ABC):
    provider: base.Provider

    @abc.abstractmethod
    async def answers(self, host: str | None, path: str) -> frozenset[str]:
        """The backends answering requests for host and path (empty: the 503)."""

    @abc.abstractmethod
    async def settle(self) -> None:
        """Until every drain has finished."""


class FakeHarness(Harness):
    def __init__(self, names: dict[base.Endpoint, str]) -> None:
        self.provider = self.fake = fake.FakeProvider(drain_timeout=5.0)
        self.names = names

    async def answers(self, host: str | None, path: str) -> frozenset[str]:
        return frozenset(self.names[e] for e in self.fake.serving(host, path))

    async def settle(self) -> None:
        self.fake.finish_drains()


class HAProxyHarness(Harness):
    def __init__(self, port: int, provider: haproxy_provider.HAProxyProvider) -> None:
        self.provider = self.haproxy = provider
        self.port = port

    async def answers(self, host: str | None, path: str) -> frozenset[str]:
        client = lbkit.Client(self.port)
        try:
            responses = [await client.get(host, path) for _ in range(8)]
        finally:
            await client.close()
        statuses = {r.status for r in responses}
        if statuses == {503}:
            return frozenset()
        assert statuses == {200}, [(r.status, r.body) for r in responses]
        return frozenset(r.backend for r in responses if r.backend)

    async def settle(self) -> None:
        await testkit.eventually(lambda: not self.haproxy.draining(), timeout=10, interval=0.02)


@pytest.fixture(params=["fake", "haproxy"])
async def world(
    request: pytest.FixtureRequest,
    backends: Callable[..., Awaitable[lbkit.Backend]],
    lb_factory: Callable[..., Awaitable[lbkit.LoadBalancer]],
    provider_factory: Callable[..., haproxy_provider.HAProxyProvider],
) -> tuple[Harness, dict[str, lbkit.Backend]]:
    made = {
        "api-1": await backends("api-1", "member1"),
        "api-2": await backends("api-2", "member2"),
        "web-1": await backends("web-1", "member1"),
        "web-2": await backends("web-2", "member2"),
        "health-1": await backends("health-1", "member1"),
    }
    harness: Harness
    if request.param == "fake":
        harness = FakeHarness({b.endpoint: name for name, b in made.items()})
    else:
        lb = await lb_factory()
        harness = HAProxyHarness(lb.port, provider_factory(lb))
    return harness, made


def shop(made: dict[str, lbkit.Backend], key: str = "shop/front",
         blocked: tuple[str, ...] = (), host: str = HOST) -> base.LoadBalancerSpec:
    return lbkit.spec(
        key,
        [(host, "/api", "Prefix", "api:80"),
         (host, "/health", "Exact", "health:http"),
         (None, "/", "Prefix", "web:80")],
        {"api:80": lbkit.backend("api", "80", [made["api-1"], made["api-2"]]),
         "health:http": lbkit.backend("health", "http", [made["health-1"]]),
         "web:80": lbkit.backend("web", "80", [made["web-1"], made["web-2"]])},
        blocked=blocked,
    )


async def test_routes(world: tuple[Harness, dict[str, lbkit.Backend]]) -> None:
    harness, made = world
    status = await harness.provider.ensure_load_balancer(shop(made))
    assert status.active == {"api:80": ("member1", "member2"), "health:http": ("member1",),
                             "web:80": ("member1", "member2")}
    assert status.draining == {"api:80": (), "health:http": (), "web:80": ()}
    assert await harness.answers(HOST, "/api/orders") == {"api-1", "api-2"}
    assert await harness.answers("Shop.Example.com:8443", "/api") == {"api-1", "api-2"}
    assert await harness.answers(HOST, "/apiary") == {"web-1", "web-2"}
    assert await harness.answers(HOST, "/health") == {"health-1"}
    assert await harness.answers(HOST, "/health/deep") == {"web-1", "web-2"}
    assert await harness.answers("other.org", "/api") == {"web-1", "web-2"}
    assert await harness.provider.get_load_balancer("shop/front") == status


async def test_unknown_host_gets_503(world: tuple[Harness, dict[str, lbkit.Backend]]) -> None:
    harness, made = world
    spec = lbkit.spec("shop/api", [(HOST, "/api", "Prefix", "api:80")],
                      {"api:80": lbkit.backend("api", "80", [made["api-1"]])})
    await harness.provider.ensure_load_balancer(spec)
    assert await harness.answers("other.org", "/api") == frozenset()
    assert await harness.answers(HOST, "/") == frozenset()
    assert await harness.answers(None, "/api") == frozenset()
    assert await harness.answers(HOST, "/api") == {"api-1"}


async def test_block_drain_unblock(world: tuple[Harness, dict[str, lbkit.Backend]]) -> None:
    harness, made = world
    await harness.provider.ensure_load_balancer(shop(made))
    status = await harness.provider.update_load_balancer(shop(made, blocked=("member2",)))
    assert status.active == {"api:80": ("member1",), "health:http": ("member1",),
                             "web:80": ("member1",)}
    assert status.draining == {"api:80": ("member2",), "health:http": (), "web:80": ("member2",)}
    assert await harness.answers(HOST, "/api") == {"api-1"}
    await harness.settle()
    status_after = await harness.provider.get_load_balancer("shop/front")
    assert status_after is not None
    assert status_after.draining == {"api:80": (), "health:http": (), "web:80": ()}
    assert status_after.active == status.active
    status = await harness.provider.update_load_balancer(shop(made))
    assert status.active["api:80"] == ("member1", "member2")
    assert await harness.answers(HOST, "/api") == {"api-1", "api-2"}


async def test_removed_endpoint_drains(world: tuple[Harness, dict[str, lbkit.Backend]]) -> None:
    harness, made = world
    await harness.provider.ensure_load_balancer(shop(made))
    smaller = lbkit.spec("shop/front", [(None, "/", "Prefix", "web:80")],
                         {"web:80": lbkit.backend("web", "80", [made["web-1"]])})
    status = await harness.provider.update_load_balancer(smaller)
    assert status.active == {"web:80": ("member1",)}
    assert status.draining == {"web:80": ("member2",)}
    assert await harness.answers(HOST, "/api") == {"web-1"}  # the api route is gone
    await harness.settle()
    assert await harness.provider.get_load_balancer("shop/front") == base.LoadBalancerStatus(
        status.ingress, {"web:80": ("member1",)}, {"web:80": ()})


async def test_delete(world: tuple[Harness, dict[str, lbkit.Backend]]) -> None:
    harness, made = world
    await harness.provider.ensure_load_balancer(shop(made))
    await harness.provider.ensure_load_balancer_deleted("shop/front")
    assert await harness.provider.get_load_balancer("shop/front") is None
    assert await harness.answers(HOST, "/api") == frozenset()
    await harness.provider.ensure_load_balancer_deleted("shop/front")  # idempotent
    # Re-created while its endpoints still drain: they serve again at once.
    status = await harness.provider.ensure_load_balancer(shop(made))
    assert status.active["api:80"] == ("member1", "member2")
    assert await harness.answers(HOST, "/api") == {"api-1", "api-2"}
    await harness.provider.ensure_load_balancer_deleted("shop/front")
    await harness.settle()
    assert await harness.answers(None, "/") == frozenset()


async def test_route_conflict(world: tuple[Harness, dict[str, lbkit.Backend]]) -> None:
    harness, made = world
    await harness.provider.ensure_load_balancer(shop(made))
    thief = lbkit.spec("other/thief", [(HOST, "/api", "Prefix", "web:80")],
                       {"web:80": lbkit.backend("web", "80", [made["web-2"]])})
    with pytest.raises(base.RouteConflict, match="served for shop/front") as caught:
        await harness.provider.ensure_load_balancer(thief)
    assert caught.value.holders == ("shop/front",)
    assert await harness.provider.get_load_balancer("other/thief") is None
    assert await harness.answers(HOST, "/api") == {"api-1", "api-2"}
    # Once the owner lets go, the other MCI can have the route.
    await harness.provider.ensure_load_balancer_deleted("shop/front")
    await harness.provider.ensure_load_balancer(thief)
    assert await harness.answers(HOST, "/api") == {"web-2"}


async def test_invalid_spec_changes_nothing(
    world: tuple[Harness, dict[str, lbkit.Backend]],
) -> None:
    harness, made = world
    status = await harness.provider.ensure_load_balancer(shop(made))
    bad = lbkit.spec("shop/front", [(HOST, "api", "Prefix", "api:80")],
                     {"api:80": lbkit.backend("api", "80", [made["api-1"]])})
    with pytest.raises(base.InvalidSpec):
        await harness.provider.update_load_balancer(bad)
    assert await harness.provider.get_load_balancer("shop/front") == status
    assert await harness.answers(HOST, "/api") == {"api-1", "api-2"}


async def test_resync_serves_exactly_the_given_specs(
    world: tuple[Harness, dict[str, lbkit.Backend]],
) -> None:
    harness, made = world
    await harness.provider.ensure_load_balancer(shop(made))
    extra = lbkit.spec("blog/site", [("blog.example.com", "/", "Prefix", "web:80")],
                       {"web:80": lbkit.backend("web", "80", [made["web-2"]])})
    await harness.provider.ensure_load_balancer(extra)
    assert await harness.answers("blog.example.com", "/") == {"web-2"}
    moved = lbkit.spec("blog/site", [("blog.example.com", "/", "Prefix", "web:80")],
                       {"web:80": lbkit.backend("web", "80", [made["web-1"]])})
    await harness.provider.resync([moved])
    assert await harness.provider.get_load_balancer("shop/front") is None
    assert await harness.answers(HOST, "/api") == frozenset()
    assert await harness.answers("blog.example.com", "/") == {"web-1"}
    await harness.settle()


async def test_resync_reports_specs_it_skipped(
    world: tuple[Harness, dict[str, lbkit.Backend]],
) -> None:
    harness, made = world
    bad = lbkit.spec("bad/one", [(HOST, "nopath", "Prefix", "api:80")],
                     {"api:80": lbkit.backend("api", "80", [made["api-1"]])})
    with pytest.raises(base.ProviderError, match="bad/one"):
        await harness.provider.resync([shop(made), bad])
    assert await harness.answers(HOST, "/api") == {"api-1", "api-2"}
    assert await harness.provider.get_load_balancer("bad/one") is None
