"""MultiClusterIngress benchmarks (issue 5): block latency, lost requests, scale.

* Block latency: ``remedyActions`` of member1 written (as the remedy
  controller does) -> every HAProxy server of member1 out of ``ready``
  (draining); unblock -> back to ``ready``.  HAProxy's state is polled through
  its runtime socket every 2 ms.
* Lost requests: 20 block/unblock cycles under a steady stream of requests
  (4 keep-alive clients, every 5th request slow); every failed request counts.
* Scale: 200 MCIs over 20 Clusters: the time from blocking one cluster until
  every MCI's status lists it and every one of its 200 HAProxy servers drains.

Backends run in network namespaces of their own (Kubernetes refuses loopback
endpoint addresses).  Run: ``python -m bench.mci [--trials N] [--markdown PATH]``.
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from bench import report, takeover
from clusterhealth_core import status
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment, haproxy, httpload, netns, processes
from clusterhealth_mci.providers.haproxy import config as haproxy_config
from clusterhealth_mci.providers.haproxy import runtime

SECTION_TITLE = "## MultiClusterIngress provider (issue 5)"
HOST = "bench.example"
PORTS = (8080, 8081)


async def _actions(api: kube.ApiClient, cluster: str, blocked: bool) -> None:
    await status.apply_status(api, resources.CLUSTERS, cluster,
                              {"remedyActions": ["TrafficControl"]} if blocked else {},
                              field_manager="clusterhealth-remedy")


async def _service(api: kube.ApiClient, name: str, address: str) -> None:
    await api.create(resources.SERVICES, {"metadata": {"name": name, "namespace": "default"},
                                          "spec": {"ports": [{"name": "http", "port": 80}]}})
    for port in PORTS:
        await api.create(resources.ENDPOINT_SLICES, {
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{name}-{port}", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": port}],
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}]})


def _mci(name: str, service: str, host: str) -> dict[str, Any]:
    return {"apiVersion": resources.MULTI_CLUSTER_INGRESSES.api_version,
            "kind": "MultiClusterIngress", "metadata": {"name": name, "namespace": "default"},
            "spec": {"rules": [{"host": host, "http": {"paths": [{
                "path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": service, "port": {"number": 80}}}}]}}]}}


async def _modes(client: runtime.RuntimeClient, address: str) -> list[str]:
    return [s.mode for s in await client.show_servers_state() if s.address == address]


async def _until(predicate: Any, timeout: float = 30.0, interval: float = 0.002) -> float:
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(interval)
    return time.monotonic()


class Stack:
    """HAProxy, test hosts with backends, and the MCI controller process."""

    def __init__(self, env: environment.LocalEnvironment, tmp: pathlib.Path, slots: int,
                 servers: int) -> None:
        self.env = env
        self.tmp = tmp
        self.layout = haproxy_config.HAProxyLayout(
            bind_address="127.0.0.1", bind_port=haproxy.free_port(),
            admin_socket=str(tmp / "admin.sock"), map_dir=str(tmp / "maps"),
            slots=slots, servers_per_slot=servers)
        self.lb = haproxy.HAProxyServer(haproxy_config.render(self.layout), tmp)
        self.hosts = {c: netns.TestHost(f"bench-{c}", 210 + i)
                      for i, c in enumerate(env.members)}
        self.procs: list[processes.ManagedProcess] = []

    async def start(self) -> None:
        haproxy_config.write_map_files(self.layout)
        await asyncio.to_thread(self.lb.start)
        for cluster, host in self.hosts.items():
            host.create()
            for port in PORTS:
                proc = processes.ManagedProcess(
                    f"backend-{cluster}-{port}",
                    host.argv([sys.executable, "-m", "clusterhealth_localenv.httpload",
                               "--name", f"{cluster}-{port}", "--bind", host.address,
                               "--port", str(port)]),
                    self.tmp / f"backend-{cluster}-{port}.log", env=takeover.child_env())
                proc.start()
                self.procs.append(proc)
        controller = processes.ManagedProcess("mci", [
            sys.executable, "-m", "clusterhealth_mci", "--kubeconfig",
            str(self.env.kubeconfig()), "--leader-elect", "false", "--provider", "haproxy",
            "--haproxy-socket", self.layout.admin_socket,
            "--haproxy-map-dir", self.layout.map_dir,
            "--haproxy-slots", str(self.layout.slots),
            "--haproxy-servers-per-slot", str(self.layout.servers_per_slot),
            "--haproxy-bind-address", "127.0.0.1",
            "--haproxy-bind-port", str(self.layout.bind_port), "--drain-timeout", "2s",
            "--workers", "4", "--bind-address", "127.0.0.1", "--healthz-port", "0"],
            self.tmp / "mci.log", env=takeover.child_env())
        controller.start()
        self.procs.append(controller)

    async def stop(self) -> None:
        await asyncio.gather(*(p.stop() for p in self.procs))
        for host in self.hosts.values():
            host.destroy()
        await asyncio.to_thread(self.lb.stop)


async def measure_switch(env: environment.LocalEnvironment, tmp: pathlib.Path, trials: int,
                         cycles: int) -> list[report.Figure]:
    stack = Stack(env, tmp, slots=16, servers=16)
    await stack.start()
    client = runtime.RuntimeClient(stack.layout.admin_socket)
    member1 = stack.hosts["member1"].address
    try:
        async with env.client() as cp:
            for cluster, host in stack.hosts.items():
                async with env.client(cluster) as member:
                    await _service(member, "bench-web", host.address)
            await cp.create(resources.MULTI_CLUSTER_INGRESSES, _mci("bench", "bench-web", HOST))

            async def member1_modes(wanted: set[str]) -> bool:
                modes = await _modes(client, member1)
                return bool(modes) and set(modes) <= wanted

            await _until(lambda: member1_modes({"ready"}), timeout=60)
            block: list[float] = []
            unblock: list[float] = []
            for trial in range(trials):
                started = time.monotonic()
                await _actions(cp, "member1", True)
                block.append((await _until(lambda: member1_modes({"drain", "maint"}))
                              - started) * 1000)
                started = time.monotonic()
                await _actions(cp, "member1", False)
                unblock.append((await _until(lambda: member1_modes({"ready"})) - started) * 1000)
                if trial % 10 == 9:
                    takeover.progress(f"block latency {trial + 1}/{trials}")
            traffic = httpload.Traffic(stack.layout.bind_port, HOST, "/")
            traffic.start()
            try:
                await traffic.wait_for(100)
                for cycle in range(cycles):
                    await _actions(cp, "member1", True)
                    await _until(lambda: member1_modes({"drain", "maint"}))
                    await asyncio.sleep(0.5)  # slow requests in flight while draining
                    await _actions(cp, "member1", False)
                    await _until(lambda: member1_modes({"ready"}))
                    await asyncio.sleep(0.5)
                    takeover.progress(f"cycle {cycle + 1}/{cycles}: "
                                      f"{len(traffic.answers)} answers, "
                                      f"{len(traffic.failures)} failures")
            finally:
                await traffic.stop()
            await cp.delete(resources.MULTI_CLUSTER_INGRESSES, "bench", namespace="default")
    finally:
        await client.close()
        await stack.stop()

    def p99(values: list[float]) -> float:
        return sorted(values)[max(0, round(0.99 * len(values)) - 1)]

    return [
        report.Figure(f"block latency: remedyActions written -> HAProxy servers draining "
                      f"(p99 {p99(block):.0f} ms)", tuple(block), "ms", "p99 < 500 ms",
                      "pass" if p99(block) < 500 else "FAIL"),
        report.Figure(f"unblock latency: -> servers ready (p99 {p99(unblock):.0f} ms)",
                      tuple(unblock), "ms", "-", "recorded"),
        report.Figure(f"failed requests during {cycles} block/unblock cycles "
                      f"({len(traffic.answers)} answered)", (float(len(traffic.failures)),),
                      "requests", "0", "pass" if not traffic.failures else "FAIL"),
    ]


async def measure_scale(env: environment.LocalEnvironment, tmp: pathlib.Path, n_mcis: int,
                        n_clusters: int) -> list[report.Figure]:
    """Block one of ``n_clusters`` Clusters under ``n_mcis`` MCIs.

    The Clusters are the members and more Cluster objects sharing the members'
    API servers (alternating), so every Service is located in all of them.
    """
    stack = Stack(env, tmp, slots=max(16, n_mcis + 8), servers=max(8, n_clusters * 2))
    clusters = [f"scale-c{i:02d}" for i in range(n_clusters - len(env.members))]
    async with env.client() as cp:
        for i, name in enumerate(clusters):
            source = await cp.get(resources.CLUSTERS, env.members[i % len(env.members)])
            await cp.create(resources.CLUSTERS, {
                "apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
                "metadata": {"name": name}, "spec": source["spec"]})
        for cluster, host in stack.hosts.items():
            async with env.client(cluster) as member:
                await _service(member, "scale-web", host.address)
        await stack.start()
        client = runtime.RuntimeClient(stack.layout.admin_socket)
        try:
            sem = asyncio.Semaphore(16)

            async def create(i: int) -> None:
                async with sem:
                    await cp.create(resources.MULTI_CLUSTER_INGRESSES,
                                    _mci(f"scale-{i:03d}", "scale-web", f"s{i}.example"))
            await asyncio.gather(*(create(i) for i in range(n_mcis)))
            takeover.progress(f"waiting for {n_mcis} MCIs to be programmed")

            async def programmed() -> bool:
                servers = await client.show_servers_state()
                return sum(1 for s in servers if s.mode == "ready") >= n_mcis * n_clusters * 2
            await _until(programmed, timeout=300, interval=0.5)
            victim = clusters[0]  # shares member1's API server, hence its endpoints' address
            victim_member_address = stack.hosts[env.members[0]].address

            async def all_statuses() -> bool:
                listing = await cp.list(resources.MULTI_CLUSTER_INGRESSES, namespace="default")
                blocked = [i for i in listing["items"] if i["metadata"]["name"].startswith(
                    "scale-") and victim in ((i.get("status") or {}).get(
                        "trafficBlockClusters") or [])]
                return len(blocked) == n_mcis

            async def all_draining() -> bool:
                servers = await client.show_servers_state()
                victims = [s for s in servers if s.address == victim_member_address
                           and s.mode != "ready"]
                return len(victims) >= n_mcis * len(PORTS)  # the victim's own servers

            takeover.progress(f"blocking {victim}")
            started = time.monotonic()
            await _actions(cp, victim, True)
            drained = await _until(all_draining, timeout=120, interval=0.05) - started
            statused = await _until(all_statuses, timeout=120, interval=0.2) - started
        finally:
            await client.close()
            await stack.stop()
            for name in clusters:
                await cp.delete(resources.CLUSTERS, name, missing_ok=True)
    return [
        report.Figure(f"scale: {n_mcis} MCIs over {n_clusters} clusters, one blocked -> all "
                      "its HAProxy servers draining", (drained,), "s", "-", "recorded"),
        report.Figure("scale: ... -> every MCI status lists it", (statused,), "s", "-",
                      "recorded"),
    ]


async def measure(trials: int, cycles: int, n_mcis: int, n_clusters: int
                  ) -> list[report.Figure]:
    with tempfile.TemporaryDirectory(prefix="clusterhealth-bench-") as tmp:
        async with environment.LocalEnvironment(environment.EnvironmentConfig()) as env:
            base = pathlib.Path(tmp)
            (base / "switch").mkdir()
            (base / "scale").mkdir()
            figures = await measure_switch(env, base / "switch", trials, cycles)
            figures += await measure_scale(env, base / "scale", n_mcis, n_clusters)
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table, optionally update docs/benchmarks.md."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench.mci")
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--mcis", type=int, default=200)
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--markdown", type=pathlib.Path, default=None)
    options = parser.parse_args(args)
    figures = asyncio.run(measure(options.trials, options.cycles, options.mcis,
                                  options.clusters))
    print(report.text_table(figures))
    if options.markdown is not None:
        notes = [
            "Block latency is measured from just before the remedyActions write to the moment "
            "HAProxy's runtime API shows every member1 server out of `ready` (2 ms polling); "
            "one MCI, 2 member clusters with 2 backends each, 4 controller workers.",
            "Lost requests: 4 keep-alive clients send requests back to back through HAProxy "
            "(every 5th asks the backend for a 0.3 s response, so requests are in flight when "
            "member1 drains); each cycle blocks member1, waits 0.5 s, unblocks it, waits 0.5 s.",
            "Scale: 20 Cluster objects share the two member API servers (alternating), so "
            "every Service is located in all 20; 200 MCIs with one backend each = 200 slots "
            "x 20 clusters x 2 endpoints = 8,000 HAProxy servers. Single trial.",
        ]
        command = report.command_line("bench.mci", args)
        body = report.section(SECTION_TITLE, figures, notes, command)
        report.write_section(options.markdown, SECTION_TITLE, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
