"""Errors the user must fix, end to end: the MCI controller process in front of real HAProxy.

The controller runs as the component runs (``python -m clusterhealth_mci``,
``--provider haproxy``) against the real control plane and members; its
backends are real HTTP servers in a network namespace of their own
(Kubernetes refuses loopback endpoint addresses).  For each case the MCI
gets ``LoadBalancerReady=False`` with the reason and one Warning Event in its
namespace, HAProxy does not serve the broken MCI, and the controller does
not reconcile it again while nothing changes (its own ``/metrics`` say so).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import pathlib
import shutil
import sys
import tempfile
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import mcikit as k
import pytest
from prometheus_client import parser as prometheus_parser

import testkit
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment, haproxy, httpload, netns, processes
from clusterhealth_mci import controller
from clusterhealth_mci.providers.haproxy import config as haproxy_config

MCI = resources.MULTI_CLUSTER_INGRESSES
ROOT = pathlib.Path(__file__).resolve().parents[2]
PORTS = (8080, 8081)
SERVERS_PER_SLOT = 2


@dataclasses.dataclass
class Stack:
    lb: haproxy.HAProxyServer
    layout: haproxy_config.HAProxyLayout
    host: netns.TestHost
    metrics_port: int
    namespace: str

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """The controller process's samples: (name, sorted labels) -> value."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as answer:
            text = answer.read().decode()
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for family in prometheus_parser.text_string_to_metric_families(text)
                for s in family.samples}

    def reconciles(self, result: str) -> float:
        return self.metrics().get(("clusterhealth_controller_reconcile_total", (
            ("controller", "mci"), ("result", result))), 0.0)

    async def get(self, host: str, path: str = "/") -> httpload.Response:
        return await httpload.get(self.layout.bind_port, host, path)


@pytest.fixture(scope="module")
async def stack(env: environment.LocalEnvironment) -> AsyncIterator[Stack]:
    python_env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        str(ROOT / p) for p in ("core", "agent", "remedy", "mci-provider", "controlplane"))}
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="mci-err-", dir="/tmp"))  # short socket path
    layout = haproxy_config.HAProxyLayout(
        bind_address="127.0.0.1", bind_port=haproxy.free_port(),
        admin_socket=str(workdir / "admin.sock"), map_dir=str(workdir / "maps"),
        slots=4, servers_per_slot=SERVERS_PER_SLOT)
    haproxy_config.write_map_files(layout)
    lb = haproxy.HAProxyServer(haproxy_config.render(layout), workdir)
    await asyncio.to_thread(lb.start)
    host = netns.TestHost(f"err-{workdir.name[-6:]}", 203).create()
    procs = []
    for port in PORTS:
        backend = processes.ManagedProcess(
            f"backend-{port}", host.argv([sys.executable, "-m", "clusterhealth_localenv.httpload",
                                          "--name", f"b{port}", "--bind", host.address,
                                          "--port", str(port)]),
            workdir / f"backend-{port}.log", env=python_env)
        backend.start()
        procs.append(backend)
    for port in PORTS:
        await k.eventually(lambda p=port: k.listening(host.address, p), timeout=10)
    metrics_port = haproxy.free_port()
    mci = processes.ManagedProcess("clusterhealth_mci", [
        sys.executable, "-m", "clusterhealth_mci", "--kubeconfig", str(env.kubeconfig()),
        "--leader-elect", "false", "--provider", "haproxy",
        "--haproxy-socket", layout.admin_socket, "--haproxy-map-dir", layout.map_dir,
        "--haproxy-slots", str(layout.slots),
        "--haproxy-servers-per-slot", str(SERVERS_PER_SLOT),
        "--haproxy-bind-address", "127.0.0.1", "--haproxy-bind-port", str(layout.bind_port),
        "--haproxy-monitor-interval", "1s", "--drain-timeout", "2s",
        "--resync-period", "1h", "--bind-address", "127.0.0.1",
        "--healthz-port", str(metrics_port)], workdir / "mci.log", env=python_env)
    mci.start()
    procs.append(mci)
    async with env.client() as cp:
        members = {name: env.client(name) for name in env.members}
        try:
            namespace = await k.make_namespace(cp, *members.values(), prefix="mci-err")
        finally:
            for api in members.values():
                await api.close()
    made = Stack(lb, layout, host, metrics_port, namespace)
    await k.eventually(lambda: _serves_metrics(made), timeout=30)
    try:
        yield made
    finally:
        await asyncio.gather(*(proc.stop() for proc in procs))
        host.destroy()
        await asyncio.to_thread(lb.stop)
        shutil.rmtree(workdir, ignore_errors=True)


