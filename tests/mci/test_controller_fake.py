"""The MCI controller on the real API servers, with the in-memory provider.

The controller runs in-process (through the runner, as the component runs
it) so the test can look into the fake load balancer; everything it reads
and writes goes through the real control plane and the real member API
servers.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
from collections.abc import AsyncIterator
from typing import Any

import mcikit as k
import prometheus_client
import pytest

import testkit
from clusterhealth_core import clock as clocks
from clusterhealth_core import election, runner
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment
from clusterhealth_mci import controller, metrics
from clusterhealth_mci.providers import base, fake

Running = tuple[controller.MCIController, fake.FakeProvider, prometheus_client.CollectorRegistry]


@pytest.fixture
async def running(cp: kube.ApiClient) -> AsyncIterator[Running]:
    provider = fake.FakeProvider(immediate_drain=True)
    async with k.running_controller(cp, provider) as run:
        yield run.controller, provider, run.registry
    for cluster in ("member1", "member2"):
        await k.set_actions(cp, cluster, [])


async def test_locations_block_fail_open_and_delete(
    running: Running, cp: kube.ApiClient, members: dict[str, kube.ApiClient],
) -> None:
    ctrl, provider, registry = running
    service, name = testkit.unique("svc"), testkit.unique("mci")
    await k.make_service(members["member1"], service, [("10.1.0.5", 8080)])
    await cp.create(resources.MULTI_CLUSTER_INGRESSES, k.mci_body(name, service, "a.example"))
    key = f"default/{name}"
    try:
        async def located(clusters: list[str]) -> Any:
            st = await k.mci_status(cp, name)
            return st.get("serviceLocations") == [{"name": service, "clusters": clusters}]
        await k.eventually(lambda: located(["member1"]))
        obj = await cp.get(resources.MULTI_CLUSTER_INGRESSES, name, namespace="default")
        assert controller.FINALIZER in obj["metadata"]["finalizers"]
        endpoints = last_spec(provider, key).backends[f"{service}:80"].endpoints
        assert [e.cluster for e in endpoints] == ["member1"]

        # the Service appears in member2 -> located there too
        await k.make_service(members["member2"], service, [("10.2.0.5", 8080)])
        await k.eventually(lambda: located(["member1", "member2"]))

        # member1 gets TrafficControl -> blocked in status and in the load balancer
        await k.set_actions(cp, "member1", ["TrafficControl"])

        async def blocked(clusters: list[str]) -> Any:
            return (await k.mci_status(cp, name)).get("trafficBlockClusters") == clusters
        await k.eventually(lambda: blocked(["member1"]))
        assert last_spec(provider, key).blocked_clusters == {"member1"}
        assert registry.get_sample_value("clusterhealth_mci_blocked_clusters",
                                         {"mci": key}) == 1

        # both blocked -> fail open: status lists both, traffic keeps flowing to both
        await k.set_actions(cp, "member2", ["TrafficControl"])
        await k.eventually(lambda: blocked(["member1", "member2"]))

        async def failing_open() -> Any:
            st = await k.mci_status(cp, name)
            return next((c for c in st.get("conditions", []) if c["type"] == "FailOpen"
                         and c["status"] == "True"), None)
        cond = await k.eventually(failing_open)
        assert "member1, member2" in cond["message"]
        assert last_spec(provider, key).blocked_clusters == frozenset()
        assert registry.get_sample_value("clusterhealth_mci_fail_open", {"mci": key}) == 1

        # unblocked -> nothing blocked
        await k.set_actions(cp, "member1", [])
        await k.set_actions(cp, "member2", [])
        await k.eventually(lambda: _no_blocked(cp, name))

        # the Service disappears from member1 -> located only in member2
        await k.delete_service(members["member1"], service)
        await k.eventually(lambda: located(["member2"]))
    finally:
        await cp.delete(resources.MULTI_CLUSTER_INGRESSES, name, namespace="default",
                        missing_ok=True)
        for member in members.values():
            await k.delete_service(member, service)

    # deleted -> the load balancer forgets it and the finalizer is released
    async def gone() -> Any:
        listing = await cp.list(resources.MULTI_CLUSTER_INGRESSES, namespace="default")
        return all(i["metadata"]["name"] != name for i in listing["items"])
    await k.eventually(gone)
    assert provider.calls_of("ensure_load_balancer_deleted")[-1] == key
    assert key not in ctrl.specs


def last_spec(provider: fake.FakeProvider, key: str) -> base.LoadBalancerSpec:
    specs = [s for s in provider.calls_of("ensure_load_balancer")
             if isinstance(s, base.LoadBalancerSpec) and s.key == key]
    return specs[-1]


async def _no_blocked(cp: kube.ApiClient, name: str) -> bool:
    return "trafficBlockClusters" not in await k.mci_status(cp, name)


async def test_other_ingress_class_is_ignored(running: Running, cp: kube.ApiClient) -> None:
    _, provider, _ = running
    name = testkit.unique("foreign")
    await cp.create(resources.MULTI_CLUSTER_INGRESSES,
                    k.mci_body(name, "svc", "b.example", ingress_class="someone-else"))
    try:
        await asyncio.sleep(1.5)
        obj = await cp.get(resources.MULTI_CLUSTER_INGRESSES, name, namespace="default")
        assert "finalizers" not in obj["metadata"]
        assert all(spec.key != f"default/{name}"  # type: ignore[attr-defined]
                   for spec in provider.calls_of("ensure_load_balancer"))
    finally:
        await cp.delete(resources.MULTI_CLUSTER_INGRESSES, name, namespace="default")


async def test_cluster_weights_annotation(
    running: Running, cp: kube.ApiClient, members: dict[str, kube.ApiClient],
) -> None:
    _, provider, _ = running
    service, name = testkit.unique("svc"), testkit.unique("weighted")
    await k.make_service(members["member1"], service, [("10.1.0.9", 8080)])
    body = k.mci_body(name, service, "w.example")
    body["metadata"]["annotations"] = {"clusterhealth.io/cluster-weights": "member1=200"}
    await cp.create(resources.MULTI_CLUSTER_INGRESSES, body)
    key = f"default/{name}"
    try:
        async def weighted() -> Any:
            specs = [s for s in provider.calls_of("ensure_load_balancer")
                     if isinstance(s, base.LoadBalancerSpec) and s.key == key]
            return specs and specs[-1].cluster_weights == {"member1": 200}
        await k.eventually(weighted)

        await cp.patch(resources.MULTI_CLUSTER_INGRESSES, name, {"metadata": {"annotations": {
            "clusterhealth.io/cluster-weights": "member1=lots"}}}, namespace="default")

        async def reported() -> Any:
            st = await k.mci_status(cp, name)
            return next((c for c in st.get("conditions", []) if c["type"] == "LoadBalancerReady"
                         and "'member1=lots' is not" in c["message"]), None)
        await k.eventually(reported)
    finally:
        await cp.delete(resources.MULTI_CLUSTER_INGRESSES, name, namespace="default")
        await k.delete_service(members["member1"], service)


async def test_resource_binding_is_the_source_when_present(
    cp: kube.ApiClient, members: dict[str, kube.ApiClient],
) -> None:
    # Our control plane serves ResourceBindings (the chart's CRD), as Karmada does.
    service, name = testkit.unique("bound"), testkit.unique("bound")
    await k.make_service(members["member1"], service, [("10.1.0.7", 8080)])
    provider = fake.FakeProvider(immediate_drain=True)
    try:
        async with k.running_controller(cp, provider):
            await cp.create(resources.MULTI_CLUSTER_INGRESSES,
                            k.mci_body(name, service, "rb.example"))

            async def located(clusters: list[str]) -> Any:
                st = await k.mci_status(cp, name)
                return st.get("serviceLocations") == [{"name": service, "clusters": clusters}]
            await k.eventually(lambda: located(["member1"]))  # no binding yet: discovery

            # Karmada's way: the Service's binding says where it was scheduled
            await cp.create(resources.RESOURCE_BINDINGS, {
                "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
                "metadata": {"name": f"{service}-service", "namespace": "default"},
                "spec": {"resource": {"apiVersion": "v1", "kind": "Service", "name": service,
                                      "namespace": "default"},
                         "clusters": [{"name": "member2"}, {"name": "member1"}]}})
            await k.eventually(lambda: located(["member1", "member2"]))
            await cp.patch(resources.RESOURCE_BINDINGS, f"{service}-service",
                           {"spec": {"clusters": [{"name": "member2"}]}}, namespace="default")
            await k.eventually(lambda: located(["member2"]))

            # binding gone: back to discovery
            await cp.delete(resources.RESOURCE_BINDINGS, f"{service}-service",
                            namespace="default")
            await k.eventually(lambda: located(["member1"]))
            await cp.delete(resources.MULTI_CLUSTER_INGRESSES, name, namespace="default")
            await k.eventually(lambda: k.gone(cp, name))  # the finalizer is released
    finally:
        await cp.delete(resources.MULTI_CLUSTER_INGRESSES, name, namespace="default",
                        missing_ok=True)
        await k.delete_service(members["member1"], service)


async def test_member_watches_restart_when_the_cluster_secret_is_rotated(
    env: environment.LocalEnvironment, cp: kube.ApiClient, members: dict[str, kube.ApiClient],
) -> None:
    """A wrong token (401) first; the Secret is fixed: the pool rebuilds the member's client,
    its listener restarts the watches, and the Cluster locates the Service.  The Secret is
    the provider's own (read-only credentials, named like the Cluster)."""
    namespace = environment.MCI_CREDENTIALS_NAMESPACE
    member = env.servers["member1"]
    reader = await cp.get(resources.SECRETS, "member1", namespace=namespace)
    reader_token = base64.b64decode(reader["data"]["token"]).decode()
    cluster, service, name = testkit.unique("rotated"), testkit.unique("rot"), testkit.unique("rot")

    def secret(token: str) -> dict[str, Any]:
        return {"caBundle": base64.b64encode(env.ca.cert_pem).decode(),
                "token": base64.b64encode(token.encode()).decode()}
    await cp.create(resources.SECRETS, {"metadata": {"name": cluster, "namespace": namespace},
                                        "type": "Opaque", "data": secret("not-the-token")})
    await cp.create(resources.CLUSTERS, {
        "apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
        "metadata": {"name": cluster},
        "spec": {"apiEndpoint": member.url, "syncMode": "Push",
                 "secretRef": {"namespace": environment.CLUSTER_SECRET_NAMESPACE,
                               "name": "member1"}}})
    await k.make_service(members["member1"], service, [("10.1.0.40", 8080)])
    provider = fake.FakeProvider(immediate_drain=True)
    try:
        async with k.running_controller(cp, provider) as run:
            await cp.create(resources.MULTI_CLUSTER_INGRESSES,
                            k.mci_body(name, service, "rotated.example"))

            async def located(clusters: list[str]) -> Any:
                st = await k.mci_status(cp, name)
                return st.get("serviceLocations") == [{"name": service, "clusters": clusters}]
            await k.eventually(lambda: located(["member1"]))  # the wrong token: 401s
            # Each 401 makes the pool rebuild the client; rebuilt clients refused again are
            # retried with backoff (without it: a hundred rebuilds a second).
            refused: list[str] = []
            run.controller.members.pool.add_listener(refused.append)
            await asyncio.sleep(3)
            assert 1 <= refused.count(cluster) <= 6
            first = run.controller.members.pool.peek(cluster)
            await cp.patch(resources.SECRETS, cluster, {"data": secret(reader_token)},
                           namespace=namespace)
            await k.eventually(lambda: located(sorted([cluster, "member1"])))
            assert run.controller.members.active[cluster].api is not first
            await cp.delete(resources.MULTI_CLUSTER_INGRESSES, name, namespace="default")
            await k.eventually(lambda: k.gone(cp, name))
    finally:
        await cp.delete(resources.MULTI_CLUSTER_INGRESSES, name, namespace="default",
                        missing_ok=True)
        await cp.delete(resources.CLUSTERS, cluster, missing_ok=True)
        await cp.delete(resources.SECRETS, cluster, namespace=namespace, missing_ok=True)
        await k.delete_service(members["member1"], service)



