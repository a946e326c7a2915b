"""Informers on the kinds asked for in the members (``members.MemberKinds``), on real API servers.

What the control plane's member objects rely on: nothing watched before a
caller asks, kinds resolved through the member's discovery, only the objects
matching the label selector, listeners told at once when the pool replaces a
client (once, not once more for the Secret), the informers moved onto the new
client when next asked for, and stopped when the Cluster is forgotten.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from clusterhealth_core import clock as clocks
from clusterhealth_core import members
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import discovery, errors, informer, resources
from clusterhealth_localenv import environment, waiting

NAMESPACE = environment.CLUSTER_SECRET_NAMESPACE
Heard = list[tuple[str, str, str | None]]


@pytest.fixture
async def kinds(env: environment.LocalEnvironment, cp: kube.ApiClient
                ) -> AsyncIterator[tuple[members.MemberKinds, dict[str, Any], str, Heard]]:
    name = f"kinds-{uuid.uuid4().hex[:6]}"
    server = env.servers["member1"]
    secrets = informer.Informer(cp, resources.SECRETS, namespace=NAMESPACE)
    clusters = informer.Informer(cp, resources.CLUSTERS)
    tasks = [asyncio.create_task(i.run()) for i in (secrets, clusters)]
    pool = members.MemberClients(cp, secrets=secrets, clusters=clusters, user_agent="test-kinds")
    made = members.MemberKinds(pool, clock=clocks.Clock(),
                               label_selector=f"test.clusterhealth.io/kinds={name}")
    heard: Heard = []
    made.add_listener(lambda cluster, event, obj, old: heard.append(
        (cluster, event, obj["metadata"]["name"] if obj else None)))
    try:
        await cp.create(resources.SECRETS, {
            "metadata": {"name": name, "namespace": NAMESPACE}, "type": "Opaque",
            "data": {"caBundle": base64.b64encode(env.ca.cert_pem).decode(),
                     "token": base64.b64encode(server.token.encode()).decode()}})
        cluster = await cp.create(resources.CLUSTERS, {
            "apiVersion": resources.CLUSTERS.api_version, "kind": resources.CLUSTERS.kind,
            "metadata": {"name": name},
            "spec": {"syncMode": "Push", "apiEndpoint": server.url,
                     "secretRef": {"namespace": NAMESPACE, "name": name}}})
        await waiting.eventually(lambda: f"{NAMESPACE}/{name}" in secrets.store
                                 and name in clusters.store)
        yield made, cluster, name, heard
    finally:
        await made.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await pool.close()
        with contextlib.suppress(errors.NotFound):
            await cp.delete(resources.CLUSTERS, name)
        with contextlib.suppress(errors.NotFound):
            await cp.delete(resources.SECRETS, name, namespace=NAMESPACE)


async def test_kinds_are_watched_when_asked_for_on_the_selector_and_moved_to_a_new_client(
        env: environment.LocalEnvironment, cp: kube.ApiClient,
        kinds: tuple[members.MemberKinds, dict[str, Any], str, Heard]) -> None:
    made, cluster, label, heard = kinds
    name = str(cluster["metadata"]["name"])
    assert made.active == {} and made.problems == {}  # nothing until a caller asks
    with pytest.raises(discovery.NotServed):
        await made.resource(cluster, "example.com/v1", "Nothing")
    configmaps = await made.resource(cluster, "v1", "ConfigMap")
    assert configmaps.plural == "configmaps"
    watch = await made.watch(cluster, configmaps)
    assert await made.watch(cluster, configmaps) is watch  # one informer per kind
    await watch.wait_synced()
    first = made.active[name].api
    async with env.client("member1") as member:
        for suffix, labels in (("in", {"test.clusterhealth.io/kinds": label}), ("out", {})):
            await member.create(resources.CONFIGMAPS, {"metadata": {
                "name": f"{label}-{suffix}", "namespace": "default", "labels": labels}})
        try:
            await waiting.eventually(lambda: (name, "ADDED", f"{label}-in") in heard)
            assert made.get(name, configmaps, "default", f"{label}-in") is not None
            assert made.get(name, configmaps, "default", f"{label}-out") is None
            assert made.get("elsewhere", configmaps, "default", f"{label}-in") is None
            assert all(obj != f"{label}-out" for _, _, obj in heard)
            # The Secret changes: the pool replaces the client, the listeners hear it once.
            heard.clear()
            await cp.patch(resources.SECRETS, name, {"metadata": {"labels": {"r": "1"}}},
                           namespace=NAMESPACE)
            await waiting.eventually(lambda: heard != [])
            # Every handler of that Secret event has run: it is not heard twice.
            assert heard == [(name, "", None)]
            assert made.active[name].api is first  # rebuilt only when next asked for
            second = await made.client(cluster)
            assert second is not first and made.active[name].api is second
            assert heard == [(name, "", None), (name, "", None)]
            moved = made.active[name].factory.informers
            assert [i.resource for i in moved] == [configmaps]
            await moved[0].wait_synced()
            assert made.get(name, configmaps, "default", f"{label}-in") is not None
            with pytest.raises(errors.ClientClosed):  # the replaced client was released
                await first.list(resources.NODES)
            # The Cluster is forgotten: its informers stop, nobody is told.
            heard.clear()
            await made.pool.forget(name)
            assert made.active == {} and heard == []
            assert made.get(name, configmaps, "default", f"{label}-in") is None
        finally:
            for suffix in ("in", "out"):
                await member.delete(resources.CONFIGMAPS, f"{label}-{suffix}",
                                    namespace="default")