async def _serves_metrics(stack: Stack) -> bool:
    try:
        samples = await asyncio.to_thread(stack.metrics)
    except OSError:
        return False
    return bool(samples)


async def _reason(cp: kube.ApiClient, name: str, namespace: str, reason: str
                  ) -> dict[str, Any] | None:
    found = await k.condition(cp, name, namespace=namespace)
    return found if found is not None and found["reason"] == reason else None


async def _reported_once(stack: Stack, cp: kube.ApiClient, name: str, reason: str,
                         ) -> dict[str, Any]:
    """The False condition, one Warning Event in the MCI's namespace, and no retry loop."""
    ns = stack.namespace
    found = await k.eventually(lambda: _reason(cp, name, ns, reason))
    assert found["status"] == "False"
    events = await k.eventually(lambda: k.events_of(cp, name, ns, reason))
    assert [(e["type"], e["involvedObject"]["namespace"]) for e in events] == [("Warning", ns)]
    await asyncio.sleep(0.5)  # the status write brings the key back once
    before = await asyncio.to_thread(lambda: (stack.reconciles("error"),
                                              stack.reconciles("terminal")))
    await asyncio.sleep(3.0)  # a retry loop would reconcile several times meanwhile
    after = await asyncio.to_thread(lambda: (stack.reconciles("error"),
                                             stack.reconciles("terminal")))
    assert after == before
    events = await k.events_of(cp, name, ns, reason)
    assert len(events) == 1 and events[0].get("count", 1) == 1
    return found


async def _service(members: dict[str, kube.ApiClient], stack: Stack, name: str,
                   ports: tuple[int, ...]) -> None:
    await k.make_service(members["member1"], name,
                         [(stack.host.address, port) for port in ports],
                         namespace=stack.namespace)


async def _delete(cp: kube.ApiClient, stack: Stack, *names: str) -> None:
    for name in names:
        await cp.delete(MCI, name, namespace=stack.namespace, missing_ok=True)
    for name in names:
        await k.eventually(lambda n=name: k.gone(cp, n, stack.namespace))


async def test_port_not_found_instead_of_ready_with_503(
        stack: Stack, cp: kube.ApiClient, members: dict[str, kube.ApiClient]) -> None:
    service, name, host = testkit.unique("svc"), testkit.unique("port"), "port.example"
    await _service(members, stack, service, (8080,))
    await cp.create(MCI, k.path_body(name, [k.http_path(service, "/", port="web")], host,
                                     stack.namespace))
    found = await _reported_once(stack, cp, name, controller.PORT_NOT_FOUND)
    assert f"Service {service} has no port named 'web' in member1 (its ports: 80/http)" \
        in found["message"]
    assert (await stack.get(host)).status == 503  # not served, and the status says why

    # The port name fixed in the MCI: served by the real backend.
    await cp.patch(MCI, name, {"spec": {"rules": [{"host": host, "http": {"paths": [
        k.http_path(service, "/", port="http")]}}]}}, namespace=stack.namespace)
    ready = await k.eventually(lambda: _reason(cp, name, stack.namespace, "Programmed"))
    assert ready["status"] == "True"
    answer = await stack.get(host)
    assert (answer.status, answer.backend) == (200, "b8080")
    await _delete(cp, stack, name)


