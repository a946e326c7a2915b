"""End to end: agent-style condition -> Remedy controller -> MCI controller -> real HAProxy.

Two member clusters each run two real HTTP backends registered as the
Service's endpoints (EndpointSlices) in that member — each member's backends
live in a network namespace of their own (Kubernetes refuses loopback
endpoint addresses); HAProxy, driven through
its runtime socket by the MCI controller process, is in front; a steady
stream of client requests (some slow, so requests are in flight) runs
through it the whole time.

Blocking and unblocking also runs against Karmada's API: its MCI CRD has
``trafficBlockClusters`` but no conditions in the status, so the provider's
``LoadBalancerReady``/``FailOpen`` are left out there (and said once).
"""

from __future__ import annotations

import asyncio
import dataclasses
import pathlib
import sys
import time
from collections.abc import AsyncIterator

import mcikit as k
import pytest

import testkit
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import conditions, environment, haproxy, httpload, netns, processes
from clusterhealth_mci.providers.haproxy import config as haproxy_config

DNS = "ServiceDomainNameResolutionReady"
HOST = "shop.example"


BACKEND_PORTS = (8080, 8081)


@dataclasses.dataclass
class Stack:
    lb: haproxy.HAProxyServer
    layout: haproxy_config.HAProxyLayout
    hosts: dict[str, netns.TestHost]
    service: str
    mci: str
    remedy: str
    processes: list[processes.ManagedProcess]

    def names(self, cluster: str) -> set[str]:
        return {f"{cluster}-{port}" for port in BACKEND_PORTS}

    def log(self, module: str) -> str:
        """What process ``module`` has logged so far."""
        (proc,) = [p for p in self.processes if p.name == module]
        return proc.log_path.read_text(errors="replace")


async def _set_dns(cp: kube.ApiClient, cluster: str, value: str) -> None:
    """As the agent would (Karmada's conditions on the member stay)."""
    await conditions.set_condition(cp, cluster, DNS, value, manager="test-agent",
                                   message=f"DNS {value}", transition="2026-01-01T00:00:00Z")


def _spawn(module: str, args: list[str], log: pathlib.Path, env: dict[str, str]
           ) -> processes.ManagedProcess:
    proc = processes.ManagedProcess(module, [sys.executable, "-m", module, *args], log, env=env)
    proc.start()
    return proc


@pytest.fixture
async def stack(plane: environment.LocalEnvironment, cp: kube.ApiClient,
                members: dict[str, kube.ApiClient], python_env: dict[str, str],
                tmp_path: pathlib.Path) -> AsyncIterator[Stack]:
    layout = haproxy_config.HAProxyLayout(
        bind_address="127.0.0.1", bind_port=haproxy.free_port(),
        admin_socket=str(tmp_path / "admin.sock"), map_dir=str(tmp_path / "maps"),
        slots=8, servers_per_slot=8)
    haproxy_config.write_map_files(layout)
    lb = haproxy.HAProxyServer(haproxy_config.render(layout), tmp_path)
    await asyncio.to_thread(lb.start)
    hosts = {cluster: netns.TestHost(f"{cluster}-{tmp_path.name[-6:]}", index).create()
             for index, cluster in ((201, "member1"), (202, "member2"))}
    procs: list[processes.ManagedProcess] = []
    for cluster, host in hosts.items():
        for port in BACKEND_PORTS:
            backend = processes.ManagedProcess(
                f"backend-{cluster}-{port}",
                host.argv([sys.executable, "-m", "clusterhealth_localenv.httpload",
                           "--name", f"{cluster}-{port}", "--bind", host.address,
                           "--port", str(port)]),
                tmp_path / f"backend-{cluster}-{port}.log", env=python_env)
            backend.start()
            procs.append(backend)
    for host in hosts.values():
        for port in BACKEND_PORTS:
            await k.eventually(lambda h=host, p=port: k.listening(h.address, p), timeout=10)
    service, mci_name = testkit.unique("shop"), testkit.unique("shop")
    remedy = testkit.unique("dns")
    for cluster, host in hosts.items():
        await k.make_service(members[cluster], service,
                             [(host.address, port) for port in BACKEND_PORTS])
    for cluster in hosts:
        await _set_dns(cp, cluster, "True")
    await cp.create(resources.REMEDIES, {
        "apiVersion": resources.REMEDIES.api_version, "kind": "Remedy",
        "metadata": {"name": remedy},
        "spec": {"clusterAffinity": {"clusterNames": ["member1", "member2"]},
                 "decisionMatches": [{"clusterConditionMatch": {
                     "conditionType": DNS, "operator": "Equal", "conditionStatus": "False"}}],
                 "actions": ["TrafficControl"]}})
    kubeconfig = str(plane.kubeconfig())
    procs += [
        _spawn("clusterhealth_remedy", ["--kubeconfig", kubeconfig, "--leader-elect", "false",
                                        "--bind-address", "127.0.0.1", "--healthz-port", "0"],
               tmp_path / "remedy.log", python_env),
        _spawn("clusterhealth_mci", [
            "--kubeconfig", kubeconfig, "--leader-elect", "false", "--provider", "haproxy",
            "--haproxy-socket", layout.admin_socket, "--haproxy-map-dir", layout.map_dir,
            "--haproxy-slots", "8", "--haproxy-servers-per-slot", "8",
            "--haproxy-bind-address", "127.0.0.1", "--haproxy-bind-port", str(layout.bind_port),
            "--drain-timeout", "5s", "--resync-period", "30s",
            "--bind-address", "127.0.0.1", "--healthz-port", "0"],
               tmp_path / "mci.log", python_env),
    ]
    await cp.create(resources.MULTI_CLUSTER_INGRESSES, k.mci_body(mci_name, service, HOST))
    yield Stack(lb, layout, hosts, service, mci_name, remedy, procs)
    await asyncio.gather(*(proc.stop() for proc in procs))
    await cp.delete(resources.MULTI_CLUSTER_INGRESSES, mci_name, namespace="default",
                    missing_ok=True)
    await cp.delete(resources.REMEDIES, remedy, missing_ok=True)
    for cluster, host in hosts.items():
        await _set_dns(cp, cluster, "True")
        await k.delete_service(members[cluster], service)
        await k.set_actions(cp, cluster, [])
        host.destroy()
    await asyncio.to_thread(lb.stop)


