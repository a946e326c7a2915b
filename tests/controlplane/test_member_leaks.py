"""Nothing is left of a member once its Cluster is gone, or once its client is replaced.

The controller manager (cluster status, execution, work status) and the MCI
controller run in this process against the session's real API servers;
Clusters point at the two real members (many Clusters share one member and
its Secret).  200 Clusters are created and deleted in four waves: every one
is probed, its Node and Pod caches loaded, its Services and EndpointSlices
watched by the MCI controller, and a tenth of them get a Work applied.

Measured after the first wave and after the last: every connection of this
process to a member belongs to a client of a Cluster that exists (the
environment's own two), the other sockets are as many as before, and the
memory has not grown with the Clusters (the tolerances are explained at
:data:`BLOCKS_PER_CLUSTER` and :data:`RSS_PER_CLUSTER`).  tracemalloc is not
used: it made this process ten times slower.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import ctypes
import dataclasses
import gc
import os
import pathlib
import resource
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import cpkit
import prometheus_client
import pytest

import testkit
from clusterhealth_controlplane import controllers as table
from clusterhealth_controlplane import manager, options, vocabulary
from clusterhealth_controlplane.clusterstatus import controller as clusterstatus
from clusterhealth_core import clock as clocks
from clusterhealth_core import election, members, runner
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources, transport
from clusterhealth_localenv import environment
from clusterhealth_mci import controller as mci
from clusterhealth_mci import metrics as mci_metrics
from clusterhealth_mci.providers import fake

LIBC = ctypes.CDLL("libc.so.6")
SECRETS = environment.CLUSTER_SECRET_NAMESPACE
MEMBERS = ("member1", "member2")
WAVES = 4
PER_WAVE = 50
WORK_EVERY = 10
"""One Cluster in ten gets a Work (a ConfigMap applied in its member)."""
BLOCKS_FRACTION = 10
"""What may remain per deleted Cluster in Python memory blocks (``sys.getallocatedblocks``):
less than a tenth of what one Cluster costs while it exists, measured in the same run
(about 2,300 blocks: its clients, caches, informers and requests).  Measured left: about 20
per Cluster, the Event recorder's aggregation entries, an LRU bounded at 4,096 (as
client-go's); a leaked client alone is hundreds of blocks."""
RSS_FRACTION = 4
"""What may remain per deleted Cluster in resident memory (after ``malloc_trim``): less than
a quarter of what one Cluster costs while it exists (about 360 KiB).  The resident size moves
by a few MiB from run to run (the allocators keep pages); over seven waves of 50 it stayed
flat (83.0, 83.1, 83.3, 83.6, 83.1, 83.5 MiB), where a leak of the C-level parts of a
Cluster (TLS contexts, buffers) would grow it by wave.  The blocks catch Python objects,
the socket counts catch connections, exactly."""
FAST_HEALTH = options.Options(health=options.ClusterHealth(
    update_frequency=30.0, success_threshold=1.0, failure_threshold=1.0,
    monitor_grace_period=120.0, probe_timeout=20.0))
"""Each Cluster is probed once when it appears (and then every 30 s: not within a wave)."""


# --- what this process holds -----------------------------------------------------------


def _socket_inodes() -> set[str]:
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                found.add(target[8:-1])
    return found


def _peer(hex_address: str) -> tuple[str, int]:
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)[::-1]
    return ".".join(str(b) for b in raw), int(port, 16)


