"""What the fake provider offers the controller's unit tests beyond the shared contract."""

from __future__ import annotations

import asyncio

import pytest

from clusterhealth_core import clock as clocks
from clusterhealth_mci.providers import base, fake, plan

A1 = base.Endpoint("member1", "10.0.1.1", 8080)
A2 = base.Endpoint("member1", "10.0.1.2", 8080)
B1 = base.Endpoint("member2", "10.0.2.1", 8080)


class StepClock(clocks.Clock):
    """A monotonic clock moved by hand."""

    def __init__(self) -> None:
        self.seconds = 1000.0

    def monotonic(self) -> float:
        return self.seconds


def spec(blocked: frozenset[str] = frozenset(), endpoints: tuple[base.Endpoint, ...] = (A1, A2, B1),
         weights: dict[str, int] | None = None) -> base.LoadBalancerSpec:
    return base.LoadBalancerSpec(
        "shop/web", (base.Route("shop.example.com", "/", "Prefix", "web:80"),),
        {"web:80": base.Backend("web", "80", endpoints)}, blocked, weights or {})


async def test_drains_finish_by_hand() -> None:
    provider = fake.FakeProvider()
    await provider.ensure_load_balancer(spec())
    status = await provider.update_load_balancer(spec(frozenset({"member2"})))
    assert status.draining == {"web:80": ("member2",)}
    assert provider.draining() == [("shop/web", "web:80", B1)]
    assert provider.endpoint_state("shop/web", "web:80", B1) == plan.DRAIN
    assert provider.finish_drains(cluster="member1") == 0
    assert provider.finish_drains(cluster="member2") == 1
    status_after = await provider.get_load_balancer("shop/web")
    assert status_after is not None and status_after.draining == {"web:80": ()}
    assert provider.endpoint_state("shop/web", "web:80", B1) == plan.MAINT
    assert ("shop/web", "web:80", B1, plan.DRAIN) in provider.transitions


async def test_drains_time_out_on_the_clock() -> None:
    clock = StepClock()
    provider = fake.FakeProvider(drain_timeout=30.0, clock=clock)
    await provider.ensure_load_balancer(spec())
    await provider.update_load_balancer(spec(frozenset({"member2"})))
    clock.seconds += 29.0
    await provider.poll()
    assert provider.draining()
    clock.seconds += 1.0
    status = await provider.get_load_balancer("shop/web")  # every call polls
    assert status is not None and status.draining == {"web:80": ()}


async def test_immediate_drain() -> None:
    provider = fake.FakeProvider(immediate_drain=True)
    await provider.ensure_load_balancer(spec())
    status = await provider.update_load_balancer(spec(frozenset({"member2"})))
    assert status.active == {"web:80": ("member1",)}
    assert status.draining == {"web:80": ()}
    status = await provider.update_load_balancer(spec())
    assert status.active == {"web:80": ("member1", "member2")}


async def test_records_calls_and_injects_failures() -> None:
    provider = fake.FakeProvider()
    provider.fail_next(base.ProviderError("load balancer down"))
    with pytest.raises(base.ProviderError, match="down"):
        await provider.ensure_load_balancer(spec())
    await provider.ensure_load_balancer(spec())
    await provider.ensure_load_balancer_deleted("shop/web")
    await provider.close()
    assert [c.method for c in provider.calls] == [
        "ensure_load_balancer", "ensure_load_balancer", "ensure_load_balancer_deleted", "close"]
    assert provider.calls_of("ensure_load_balancer_deleted") == ["shop/web"]
    assert provider.closed


async def test_serving_reports_weights_per_cluster() -> None:
    provider = fake.FakeProvider()
    await provider.ensure_load_balancer(spec(weights={"member2": 50}))
    assert provider.route("shop.example.com", "/x") == ("shop/web", "web:80")
    assert provider.route("other.org", "/x") is None
    # member1: two endpoints share weight 100; member2: one endpoint, weight 50.
    assert provider.serving("shop.example.com", "/x") == {A1: 256, A2: 256, B1: 256}
    await provider.update_load_balancer(spec(weights={"member2": 25}))
    assert provider.serving("shop.example.com", "/x")[B1] == 128


async def test_new_endpoint_of_a_blocked_cluster_never_takes_traffic() -> None:
    provider = fake.FakeProvider()
    await provider.ensure_load_balancer(spec(frozenset({"member2"}), endpoints=(A1,)))
    status = await provider.update_load_balancer(spec(frozenset({"member2"})))
    assert status.active == {"web:80": ("member1",)}
    assert status.draining == {"web:80": ()}


async def test_deleted_mci_drains_then_disappears() -> None:
    provider = fake.FakeProvider()
    await provider.ensure_load_balancer(spec())
    await provider.ensure_load_balancer_deleted("shop/web")
    assert await provider.get_load_balancer("shop/web") is None
    assert len(provider.draining()) == 3
    provider.finish_drains("shop/web")
    assert provider.draining() == []
    await asyncio.sleep(0)
