"""``make demo``: the whole chain, from a DNS failure to failback, under real traffic.

What runs (every component as its own process, ``python -m ...``; this module
imports none of them):

- a control plane and two member clusters on real kube-apiservers and etcd;
  each member runs workloads (its own kube-controller-manager, kube-scheduler
  and kwok's simulated Nodes, :mod:`.workloads`);
- per member a real DNS server (dnsmasq) and a detection agent per Node;
- the Remedy controller with a Remedy ``dns-failure``
  (``ServiceDomainNameResolutionReady`` False -> ``TrafficControl``);
- the control plane's controller manager (every controller, failover timers
  shortened by flags) and its scheduler;
- a Deployment ``web`` propagated 1:2 over member1/member2 (seed 000's
  policy, with failback), a Service ``web`` in each member, and a
  MultiClusterIngress in front, served by a real HAProxy that the MCI
  provider drives;
- each Ready Pod's IP served by a real HTTP server (:mod:`.podservers`), so
  traffic follows the Pods, and a load generator sending requests through
  HAProxy, with a counter line of answers per cluster and failures.

Then the story: phase 1 stops member1's DNS server (detected, remedied,
member1 drained from HAProxy, and back); phase 2 stops member1's API server
(Ready False, taints, eviction, member2 runs 3 Pods; member1 back, stale
objects removed, failback after the window); phase 3 is the summary.
``--follow`` keeps watching afterwards; Ctrl-C stops everything at any point.

``--real-nodes`` (root) tells the DNS story on real Pods instead
(:mod:`.dnsstory`, the story ``tests/install`` asserts): every chart installed
with helm onto clusters whose Nodes run containers (:func:`.fleet.running`, a few
minutes), member1's CoreDNS scaled to 0 and back, the agent DaemonSet's Pods
failing their probe, the MCI provider's HAProxy sidecar draining member1, requests
flowing through that Pod all along.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import functools
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import demoview as view
from clusterhealth_localenv import (
    dns,
    dnsstory,
    environment,
    fleet,
    haproxy,
    httpload,
    podnet,
    podservers,
    processes,
)
from clusterhealth_localenv import workloads as wl

MEMBERS = ("member1", "member2")
NAMESPACE = "demo"
APP = "web"
HOST = "web.demo.example"
POD_PORT = 8080
FAILBACK_ANNOTATION = "clusterhealth.io/failback"
NOT_READY = "cluster.karmada.io/not-ready"
UNREACHABLE = "cluster.karmada.io/unreachable"
TOLERATION_SECONDS = 5
"""The policy's own tolerance of a NoExecute taint before its binding is evicted."""
SOURCE_ROOTS = ("core", "agent", "remedy", "mci-provider", "controlplane")

AGENT_FLAGS = (
    "--detect-period", "1s", "--detect-failure-threshold", "3s",
    "--detect-success-threshold", "3s", "--stale-threshold", "10s",
    "--node-heartbeat-period", "3s", "--report-period", "30s",
    "--leader-elect-lease-duration", "6s", "--leader-elect-renew-deadline", "4s",
    "--leader-elect-retry-period", "1s", "--leader-elect-resource-namespace", "default",
)
CONTROLLER_MANAGER_TIMERS = (
    ("--cluster-status-update-frequency", "1s", "10s"),
    ("--cluster-success-threshold", "3s", "30s"),
    ("--cluster-failure-threshold", "3s", "30s"),
    ("--cluster-monitor-grace-period", "20s", "40s"),
    ("--cluster-probe-timeout", "1s", "5s"),
    ("--failover-eviction-timeout", "5s", "5m"),
    ("--graceful-eviction-timeout", "60s", "10m"),
    ("--failback-stabilization-window", "15s", "5m"),
)
"""(flag, the demo's value, the default): the failover timers, shortened so the chain
fits in a demo (``docs/failover.md`` explains each)."""
MCI_FLAGS = ("--drain-timeout", "30s", "--resync-period", "30s",
             "--haproxy-monitor-interval", "1s")
HAPROXY_SLOTS = 4
HAPROXY_SERVERS_PER_SLOT = 8
POD_GRACE = 30.0
"""How long a gone Pod's server keeps answering: Kubernetes' default
``terminationGracePeriodSeconds``, time for the load balancer to learn that the endpoint
went (after a member's API server restart the MCI provider's watch of that member
reconnects at its backoff, up to 30 s)."""
WAIT = 120.0
"""The longest any step of the story may take before the demo gives up."""
MEMBER_BACK_WAIT = 240.0
"""A restarted member's kwok (its kubelets) comes back at client-go's watch backoff."""


def _stamp() -> str:
    return datetime.datetime.now().strftime("%H:%M:%S")


def say(text: str) -> None:
    """Print one line of the demo's story."""
    print(f"[{_stamp()}] {text}", flush=True)


class DemoError(RuntimeError):
    """A step of the story did not happen in time, or a component died; says which."""


@dataclasses.dataclass
class Control:
    """Shared between the signal handler and the story."""

    stopping: bool = False
    """Teardown has begun: a signal no longer interrupts anything."""
    following: bool = False
    """The phases are over and the demo only watches (``--follow``)."""


