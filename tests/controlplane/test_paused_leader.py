"""A paused former leader writes nothing anywhere: not to the members, not to HAProxy.

Two controller managers (``--controllers execution``) and two MCI controllers
(``--provider haproxy``, one real HAProxy) run as processes, as shipped, on
the audited environment (its member writes an audit log).  Replica A leads
both Leases and has applied a Work to the member and the MCI's endpoint to
HAProxy.  Then:

1. A is paused (SIGSTOP) past its Lease; B takes both Leases over, and is
   then killed, so that nobody leads;
2. the world changes under A: the object the Work applied is deleted in the
   member (A's watch on the member keeps that event for it while it is
   stopped), and HAProxy restarts, losing everything it was told at runtime;
3. A resumes (SIGCONT).  Its old execution term wants to put the object
   back, and its HAProxy provider (which outlives terms) notices the new
   HAProxy within its monitor interval and wants to restore it; but A's
   Leases are gone: the fence refuses.  A campaigns, waits out B's Leases,
   and acquires them again.

The witnesses: the member's audit log has no write by the members' user
between B's death and A's new term, and HAProxy's ``show servers state``
shows no server for the endpoint until A's new MCI term.  Then the new terms
do what the old ones wanted (the object comes back, HAProxy is restored):
the writes were pending, and only the fence held them back.

Without the fences this test fails: HAProxy's witness every time (the
provider's monitor outlives the term and restores HAProxy at once), the
member's only in the runs where A's old execution term handles the deletion
before its elector cancels it (both wake at the same instant; A's log showed
the refused member write in 6 of our 7 runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import pathlib
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import cpkit
import pytest

import testkit
from clusterhealth_controlplane import vocabulary
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment, haproxy, processes
from clusterhealth_mci.providers.haproxy import config as haproxy_config
from clusterhealth_mci.providers.haproxy import runtime

MEMBER = "member2"
MEMBERS_USER = "clusterhealth-karmada"
"""Who the Cluster Secrets' token authenticates as on the members (the witness's subject)."""
ENDPOINT = "198.18.0.10"
ELECTION = ("--leader-elect", "true", "--leader-elect-lease-duration", "3s",
            "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "0.5s",
            "--leader-elect-resource-namespace", "default")
WRITE_VERBS = frozenset({"create", "update", "patch", "delete"})


@pytest.fixture
def audited(audited_env: environment.LocalEnvironment) -> environment.LocalEnvironment:
    return audited_env


@dataclasses.dataclass
class Replica:
    identity: str
    plane: processes.ManagedProcess
    lb: processes.ManagedProcess

    def signal(self, sig: int) -> None:
        for proc in (self.plane, self.lb):
            proc.kill(sig)


@dataclasses.dataclass
class Stage:
    env: environment.LocalEnvironment
    cp: kube.ApiClient
    member: kube.ApiClient
    lb: haproxy.HAProxyServer
    layout: haproxy_config.HAProxyLayout
    name: str
    leases: tuple[str, str]
    replicas: dict[str, Replica] = dataclasses.field(default_factory=dict)

    def spawn(self, identity: str, python_env: dict[str, str], directory: pathlib.Path
              ) -> Replica:
        kubeconfig = str(self.env.kubeconfig())
        common = ("--kubeconfig", kubeconfig, *ELECTION, "--leader-elect-identity", identity,
                  "--bind-address", "127.0.0.1", "--healthz-port", "0")
        plane = processes.ManagedProcess(f"plane-{identity}", [
            sys.executable, "-m", "clusterhealth_controlplane", *common,
            "--leader-elect-resource-name", self.leases[0], "--controllers", "execution"],
            directory / f"plane-{identity}.log", env=python_env)
        lb = processes.ManagedProcess(f"lb-{identity}", [
            sys.executable, "-m", "clusterhealth_mci", *common,
            "--leader-elect-resource-name", self.leases[1], "--provider", "haproxy",
            "--haproxy-socket", self.layout.admin_socket,
            "--haproxy-map-dir", self.layout.map_dir, "--haproxy-slots", "4",
            "--haproxy-servers-per-slot", "4", "--haproxy-bind-address", "127.0.0.1",
            "--haproxy-bind-port", str(self.layout.bind_port), "--drain-timeout", "2s",
            "--haproxy-monitor-interval", "1s"],
            directory / f"lb-{identity}.log", env=python_env)
        plane.start()
        lb.start()
        replica = self.replicas[identity] = Replica(identity, plane, lb)
        return replica

    async def holders(self) -> tuple[dict[str, Any], dict[str, Any]]:
        found = []
        for lease in self.leases:
            obj = await cpkit.get_or_none(self.cp, resources.LEASES, lease, "default")
            found.append((obj or {}).get("spec") or {})
        return found[0], found[1]

    async def led_by(self, identity: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        plane, lb = await self.holders()
        if plane.get("holderIdentity") == identity and lb.get("holderIdentity") == identity:
            return plane, lb
        return None

    async def servers(self) -> dict[str, str]:
        """HAProxy's MCI servers with an address: ``address -> mode``."""
        client = runtime.RuntimeClient(self.layout.admin_socket)
        try:
            states = await client.show_servers_state()
        finally:
            await client.close()
        return {s.address: s.mode for s in states if s.address != "0.0.0.0"}

    async def applied(self) -> bool:
        return await cpkit.get_or_none(self.member, resources.CONFIGMAPS, self.name,
                                       "default") is not None