class _HeldProvider(fake.FakeProvider):
    """Holds the next ``ensure_load_balancer`` call (once armed) until it is released."""

    def __init__(self) -> None:
        super().__init__(immediate_drain=True)
        self.armed = False
        self.holding = asyncio.Event()
        self.release = asyncio.Event()

    async def ensure_load_balancer(self, spec: base.LoadBalancerSpec) -> base.LoadBalancerStatus:
        if self.armed:
            self.armed = False
            self.holding.set()
            await self.release.wait()
        return await super().ensure_load_balancer(spec)


@contextlib.asynccontextmanager
async def standing_by(cp: kube.ApiClient, provider: base.Provider
                      ) -> AsyncIterator[runner.ElectedController]:
    """A standby replica (``--standby-programs``) while another holds the Lease for good.

    It programs its load balancer and writes nothing: no status write of its own
    (or of a leader) brings an MCI back to its queue.
    """
    lease = testkit.unique("mci-held")
    await cp.create(resources.LEASES, {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": lease, "namespace": "default"},
        "spec": {"holderIdentity": "the-leader", "leaseDurationSeconds": 3600,
                 "renewTime": datetime.datetime.now(datetime.UTC).strftime(
                     "%Y-%m-%dT%H:%M:%S.%fZ")}})
    registry = prometheus_client.CollectorRegistry()
    mci_metrics = metrics.MCIMetrics(registry)
    settings = controller.ControllerSettings(resync_period=600)  # no resync to the rescue
    replica = runner.ElectedController(
        cp, True, election.ElectionConfig(lease, "default", identity="standby",
                                          lease_duration=3.0, renew_deadline=2.0,
                                          retry_period=0.5),
        clocks.Clock(),
        make=lambda term: controller.MCIController(term, provider, settings, mci_metrics),
        leader_gauge=mci_metrics.is_leader, metrics=runner.ProcessMetrics(registry),
        term=runner.TermSettings(controller.COMPONENT), on_stop=mci_metrics.clear, standby=True)
    task = asyncio.create_task(replica.run())
    try:
        await k.eventually(lambda: _synced(replica))
        yield replica
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await cp.delete(resources.LEASES, lease, namespace="default", missing_ok=True)


