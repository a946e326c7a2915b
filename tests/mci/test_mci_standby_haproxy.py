"""``--standby-programs``: every replica programs its own HAProxy; only the leader writes.

What the chart's default runs (two replicas, an HAProxy sidecar in each pod):
two replicas of the controller, each driving its own real HAProxy, campaign
for one Lease on the real API server. Both HAProxies get every route and
server, both take a blocked cluster out, the MCI's status and finalizer come
from the leader alone, and when the leader goes the standby takes over
without moving a single server of its HAProxy (it adopts its own state).

The endpoints are test-host addresses (198.18.0.0/15) that nothing connects
to: no request is sent, so no backend is needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import pathlib
from collections.abc import AsyncIterator

import mcikit as k
import prometheus_client
import pytest

import testkit
from clusterhealth_core import clock as clocks
from clusterhealth_core import election, runner
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import haproxy
from clusterhealth_mci import controller, metrics
from clusterhealth_mci.providers.haproxy import config as haproxy_config
from clusterhealth_mci.providers.haproxy import provider as haproxy_provider
from clusterhealth_mci.providers.haproxy import runtime

HOST = "standby.example"
ADDRESSES = {"member1": "198.18.31.10", "member2": "198.18.32.10"}


@dataclasses.dataclass
class Replica:
    lb: haproxy.HAProxyServer
    layout: haproxy_config.HAProxyLayout
    provider: haproxy_provider.HAProxyProvider
    registry: prometheus_client.CollectorRegistry
    elected: runner.ElectedController
    task: asyncio.Task[None] | None = None

    @property
    def leading(self) -> bool:
        return self.registry.get_sample_value("clusterhealth_mci_is_leader") == 1.0

    async def servers(self) -> dict[str, str]:
        """address -> mode of every server with an address (what this HAProxy serves)."""
        client = runtime.RuntimeClient(self.layout.admin_socket)
        try:
            states = await client.show_servers_state()
        finally:
            await client.close()
        return {s.address: s.mode for s in states
                if s.backend.startswith("mci_slot_") and s.address != "0.0.0.0"}


@pytest.fixture
async def replicas(cp: kube.ApiClient, tmp_path: pathlib.Path) -> AsyncIterator[list[Replica]]:
    lease = testkit.unique("mci-standby")
    made: list[Replica] = []
    for index in range(2):
        layout = haproxy_config.HAProxyLayout(
            bind_address="127.0.0.1", bind_port=haproxy.free_port(),
            admin_socket=str(tmp_path / f"admin-{index}.sock"),
            map_dir=str(tmp_path / f"maps-{index}"), slots=4, servers_per_slot=4)
        haproxy_config.write_map_files(layout)
        lb = haproxy.HAProxyServer(haproxy_config.render(layout), tmp_path, name=f"lb-{index}")
        await asyncio.to_thread(lb.start)
        clock = clocks.Clock()
        provider = haproxy_provider.HAProxyProvider(layout.admin_socket, layout,
                                                    drain_timeout=2.0, clock=clock)
        registry = prometheus_client.CollectorRegistry()
        mci_metrics = metrics.MCIMetrics(registry)
        settings = controller.ControllerSettings(resync_period=30, drain_timeout=2.0)
        elected = runner.ElectedController(
            cp, True, election.ElectionConfig(lease, "default", identity=f"replica-{index}",
                                              lease_duration=3.0, renew_deadline=2.0,
                                              retry_period=0.5),
            clock,
            make=lambda term, p=provider, m=mci_metrics, s=settings: controller.MCIController(
                term, p, s, m),
            leader_gauge=mci_metrics.is_leader, metrics=runner.ProcessMetrics(registry),
            term=runner.TermSettings(controller.COMPONENT), on_stop=mci_metrics.clear,
            standby=True)
        replica = Replica(lb, layout, provider, registry, elected)
        replica.task = asyncio.create_task(elected.run())
        made.append(replica)
    try:
        yield made
    finally:
        for replica in made:
            if replica.task is not None:
                replica.task.cancel()
                await asyncio.gather(replica.task, return_exceptions=True)
            await replica.provider.close()
            await asyncio.to_thread(replica.lb.stop)
        await cp.delete(resources.LEASES, lease, namespace="default", missing_ok=True)


@contextlib.asynccontextmanager
async def served_mci(cp: kube.ApiClient, members: dict[str, kube.ApiClient]
                     ) -> AsyncIterator[str]:
    service, name = testkit.unique("web"), testkit.unique("web")
    for cluster, address in ADDRESSES.items():
        await k.make_service(members[cluster], service, [(address, 8080)])
    await cp.create(resources.MULTI_CLUSTER_INGRESSES, k.mci_body(name, service, HOST))
    try:
        yield name
    finally:
        await cp.delete(resources.MULTI_CLUSTER_INGRESSES, name, namespace="default",
                        missing_ok=True)
        await k.eventually(lambda: k.gone(cp, name))  # a leader released the finalizer
        for cluster in ADDRESSES:
            await k.set_actions(cp, cluster, [])
            await k.delete_service(members[cluster], service)


async def test_every_replica_programs_its_haproxy_and_only_the_leader_writes(
        cp: kube.ApiClient, members: dict[str, kube.ApiClient],
        replicas: list[Replica]) -> None:
    await k.eventually(lambda: _one_leader(replicas))
    async with served_mci(cp, members) as name:
        everything = {address: "ready" for address in ADDRESSES.values()}

        async def both_serve(expected: dict[str, str]) -> bool:
            return all([await r.servers() == expected for r in replicas])

        await k.eventually(lambda: both_serve(everything))
        (leader,) = [r for r in replicas if r.leading]
        (standby,) = [r for r in replicas if not r.leading]
        assert isinstance(standby.elected.current, controller.MCIController)
        assert not standby.elected.current.writes  # the standby's controller only reads

        async def status_writers() -> set[str]:
            # the leader programs its load balancer, then reports it in the status
            obj = await cp.get(resources.MULTI_CLUSTER_INGRESSES, name, namespace="default")
            assert controller.FINALIZER in obj["metadata"]["finalizers"]
            return {f["manager"] for f in obj["metadata"].get("managedFields") or []
                    if f.get("subresource") == "status"}

        assert await k.eventually(status_writers) == {controller.FIELD_MANAGER}

        # a blocked cluster leaves both load balancers; the leader reports it
        await k.set_actions(cp, "member1", ["TrafficControl"])
        member1 = ADDRESSES["member1"]

        async def both_blocked() -> bool:
            servers = [await r.servers() for r in replicas]
            return all(s.get(member1) in ("drain", "maint") and
                       s.get(ADDRESSES["member2"]) == "ready" for s in servers)

        try:
            await k.eventually(both_blocked)
        except AssertionError as exc:  # say what each side saw (a CI run once timed out here)
            raise AssertionError(f"{exc}; {await _blocking_state(cp, replicas)}") from exc

        async def reported(clusters: list[str]) -> bool:
            return (await k.mci_status(cp, name)).get("trafficBlockClusters") == clusters

        await k.eventually(lambda: reported(["member1"]))

        # the leader goes: the standby leads, adopting its own HAProxy as it is
        await k.eventually(lambda: both_serve({member1: "maint",
                                               ADDRESSES["member2"]: "ready"}))
        before = await standby.servers()
        assert leader.task is not None
        leader.task.cancel()
        await asyncio.gather(leader.task, return_exceptions=True)
        leader.task = None
        await k.eventually(lambda: _leads(standby))
        await k.eventually(lambda: _writing_and_synced(standby.elected))
        assert await standby.servers() == before

        # and writes as the leader now: unblocking is reported and served
        await k.set_actions(cp, "member1", [])
        await k.eventually(lambda: _unblocked(cp, name))
        await k.eventually(lambda: _serves(standby, everything))


async def _blocking_state(cp: kube.ApiClient, replicas: list[Replica]) -> str:
    """member1 as the server, each replica's cache and each HAProxy see it."""
    cluster = await cp.get(resources.CLUSTERS, "member1")
    seen = [f"server: remedyActions={cluster.get('status', {}).get('remedyActions')} "
            f"managers={[f.get('manager') for f in cluster['metadata'].get('managedFields', [])]}"]
    for index, replica in enumerate(replicas):
        current = replica.elected.current
        cached = (current.clusters.store.get("member1", {}).get("status", {})
                  .get("remedyActions") if isinstance(current, controller.MCIController)
                  else "no controller")
        seen.append(f"replica {index} (leading={replica.leading}): cache remedyActions="
                    f"{cached}, servers={await replica.servers()}")
    return "; ".join(seen)


async def _writing_and_synced(elected: runner.ElectedController) -> bool:
    """Whether the leader's own controller (a fresh one, which writes) has synced."""
    current = elected.current
    return isinstance(current, controller.MCIController) and current.writes and current.synced


async def _unblocked(cp: kube.ApiClient, name: str) -> bool:
    return not (await k.mci_status(cp, name)).get("trafficBlockClusters")


async def _serves(replica: Replica, expected: dict[str, str]) -> bool:
    return await replica.servers() == expected


async def _one_leader(replicas: list[Replica]) -> bool:
    return sum(r.leading for r in replicas) == 1


async def _leads(replica: Replica) -> bool:
    return replica.leading