def _peers() -> dict[str, tuple[str, int]]:
    """This process's TCP sockets: inode -> remote address."""
    mine = _socket_inodes()
    found = {}
    for line in pathlib.Path("/proc/self/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[9] in mine:
            found[fields[9]] = _peer(fields[2])
    return found


def connections_to(env: environment.LocalEnvironment, names: tuple[str, ...]) -> int:
    """TCP connections of this process to the named API servers."""
    wanted = {(env.servers[n].host, env.servers[n].port) for n in names}
    return sum(1 for peer in _peers().values() if peer in wanted)




def open_connections(api: kube.ApiClient | None) -> int:
    """Connections open in a member client's pool (httpx's, through httpcore's pool)."""
    http = None if api is None else api._pool.connections
    if http is None:
        return 0
    assert isinstance(http, transport.HttpTransport)
    pool = http._client._transport._pool  # type: ignore[attr-defined]
    return sum(1 for connection in pool.connections if not connection.is_closed())


@dataclasses.dataclass(frozen=True)
class Footprint:
    """What the process holds at one moment."""

    member_connections: int
    owned: int
    """Connections of the current clients of the environment's own Clusters."""
    other_sockets: int
    """Sockets that are neither connections to an API server of the environment."""
    blocks: int
    rss: int

    @classmethod
    def now(cls, env: environment.LocalEnvironment, running: Controllers) -> Footprint:
        gc.collect()
        LIBC.malloc_trim(0)  # freed C heap back to the system: RSS is what is still in use
        pools = (running.context.members, running.mci.members.pool)
        servers = (environment.CONTROL_PLANE, *MEMBERS)
        statm = pathlib.Path("/proc/self/statm").read_text().split()
        return cls(
            member_connections=connections_to(env, MEMBERS),
            owned=sum(open_connections(pool.peek(name)) for pool in pools for name in MEMBERS),
            other_sockets=len(_socket_inodes()) - connections_to(env, servers),
            blocks=sys.getallocatedblocks(),
            rss=int(statm[1]) * resource.getpagesize())

    @classmethod
    async def settled(cls, env: environment.LocalEnvironment, running: Controllers,
                      within: float = 10.0) -> Footprint:
        """The footprint once no connection is half-made: its sockets and pools agree.

        A request that starts a connection puts it in its pool before its socket exists
        (httpcore's ``is_closed`` is false until the connect fails), and a closing one
        leaves its socket for a moment: either makes the two counts differ for an instant
        (11 sockets against 12 pooled in one CI run).  A leaked socket stays unowned, so
        the last footprint after ``within`` seconds is returned as it is, for the test to
        judge.
        """
        deadline = asyncio.get_running_loop().time() + within
        while True:
            found = cls.now(env, running)
            if found.member_connections == found.owned \
                    or asyncio.get_running_loop().time() >= deadline:
                return found
            await asyncio.sleep(0.2)


# --- the controllers, in this process --------------------------------------------------


@dataclasses.dataclass
class Controllers:
    plane: runner.ElectedController
    lb: runner.ElectedController

    @property
    def context(self) -> manager.Context:
        current = self.plane.current
        assert isinstance(current, manager.Manager)
        return current.context

    @property
    def status(self) -> clusterstatus.ClusterStatusController:
        current = self.plane.current
        assert isinstance(current, manager.Manager)
        part = current.parts["clusterStatus"]
        assert isinstance(part, clusterstatus.ClusterStatusController)
        return part

    @property
    def objects(self) -> members.MemberKinds:
        return self.context.member_objects

    @property
    def mci(self) -> mci.MCIController:
        current = self.lb.current
        assert isinstance(current, mci.MCIController)
        return current

    def holding(self) -> dict[str, object]:
        """Every per-member thing the controllers keep beyond the environment's own members
        (:data:`EMPTY` when only those exist)."""
        def ours(keys: object) -> int:
            assert isinstance(keys, dict | set)
            return len(set(keys) - set(MEMBERS))
        return {
            "plane pool": self.context.members.size, "lb pool": self.mci.members.pool.size,
            "status caches": ours(self.status.caches.caches),
            "status memory": ours(self.status.memory),
            "status discovery": ours(self.status.discovery.known),
            "member objects": ours(self.objects.active),
            "lb caches": ours(self.mci.members.active) + ours(self.mci.members._pending),
        }


EMPTY = {"plane pool": (len(MEMBERS), 0), "lb pool": (len(MEMBERS), 0), "status caches": 0,
         "status memory": 0, "status discovery": 0, "member objects": 0, "lb caches": 0}


@contextlib.asynccontextmanager
async def controllers(cp: kube.ApiClient) -> AsyncIterator[Controllers]:
    registry = prometheus_client.CollectorRegistry()
    lb_metrics = mci_metrics.MCIMetrics(registry)
    process = runner.ProcessMetrics(registry)
    clock = clocks.Clock()
    entries = table.selected(["clusterStatus", "execution", "workStatus"])
    plane = runner.ElectedController(
        cp, False, election.ElectionConfig("leaks", "default"), clock,
        make=lambda term: manager.Manager(manager.Context(term, 4, 300.0, options=FAST_HEALTH),
                                          entries),
        leader_gauge=prometheus_client.Gauge("plane", "leader", registry=registry),
        metrics=process, term=runner.TermSettings("leaks-plane"))
    provider = fake.FakeProvider(clock=clock)
    lb = runner.ElectedController(
        cp, False, election.ElectionConfig("leaks-lb", "default"), clock,
        # the Clusters' own credentials: this test is about the pools, not whose token
        make=lambda term: mci.MCIController(
            term, provider, mci.ControllerSettings(member_credentials=members.CLUSTER),
            lb_metrics),
        leader_gauge=lb_metrics.is_leader, metrics=process,
        term=runner.TermSettings(mci.COMPONENT))
    tasks = [asyncio.create_task(plane.run()), asyncio.create_task(lb.run())]
    try:
        await testkit.eventually(lambda: _synced(plane, lb), timeout=30, what="controllers synced")
        yield Controllers(plane, lb)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await provider.close()


async def _synced(*replicas: runner.ElectedController) -> bool:
    return all(r.current is not None and r.current.synced for r in replicas)


# --- Clusters ----------------------------------------------------------------------------


def cluster(name: str, env: environment.LocalEnvironment, member: str) -> dict[str, Any]:
    return {"apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
            "metadata": {"name": name},
            "spec": {"apiEndpoint": env.servers[member].url, "syncMode": "Push",
                     "secretRef": {"namespace": SECRETS, "name": member}}}


def work(name: str) -> dict[str, Any]:
    return {"apiVersion": resources.WORKS.api_version, "kind": "Work",
            "metadata": {"name": name, "namespace": vocabulary.execution_namespace(name)},
            "spec": {"workload": {"manifests": [{
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"}, "data": {"a": "1"}}]}}}


async def _finalize_namespace(cp: kube.ApiClient, name: str) -> None:
    """Delete a namespace now (no namespace controller runs here): empty its finalizers."""
    await cp.delete(resources.NAMESPACES, name, missing_ok=True)
    with contextlib.suppress(errors.NotFound):
        await cp.request("PUT", resources.NAMESPACES.path(name, subresource="finalize"),
                         body={"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": name}, "spec": {"finalizers": []}})


async def wave(env: environment.LocalEnvironment, cp: kube.ApiClient, running: Controllers,
               names: list[str]) -> Footprint:
    """Create the Clusters, wait until each is fully in use, delete them, wait until clean.

    Returns the footprint while they were all in use.
    """
    with_work = names[::WORK_EVERY]
    for name in with_work:
        await cp.create(resources.NAMESPACES,
                        {"metadata": {"name": vocabulary.execution_namespace(name)}})
    for index, name in enumerate(names):
        await cp.create(resources.CLUSTERS, cluster(name, env, MEMBERS[index % 2]))
    for name in with_work:
        await cp.create(resources.WORKS, work(name))

    async def in_use() -> bool:
        status, lb = running.status, running.mci
        for name in names:
            caches = status.caches.caches.get(name)
            if caches is None or not (caches.nodes.synced and caches.pods.synced):
                return False
            if name not in lb.members.active:
                return False
        for name in with_work:
            obj = await cp.get(resources.WORKS, name,
                               namespace=vocabulary.execution_namespace(name))
            if not any(c["type"] == "Applied" and c["status"] == "True"
                       for c in (obj.get("status") or {}).get("conditions") or []):
                return False
        return True
    await testkit.eventually(in_use, timeout=60, what="every Cluster probed, cached and watched")
    busy = await Footprint.settled(env, running)

    for name in with_work:  # as Karmada does: the Works go first, then the Cluster
        await cp.delete(resources.WORKS, name, namespace=vocabulary.execution_namespace(name))

    async def finalized() -> bool:
        return all([await _gone(cp, name) for name in with_work])
    await testkit.eventually(finalized, timeout=30, what="the Works finalized")
    for name in with_work:
        await _finalize_namespace(cp, vocabulary.execution_namespace(name))
    for name in names:
        await cp.delete(resources.CLUSTERS, name)


    async def clean() -> bool:
        return running.holding() == EMPTY
    try:
        await testkit.eventually(clean, timeout=30, what="nothing kept for the deleted Clusters")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; still held: {running.holding()}") from None
    return busy


async def _gone(cp: kube.ApiClient, name: str) -> bool:
    return await cpkit.get_or_none(cp, resources.WORKS, name,
                                   vocabulary.execution_namespace(name)) is None


async def test_200_clusters_created_and_deleted_leave_nothing_behind(
        env: environment.LocalEnvironment, cp: kube.ApiClient) -> None:
    suffix = uuid.uuid4().hex[:5]
    async with controllers(cp) as running:
        await testkit.eventually(lambda: _async(running.holding() == EMPTY),
                               what="the environment's members in use")
        idle = await Footprint.settled(env, running)
        busy = await wave(env, cp, running, [f"leak-{suffix}-0-{i}" for i in range(PER_WAVE)])
        before = await Footprint.settled(env, running)
        kinds = object_kinds()
        for number in range(1, WAVES):
            await wave(env, cp, running,
                       [f"leak-{suffix}-{number}-{i}" for i in range(PER_WAVE)])
        after = await Footprint.settled(env, running)
        grown = object_kinds()
        grown.subtract(kinds)
    for moment in (idle, before, after):  # no connection but those of live clients
        assert moment.member_connections == moment.owned, moment
    assert after.other_sockets == before.other_sockets == idle.other_sockets, (before, after)
    measured = (WAVES - 1) * PER_WAVE
    # what one Cluster costs while it exists, and what is left per Cluster once deleted
    cost_blocks, cost_rss = ((busy.blocks - idle.blocks) / PER_WAVE,
                             (busy.rss - idle.rss) / PER_WAVE)
    left_blocks, left_rss = ((after.blocks - before.blocks) / measured,
                             (after.rss - before.rss) / measured)
    summary = (f"per Cluster in use: {cost_blocks:.0f} blocks, {cost_rss / 1024:.0f} KiB; "
               f"left per deleted Cluster: {left_blocks:.1f} blocks, {left_rss / 1024:.1f} KiB; "
               f"grown: {grown.most_common(6)}")
    assert left_blocks < cost_blocks / BLOCKS_FRACTION, summary
    assert left_rss < cost_rss / RSS_FRACTION, summary


def object_kinds() -> collections.Counter[str]:
    """How many objects of each type the collector tracks."""
    gc.collect()
    return collections.Counter(type(o).__qualname__ for o in gc.get_objects())


async def test_a_replaced_client_is_closed_once_its_users_moved(
        env: environment.LocalEnvironment, cp: kube.ApiClient) -> None:
    name = f"rotate-{uuid.uuid4().hex[:6]}"
    source = await cp.get(resources.SECRETS, "member1", namespace=SECRETS)
    await cp.create(resources.SECRETS, {"metadata": {"name": name, "namespace": SECRETS},
                                        "type": "Opaque", "data": source["data"]})
    body = cluster(name, env, "member1")
    body["spec"]["secretRef"]["name"] = name
    try:
        async with controllers(cp) as running:
            await testkit.eventually(lambda: _async(running.holding() == EMPTY),
                                   what="the environment's members in use")
            await cp.create(resources.NAMESPACES,
                            {"metadata": {"name": vocabulary.execution_namespace(name)}})
            await cp.create(resources.CLUSTERS, body)
            await cp.create(resources.WORKS, work(name))

            def plane_users(api: kube.ApiClient) -> bool:
                caches = running.status.caches.caches.get(name)
                objects = running.objects.active.get(name)
                return (caches is not None and caches.api is api and caches.nodes.synced
                        and objects is not None and objects.api is api)

            def lb_users(api: kube.ApiClient) -> bool:
                active = running.mci.members.active.get(name)
                return active is not None and active.api is api

            async def settled() -> tuple[kube.ApiClient, kube.ApiClient] | None:
                plane, lb = running.context.members.peek(name), running.mci.members.pool.peek(name)
                if plane is None or lb is None or not (plane_users(plane) and lb_users(lb)):
                    return None
                return plane, lb

            old_plane, old_lb = await testkit.eventually(settled, what="the Cluster in use")
            # the credentials rotate (a new resourceVersion of the Secret): new clients
            data = dict(source["data"])
            data["token"] = base64.b64encode(env.servers["member1"].token.encode()).decode()
            await cp.patch(resources.SECRETS, name, {"metadata": {"labels": {"rotated": "1"}},
                                                     "data": data}, namespace=SECRETS)

            async def moved() -> tuple[kube.ApiClient, kube.ApiClient] | None:
                found = await settled()
                return found if found and found[0] is not old_plane \
                    and found[1] is not old_lb else None
            await testkit.eventually(moved, what="every user on the new clients")
            await testkit.eventually(lambda: _closed(old_plane, old_lb),
                                   what="the replaced clients closed")
            assert running.context.members.size == (1 + len(MEMBERS), 0)
            assert running.mci.members.pool.size == (1 + len(MEMBERS), 0)
            with pytest.raises(errors.ClientClosed):  # closed for good: never opened again
                await old_plane.get(resources.NAMESPACES, "default")
            await cp.delete(resources.WORKS, name, namespace=vocabulary.execution_namespace(name))
            await testkit.eventually(lambda: _gone(cp, name), what="Work finalized")
            await cp.delete(resources.CLUSTERS, name)
            await testkit.eventually(lambda: _async(running.holding() == EMPTY),
                                   what="nothing kept")
            end = await Footprint.settled(env, running)
            assert end.member_connections == end.owned, end
    finally:
        await cp.delete(resources.CLUSTERS, name, missing_ok=True)
        await _finalize_namespace(cp, vocabulary.execution_namespace(name))
        await cp.delete(resources.SECRETS, name, namespace=SECRETS, missing_ok=True)


async def _closed(*apis: kube.ApiClient) -> bool:
    return all(api.closed for api in apis)


async def _async(value: bool) -> bool:
    return value