def child_env() -> dict[str, str]:
    """The environment of the component processes: the repository's sources importable."""
    repo = pathlib.Path(__file__).resolve().parents[2]
    roots = os.pathsep.join(str(repo / root) for root in SOURCE_ROOTS)
    return {**os.environ, "PYTHONPATH": roots}


def controller_manager_flags() -> list[str]:
    """The demo's failover timers as command-line flags."""
    return [item for flag, value, _ in CONTROLLER_MANAGER_TIMERS for item in (flag, value)]


def policy() -> dict[str, Any]:
    """Seed 000's policy (Divided 1:2, tolerating failures briefly), opted in to failback."""
    return {
        "apiVersion": resources.PROPAGATION_POLICIES.api_version, "kind": "PropagationPolicy",
        "metadata": {"name": f"{APP}-propagation", "namespace": NAMESPACE,
                     "annotations": {FAILBACK_ANNOTATION: "true"}},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": APP}],
            "placement": {
                "clusterAffinity": {"clusterNames": list(MEMBERS)},
                "clusterTolerations": [
                    {"key": key, "operator": "Exists", "effect": "NoExecute",
                     "tolerationSeconds": TOLERATION_SECONDS}
                    for key in (NOT_READY, UNREACHABLE)],
                "replicaScheduling": {
                    "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                    "weightPreference": {"staticWeightList": [
                        {"targetCluster": {"clusterNames": ["member1"]}, "weight": 1},
                        {"targetCluster": {"clusterNames": ["member2"]}, "weight": 2}]}}}}}


def deployment() -> dict[str, Any]:
    """Three replicas of the app (kwok runs them; :mod:`.podservers` answers for them)."""
    labels = {"app": APP}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": APP, "namespace": NAMESPACE},
        "spec": {"replicas": 3, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                     {"name": APP, "image": "registry.k8s.io/pause:3.10",
                      "ports": [{"name": "http", "containerPort": POD_PORT}],
                      "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}}


def service() -> dict[str, Any]:
    """The app's Service, created in each member (its EndpointSlices list the Pods)."""
    return {"metadata": {"name": APP, "namespace": NAMESPACE},
            "spec": {"selector": {"app": APP}, "ports": [
                {"name": "http", "port": 80, "targetPort": POD_PORT, "protocol": "TCP"}]}}


def multi_cluster_ingress() -> dict[str, Any]:
    """``web.demo.example/`` -> Service ``web`` port 80, in every member running it."""
    return {"apiVersion": resources.MULTI_CLUSTER_INGRESSES.api_version,
            "kind": "MultiClusterIngress", "metadata": {"name": APP, "namespace": NAMESPACE},
            "spec": {"rules": [{"host": HOST, "http": {"paths": [{
                "path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": APP, "port": {"number": 80}}}}]}}]}}


REPLICA_SETS = resources.Resource("apps", "v1", "replicasets", "ReplicaSet", namespaced=True)

DEMO_REMEDY = {
    "apiVersion": resources.REMEDIES.api_version, "kind": "Remedy",
    "metadata": {"name": "dns-failure"},
    "spec": {"decisionMatches": [{"clusterConditionMatch": {
        "conditionType": view.DNS_CONDITION, "operator": "Equal", "conditionStatus": "False"}}],
        "actions": ["TrafficControl"]},
}


async def get_or_none(api: kube.ApiClient, resource: resources.Resource, name: str,
                      namespace: str | None = None) -> dict[str, Any] | None:
    """The object, or None when it does not exist."""
    try:
        return await api.get(resource, name, namespace=namespace)
    except errors.NotFound:
        return None