@contextlib.asynccontextmanager
async def stage(env: environment.LocalEnvironment, tmp_path: pathlib.Path
                ) -> AsyncIterator[Stage]:
    name = f"fence-{uuid.uuid4().hex[:6]}"
    layout = haproxy_config.HAProxyLayout(
        bind_address="127.0.0.1", bind_port=haproxy.free_port(),
        admin_socket=str(tmp_path / "admin.sock"), map_dir=str(tmp_path / "maps"),
        slots=4, servers_per_slot=4)
    haproxy_config.write_map_files(layout)
    lb = haproxy.HAProxyServer(haproxy_config.render(layout), tmp_path)
    await asyncio.to_thread(lb.start)
    async with env.client() as cp, env.client(MEMBER) as member:
        made = Stage(env, cp, member, lb, layout, name, (f"{name}-plane", f"{name}-lb"))
        try:
            yield made
        finally:
            for replica in made.replicas.values():
                replica.signal(signal.SIGCONT)
                await asyncio.gather(replica.plane.stop(), replica.lb.stop())
            await cleanup(made)
            await asyncio.to_thread(lb.stop)


async def cleanup(made: Stage) -> None:
    namespace = vocabulary.execution_namespace(MEMBER)
    with contextlib.suppress(errors.NotFound):
        await made.cp.patch(resources.WORKS, made.name, {"metadata": {"finalizers": None}},
                            namespace=namespace)
    await made.cp.delete(resources.WORKS, made.name, namespace=namespace, missing_ok=True)
    await made.cp.delete(resources.MULTI_CLUSTER_INGRESSES, made.name, namespace="default",
                         missing_ok=True)
    with contextlib.suppress(errors.NotFound):  # the controller is gone: its finalizer too
        await made.cp.patch(resources.MULTI_CLUSTER_INGRESSES, made.name,
                            {"metadata": {"finalizers": None}}, namespace="default")
    for resource in (resources.CONFIGMAPS, resources.SERVICES, resources.ENDPOINT_SLICES):
        await made.member.delete(resource, made.name, namespace="default", missing_ok=True)
    for lease in made.leases:
        await made.cp.delete(resources.LEASES, lease, namespace="default", missing_ok=True)


