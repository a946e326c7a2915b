"""Errors the user must fix reach the MCI (condition + Event), and are not retried.

The controller runs in-process with the fake provider (so the test can see
which calls reached the load balancer), against the real control plane and
member API servers.  Each test works in a namespace of its own, so the
Events it finds are the ones the controller wrote into the MCI's namespace.
The same cases against real HAProxy: ``test_mci_errors_haproxy_e2e.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import mcikit as k
import pytest

import testkit
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_mci import controller
from clusterhealth_mci.providers import base, fake

MCI = resources.MULTI_CLUSTER_INGRESSES
RECONCILES = "clusterhealth_controller_reconcile_total"
RETRIES = "clusterhealth_workqueue_retries_total"


@pytest.fixture
async def running(cp: kube.ApiClient) -> AsyncIterator[tuple[k.Running, fake.FakeProvider]]:
    provider = fake.FakeProvider(immediate_drain=True)
    # No periodic resync during a test: every reconcile seen comes from a change.
    settings = controller.ControllerSettings(resync_period=3600)
    async with k.running_controller(cp, provider, settings) as run:
        yield run, provider


async def _reason(cp: kube.ApiClient, name: str, namespace: str, reason: str
                  ) -> dict[str, Any] | None:
    found = await k.condition(cp, name, namespace=namespace)
    return found if found is not None and found["reason"] == reason else None


def _calls_for(provider: fake.FakeProvider, key: str) -> list[base.LoadBalancerSpec]:
    return [s for s in provider.calls_of("ensure_load_balancer")
            if isinstance(s, base.LoadBalancerSpec) and s.key == key]


def _counts(run: k.Running) -> tuple[float | None, ...]:
    return (run.sample(RECONCILES, {"controller": "mci", "result": "error"}),
            run.sample(RECONCILES, {"controller": "mci", "result": "terminal"}),
            run.sample(RETRIES, {"name": "mci"}))


async def _assert_not_retried(run: k.Running) -> None:
    """Nothing is reconciled again while nothing changes (a retry loop would, within ms)."""
    await asyncio.sleep(0.5)  # our own status write brings the key back once
    before = _counts(run)
    await asyncio.sleep(3.0)
    assert _counts(run) == before


async def _one_warning(cp: kube.ApiClient, name: str, namespace: str, reason: str
                       ) -> dict[str, Any]:
    events = await k.eventually(lambda: k.events_of(cp, name, namespace, reason))
    assert len(events) == 1
    event = events[0]
    assert event["type"] == "Warning"
    assert event["involvedObject"]["namespace"] == namespace
    assert event["involvedObject"]["kind"] == "MultiClusterIngress"
    assert event.get("count", 1) == 1
    return dict(event)


async def test_invalid_path(running: tuple[k.Running, fake.FakeProvider], cp: kube.ApiClient,
                            members: dict[str, kube.ApiClient]) -> None:
    run, provider = running
    ns = await k.make_namespace(cp, *members.values())
    service, name = testkit.unique("svc"), testkit.unique("regex")
    await k.make_service(members["member1"], service, [("10.1.0.5", 8080)], namespace=ns)
    await cp.create(MCI, k.path_body(name, [
        k.http_path(service, "/api/(v1|v2)/.*", "ImplementationSpecific")], "bad.example", ns))
    found = await k.eventually(lambda: _reason(cp, name, ns, controller.INVALID_SPEC))
    assert found["status"] == "False"
    assert found["message"].startswith("route bad.example/api/(v1|v2)/.*: ")
    assert "looks like a regular expression" in found["message"]
    assert "not served" in found["message"]
    event = await _one_warning(cp, name, ns, controller.INVALID_SPEC)
    assert "regular expression" in event["message"]
    await _assert_not_retried(run)
    assert _calls_for(provider, f"{ns}/{name}") == []  # never reached the load balancer
    assert len(await k.events_of(cp, name, ns, controller.INVALID_SPEC)) == 1

    # The user fixes the path: served.
    await cp.patch(MCI, name, {"spec": {"rules": [{"host": "bad.example", "http": {"paths": [
        k.http_path(service, "/api", "Prefix")]}}]}}, namespace=ns)
    served = await k.eventually(lambda: _reason(cp, name, ns, "Programmed"))
    assert served["status"] == "True"
    assert provider.route("bad.example", "/api/v1") == (f"{ns}/{name}", f"{service}:80")
    await cp.delete(MCI, name, namespace=ns)
    await k.eventually(lambda: k.gone(cp, name, ns))


async def test_route_conflict_the_older_mci_keeps_the_route(
        running: tuple[k.Running, fake.FakeProvider], cp: kube.ApiClient,
        members: dict[str, kube.ApiClient]) -> None:
    run, provider = running
    ns = await k.make_namespace(cp, *members.values())
    service, suffix = testkit.unique("svc"), testkit.unique("x")
    older, younger = f"a-{suffix}", f"b-{suffix}"  # same second: the name decides
    host = "shared.example"
    await k.make_service(members["member1"], service, [("10.1.0.6", 8080)], namespace=ns)
    # The older MCI cannot be served at first (a path with a space)...
    await cp.create(MCI, k.path_body(older, [k.http_path(service, "/"),
                                             k.http_path(service, "/a b")], host, ns))
    await k.eventually(lambda: _reason(cp, older, ns, controller.INVALID_SPEC))
    # ... so the younger one gets the route it also claims.
    await cp.create(MCI, k.path_body(younger, [k.http_path(service, "/")], host, ns))
    await k.eventually(lambda: _reason(cp, younger, ns, "Programmed"))
    assert provider.route(host, "/x") == (f"{ns}/{younger}", f"{service}:80")

    # The older one is fixed: it takes its route back, the younger one is told why.
    await cp.patch(MCI, older, {"spec": {"rules": [{"host": host, "http": {"paths": [
        k.http_path(service, "/")]}}]}}, namespace=ns)
    await k.eventually(lambda: _reason(cp, older, ns, "Programmed"))
    lost = await k.eventually(lambda: _reason(cp, younger, ns, controller.ROUTE_CONFLICT))
    assert lost["status"] == "False"
    assert f"{host}/ (Prefix) already served for MCI {ns}/{older}" in lost["message"]
    assert provider.route(host, "/x") == (f"{ns}/{older}", f"{service}:80")
    event = await _one_warning(cp, younger, ns, controller.ROUTE_CONFLICT)
    assert f"{ns}/{older}" in event["message"]
    await _assert_not_retried(run)

    # The older one goes away: the younger one is served again.
    await cp.delete(MCI, older, namespace=ns)
    await k.eventually(lambda: _reason(cp, younger, ns, "Programmed"))
    assert provider.route(host, "/x") == (f"{ns}/{younger}", f"{service}:80")
    await cp.delete(MCI, younger, namespace=ns)
    await k.eventually(lambda: k.gone(cp, younger, ns))


async def test_port_not_found(running: tuple[k.Running, fake.FakeProvider], cp: kube.ApiClient,
                              members: dict[str, kube.ApiClient]) -> None:
    run, provider = running
    ns = await k.make_namespace(cp, *members.values())
    service, name = testkit.unique("svc"), testkit.unique("port")
    await k.make_service(members["member1"], service, [("10.1.0.7", 8080)], namespace=ns)
    await cp.create(MCI, k.path_body(name, [k.http_path(service, "/", port="web")],
                                     "port.example", ns))
    found = await k.eventually(lambda: _reason(cp, name, ns, controller.PORT_NOT_FOUND))
    assert found["status"] == "False"
    assert f"Service {service} has no port named 'web' in member1 (its ports: 80/http)" \
        in found["message"]
    status = await k.mci_status(cp, name, ns)
    assert status["serviceLocations"] == [{"name": service, "clusters": ["member1"]}]
    await _one_warning(cp, name, ns, controller.PORT_NOT_FOUND)
    await _assert_not_retried(run)
    assert _calls_for(provider, f"{ns}/{name}") == []

    # The Service gains the port in member1 (member2 runs it without): served from member1,
    # and the condition says what member2 lacks.
    await members["member1"].patch(resources.SERVICES, service, {"spec": {"ports": [
        {"name": "http", "port": 80, "protocol": "TCP"},
        {"name": "web", "port": 81, "protocol": "TCP"}]}}, namespace=ns)
    await members["member2"].create(resources.SERVICES, {
        "metadata": {"name": service, "namespace": ns},
        "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}})
    served = await k.eventually(lambda: _partial(cp, name, ns))
    assert f"Service {service} has no port named 'web' in member2" in served["message"]
    await cp.delete(MCI, name, namespace=ns)
    await k.eventually(lambda: k.gone(cp, name, ns))


async def _partial(cp: kube.ApiClient, name: str, namespace: str) -> dict[str, Any] | None:
    found = await _reason(cp, name, namespace, "Programmed")
    return found if found is not None and "member2" in found["message"] else None


async def test_transient_errors_keep_the_backoff(
        running: tuple[k.Running, fake.FakeProvider], cp: kube.ApiClient,
        members: dict[str, kube.ApiClient]) -> None:
    run, provider = running
    ns = await k.make_namespace(cp, *members.values())
    service, name = testkit.unique("svc"), testkit.unique("flaky")
    await k.make_service(members["member1"], service, [("10.1.0.8", 8080)], namespace=ns)
    errors_before = run.sample(RECONCILES, {"controller": "mci", "result": "error"}) or 0.0
    provider.fail_next(base.ProviderError("HAProxy runtime socket: connection refused"), 3)
    await cp.create(MCI, k.path_body(name, [k.http_path(service, "/")], "flaky.example", ns))
    served = await k.eventually(lambda: _reason(cp, name, ns, "Programmed"))
    assert served["status"] == "True"
    errors_after = run.sample(RECONCILES, {"controller": "mci", "result": "error"}) or 0.0
    assert errors_after - errors_before >= 3  # retried, not reported as the user's error
    assert await k.events_of(cp, name, ns) == [] or all(
        e["type"] == "Normal" for e in await k.events_of(cp, name, ns))
    await cp.delete(MCI, name, namespace=ns)
    await k.eventually(lambda: k.gone(cp, name, ns))


async def test_gauges_are_cleared_when_the_term_ends(
        cp: kube.ApiClient, members: dict[str, kube.ApiClient]) -> None:
    ns = await k.make_namespace(cp, *members.values())
    service, name = testkit.unique("svc"), testkit.unique("gauge")
    await k.make_service(members["member1"], service, [("10.1.0.9", 8080)], namespace=ns)
    provider = fake.FakeProvider(immediate_drain=True)
    key = f"{ns}/{name}"
    async with k.running_controller(cp, provider) as run:
        await cp.create(MCI, k.path_body(name, [k.http_path(service, "/")], "g.example", ns))
        await k.eventually(lambda: _reason(cp, name, ns, "Programmed"))
        assert run.sample("clusterhealth_mci_blocked_clusters", {"mci": key}) == 0
        assert run.sample("clusterhealth_mci_backends", {"mci": key, "cluster": "member1"}) == 1
    # Leadership (the term) ended: this replica no longer reports any MCI.
    assert run.sample("clusterhealth_mci_blocked_clusters", {"mci": key}) is None
    assert run.sample("clusterhealth_mci_backends", {"mci": key, "cluster": "member1"}) is None
    assert run.sample("clusterhealth_mci_fail_open", {"mci": key}) is None
    async with k.running_controller(cp, provider):
        await cp.delete(MCI, name, namespace=ns)
        await k.eventually(lambda: k.gone(cp, name, ns))


async def test_service_in_no_member(running: tuple[k.Running, fake.FakeProvider],
                                    cp: kube.ApiClient,
                                    members: dict[str, kube.ApiClient]) -> None:
    """Not "Programmed, 0 cluster(s) active" and 503s: the MCI names the missing Service."""
    _, provider = running
    ns = await k.make_namespace(cp, *members.values())
    service, name = testkit.unique("svc"), testkit.unique("nowhere")
    await cp.create(MCI, k.path_body(name, [k.http_path(service, "/")], "nowhere.example", ns))
    found = await k.eventually(lambda: _reason(cp, name, ns, controller.SERVICE_NOT_FOUND))
    assert found["status"] == "False"
    assert f"backend Service {ns}/{service} exists in no member cluster" in found["message"]
    assert "member1" in found["message"] and "member2" in found["message"]
    event = await _one_warning(cp, name, ns, controller.SERVICE_NOT_FOUND)
    assert f"{ns}/{service}" in event["message"]
    # the Service appears in a member: served, and said so
    await k.make_service(members["member1"], service, [("10.1.0.9", 8080)], namespace=ns)
    served = await k.eventually(lambda: _reason(cp, name, ns, "Programmed"))
    assert served["status"] == "True"
    assert provider.route("nowhere.example", "/") == (f"{ns}/{name}", f"{service}:80")
    await cp.delete(MCI, name, namespace=ns)
    await k.eventually(lambda: k.gone(cp, name, ns))