async def _status(cp: kube.ApiClient, stack: Stack, key: str) -> object:
    return (await k.mci_status(cp, stack.mci)).get(key)


async def _traffic_reaches(traffic: httpload.Traffic, names: set[str], since: float) -> bool:
    return all(traffic.count(name, since) > 0 for name in names)


@pytest.mark.planes("ours", "karmada")
async def test_block_drain_unblock_without_a_failed_request(
        stack: Stack, plane: environment.LocalEnvironment, cp: kube.ApiClient) -> None:
    await k.eventually(lambda: _status(cp, stack, "loadBalancer"))
    traffic = httpload.Traffic(stack.layout.bind_port, HOST, "/")
    traffic.start()
    try:
        start = time.monotonic()
        everyone = stack.names("member1") | stack.names("member2")
        await k.eventually(lambda: _traffic_reaches(traffic, everyone, start))

        # member1's DNS fails (as the agent reports) -> Remedy -> TrafficControl -> blocked
        await _set_dns(cp, "member1", "False")
        blocked = await k.eventually(lambda: _status(cp, stack, "trafficBlockClusters"))
        assert blocked == ["member1"]
        # after the drain no request reaches member1's backends
        drained_at = time.monotonic() + 0.5
        await asyncio.sleep(1.0)
        await traffic.wait_for(200)
        assert all(traffic.count(name, drained_at) == 0 for name in stack.names("member1"))
        assert all(traffic.count(name, drained_at) > 0 for name in stack.names("member2"))

        # back to healthy -> traffic returns to both
        await _set_dns(cp, "member1", "True")
        async def unblocked() -> bool:
            return await _status(cp, stack, "trafficBlockClusters") is None
        await k.eventually(unblocked)
        back = time.monotonic()
        await k.eventually(lambda: _traffic_reaches(traffic, everyone, back))
    finally:
        await traffic.stop()
    assert traffic.failures == [], traffic.failures[:5]
    assert len(traffic.answers) > 100  # a real stream ran through the whole switch
    mci_status = await k.mci_status(cp, stack.mci)
    mci_log = stack.log("clusterhealth_mci")
    (address,) = mci_status["loadBalancer"]["ingress"]
    if plane.is_karmada:  # Karmada's MCI status has no conditions: said once, not written
        assert "conditions" not in mci_status
        assert mci_log.count(f"{resources.MULTI_CLUSTER_INGRESSES.crd_name} does not declare "
                             "status.conditions on this server") == 1, mci_log[-3000:]
        # its schema requires an error on every port: the address is written without them
        assert address == {"ip": "127.0.0.1"}
        assert mci_log.count("requires error on every status.loadBalancer.ingress.ports "
                             "entry") == 1, mci_log[-3000:]
    else:
        (ready,) = [c for c in mci_status["conditions"] if c["type"] == "LoadBalancerReady"]
        assert ready["status"] == "True"
        assert "does not declare" not in mci_log and "requires error" not in mci_log
        assert address["ports"] == [{"port": stack.layout.bind_port, "protocol": "TCP"}]


async def test_all_blocked_fails_open(stack: Stack, cp: kube.ApiClient) -> None:
    await k.eventually(lambda: _status(cp, stack, "loadBalancer"))
    traffic = httpload.Traffic(stack.layout.bind_port, HOST, "/")
    traffic.start()
    try:
        await _set_dns(cp, "member1", "False")
        await _set_dns(cp, "member2", "False")

        async def both_blocked() -> bool:
            return await _status(cp, stack, "trafficBlockClusters") == ["member1", "member2"]
        await k.eventually(both_blocked)
        conditions = await _status(cp, stack, "conditions")
        assert isinstance(conditions, list)
        fail_open = next(c for c in conditions if c["type"] == "FailOpen")
        assert fail_open["status"] == "True"
        since = time.monotonic()
        everyone = stack.names("member1") | stack.names("member2")
        await k.eventually(lambda: _traffic_reaches(traffic, everyone, since))
    finally:
        await traffic.stop()
    assert traffic.failures == [], traffic.failures[:5]


async def test_haproxy_restart_restored_and_delete_cleans_up(stack: Stack,
                                                             cp: kube.ApiClient) -> None:
    await k.eventually(lambda: _status(cp, stack, "loadBalancer"))
    answer = await httpload.get(stack.layout.bind_port, HOST, "/")
    assert answer.status == 200

    await asyncio.to_thread(stack.lb.restart)  # all runtime state is lost

    async def served() -> bool:
        try:
            return (await httpload.get(stack.layout.bind_port, HOST, "/")).status == 200
        except OSError:
            return False
    await k.eventually(served, timeout=30)

    await cp.delete(resources.MULTI_CLUSTER_INGRESSES, stack.mci, namespace="default")

    async def gone() -> bool:
        listing = await cp.list(resources.MULTI_CLUSTER_INGRESSES, namespace="default")
        return all(i["metadata"]["name"] != stack.mci for i in listing["items"])
    await k.eventually(gone)
    response = await httpload.get(stack.layout.bind_port, HOST, "/")
    assert response.status == 503
    assert HOST not in stack.lb.query(f"show map {stack.layout.prefix_map}")