async def create_world(made: Stage) -> None:
    """A Work for the member, and an MCI over a Service with one endpoint there."""
    with contextlib.suppress(errors.Conflict):
        await made.cp.create(resources.NAMESPACES, {"metadata": {
            "name": vocabulary.execution_namespace(MEMBER)}})
    await made.cp.create(resources.WORKS, {
        "apiVersion": resources.WORKS.api_version, "kind": "Work",
        "metadata": {"name": made.name, "namespace": vocabulary.execution_namespace(MEMBER)},
        "spec": {"workload": {"manifests": [{
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": made.name, "namespace": "default"}, "data": {"a": "1"}}]}}})
    await made.member.create(resources.SERVICES, {
        "metadata": {"name": made.name, "namespace": "default"},
        "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}})
    await made.member.create(resources.ENDPOINT_SLICES, {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": made.name, "namespace": "default",
                     "labels": {"kubernetes.io/service-name": made.name}},
        "addressType": "IPv4", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
        "endpoints": [{"addresses": [ENDPOINT], "conditions": {"ready": True}}]})
    await made.cp.create(resources.MULTI_CLUSTER_INGRESSES, {
        "apiVersion": resources.MULTI_CLUSTER_INGRESSES.api_version,
        "kind": "MultiClusterIngress", "metadata": {"name": made.name, "namespace": "default"},
        "spec": {"rules": [{"host": f"{made.name}.example", "http": {"paths": [{
            "path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": made.name, "port": {"number": 80}}}}]}}]}})


def _time(value: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))


def member_writes(env: environment.LocalEnvironment, since: datetime.datetime,
                  until: datetime.datetime) -> list[str]:
    """Writes by the members' user the member received in ``[since, until)``."""
    found = []
    for event in env.audit_events(MEMBER):
        if event.get("stage") != "ResponseComplete" or event["verb"] not in WRITE_VERBS:
            continue
        if event["user"]["username"] != MEMBERS_USER:
            continue
        received = environment.audit_time(event)
        if since <= received < until:
            ref = event.get("objectRef") or {}
            found.append(f"{event['verb']} {ref.get('resource')}/{ref.get('name')} at "
                         f"{event['requestReceivedTimestamp']} ({event.get('userAgent')})")
    return found


async def test_a_paused_former_leader_writes_nothing_to_members_or_haproxy(
        audited: environment.LocalEnvironment, python_env: dict[str, str],
        tmp_path: pathlib.Path) -> None:
    async with stage(audited, tmp_path) as made:
        a = made.spawn("replica-a", python_env, tmp_path)
        await testkit.eventually(lambda: made.led_by(a.identity), timeout=60,
                               what="replica A leading both Leases")
        b = made.spawn("replica-b", python_env, tmp_path)
        await create_world(made)
        await testkit.eventually(made.applied, what="the Work applied by A")

        async def serving() -> bool:
            return (await made.servers()).get(ENDPOINT) == "ready"
        await testkit.eventually(serving, what="the endpoint served by HAProxy")
        await asyncio.sleep(2.0)  # B is up and standing by (its informers synced)

        a.signal(signal.SIGSTOP)
        plane_b, lb_b = await testkit.eventually(lambda: made.led_by(b.identity), timeout=30,
                                               what="replica B taking both Leases over")
        await asyncio.sleep(1.0)  # B's terms resync (nothing to change)
        b.signal(signal.SIGKILL)
        await asyncio.gather(b.plane.stop(), b.lb.stop())
        dead = datetime.datetime.now(datetime.UTC)

        # the world changes while nobody leads; A's member watch keeps the event for it
        await made.member.delete(resources.CONFIGMAPS, made.name, namespace="default")
        await made.lb.restart_async()  # HAProxy forgets every runtime change
        before = await made.servers()
        assert ENDPOINT not in before, before

        a.signal(signal.SIGCONT)
        snapshots: list[tuple[datetime.datetime, dict[str, str]]] = []
        started = time.monotonic()
        while (led := await made.led_by(a.identity)) is None:
            snapshots.append((datetime.datetime.now(datetime.UTC), await made.servers()))
            assert time.monotonic() - started < 60, "A never led again"
            await asyncio.sleep(0.1)
        plane_a, lb_a = led
        plane_term, lb_term = _time(plane_a["acquireTime"]), _time(lb_a["acquireTime"])
        assert plane_term > _time(plane_b["acquireTime"]) and lb_term > _time(lb_b["acquireTime"])

        # the new terms do what the old ones were refused: the writes were pending
        await testkit.eventually(made.applied, what="the object put back by A's new term")
        await testkit.eventually(serving, what="HAProxy restored by A's new term")

        late = member_writes(audited, dead, plane_term)
        assert late == [], late
        changed = [(at, seen) for at, seen in snapshots if at < lb_term and seen != before]
        assert changed == [], changed
        assert len(snapshots) >= 10  # HAProxy was watched through A's whole comeback
        assert member_writes(audited, plane_term, datetime.datetime.now(datetime.UTC))