async def _synced(replica: runner.ElectedController) -> bool:
    return replica.current is not None and replica.current.synced


async def test_actions_changed_while_a_reconcile_locates_the_mci_there_are_not_lost(
    cp: kube.ApiClient, members: dict[str, kube.ApiClient],
) -> None:
    # A reconcile reads the Clusters' remedy actions, then awaits the load balancer.
    # A Cluster whose actions change meanwhile must find the MCI located there, also
    # when that very reconcile is the one moving it there (here: its binding adds
    # member2). In a standby nothing else brings the MCI back before the resync.
    service, name = testkit.unique("held"), testkit.unique("held")
    key, binding = f"default/{name}", f"{service}-service"
    provider = _HeldProvider()
    for cluster, address in (("member1", "198.18.41.10"), ("member2", "198.18.42.10")):
        await k.make_service(members[cluster], service, [(address, 8080)])
    await cp.create(resources.RESOURCE_BINDINGS, {
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {"name": binding, "namespace": "default"},
        "spec": {"resource": {"apiVersion": "v1", "kind": "Service", "name": service,
                              "namespace": "default"},
                 "clusters": [{"name": "member1"}]}})
    await cp.create(resources.MULTI_CLUSTER_INGRESSES, k.mci_body(name, service, "held.example"))
    try:
        async with standing_by(cp, provider) as replica:
            def serving(clusters: set[str]) -> bool:
                specs = [s for s in provider.calls_of("ensure_load_balancer")
                         if isinstance(s, base.LoadBalancerSpec) and s.key == key]
                return bool(specs) and {e.cluster for e in specs[-1].backends[
                    f"{service}:80"].endpoints} == clusters
            await k.eventually(lambda: serving({"member1"}))

            provider.armed = True  # the reconcile that locates member2 waits in the provider
            await cp.patch(resources.RESOURCE_BINDINGS, binding,
                           {"spec": {"clusters": [{"name": "member1"}, {"name": "member2"}]}},
                           namespace="default")
            await asyncio.wait_for(provider.holding.wait(), 20)
            await k.set_actions(cp, "member2", ["TrafficControl"])

            def seen() -> bool:  # the standby's cache, and so its handlers, saw the change
                current = replica.current
                assert isinstance(current, controller.MCIController)
                obj = current.clusters.store.get("member2") or {}
                return (obj.get("status") or {}).get("remedyActions") == ["TrafficControl"]
            await k.eventually(seen)
            provider.release.set()
            await k.eventually(lambda: last_spec(provider, key).blocked_clusters == {"member2"})
            assert serving({"member1", "member2"})
    finally:
        provider.release.set()
        await k.set_actions(cp, "member2", [])
        await cp.delete(resources.MULTI_CLUSTER_INGRESSES, name, namespace="default",
                        missing_ok=True)
        await cp.delete(resources.RESOURCE_BINDINGS, binding, namespace="default",
                        missing_ok=True)
        for cluster in ("member1", "member2"):
            await k.delete_service(members[cluster], service)
