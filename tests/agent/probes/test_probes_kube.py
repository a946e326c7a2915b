"""The API-server and CoreDNS probes against the real member kube-apiserver."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import probeservers
import pytest

from clusterhealth_agent.probes import base, kube
from clusterhealth_core.kube import client, config, resources

NAMESPACE = "kube-system"


def unreachable_client() -> client.ApiClient:
    port = probeservers.closed_port()
    return client.ApiClient(config.Credentials(f"https://127.0.0.1:{port}",
                                               insecure_skip_tls_verify=True))


async def test_apiserver_ready(members: dict[str, client.ApiClient]) -> None:
    probe = kube.APIServerProbe("apiserver", "APIServerReady", members["member1"])
    result = await base.run_probe(probe, 5.0)
    assert (result.ok, result.reason) == (True, "APIServerReady"), result
    assert result.message.endswith("/readyz: ok")


async def test_apiserver_unreachable() -> None:
    async with unreachable_client() as api:
        result = await base.run_probe(kube.APIServerProbe("apiserver", "APIServerReady", api), 5.0)
    assert (result.ok, result.reason) == (False, "APIServerUnreachable")
    assert result.duration < 2.0  # not retried


async def test_apiserver_not_ready_quotes_the_failed_checks() -> None:
    # What kube-apiserver answers while etcd is down (it cannot be made to, cheaply).
    body = (b"[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\n"
            b"[+]poststarthook/start-informers ok\nreadyz check failed\n")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server, client.ApiClient(
        config.Credentials(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
    ) as api:
        result = await base.run_probe(kube.APIServerProbe("apiserver", "APIServerReady", api),
                                      5.0)
    assert (result.ok, result.reason) == (False, "APIServerNotReady")
    assert "500" in result.message and "etcd failed: reason withheld" in result.message
    assert "ping" not in result.message


def endpoint(address: str, ready: bool | None) -> dict[str, Any]:
    item: dict[str, Any] = {"addresses": [address]}
    if ready is not None:
        item["conditions"] = {"ready": ready}
    return item


@pytest.fixture
async def dns_service(members: dict[str, client.ApiClient]) -> AsyncIterator[str]:
    """A service name of our own (other tests may own kube-dns); its slices are deleted."""
    service = f"kube-dns-{uuid.uuid4().hex[:6]}"
    yield service
    api = members["member1"]
    listing = await api.list(resources.ENDPOINT_SLICES, namespace=NAMESPACE,
                             label_selector=f"kubernetes.io/service-name={service}")
    for item in listing["items"]:
        await api.delete(resources.ENDPOINT_SLICES, item["metadata"]["name"],
                         namespace=NAMESPACE, missing_ok=True)


async def create_slice(
    api: client.ApiClient, service: str, name: str, endpoints: list[dict[str, Any]]
) -> None:
    await api.create(resources.ENDPOINT_SLICES, {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": NAMESPACE,
                     "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}],
    })


async def test_coredns_follows_endpoint_readiness(
    members: dict[str, client.ApiClient], dns_service: str
) -> None:
    api = members["member1"]
    probe = kube.CoreDNSProbe("coredns", "CoreDNSReady", api, service=dns_service)

    result = await base.run_probe(probe, 5.0)
    assert (result.ok, result.reason) == (False, "NoEndpoints"), result

    name = f"{dns_service}-abcde"
    await create_slice(api, dns_service, name,
                       [endpoint("198.18.0.10", True), endpoint("198.18.1.10", False)])
    result = await base.run_probe(probe, 5.0)
    assert (result.ok, result.reason) == (True, "EndpointsReady"), result
    assert f"1 of 2 endpoints of {NAMESPACE}/{dns_service} ready" == result.message

    await api.patch(resources.ENDPOINT_SLICES, name, {"endpoints": [
        endpoint("198.18.0.10", False), endpoint("198.18.1.10", False)]}, namespace=NAMESPACE)
    result = await base.run_probe(probe, 5.0)
    assert (result.ok, result.reason) == (False, "NoReadyEndpoints"), result
    assert result.message.startswith("0 of 2 endpoints")

    # A second slice whose endpoint has no ready condition: absent counts as ready.
    await create_slice(api, dns_service, f"{dns_service}-fghij", [endpoint("198.18.2.10", None)])
    result = await base.run_probe(probe, 5.0)
    assert (result.ok, result.message) == (True, f"1 of 3 endpoints of {NAMESPACE}/"
                                                 f"{dns_service} ready")

    await api.patch(resources.ENDPOINT_SLICES, name, {"endpoints": [
        endpoint("198.18.0.10", True), endpoint("198.18.1.10", True)]}, namespace=NAMESPACE)
    result = await base.run_probe(probe, 5.0)
    assert result.message.startswith("3 of 3 endpoints")


async def test_coredns_empty_slice_is_no_endpoints(
    members: dict[str, client.ApiClient], dns_service: str
) -> None:
    api = members["member1"]
    await create_slice(api, dns_service, f"{dns_service}-empty", [])
    probe = kube.CoreDNSProbe("coredns", "CoreDNSReady", api, service=dns_service)
    result = await base.run_probe(probe, 5.0)
    assert (result.ok, result.reason) == (False, "NoEndpoints")


async def test_coredns_other_member_is_separate(
    members: dict[str, client.ApiClient], dns_service: str
) -> None:
    await create_slice(members["member1"], dns_service, f"{dns_service}-m1",
                       [endpoint("198.18.0.10", True)])
    probe = kube.CoreDNSProbe("coredns", "CoreDNSReady", members["member2"], service=dns_service)
    assert (await base.run_probe(probe, 5.0)).reason == "NoEndpoints"


async def test_coredns_unreachable() -> None:
    async with unreachable_client() as api:
        result = await base.run_probe(kube.CoreDNSProbe("coredns", "CoreDNSReady", api), 5.0)
    assert (result.ok, result.reason) == (False, "APIServerUnreachable")


def test_coredns_defaults_to_kube_dns() -> None:
    probe = kube.CoreDNSProbe("coredns", "CoreDNSReady", unreachable_client())
    assert (probe.namespace, probe.service) == ("kube-system", "kube-dns")