class Demo:
    """Everything the demo started, and the story told with it."""

    def __init__(self, env: environment.LocalEnvironment, network: podnet.PodNetwork,
                 args: argparse.Namespace, stack: contextlib.AsyncExitStack) -> None:
        self.env = env
        self.network = network
        self.args = args
        self.stack = stack
        self.logs = env.workdir / "logs"
        self.components: list[processes.ManagedProcess] = []
        self.dns: dict[str, dns.DnsServer] = {}
        self.lb: haproxy.HAProxyServer | None = None
        self.lb_port = 0
        self.traffic: httpload.Traffic | None = None
        self.pod_servers: dict[str, podservers.PodServers] = {}
        self.phases: list[view.Phase] = []
        self.pod_ranges: dict[str, str] = {}
        self._cp: kube.ApiClient | None = None
        self._members: dict[str, kube.ApiClient] = {}
        self._counted = (0, 0)
        self._phase_from: dict[int, tuple[int, int]] = {}
        self._tasks: list[asyncio.Task[None]] = []

    # --- plumbing ----------------------------------------------------------------

    @property
    def cp(self) -> kube.ApiClient:
        """The control plane's client."""
        assert self._cp is not None
        return self._cp

    def now(self) -> float:
        """Monotonic seconds."""
        return time.monotonic()

    def spawn(self, name: str, module: str, args: Sequence[str]) -> processes.ManagedProcess:
        """Start a component process; it is stopped when the demo ends."""
        proc = processes.ManagedProcess(name, [sys.executable, "-m", module, *args],
                                        self.logs / f"{name}.log", env=child_env())
        self.stack.push_async_callback(proc.stop)
        proc.start()
        self.components.append(proc)
        return proc

    def check_components(self) -> None:
        """A component that died ends the demo, quoting its log."""
        for proc in self.components:
            if not proc.running():
                raise DemoError(f"{proc.name} exited ({proc.exit_code()}); its log "
                                f"{proc.log_path} ends:\n{proc.log_tail(15)}")

    async def wait(self, what: str, check: Callable[[], Awaitable[Any]],
                   timeout: float = WAIT) -> Any:
        """Poll ``check`` until it returns something truthy (API errors count as "not yet")."""
        deadline = self.now() + timeout
        while True:
            self.check_components()
            with contextlib.suppress(errors.KubeError, OSError, TimeoutError):
                result = await check()
                if result:
                    return result
            if self.now() > deadline:
                raise DemoError(f"{what}: not within {timeout:.0f} s (logs: {self.logs})")
            await asyncio.sleep(0.25)

    async def cluster(self, name: str) -> dict[str, Any]:
        """A Cluster of the control plane."""
        return await self.cp.get(resources.CLUSTERS, name)

    async def member_deployment(self, member: str) -> dict[str, Any] | None:
        """The app's Deployment in a member (None: absent)."""
        return await get_or_none(self._members[member], resources.DEPLOYMENTS, APP, NAMESPACE)

    async def settled(self, member: str) -> int | None:
        """Replicas the member runs, all available (None: no Deployment; -1: not settled)."""
        return view.deployment_settled(await self.member_deployment(member))

    async def haproxy_rows(self) -> list[dict[str, str]]:
        """HAProxy's ``show stat`` rows."""
        assert self.lb is not None
        return view.parse_stat(await asyncio.to_thread(self.lb.query, "show stat"))

    async def haproxy_states(self) -> dict[str, Counter[str]]:
        """Per member, its Pods' HAProxy servers by state."""
        return view.servers_by_cluster(await self.haproxy_rows(), self.pod_ranges)

    async def mci_blocked(self) -> list[str]:
        """The MCI's ``trafficBlockClusters``."""
        obj = await self.cp.get(resources.MULTI_CLUSTER_INGRESSES, APP, namespace=NAMESPACE)
        return list((obj.get("status") or {}).get("trafficBlockClusters") or [])

    def answered_since(self, cluster: str, since: float) -> int:
        """Answers from ``cluster`` to requests sent after ``since``."""
        assert self.traffic is not None
        count = 0
        for sent, backend in reversed(self.traffic.answers):
            if sent < since - 60.0:  # answers arrive in order of completion, within 60 s
                break
            if sent >= since and view.cluster_of_backend(backend) == cluster:
                count += 1
        return count

    async def diagnose(self) -> None:
        """When a step did not happen: the app's objects in each member, and its binding."""
        say("what the members hold of the app now:")
        for member, api in self._members.items():
            try:
                dep = await self.member_deployment(member)
                sets = await api.list(REPLICA_SETS, namespace=NAMESPACE)
                pods = await api.list(resources.PODS, namespace=NAMESPACE)
            except (errors.KubeError, OSError) as exc:
                say(f"  {member}: {exc}")
                continue
            if dep is not None:
                say(f"  {member}: Deployment uid {dep['metadata']['uid'][:8]} replicas "
                    f"{dep['spec'].get('replicas')} status {dep.get('status')}")
            for item in sets["items"]:
                owners = [o["uid"][:8] for o in item["metadata"].get("ownerReferences") or []]
                say(f"  {member}: ReplicaSet {item['metadata']['name']} owners {owners} "
                    f"replicas {item['spec'].get('replicas')} deleting "
                    f"{item['metadata'].get('deletionTimestamp')}")
            for item in pods["items"]:
                say(f"  {member}: Pod {item['metadata']['name']} {item['status'].get('phase')} "
                    f"{item['status'].get('podIP')} deleting "
                    f"{item['metadata'].get('deletionTimestamp')}")
        with contextlib.suppress(errors.KubeError, OSError):
            rb = await self.cp.get(resources.RESOURCE_BINDINGS, f"{APP}-deployment",
                                   namespace=NAMESPACE)
            say(f"  binding: clusters {rb['spec'].get('clusters')} tasks "
                f"{rb['spec'].get('gracefulEvictionTasks')}")

    # --- setting up ----------------------------------------------------------------

    async def setup(self) -> None:
        """Start everything the story needs and wait until traffic flows to both members."""
        env = self.env
        self._cp = await self.stack.enter_async_context(env.client())
        for member in MEMBERS:
            self._members[member] = await self.stack.enter_async_context(env.client(member))
            self.pod_ranges[member] = env.workloads[member].pod_cidr
        say("started:")
        for name, server in env.servers.items():
            say(f"  {name:<14} kube-apiserver {server.url}   kubeconfig {server.kubeconfig}")
        for member, runner in env.workloads.items():
            say(f"  {member}: kube-controller-manager, kube-scheduler, kwok Nodes "
                f"{', '.join(runner.node_names)}; Pod IPs from {runner.pod_cidr}")
        say(f"  the Pod ranges are local in network namespace {self.network.namespace}, "
            f"routed from this machine only (EndpointSlices refuse loopback Pod IPs)")
        await self.start_detection()
        await self.start_control_plane()
        await self.start_load_balancer()
        await self.deploy_app()
        self.start_traffic()

    async def start_detection(self) -> None:
        """Per member a dnsmasq and an agent per Node; the Remedy controller and its Remedy."""
        for member in MEMBERS:
            server = dns.DnsServer("127.0.0.1", records={
                "kubernetes.default.svc.cluster.local": "198.18.0.1"},
                log_dir=self.logs / f"{member}-dns")
            self.stack.push_async_callback(server.stop_async)
            await server.start_async()
            self.dns[member] = server
            host, port = server.address
            nodes = self.env.workloads[member].node_names
            for node in nodes:
                self.spawn(f"agent-{node}", "clusterhealth_agent", [
                    "--kubeconfig", str(self.env.kubeconfig(member)),
                    "--karmada-kubeconfig", str(self.env.kubeconfig()),
                    "--cluster-name", member, "--host-name", node,
                    "--nameserver", f"{host}:{port}", "--bind-address", "127.0.0.1",
                    "--healthz-port", "0", *AGENT_FLAGS])
            say(f"  {member}: dnsmasq at {host}:{port}; a detection agent on each Node "
                f"({', '.join(nodes)}), detecting every 1 s, agreeing after 3 s")
        self.spawn("remedy-controller", "clusterhealth_remedy", [
            "--kubeconfig", str(self.env.kubeconfig()), "--leader-elect", "false",
            "--bind-address", "127.0.0.1", "--healthz-port", "0"])
        await self.cp.create(resources.REMEDIES, DEMO_REMEDY)
        say("  Remedy dns-failure: ServiceDomainNameResolutionReady Equal False -> "
            "TrafficControl, on every cluster (Remedy controller running)")

    async def start_control_plane(self) -> None:
        """The controller manager with every controller and shortened timers; the scheduler."""
        kubeconfig = str(self.env.kubeconfig())
        self.spawn("controller-manager", "clusterhealth_controlplane", [
            "--kubeconfig", kubeconfig, "--leader-elect", "false",
            "--bind-address", "127.0.0.1", "--healthz-port", "0",
            *controller_manager_flags()])
        self.spawn("scheduler", "clusterhealth_controlplane.scheduler", [
            "--kubeconfig", kubeconfig, "--leader-elect", "false",
            "--bind-address", "127.0.0.1", "--healthz-port", "0"])
        say("  control plane: python -m clusterhealth_controlplane (every controller) and "
            "its scheduler; failover timers SHORTENED for the demo:")
        for flag, value, default in CONTROLLER_MANAGER_TIMERS:
            say(f"      {flag} {value:<5} (default {default})")
        say(f"      and the policy tolerates not-ready/unreachable NoExecute for "
            f"{TOLERATION_SECONDS} s (the webhook's default: 300 s)")

        async def ready() -> bool:
            for member in MEMBERS:
                cluster = await self.cluster(member)
                if (view.condition_status(cluster, "Ready") != "True"
                        or (cluster.get("spec") or {}).get("taints")):
                    return False
            return True
        await self.wait("both members Ready and untainted", ready)
        say("  both members Ready (the controller manager probes their API servers)")

    async def start_load_balancer(self) -> None:
        """HAProxy with the provider's layout, and the MCI provider driving it."""
        directory = self.env.workdir / "haproxy"
        self.lb_port = haproxy.free_port()
        layout = [
            "--haproxy-socket", str(directory / "admin.sock"),
            "--haproxy-slots", str(HAPROXY_SLOTS),
            "--haproxy-servers-per-slot", str(HAPROXY_SERVERS_PER_SLOT),
            "--haproxy-map-dir", str(directory / "maps"),
            "--haproxy-bind-address", "127.0.0.1", "--haproxy-bind-port", str(self.lb_port)]
        config = directory / "haproxy.cfg"
        rendered = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "clusterhealth_mci.providers.haproxy", *layout,
             "--output", str(config)],
            env=child_env(), capture_output=True, text=True, check=False, timeout=60)
        if rendered.returncode != 0:
            raise DemoError(f"rendering HAProxy's configuration failed: {rendered.stderr}")
        self.lb = haproxy.HAProxyServer(config.read_text(), self.logs, name="haproxy")
        self.stack.push_async_callback(self.lb.stop_async)
        await self.lb.start_async()
        self.spawn("mci-provider", "clusterhealth_mci", [
            "--kubeconfig", str(self.env.kubeconfig()), "--leader-elect", "false",
            "--provider", "haproxy", *layout, *MCI_FLAGS,
            "--bind-address", "127.0.0.1", "--healthz-port", "0"])
        say(f"  HAProxy on 127.0.0.1:{self.lb_port} (configuration rendered by "
            "python -m clusterhealth_mci.providers.haproxy), driven by the MCI provider "
            "through its admin socket")

    async def deploy_app(self) -> None:
        """The Deployment and its policy, the Services, the MCI; the Pods' servers."""
        for api in (self.cp, *self._members.values()):
            with contextlib.suppress(errors.Conflict):
                await api.create(resources.NAMESPACES, {"metadata": {"name": NAMESPACE}})
        for api in self._members.values():
            await api.create(resources.SERVICES, service(), namespace=NAMESPACE)
        await self.cp.create(resources.DEPLOYMENTS, deployment(), namespace=NAMESPACE)
        await self.cp.create(resources.PROPAGATION_POLICIES, policy(), namespace=NAMESPACE)
        await self.cp.create(resources.MULTI_CLUSTER_INGRESSES, multi_cluster_ingress(),
                             namespace=NAMESPACE)
        say(f"  Deployment {NAMESPACE}/{APP} (3 replicas) with PropagationPolicy "
            f"{APP}-propagation: Divided, weights member1 1 : member2 2, "
            f"{FAILBACK_ANNOTATION}: \"true\"")
        say(f"  Service {APP} (port 80 -> Pods' {POD_PORT}) in each member; "
            f"MultiClusterIngress {APP}: {HOST}/ -> Service {APP}")
        for member in MEMBERS:
            self.pod_servers[member] = podservers.PodServers(
                member, functools.partial(self.env.client, member), NAMESPACE, f"app={APP}",
                POD_PORT, grace=POD_GRACE, listen=self.network.listen)
        self.background(podservers.run_all(list(self.pod_servers.values())))
        say(f"  each Ready Pod's IP is served by a real HTTP server on port {POD_PORT} "
            "(kwok runs no containers); they keep serving while a member's API server is "
            f"down, and for {POD_GRACE:g} s after their Pod is gone (termination grace)")

        async def split() -> bool:
            return (await self.settled("member1"), await self.settled("member2")) == (1, 2)
        await self.wait("the Deployment running 1:2 on member1/member2", split)
        say("  member1 runs 1 Ready Pod, member2 2")

        async def served() -> bool:
            states = await self.haproxy_states()
            return (view.taking_traffic(states, "member1") == 1
                    and view.taking_traffic(states, "member2") == 2)
        await self.wait("HAProxy serving the 3 Pods", served)
        say(f"  HAProxy: {view.haproxy_line(await self.haproxy_states())}")

    def background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` until the demo ends."""
        self._tasks.append(asyncio.create_task(work))

    def start_traffic(self) -> None:
        """The load generator and the observers that print what happens."""
        self.traffic = httpload.Traffic(self.lb_port, HOST, "/", clients=4)
        self.traffic.start()
        say(f"load: 4 keep-alive clients sending GET http://{HOST}/ through HAProxy "
            "back to back (every 5th request takes 0.3 s, so requests are in flight)")
        self.background(self.print_counters())
        self.background(self.follow_clusters())
        self.background(self.follow_mci())

    async def stop_background(self) -> None:
        """Stop the observers and the Pods' servers."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    # --- observers -----------------------------------------------------------------

    def count_window(self) -> tuple[dict[str, int], int]:
        """Answers per member and failures since the previous call."""
        assert self.traffic is not None
        answers, failures = len(self.traffic.answers), len(self.traffic.failures)
        first_answer, first_failure = self._counted
        self._counted = (answers, failures)
        recent = view.answers_by_cluster(self.traffic.answers[first_answer:answers], MEMBERS)
        return recent, failures - first_failure

    async def print_counters(self) -> None:
        """Every ``--every`` seconds: the counter line."""
        assert self.traffic is not None
        self.count_window()
        while True:
            await asyncio.sleep(self.args.every)
            recent, failed = self.count_window()
            try:
                lb = view.haproxy_line(await self.haproxy_states())
            except OSError as exc:
                lb = f"(admin socket: {exc})"
            say(view.traffic_line(self.args.every, recent, failed, len(self.traffic.answers),
                                  len(self.traffic.failures), lb))

    async def follow_clusters(self) -> None:
        """Print every change of a member's conditions, remedy actions and taints."""
        known: dict[str, dict[str, str]] = {}
        async with self.env.client() as api:
            while True:
                try:
                    listing = await api.list(resources.CLUSTERS)
                    for item in listing["items"]:
                        self._cluster_changed(known, item)
                    async for event in api.watch(
                            resources.CLUSTERS,
                            resource_version=listing["metadata"]["resourceVersion"]):
                        if event.type in ("ADDED", "MODIFIED"):
                            self._cluster_changed(known, event.object)
                except (errors.KubeError, OSError):
                    await asyncio.sleep(1)

    def _cluster_changed(self, known: dict[str, dict[str, str]], obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        now = view.cluster_view(obj)
        if name in known:
            for line in view.cluster_changes(known[name], now):
                say(f"    cluster {name}: {line}")
        known[name] = now

    async def follow_mci(self) -> None:
        """Print every change of the MCI's ``trafficBlockClusters``."""
        before: list[str] | None = None
        while True:
            with contextlib.suppress(errors.KubeError, OSError):
                blocked = await self.mci_blocked()
                if before is not None and blocked != before:
                    say(f"    MultiClusterIngress {APP}: trafficBlockClusters "
                        f"{before or '[]'} -> {blocked or '[]'}")
                before = blocked
            await asyncio.sleep(0.5)

    # --- the story -----------------------------------------------------------------

    def begin(self, number: int, title: str) -> view.Phase:
        """A new phase; its traffic counts start now."""
        assert self.traffic is not None
        phase = view.Phase(number, title, self.now())
        self._phase_from[number] = (len(self.traffic.answers), len(self.traffic.failures))
        self.phases.append(phase)
        return phase

    def tally(self, phase: view.Phase) -> None:
        """The traffic of a phase, so far (the whole phase once it ended)."""
        assert self.traffic is not None
        first_answer, first_failure = self._phase_from[phase.number]
        phase.answered = view.answers_by_cluster(self.traffic.answers[first_answer:], MEMBERS)
        phase.failed = list(self.traffic.failures[first_failure:])

    def end(self, phase: view.Phase) -> None:
        """Close a phase: its duration and the traffic during it."""
        phase.ended = self.now()
        self.tally(phase)

    def mark(self, phase: view.Phase, what: str) -> None:
        """A milestone of the phase, printed at once."""
        at = phase.mark(self.now(), what)
        say(f"  +{at:5.1f} s  {what}")

    async def phase_dns(self) -> None:
        """Phase 1: member1's DNS server stops, and starts again."""
        phase = self.begin(1, "member1's DNS fails, then recovers")
        say(">>> phase 1: stopping member1's DNS server (dnsmasq). Its agents probe every 1 s "
            "and must agree for 3 s before they report it.")
        await self.dns["member1"].stop_async()
        self.mark(phase, "member1's DNS server stopped")

        async def dns_is(status: str) -> bool:
            return view.condition_status(await self.cluster("member1"),
                                         view.DNS_CONDITION) == status

        async def actions(wanted: list[str]) -> bool:
            cluster = await self.cluster("member1")
            return list((cluster.get("status") or {}).get("remedyActions") or []) == wanted

        await self.wait("member1 reporting DNS failure", lambda: dns_is("False"))
        self.mark(phase, f"member1: {view.DNS_CONDITION} False (its agents)")
        await self.wait("TrafficControl on member1", lambda: actions(["TrafficControl"]))
        self.mark(phase, "member1: remedyActions [TrafficControl] (Remedy dns-failure)")

        async def blocked(wanted: list[str]) -> bool:
            return await self.mci_blocked() == wanted
        await self.wait("the MCI blocking member1", lambda: blocked(["member1"]))
        self.mark(phase, "MultiClusterIngress: trafficBlockClusters [member1] (MCI provider)")

        async def member1_servers(up: bool) -> bool:
            taking = view.taking_traffic(await self.haproxy_states(), "member1")
            return taking > 0 if up else taking == 0
        await self.wait("HAProxy draining member1", lambda: member1_servers(False))
        drained = self.now()
        self.mark(phase, "HAProxy: member1's server drained, no new request goes to member1")
        await asyncio.sleep(5.0)
        self.mark(phase, f"requests sent in the 5 s since: member2 answered "
                         f"{self.answered_since('member2', drained)}, member1 "
                         f"{self.answered_since('member1', drained)}")

        say(">>> starting member1's DNS server again")
        await self.dns["member1"].start_async()
        self.mark(phase, "member1's DNS server started")
        await self.wait("member1 reporting DNS healthy", lambda: dns_is("True"))
        self.mark(phase, f"member1: {view.DNS_CONDITION} True")
        await self.wait("TrafficControl cleared", lambda: actions([]))
        self.mark(phase, "member1: remedyActions [] (TrafficControl cleared)")
        await self.wait("the MCI unblocking member1", lambda: blocked([]))
        self.mark(phase, "MultiClusterIngress: trafficBlockClusters []")
        await self.wait("HAProxy serving member1 again", lambda: member1_servers(True))
        back = self.now()
        self.mark(phase, "HAProxy: member1's server takes traffic again")

        async def answers_again() -> bool:
            return self.answered_since("member1", back) > 0
        await self.wait("member1 answering again", answers_again)
        self.mark(phase, "traffic returns to both members")
        self.end(phase)

    async def phase_api_server(self) -> None:
        """Phase 2: member1's API server stops: failover; it starts again: failback."""
        phase = self.begin(2, "member1's control plane fails, then recovers")
        old = await self.member_deployment("member1")
        assert old is not None
        old_uid = old["metadata"]["uid"]
        pods = self.pod_servers["member1"]
        old_pods = set(pods.serving().values())
        say(">>> phase 2: member1's control-plane node crashes: its kube-apiserver, "
            "kube-controller-manager and kube-scheduler are killed. Its Nodes (kwok) and Pods "
            "keep running: their servers are the data plane, like a real cluster's.")
        await asyncio.gather(self.env.stop_server("member1", kill=True),
                             self.env.workloads["member1"].stop_controllers(kill=True))
        self.mark(phase, "member1's API server, controller manager and scheduler stopped")
        stopped = self.now()
        binding = f"{APP}-deployment"
        seen: dict[str, float] = {}

        def first(key: str, what: str) -> None:
            if key not in seen:
                seen[key] = self.now()
                self.mark(phase, what)

        async def failed_over() -> bool:
            cluster = await self.cluster("member1")
            if view.condition_status(cluster, "Ready") == "False":
                first("ready-false", "member1: Ready False (no answer for "
                      "--cluster-failure-threshold 3s)")
            effects = view.taint_effects(cluster, NOT_READY)
            if "NoSchedule" in effects:
                first("noschedule", f"member1: taint {NOT_READY}:NoSchedule")
            if "NoExecute" in effects:
                first("noexecute", f"member1: taint {NOT_READY}:NoExecute (after "
                      "--failover-eviction-timeout 5s)")
            rb = await self.cp.get(resources.RESOURCE_BINDINGS, binding, namespace=NAMESPACE)
            targets = {c["name"]: c.get("replicas") for c in rb["spec"].get("clusters") or []}
            if "noexecute" in seen and "member1" not in targets:
                first("evicted", f"binding evicted from member1 (the policy tolerates "
                      f"{TOLERATION_SECONDS} s); scheduled: "
                      + ", ".join(f"{c} {n}" for c, n in sorted(targets.items())))
            if await self.settled("member2") == 3:
                first("member2-3", "member2 runs 3 Ready Pods")
            states = await self.haproxy_states()
            if "member2-3" in seen and view.taking_traffic(states, "member2") == 3:
                first("lb-member2-3", "HAProxy: member2's 3 Pods take traffic")
            return {"lb-member2-3", "evicted"} <= set(seen)
        await self.wait("failover to member2", failed_over)

        kept = self.answered_since("member1", stopped)
        say(">>> starting member1's control plane again")
        await self.env.start_server("member1")
        self.env.workloads["member1"].start_controllers()
        self.mark(phase, f"member1's API server, controller manager and scheduler started "
                         f"(meanwhile member1's Pod answered {kept} requests: HAProxy kept its "
                         f"endpoint, its server kept running)")
        say("    (member1's kwok, its kubelets, reconnects at client-go's watch backoff: up to "
            "about 1.5 min)")

        async def failed_back() -> bool:
            cluster = await self.cluster("member1")
            if view.condition_status(cluster, "Ready") == "True":
                first("ready-true", "member1: Ready True (answering for "
                      "--cluster-success-threshold 3s)")
            if "ready-true" in seen and not (cluster.get("spec") or {}).get("taints"):
                first("untainted", "member1: taints removed")
            current = await self.member_deployment("member1")
            if current is None or current["metadata"]["uid"] != old_uid:
                first("stale-gone", "member1: the stale Deployment removed (its Work was "
                      "deleted once member2 ran the replacement)")
            if pods.reachable and not set(pods.ready().values()) & old_pods:
                first("old-pods-gone", "member1: the old Pod deleted (member1's garbage "
                      "collector, after its Deployment); its server answers for its grace "
                      "period while HAProxy drains it")
            if (await self.settled("member1"), await self.settled("member2")) == (1, 2):
                first("split", "failback: member1 runs 1 Pod, member2 2 (after "
                      "--failback-stabilization-window 15s)")
            states = await self.haproxy_states()
            if "split" in seen and (view.taking_traffic(states, "member1"),
                                    view.taking_traffic(states, "member2")) == (1, 2):
                first("lb-split", "HAProxy: member1 1 Pod, member2 2 Pods take traffic")
            if "lb-split" in seen and self.answered_since("member1", seen["lb-split"]) > 0:
                first("answers", "traffic returns to both members")
            return {"answers", "stale-gone", "old-pods-gone", "untainted"} <= set(seen)
        await self.wait("member1 back and failback", failed_back, timeout=MEMBER_BACK_WAIT)
        self.end(phase)

    async def summary(self) -> None:
        """Phase 3: the summary (also of an interrupted run: the phases so far)."""
        assert self.traffic is not None
        for phase in self.phases:
            if phase.ended is None:  # interrupted: its traffic until now
                self.tally(phase)
        try:
            seen = view.retries(await self.haproxy_rows())
        except OSError:
            seen = (0, 0)
        done = len(self.phases) == 2 and all(p.ended is not None for p in self.phases)
        say(">>> phase 3: summary" if done else ">>> summary of the run so far (stopped early)")
        for line in view.summary_lines(self.phases, len(self.traffic.answers),
                                       self.traffic.failures, seen, str(self.logs)):
            print(line, flush=True)


async def run(args: argparse.Namespace, control: Control) -> int:
    """Start everything, tell the story, stop everything; 0 when every phase happened."""
    workdir = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="clusterhealth-demo-"))
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    say(f"clusterhealth demo: everything runs on this machine; logs in {workdir / 'logs'}")
    say("starting a control plane and 2 member clusters (kube-apiserver and etcd; each member "
        "with kube-controller-manager, kube-scheduler and kwok)")
    code = 0
    demo: Demo | None = None
    network: podnet.PodNetwork | None = None
    try:
        # members are numbered from 1 in the order given (the control plane is 0)
        network = await asyncio.to_thread(podnet.create, list(range(1, len(MEMBERS) + 1)))
        env = environment.LocalEnvironment(environment.EnvironmentConfig(
            members=MEMBERS, workdir=workdir, workloads=wl.WorkloadSettings(
                pod_cidrs=tuple(network.ranges))))
        async with env, contextlib.AsyncExitStack() as stack:
            demo = Demo(env, network, args, stack)
            try:
                await demo.setup()
                await demo.phase_dns()
                await demo.phase_api_server()
                await demo.summary()
                if args.follow:
                    control.following = True
                    assert demo.traffic is not None
                    summarised = (len(demo.traffic.answers), len(demo.traffic.failures))
                    say("following (--follow): counter line and cluster changes until Ctrl-C")
                    try:
                        await asyncio.Event().wait()
                    finally:
                        say(f"while following: {len(demo.traffic.answers) - summarised[0]} "
                            f"answered, {len(demo.traffic.failures) - summarised[1]} failed")
            except DemoError as exc:
                say(f"!! the demo stopped: {exc}")
                code = 1
                await demo.diagnose()
                if demo.traffic is not None:
                    await demo.summary()
            except asyncio.CancelledError:
                if demo.traffic is not None and not control.following:
                    await demo.summary()
                raise
            finally:
                control.stopping = True
                say("stopping every process of the demo")
                if demo.traffic is not None:
                    await demo.traffic.stop()
                await demo.stop_background()
    finally:
        control.stopping = True
        if network is not None:
            await asyncio.to_thread(network.destroy)
        shutil.rmtree(workdir / "etcd", ignore_errors=True)  # the rest stays to be read
        say(f"everything stopped; logs in {workdir / 'logs'}")
    return code


async def run_real_nodes(args: argparse.Namespace) -> int:
    """``--real-nodes``: the fleet installed with helm, the DNS story on its Pods."""
    workdir = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="clusterhealth-demo-"))
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    say("clusterhealth demo on real Nodes: a control plane with 1 Node, member1 and member2 "
        "with 2 Nodes each (kubelet, containerd, kube-proxy, CoreDNS); the images built, "
        "every chart installed with helm as docs/operations.md says (a few minutes)")
    async with fleet.running(workdir) as the_fleet:
        say("installed: " + ", ".join(f"{k} {v:.0f} s" for k, v in the_fleet.timings.items()))
        story = dnsstory.DnsStory(the_fleet, say=lambda line: print(line, flush=True))
        say("requests through the MCI provider Pod's HAProxy sidecar to shop/web in both "
            "members")
        try:
            await story.start_traffic()
            say(">>> member1's CoreDNS scaled to 0, then back")
            phase = await story.run()
        except (AssertionError, fleet.FleetError) as exc:  # a step did not come
            say(f"!! the demo stopped: {exc}")
            return 1
        finally:
            await story.stop_traffic()
        assert story.traffic is not None
        seen = view.retries(await story.haproxy_rows())
        for line in view.summary_lines([phase], len(story.traffic.answers),
                                       story.traffic.failures, seen, str(the_fleet.workdir),
                                       "every helm and kubectl command's working folder; "
                                       "the clusters' logs go with them"):
            print(line, flush=True)
        for failure in story.traffic.failures[:5]:
            print(f"  failed: {failure}", flush=True)
        say("stopping every Node and cluster")
    say("everything stopped")
    return 1 if story.traffic.failures else 0


async def _main(args: argparse.Namespace) -> int:
    control = Control()
    if args.real_nodes:
        return await run_real_nodes(args)
    story = asyncio.create_task(run(args, control))
    loop = asyncio.get_running_loop()

    def interrupt(name: str) -> None:
        if control.stopping or story.done():
            say(f"{name}: already stopping")
            return
        control.stopping = True
        say(f"{name}: stopping")
        story.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, interrupt, sig.name)
    try:
        return await story
    except asyncio.CancelledError:
        return 0 if control.following else 130


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m clusterhealth_localenv.demo`` (``make demo``)."""
    parser = argparse.ArgumentParser(prog="clusterhealth-demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--follow", action="store_true",
                        help="after the summary keep the load, the counter line and the "
                             "cluster changes going until Ctrl-C")
    parser.add_argument("--every", type=float, default=5.0,
                        help="seconds between counter lines (default 5)")
    parser.add_argument("--workdir", default=None,
                        help="where the environment and the logs go (default: a new "
                             "directory under $TMPDIR, kept afterwards)")
    parser.add_argument("--real-nodes", action="store_true",
                        help="the DNS story on real Pods: every chart installed with helm "
                             "onto clusters whose Nodes run containers (needs root)")
    args = parser.parse_args(argv)
    if args.real_nodes and args.follow:
        parser.error("--follow is not available with --real-nodes")
    if args.real_nodes and os.geteuid() != 0:
        parser.error("--real-nodes needs root (its Nodes run kubelet and containerd)")
    try:
        return asyncio.run(_main(args))
    except (environment.StartError, dns.DnsServerError, haproxy.HAProxyError,
            podnet.PodNetworkError) as exc:
        print(f"clusterhealth-demo: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