async def test_invalid_paths(stack: Stack, cp: kube.ApiClient,
                             members: dict[str, kube.ApiClient]) -> None:
    service, glob, spaced = testkit.unique("svc"), testkit.unique("glob"), testkit.unique("space")
    await _service(members, stack, service, (8080,))
    await cp.create(MCI, k.path_body(glob, [
        k.http_path(service, "/static/*", "ImplementationSpecific")], "glob.example",
        stack.namespace))
    found = await _reported_once(stack, cp, glob, controller.INVALID_SPEC)
    assert "looks like a regular expression or a glob" in found["message"]
    await cp.create(MCI, k.path_body(spaced, [k.http_path(service, "/a b")], "space.example",
                                     stack.namespace))
    found = await _reported_once(stack, cp, spaced, controller.INVALID_SPEC)
    assert "printable ASCII without spaces" in found["message"]
    prefixes = stack.lb.query(f"show map {stack.layout.prefix_map}")
    assert "glob.example" not in prefixes and "space.example" not in prefixes
    await _delete(cp, stack, glob, spaced)


async def test_route_conflict_names_the_holder(
        stack: Stack, cp: kube.ApiClient, members: dict[str, kube.ApiClient]) -> None:
    first, second = testkit.unique("one"), testkit.unique("two")
    await _service(members, stack, first, (8080,))
    await _service(members, stack, second, (8081,))
    suffix = testkit.unique("x")
    older, younger, host = f"a-{suffix}", f"b-{suffix}", "contested.example"
    await cp.create(MCI, k.path_body(older, [k.http_path(first, "/")], host, stack.namespace))
    await k.eventually(lambda: _reason(cp, older, stack.namespace, "Programmed"))
    await cp.create(MCI, k.path_body(younger, [k.http_path(second, "/")], host,
                                     stack.namespace))
    found = await _reported_once(stack, cp, younger, controller.ROUTE_CONFLICT)
    assert f"already served for MCI {stack.namespace}/{older}" in found["message"]
    for _ in range(10):  # the older MCI keeps serving
        assert (await stack.get(host, "/x")).backend == "b8080"
    # The older one deleted: the younger one gets the route.
    await _delete(cp, stack, older)
    await k.eventually(lambda: _reason(cp, younger, stack.namespace, "Programmed"))

    async def moved() -> bool:
        return (await stack.get(host, "/x")).backend == "b8081"
    await k.eventually(moved)
    await _delete(cp, stack, younger)


async def test_capacity_exceeded_names_the_flag(
        stack: Stack, cp: kube.ApiClient, members: dict[str, kube.ApiClient]) -> None:
    service, name, host = testkit.unique("svc"), testkit.unique("big"), "big.example"
    # One more endpoint than a slot holds (the third address need not answer: it is refused
    # before HAProxy is touched).
    await k.make_service(members["member1"], service,
                         [(stack.host.address, 8080), (stack.host.address, 8081),
                          (stack.host.address, 8082)], namespace=stack.namespace)
    await cp.create(MCI, k.path_body(name, [k.http_path(service, "/")], host, stack.namespace))
    found = await _reported_once(stack, cp, name, controller.CAPACITY_EXCEEDED)
    assert f"has 3 endpoints, a slot holds {SERVERS_PER_SLOT} servers" in found["message"]
    assert "--haproxy-servers-per-slot" in found["message"]
    assert (await stack.get(host)).status == 503
    # Scaled down to what a slot holds: served.
    await members["member1"].delete(resources.ENDPOINT_SLICES, f"{service}-2",
                                    namespace=stack.namespace)
    await k.eventually(lambda: _reason(cp, name, stack.namespace, "Programmed"))

    async def served() -> bool:
        return (await stack.get(host)).status == 200
    await k.eventually(served)
    await _delete(cp, stack, name)
