"""The member-client pool against real API servers: build, share, refresh, proxy."""

from __future__ import annotations

import asyncio
import base64
import pathlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from clusterhealth_core import members
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, informer, resources
from clusterhealth_localenv import environment, proxy, waiting

NAMESPACE = environment.CLUSTER_SECRET_NAMESPACE


async def _secret(cp: kube.ApiClient, name: str, token: str, ca: bytes) -> None:
    await cp.create(resources.SECRETS, {
        "metadata": {"name": name, "namespace": NAMESPACE}, "type": "Opaque",
        "data": {"caBundle": base64.b64encode(ca).decode(),
                 "token": base64.b64encode(token.encode()).decode()}})


def _cluster(name: str, server: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": "1"},
            "spec": {"apiEndpoint": server, "secretRef": {"namespace": NAMESPACE, "name": name},
                     **spec}}


@pytest.fixture
async def pool(cp: kube.ApiClient) -> AsyncIterator[tuple[members.MemberClients, list[str]]]:
    secrets = informer.Informer(cp, resources.SECRETS, namespace=NAMESPACE)
    task = asyncio.create_task(secrets.run())
    await secrets.wait_synced()
    made = members.MemberClients(cp, secrets=secrets, user_agent="test-pool")
    heard: list[str] = []
    made.add_listener(heard.append)
    try:
        yield made, heard
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await made.close()


async def test_one_client_per_member_rebuilt_when_its_secret_changes(
        env: environment.LocalEnvironment, cp: kube.ApiClient,
        pool: tuple[members.MemberClients, list[str]]) -> None:
    clients, heard = pool
    name = f"pool-{uuid.uuid4().hex[:6]}"
    server = env.servers["member1"]
    await _secret(cp, name, "wrong-token", env.ca.cert_pem)
    await waiting.eventually(lambda: _async(f"{NAMESPACE}/{name}" in clients.secrets.store))
    cluster = _cluster(name, server.url)
    first = await clients.get(cluster)
    assert await clients.get(cluster) is first  # shared
    with pytest.raises(errors.Unauthorized):
        await first.list(resources.NODES)
    assert heard == [name]  # the 401 invalidated it
    # The token is rotated in the Secret: the next get builds a working client.
    await cp.patch(resources.SECRETS, name, {"data": {"token": base64.b64encode(
        server.token.encode()).decode()}}, namespace=NAMESPACE)
    await waiting.eventually(lambda: _async(
        base64.b64decode(clients.secrets.store[f"{NAMESPACE}/{name}"]["data"]["token"]).decode()
        == server.token))
    second = await clients.get(cluster)
    assert second is not first
    await second.list(resources.NODES)
    # Another change of the Secret is heard without any request failing.
    heard.clear()
    await cp.patch(resources.SECRETS, name, {"metadata": {"labels": {"rotated": "yes"}}},
                   namespace=NAMESPACE)
    await waiting.eventually(lambda: _async(heard == [name]))
    await cp.delete(resources.SECRETS, name, namespace=NAMESPACE)


async def test_a_retired_client_refused_does_not_invalidate_its_successor(
        env: environment.LocalEnvironment, cp: kube.ApiClient,
        pool: tuple[members.MemberClients, list[str]]) -> None:
    clients, heard = pool
    name = f"pool-{uuid.uuid4().hex[:6]}"
    server = env.servers["member1"]
    await _secret(cp, name, "old-token", env.ca.cert_pem)
    await waiting.eventually(lambda: _async(f"{NAMESPACE}/{name}" in clients.secrets.store))
    old = await clients.get(_cluster(name, server.url))
    # The token is rotated (the old one no longer works): a fresh client is built...
    await cp.patch(resources.SECRETS, name, {"data": {"token": base64.b64encode(
        server.token.encode()).decode()}}, namespace=NAMESPACE)
    await waiting.eventually(lambda: _async(heard == [name]))
    fresh = await clients.get(_cluster(name, server.url))
    assert fresh is not old
    heard.clear()
    # ... while a watch still on the old client gets 401: the fresh one stays.
    with pytest.raises(errors.Unauthorized):
        await old.list(resources.NODES)
    assert heard == []
    assert clients.peek(name) is fresh
    await fresh.list(resources.NODES)
    await cp.delete(resources.SECRETS, name, namespace=NAMESPACE)


async def test_a_cluster_proxy_url_and_header_are_used(
        env: environment.LocalEnvironment, cp: kube.ApiClient, tmp_path: pathlib.Path,
        pool: tuple[members.MemberClients, list[str]]) -> None:
    clients, _ = pool
    name = f"pool-{uuid.uuid4().hex[:6]}"
    server = env.servers["member1"]
    await _secret(cp, name, server.token, env.ca.cert_pem)
    await waiting.eventually(lambda: _async(f"{NAMESPACE}/{name}" in clients.secrets.store))
    with proxy.TinyProxy(tmp_path, basic_auth=("karmada", "s3cret")) as tiny:
        header = tiny.proxy_authorization
        assert header is not None
        without = await clients.get(_cluster(name, server.url, proxyURL=tiny.url))
        with pytest.raises(errors.Unreachable):  # 407: the proxy wants credentials
            await without.list(resources.NODES)
        with_header = await clients.get(_cluster(name, server.url, proxyURL=tiny.url,
                                                 proxyHeader={"Proxy-Authorization": header}))
        await with_header.list(resources.NODES)
        assert f"{server.host}:{server.port}" in tiny.established_hosts() or any(
            target == f"{server.host}:{server.port}" for target in tiny.connect_targets())
        assert tiny.connect_targets().count(f"{server.host}:{server.port}") >= 2
    await cp.delete(resources.SECRETS, name, namespace=NAMESPACE)


async def test_a_cluster_without_credentials_is_a_clear_error(
        pool: tuple[members.MemberClients, list[str]]) -> None:
    clients, _ = pool
    with pytest.raises(errors.ConfigError, match=r"cluster lonely: no spec\.apiEndpoint"):
        await clients.get({"metadata": {"name": "lonely"}, "spec": {}})
    with pytest.raises(errors.ConfigError, match=r"cluster ghost: .*does not exist"):
        await clients.get(_cluster("ghost", "https://127.0.0.1:1"))


async def _async(value: bool) -> bool:
    return value


@pytest.mark.parametrize(("own", "spec", "secret"), [
    (None, {"apiEndpoint": "https://m", "secretRef": {"namespace": "a", "name": "s"}}, "a/s"),
    ("mine", {"apiEndpoint": "https://m", "secretRef": {"namespace": "a", "name": "s"}},
     "mine/c"),
    ("mine", {"apiEndpoint": "https://m"}, "mine/c"),
    (None, {"apiEndpoint": "https://m"}, None),
    ("mine", {"secretRef": {"namespace": "a", "name": "s"}}, None),
])
def test_own_secrets_stand_in_for_the_clusters_secret_ref(
        own: str | None, spec: dict[str, Any], secret: str | None) -> None:
    access = members.access_of({"metadata": {"name": "c"}, "spec": spec}, own)
    assert (access.secret_key if access is not None else None) == secret
