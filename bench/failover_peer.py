"""Failover side by side with Karmada's own control plane, on the same members (issue 22 §2).

Both chains take turns on one Karmada-mode environment (Karmada v1.18.2's
``karmada-aggregated-apiserver`` and CRDs, members that run workloads:
kube-controller-manager, kube-scheduler and kwok each):

* **ours**: ``python -m clusterhealth_controlplane`` (every controller) and
  ``python -m clusterhealth_controlplane.scheduler``, as processes;
* **Karmada**: ``karmada-controller-manager`` with its failover chain
  (``cluster`` with its taint manager, ``clusterStatus``,
  ``clustertaintpolicy``, ``gracefulEviction``, ``binding``,
  ``bindingStatus``, ``execution``, ``workStatus``, ``namespace``; the
  ``Failover`` gate and ``--enable-no-execute-taint-eviction`` on),
  ``karmada-scheduler`` and ``karmada-webhook``, with the ClusterTaintPolicies
  that turn ``Ready`` False/Unknown into NoExecute taints (Karmada >= 1.15
  derives none from ``Ready``).

Only one chain runs at a time; the other is stopped (Karmada's webhook
unregistered, its taint policies deleted), and every round starts from
members Ready and untainted with no workload left.  Chains alternate round by
round, ours first.

Equal timers: status every 0.5 s, failure threshold 2 s, success threshold
1 s.  Ours adds NoExecute 2 s after NoSchedule (``--failover-eviction-timeout``)
and the policy tolerates it 2 s; Karmada's taint policy adds NoExecute at once,
so its policy tolerates it 4 s: both wait 6 s by configuration.  Eviction
limits raised on both (ours ``--eviction-rate=0``; Karmada
``--resource-eviction-rate`` and its client and queue limits).

Phases (``--phases``):

* ``seed``: seed 000 on 2 members: a 3-replica Deployment Divided 1:2,
  behind HAProxy driven by our MCI provider (Pods served on a pod network,
  :mod:`clusterhealth_localenv.podnet`; needs root), 4 clients sending
  requests back to back.  member1's control-plane node is killed (API
  server, controller manager and scheduler; its Pods keep serving): the time
  until its Cluster is Ready False, NoExecute-tainted, the binding evicted,
  member2 running 3 Ready Pods and HAProxy sending to them; failed requests.
  Then member1 back: the time until its stale copy is gone, and whether the
  1:2 split comes back (the policy opts in to our failback, window 10 s).
* ``fleet``: 1,000 Deployments (2 replicas, Divided 1:1 over member1 and one
  of member2..member10), placed, then left until no binding was written for
  3 s (:func:`at_rest`): from the first Deployment created, the time until
  the members run every one (placed) and until the bindings' last write (the
  placing done, status included: the finish line that means the same for both
  chains, whose queues order the same writes differently), and between the two
  (how far the status writes trail the members, recorded);
  member1's node killed: the time until every binding
  is off member1 (each binding stamped as a watch of the bindings brings the
  event that shows it off member1, :func:`watching_evictions`) and every
  Deployment runs both replicas Ready elsewhere, the eviction rate; then
  member1 back: the time until its stale copies are gone.  From the kill until
  every Deployment is Ready elsewhere, what the failover cost: the control
  plane's requests per failed-over binding by kind (``apiserver_request_total``
  of kube-apiserver and of karmada-aggregated-apiserver, the bench's own left
  out) and the CPU seconds of the chain, the control plane's servers, etcd and
  the members (:data:`CPU_GROUPS`).
* ``storm``: 100 Deployments Divided equally over 5 members; 3 members killed
  at once (60 % of the fleet): what each chain evicts within 60 s beyond the
  timers and where the replicas are, then again 30 s after the 3 are back.

Run from the repository root, as root: ``python -m bench.failover_peer
[--phases seed,fleet,storm] [--rounds 2] [--bindings 1000] [--storm-bindings 100]
[--markdown docs/benchmarks.md [--section TITLE]]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import math
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Protocol

import prometheus_client

from bench import report, runtime, takeover, usage
from clusterhealth_controlplane import options as product_options
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, informer, resources
from clusterhealth_localenv import demoview as view
from clusterhealth_localenv import (
    environment,
    haproxy,
    httpload,
    karmada,
    podnet,
    podservers,
    processes,
    workloads,
)

SECTION_TITLE = "## Failover beside Karmada's control plane (issue 22)"
NAMESPACE = "bench-failover"
NOT_READY = karmada.NOT_READY
UNREACHABLE = karmada.UNREACHABLE
FAILBACK_ANNOTATION = "clusterhealth.io/failback"
STORM_GUARD = "EvictionStormGuard"
STEP_TIMEOUT = 300.0
"""The longest one step may take before the run fails (naming the step)."""
APP = "web"
HOST = "web.bench.example"
POD_PORT = 8080
POD_GRACE = 30.0
MEMBER_REQUESTS = 16
"""Ours' requests to one member at once, raised like Karmada's client limits: at the shipped 2
(half of --workers), a member answering writes in over 2 s on this shared machine made the
health probe fail at once ("2 requests to it are in flight"), so a member that was placing
hundreds of Deployments turned Ready False and lost bindings (issue 22, fleet phase)."""
HAPROXY_SLOTS = 4
HAPROXY_SERVERS_PER_SLOT = 8


@dataclasses.dataclass(frozen=True)
class Timers:
    """What both chains are told to wait, equal in sum."""

    update_frequency: float = 0.5
    failure_threshold: float = 2.0
    success_threshold: float = 1.0
    eviction_timeout: float = 2.0
    """Ours only: NoSchedule this long -> NoExecute (Karmada's taint policy adds it at once)."""
    toleration: int = 2
    """The policy's toleration of the NoExecute taint, ours; Karmada's adds the timeout."""
    graceful_eviction_timeout: float = 60.0
    failback_window: float = 10.0

    @property
    def configured(self) -> float:
        """What the configuration makes either chain wait before an eviction."""
        return self.failure_threshold + self.eviction_timeout + self.toleration

    def ours_flags(self) -> list[str]:
        return [f"--cluster-status-update-frequency={self.update_frequency}s",
                f"--cluster-failure-threshold={self.failure_threshold}s",
                f"--cluster-success-threshold={self.success_threshold}s",
                f"--failover-eviction-timeout={self.eviction_timeout}s",
                f"--graceful-eviction-timeout={self.graceful_eviction_timeout}s",
                f"--failback-stabilization-window={self.failback_window}s",
                "--eviction-rate=0", f"--member-concurrent-requests={MEMBER_REQUESTS}"]

    def karmada_settings(self) -> karmada.KarmadaSettings:
        limits = ("--kube-api-qps=10000", "--kube-api-burst=10000",
                  "--rate-limiter-qps=1000000", "--rate-limiter-bucket-size=1000000")
        return karmada.KarmadaSettings.chain(
            failover=karmada.KarmadaFailover(
                eviction_rate=1_000_000.0,
                graceful_eviction_timeout=self.graceful_eviction_timeout),
            status_update_frequency=self.update_frequency,
            failure_threshold=self.failure_threshold,
            success_threshold=self.success_threshold,
            extra_controller_manager_args=limits,
            extra_scheduler_args=("--kube-api-qps=10000", "--kube-api-burst=10000"))


# --- the two chains ----------------------------------------------------------------------


class Chain(Protocol):
    """One control plane's failover chain, started and stopped on the environment."""

    name: str
    label: str

    def toleration(self, timers: Timers) -> int:
        """Seconds the policy tolerates the NoExecute taint, for equal waits."""

    async def start(self, env: environment.LocalEnvironment, api: kube.ApiClient) -> None:
        """Start the chain (the other one is stopped)."""

    async def stop(self, env: environment.LocalEnvironment, api: kube.ApiClient) -> None:
        """Stop the chain, leaving the API to the other."""

    def check(self) -> None:
        """Stop the run when a part of the chain died."""

    def parts(self, env: environment.LocalEnvironment) -> list[processes.ManagedProcess]:
        """The chain's own processes (whose CPU the fleet phase reads)."""

    def metrics_url(self) -> str | None:
        """The controller manager's ``/metrics`` if it exports its pauses (ours only)."""


class Ours:
    """Our controller manager (every controller) and scheduler, as processes."""

    name = "ours"
    label = "ours"

    def __init__(self, timers: Timers, logs: pathlib.Path, *, shipped: bool = False) -> None:
        self.timers = timers
        self.logs = logs
        self.flags = [] if shipped else timers.ours_flags()
        """The controller manager's flags: none as shipped."""
        self.procs: list[processes.ManagedProcess] = []
        self.urls: dict[str, str] = {}

    def toleration(self, timers: Timers) -> int:
        return timers.toleration

    async def start(self, env: environment.LocalEnvironment, api: kube.ApiClient) -> None:
        python = runtime.python()
        common = ["--kubeconfig", str(env.kubeconfig()), "--bind-address", "127.0.0.1",
                  "--leader-elect", "false"]
        self.procs = []
        for name, module, extra in (
                ("controlplane", "clusterhealth_controlplane", self.flags),
                ("scheduler", "clusterhealth_controlplane.scheduler", [])):
            port = processes.free_port("127.0.0.1")
            proc = processes.ManagedProcess(
                f"ours-{name}", [python, "-m", module, *common, "--healthz-port", str(port),
                                 *extra], self.logs / f"ours-{name}.log",
                env=runtime.child_env())
            proc.start()
            self.procs.append(proc)
            self.urls[name] = f"http://127.0.0.1:{port}/metrics"
            await processes.wait_answering(proc, f"http://127.0.0.1:{port}/readyz", None, 60.0)

    async def stop(self, env: environment.LocalEnvironment, api: kube.ApiClient) -> None:
        await asyncio.gather(*(proc.stop() for proc in self.procs))
        self.procs = []

    def check(self) -> None:
        for proc in self.procs:
            if not proc.running():
                raise SystemExit(f"bench.failover_peer: {proc.name} exited "
                                 f"({proc.exit_code()}):\n{proc.log_tail()}")

    def parts(self, env: environment.LocalEnvironment) -> list[processes.ManagedProcess]:
        return list(self.procs)

    def metrics_url(self) -> str | None:
        return self.urls.get("controlplane")


class Karmadas:
    """Karmada's chain of the environment (:class:`karmada.KarmadaControlPlane`)."""

    name = "karmada"
    label = "Karmada"

    def toleration(self, timers: Timers) -> int:
        return int(timers.eviction_timeout) + timers.toleration

    async def start(self, env: environment.LocalEnvironment, api: kube.ApiClient) -> None:
        assert env.karmada is not None
        await env.karmada.start_chain(api)

    async def stop(self, env: environment.LocalEnvironment, api: kube.ApiClient) -> None:
        assert env.karmada is not None
        await env.karmada.stop_chain(api)

    def check(self) -> None:
        pass

    def parts(self, env: environment.LocalEnvironment) -> list[processes.ManagedProcess]:
        assert env.karmada is not None
        return [p for p in (env.karmada.controller_manager, env.karmada.scheduler,
                            env.karmada.webhook) if p is not None]

    def metrics_url(self) -> str | None:
        return None


# --- objects -------------------------------------------------------------------------------


def deployment(name: str, replicas: int, labels: dict[str, str] | None = None,
               ports: bool = False) -> dict[str, Any]:
    selector = {"app": name}
    container: dict[str, Any] = {"name": "web", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}
    if ports:
        container["ports"] = [{"name": "http", "containerPort": POD_PORT}]
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels or {}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": selector},
                     "template": {"metadata": {"labels": selector},
                                  "spec": {"containers": [container]}}}}


def policy(name: str, selector: dict[str, Any], weights: dict[str, int], toleration: int,
           failback: bool = False) -> dict[str, Any]:
    """Divided by static ``weights``, tolerating not-ready/unreachable for ``toleration`` s."""
    annotations = {FAILBACK_ANNOTATION: "true"} if failback else {}
    return {
        "apiVersion": resources.PROPAGATION_POLICIES.api_version, "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", **selector}],
            "placement": {
                "clusterAffinity": {"clusterNames": list(weights)},
                "clusterTolerations": [
                    {"key": key, "operator": "Exists", "effect": "NoExecute",
                     "tolerationSeconds": toleration} for key in (NOT_READY, UNREACHABLE)],
                "replicaScheduling": {
                    "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                    "weightPreference": {"staticWeightList": [
                        {"targetCluster": {"clusterNames": [cluster]}, "weight": weight}
                        for cluster, weight in weights.items()]}}}}}


# --- waiting and reading -------------------------------------------------------------------


async def until(check: Callable[[], Awaitable[Any]], what: str,
                timeout: float = STEP_TIMEOUT, interval: float = 0.1) -> Any:
    """``check()``'s first truthy result (API errors count as "not yet")."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        try:
            result = await check()
            if result:
                return result
        except (errors.KubeError, OSError) as exc:
            last = f" (last error: {exc})"
        if time.monotonic() > deadline:
            raise SystemExit(f"bench.failover_peer: {what}: not within {timeout:.0f} s{last}")
        await asyncio.sleep(interval)


def condition(cluster: dict[str, Any], kind: str) -> str | None:
    return view.condition_status(cluster, kind)


async def clusters_healthy(cp: kube.ApiClient, members: Sequence[str]) -> bool:
    """Every member Ready, without a not-ready/unreachable taint."""
    listing = await cp.list(resources.CLUSTERS)
    found = {c["metadata"]["name"]: c for c in listing["items"]}
    for name in members:
        cluster = found.get(name)
        if cluster is None or condition(cluster, "Ready") != "True":
            return False
        keys = {t.get("key") for t in (cluster.get("spec") or {}).get("taints") or []}
        if keys & {NOT_READY, UNREACHABLE}:
            return False
    return True


async def member_counts(api: kube.ApiClient) -> dict[str, int | None]:
    """Every Deployment of the bench namespace in a member: its settled replicas (-1: not)."""
    listing = await api.list(resources.DEPLOYMENTS, namespace=NAMESPACE)
    return {item["metadata"]["name"]: view.deployment_settled(item)
            for item in listing["items"]}


async def bindings(cp: kube.ApiClient) -> list[dict[str, Any]]:
    listing = await cp.list(resources.RESOURCE_BINDINGS, namespace=NAMESPACE)
    return list(listing["items"])


def targets(binding: dict[str, Any]) -> dict[str, int]:
    return {str(t["name"]): int(t.get("replicas") or 0)
            for t in (binding.get("spec") or {}).get("clusters") or []}


KILL_PHASE = 0.25
"""Where in a wall-clock second every kill falls (seconds past the second).

Both chains store a taint's ``timeAdded`` in whole seconds and count its toleration
from there, so where a kill falls in its second moves the evictions by up to 1 s,
either way (the first eviction, a 6 s wait here, swung 5.4 to 6.3 s from round to
round).  Kills at the same point of a second give both chains the same rounding."""


def until_kill_phase(now: float) -> float:
    """Seconds from the wall-clock time ``now`` until :data:`KILL_PHASE` past a second."""
    return (KILL_PHASE - now) % 1.0


async def at_kill_phase() -> None:
    """Wait until the wall clock is :data:`KILL_PHASE` seconds past a second."""
    await asyncio.sleep(until_kill_phase(time.time()))


async def kill_node(env: environment.LocalEnvironment, member: str) -> None:
    """A member's control-plane node crashes: API server, controller manager, scheduler.

    kwok's Nodes (and the Pods' servers) keep running, as a real cluster's workers would.
    Call :func:`at_kill_phase` first, then stamp the start of the measured time.
    """
    await asyncio.gather(env.stop_server(member, kill=True),
                         env.workloads[member].stop_controllers(kill=True))


async def restart_node(env: environment.LocalEnvironment, member: str) -> None:
    await env.start_server(member)
    env.workloads[member].start_controllers()


async def clean_up(env: environment.LocalEnvironment, cp: kube.ApiClient,
                   members: Sequence[str]) -> None:
    """Delete every Deployment and policy of the bench; wait until all are gone.

    Gone means no policy left either, while the round's chain still runs: a policy still
    held by a finalizer of a chain that then stops stays "being deleted", and the next
    round's policy of the same name was refused (409 AlreadyExists).
    """
    for item in (await cp.list(resources.DEPLOYMENTS, namespace=NAMESPACE))["items"]:
        await cp.delete(resources.DEPLOYMENTS, item["metadata"]["name"], namespace=NAMESPACE,
                        missing_ok=True)
    for item in (await cp.list(resources.PROPAGATION_POLICIES, namespace=NAMESPACE))["items"]:
        await cp.delete(resources.PROPAGATION_POLICIES, item["metadata"]["name"],
                        namespace=NAMESPACE, missing_ok=True)

    async def empty() -> bool:
        if (await cp.list(resources.PROPAGATION_POLICIES, namespace=NAMESPACE))["items"]:
            return False
        if await bindings(cp):
            return False
        for member in members:
            async with env.client(member) as api:
                if await member_counts(api):
                    return False
        return True
    await until(empty, "every workload of the round removed from the members")


@contextlib.asynccontextmanager
async def chain_running(chain: Chain, env: environment.LocalEnvironment, cp: kube.ApiClient,
                        members: Sequence[str]) -> AsyncIterator[None]:
    """The chain started (members Ready and untainted), stopped afterwards."""
    await chain.start(env, cp)
    try:
        await until(lambda: clusters_healthy(cp, members),
                    f"{chain.label}: every member Ready and untainted")
        yield
    finally:
        await chain.stop(env, cp)


def order(rounds: int) -> list[str]:
    """Chains alternate, ours first."""
    return [("ours", "karmada")[i % 2] for i in range(2 * rounds)]


# --- the seed phase: 1:2, one member, real traffic ----------------------------------------


@dataclasses.dataclass
class SeedRound:
    chain: str
    ready_false: float = float("nan")
    noexecute: float = float("nan")
    evicted: float = float("nan")
    runs_3: float = float("nan")
    lb_3: float = float("nan")
    stale_gone: float = float("nan")
    """Since member1 was started again."""
    failback: float | None = None
    """Since member1 was started again: 1:2 again (None: not within the observation)."""
    failed: int = 0
    answered: int = 0


class SeedRig:
    """HAProxy driven by our MCI provider, Pods served on a pod network, the load."""

    MEMBERS = ("member1", "member2")

    def __init__(self, env: environment.LocalEnvironment, network: podnet.PodNetwork,
                 stack: contextlib.AsyncExitStack, logs: pathlib.Path) -> None:
        self.env = env
        self.network = network
        self.stack = stack
        self.logs = logs
        self.lb: haproxy.HAProxyServer | None = None
        self.traffic: httpload.Traffic | None = None
        self.pod_ranges = {m: env.workloads[m].pod_cidr for m in self.MEMBERS}
        self.provider: processes.ManagedProcess | None = None

    async def start(self, cp: kube.ApiClient) -> None:
        directory = self.env.workdir / "haproxy"
        port = haproxy.free_port()
        layout = ["--haproxy-socket", str(directory / "admin.sock"),
                  "--haproxy-slots", str(HAPROXY_SLOTS),
                  "--haproxy-servers-per-slot", str(HAPROXY_SERVERS_PER_SLOT),
                  "--haproxy-map-dir", str(directory / "maps"),
                  "--haproxy-bind-address", "127.0.0.1", "--haproxy-bind-port", str(port)]
        config = directory / "haproxy.cfg"
        rendered = await asyncio.to_thread(
            subprocess.run, [runtime.python(), "-m", "clusterhealth_mci.providers.haproxy",
                             *layout, "--output", str(config)],
            env=runtime.child_env(), capture_output=True, text=True, check=False, timeout=60)
        if rendered.returncode != 0:
            raise SystemExit(f"bench.failover_peer: HAProxy's configuration: {rendered.stderr}")
        self.lb = haproxy.HAProxyServer(config.read_text(), self.logs, name="haproxy")
        self.stack.push_async_callback(self.lb.stop_async)
        await self.lb.start_async()
        self.provider = processes.ManagedProcess(
            "mci-provider", [runtime.python(), "-m", "clusterhealth_mci", "--kubeconfig",
                             str(self.env.kubeconfig()), "--leader-elect", "false",
                             "--provider", "haproxy", *layout, "--drain-timeout", "30s",
                             "--resync-period", "30s", "--haproxy-monitor-interval", "1s",
                             "--bind-address", "127.0.0.1", "--healthz-port", "0"],
            self.logs / "mci-provider.log", env=runtime.child_env())
        self.stack.push_async_callback(self.provider.stop)
        self.provider.start()
        with contextlib.suppress(errors.Conflict):
            await cp.create(resources.NAMESPACES, {"metadata": {"name": NAMESPACE}})
        for member in self.MEMBERS:
            async with self.env.client(member) as api:
                with contextlib.suppress(errors.Conflict):
                    await api.create(resources.NAMESPACES, {"metadata": {"name": NAMESPACE}})
                await api.create(resources.SERVICES, {
                    "metadata": {"name": APP, "namespace": NAMESPACE},
                    "spec": {"selector": {"app": APP}, "ports": [
                        {"name": "http", "port": 80, "targetPort": POD_PORT,
                         "protocol": "TCP"}]}}, namespace=NAMESPACE)
        await cp.create(resources.MULTI_CLUSTER_INGRESSES, {
            "apiVersion": resources.MULTI_CLUSTER_INGRESSES.api_version,
            "kind": "MultiClusterIngress", "metadata": {"name": APP, "namespace": NAMESPACE},
            "spec": {"rules": [{"host": HOST, "http": {"paths": [{
                "path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": APP, "port": {"number": 80}}}}]}}]}},
            namespace=NAMESPACE)
        servers = [podservers.PodServers(m, functools.partial(self.env.client, m), NAMESPACE,
                                         f"app={APP}", POD_PORT, grace=POD_GRACE,
                                         listen=self.network.listen) for m in self.MEMBERS]
        task = asyncio.create_task(podservers.run_all(servers))

        async def cancel() -> None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self.stack.push_async_callback(cancel)
        self.traffic = httpload.Traffic(port, HOST, "/", clients=4)
        self.traffic.start()
        self.stack.push_async_callback(self.traffic.stop)

    def check(self) -> None:
        if self.provider is not None and not self.provider.running():
            raise SystemExit(f"bench.failover_peer: the MCI provider exited:\n"
                             f"{self.provider.log_tail()}")

    async def taking(self) -> dict[str, int]:
        assert self.lb is not None
        rows = view.parse_stat(await asyncio.to_thread(self.lb.query, "show stat"))
        states = view.servers_by_cluster(rows, self.pod_ranges)
        return {m: view.taking_traffic(states, m) for m in self.MEMBERS}


async def seed_round(env: environment.LocalEnvironment, cp: kube.ApiClient, rig: SeedRig,
                     chain: Chain, timers: Timers, observe: float) -> SeedRound:
    """One failover and return of member1 under traffic."""
    result = SeedRound(chain.name)
    members = SeedRig.MEMBERS
    async with env.client("member1") as m1:
        recovered = await workloads.wait_runs_pods(m1)
    takeover.progress(f"{chain.label}: member1 runs Pods ({recovered:.1f} s)")
    await cp.create(resources.PROPAGATION_POLICIES, policy(
        APP, {"name": APP}, {"member1": 1, "member2": 2}, chain.toleration(timers),
        failback=True), namespace=NAMESPACE)
    await cp.create(resources.DEPLOYMENTS, deployment(APP, 3, ports=True), namespace=NAMESPACE)
    m1 = env.client("member1")
    m2 = env.client("member2")
    try:
        async def split() -> bool:
            rig.check()
            counts = [(await member_counts(api)).get(APP) for api in (m1, m2)]
            return counts == [1, 2] and await rig.taking() == {"member1": 1, "member2": 2}
        await until(split, f"{chain.label}: 1:2 running and served")
        old = await m1.get(resources.DEPLOYMENTS, APP, namespace=NAMESPACE)
        await m1.close()  # its connections die with the API server: a fresh one after
        assert rig.traffic is not None
        answered, failed = len(rig.traffic.answers), len(rig.traffic.failures)
        await at_kill_phase()
        began = time.monotonic()
        await kill_node(env, "member1")
        seen: dict[str, float] = {}

        def mark(key: str) -> None:
            seen.setdefault(key, time.monotonic() - began)

        async def failed_over() -> bool:
            rig.check()
            cluster = await cp.get(resources.CLUSTERS, "member1")
            if condition(cluster, "Ready") == "False":
                mark("ready-false")
            if "NoExecute" in view.taint_effects(cluster, NOT_READY):
                mark("noexecute")
            binding = await cp.get(resources.RESOURCE_BINDINGS, f"{APP}-deployment",
                                   namespace=NAMESPACE)
            if "noexecute" in seen and "member1" not in targets(binding):
                mark("evicted")
            if (await member_counts(m2)).get(APP) == 3:
                mark("runs-3")
            if "runs-3" in seen and (await rig.taking()).get("member2") == 3:
                mark("lb-3")
            return {"evicted", "lb-3"} <= set(seen)
        try:
            await until(failed_over, f"{chain.label}: member2 running and serving 3",
                        interval=0.05)
        finally:
            await restart_node(env, "member1")
        back = time.monotonic()
        m1 = env.client("member1")

        async def stale_gone() -> bool:
            with contextlib.suppress(errors.KubeError, OSError):
                try:
                    obj = await m1.get(resources.DEPLOYMENTS, APP, namespace=NAMESPACE)
                except errors.NotFound:
                    return True
                return bool(obj["metadata"]["uid"] != old["metadata"]["uid"])
            return False
        await until(stale_gone, f"{chain.label}: member1's stale copy removed")
        result.stale_gone = time.monotonic() - back

        async def failed_back() -> bool:
            counts = [(await member_counts(api)).get(APP) for api in (m1, m2)]
            return counts == [1, 2]
        with contextlib.suppress(SystemExit):
            await until(failed_back, "failback", timeout=observe)
            result.failback = time.monotonic() - back
        result.ready_false = seen.get("ready-false", float("nan"))
        result.noexecute = seen.get("noexecute", float("nan"))
        result.evicted = seen["evicted"]
        result.runs_3 = seen["runs-3"]
        result.lb_3 = seen["lb-3"]
        await asyncio.sleep(1.0)  # requests in flight
        result.answered = len(rig.traffic.answers) - answered
        result.failed = len(rig.traffic.failures) - failed
    finally:
        await m1.close()
        await m2.close()
    await clean_up(env, cp, members)
    return result


async def seed_phase(rounds: int, timers: Timers, logs: pathlib.Path,
                     observe: float) -> list[SeedRound]:
    network = await asyncio.to_thread(podnet.create, [1, 2])
    try:
        config = environment.EnvironmentConfig(
            members=SeedRig.MEMBERS, control_plane="karmada",
            workloads=workloads.WorkloadSettings(pod_cidrs=tuple(network.ranges)),
            karmada=timers.karmada_settings(), workdir=logs.parent / "seed")
        async with environment.LocalEnvironment(config) as env, env.client() as cp, \
                contextlib.AsyncExitStack() as stack:
            rig = SeedRig(env, network, stack, logs)
            chains: dict[str, Chain] = {"ours": Ours(timers, logs), "karmada": Karmadas()}
            await chains["karmada"].stop(env, cp)  # the environment started Karmada's
            await rig.start(cp)
            results = []
            for name in order(rounds):
                chain = chains[name]
                async with chain_running(chain, env, cp, SeedRig.MEMBERS):
                    result = await seed_round(env, cp, rig, chain, timers, observe)
                results.append(result)
                takeover.progress(f"seed: {result}")
            return results
    finally:
        await asyncio.to_thread(network.destroy)


# --- the fleet phase: 1,000 bindings, 10 members ------------------------------------------


@dataclasses.dataclass
class FleetRound:
    chain: str
    first_eviction: float = float("nan")
    all_evicted: float = float("nan")
    all_ready: float = float("nan")
    rate: float = float("nan")
    stale_gone: float = float("nan")
    placed: float = float("nan")
    """The first Deployment created -> placed (the members run every Deployment 1:1)."""
    at_rest: float = float("nan")
    """The first Deployment created -> the bindings' last write before the kill: the placing
    done, status included (the finish line that means the same for both chains)."""
    requests: Counter[str] = dataclasses.field(default_factory=Counter)
    """Kill -> all Ready: kube-apiserver's and the aggregated apiserver's requests, the bench's
    own left out."""
    own_requests: Counter[str] = dataclasses.field(default_factory=Counter)
    """The bench's own requests in that window (its bindings informer's)."""
    cpu: dict[str, float] = dataclasses.field(default_factory=dict)
    """Kill -> all Ready: CPU seconds by :data:`CPU_GROUPS`."""
    pauses: dict[str, usage.Pauses] = dataclasses.field(default_factory=dict)
    """Ours only: the controller manager's event-loop pauses by :data:`PAUSE_WINDOWS`."""

    @property
    def settled(self) -> float:
        """Placed -> the bindings' last write: how far the status writes trail the members."""
        return self.at_rest - self.placed


FLEET_MEMBERS = tuple(f"member{i}" for i in range(1, 11))
CPU_GROUPS = {
    "chain": "the chain's processes",
    "apiserver": "the control plane's kube-apiserver",
    "etcd": "etcd (every API server's)",
    "aggregated": "karmada-aggregated-apiserver",
    "kcm": "the control plane's kube-controller-manager (namespace, GC)",
    "members": "the members (API servers, controller managers, schedulers, kwok)",
    "bench": "the bench itself",
}
"""Whose CPU the fleet phase reads over a failover (member1's killed parts left out)."""


def cpu_pids(env: environment.LocalEnvironment, chain: Chain) -> dict[str, list[int]]:
    """The running processes of each of :data:`CPU_GROUPS`."""
    assert env.karmada is not None
    karmada_cp = env.karmada
    groups = {
        "chain": chain.parts(env),
        "apiserver": [env.servers[environment.CONTROL_PLANE].process],
        "etcd": [env.etcd] if env.etcd is not None else [],
        "aggregated": [karmada_cp.aggregated],
        "kcm": [karmada_cp.kube_controller_manager]
        if karmada_cp.kube_controller_manager is not None else [],
        "members": [part for member in FLEET_MEMBERS
                    for part in (env.servers[member].process, *env.workloads[member].children)],
    }
    pids = {name: [p.pid for p in parts if p.pid is not None and p.running()]
            for name, parts in groups.items()}
    pids["bench"] = [os.getpid()]
    return pids


def aggregated_client(env: environment.LocalEnvironment) -> kube.ApiClient:
    """An admin client of karmada-aggregated-apiserver's own address.

    The Cluster requests it serves are counted there: kube-apiserver's aggregator
    proxies them without counting them in its ``apiserver_request_total``.
    """
    assert env.karmada is not None
    admin = env.servers[environment.CONTROL_PLANE].credentials()
    return kube.ApiClient(dataclasses.replace(admin, server=env.karmada.url), environ={})


@dataclasses.dataclass
class Reading:
    """The control plane's request counts and every group's CPU seconds, at one moment."""

    requests: Counter[str]
    """kube-apiserver's and karmada-aggregated-apiserver's (the Clusters), summed."""
    cpu: dict[str, dict[int, float]]

    @classmethod
    async def take(cls, servers: Sequence[kube.ApiClient], pids: dict[str, list[int]]
                   ) -> Reading:
        requests: Counter[str] = Counter()
        for server in servers:
            requests += await usage.request_counts(server)
        return cls(requests, {name: usage.cpu_reading(group) for name, group in pids.items()})


def bench_requests(informers: prometheus_client.CollectorRegistry) -> Counter[str]:
    """The bench's own control-plane requests in a window its bindings informer lived in.

    Every list page and watch it sent (each watch is counted by the API server as it ends,
    and all end inside the window).  Neither server counts its reads of ``/metrics``.
    """
    own: Counter[str] = Counter()
    for verb, sample in (("LIST", "clusterhealth_informer_lists_total"),
                         ("WATCH", "clusterhealth_informer_watches_total")):
        value = informers.get_sample_value(
            sample, {"resource": resources.RESOURCE_BINDINGS.plural}) or 0.0
        own[f"{verb} {resources.RESOURCE_BINDINGS.plural}"] = int(value)
    return own


def window_usage(result: FleetRound, before: Reading, after: Reading,
                 own: Counter[str]) -> None:
    """Fill ``result``'s requests (the bench's ``own`` apart) and CPU from two readings."""
    counted = usage.sent(before.requests, after.requests)
    result.own_requests = own & counted
    result.requests = counted - own
    result.cpu = {name: usage.cpu_used(start, after.cpu.get(name, {}))
                  for name, start in before.cpu.items()}


async def fleet_round(env: environment.LocalEnvironment, cp: kube.ApiClient, chain: Chain,
                      timers: Timers, count: int) -> FleetRound:
    result = FleetRound(chain.name)
    others = FLEET_MEMBERS[1:]
    async with env.client("member1") as m1:
        await workloads.wait_runs_pods(m1)
    for index, other in enumerate(others):
        await cp.create(resources.PROPAGATION_POLICIES, policy(
            f"group-{index}", {"labelSelector": {"matchLabels": {"group": other}}},
            {"member1": 1, other: 1}, chain.toleration(timers)), namespace=NAMESPACE)
    names = [f"d{i:04d}" for i in range(count)]
    group = {name: others[i % len(others)] for i, name in enumerate(names)}
    semaphore = asyncio.Semaphore(16)
    creating = time.monotonic()

    async def create(name: str) -> None:
        async with semaphore:
            await cp.create(resources.DEPLOYMENTS,
                            deployment(name, 2, {"group": group[name]}), namespace=NAMESPACE)
    await asyncio.gather(*(create(n) for n in names))
    clients = {m: env.client(m) for m in FLEET_MEMBERS} | {"aggregated": aggregated_client(env)}
    try:
        async def placed() -> bool:
            chain.check()
            on_m1 = await member_counts(clients["member1"])
            if sum(1 for v in on_m1.values() if v == 1) < count:
                return False
            total = 0
            for other in others:
                total += sum(1 for v in (await member_counts(clients[other])).values() if v == 1)
            return total == count
        await until(placed, f"{chain.label}: {count} Deployments running 1:1", interval=1.0,
                    timeout=1800.0)
        result.placed = time.monotonic() - creating
        takeover.progress(f"{chain.label}: {count} Deployments placed in "
                          f"{result.placed:.0f} s")
        result.at_rest = await at_rest(cp, chain) - creating
        takeover.progress(f"{chain.label}: the bindings' last write {result.settled:.1f} s "
                          "after they were placed")
        await clients["member1"].close()
        evicted_at: dict[str, float] = {}
        pids = cpu_pids(env, chain)
        informers = prometheus_client.CollectorRegistry()
        servers = (cp, clients["aggregated"])
        before = await Reading.take(servers, pids)
        url = chain.metrics_url()
        first_seen = asyncio.Event()
        at_first: asyncio.Task[usage.Pauses] | None = None
        try:
            async with watching_evictions(cp, count, evicted_at, informers,
                                          first_seen) as all_seen:
                paused = None if url is None else await asyncio.to_thread(usage.pauses_of, url)
                await at_kill_phase()
                began = time.monotonic()
                await kill_node(env, "member1")
                at_first = None if url is None else asyncio.create_task(
                    pauses_after(first_seen, url))

                async def evicted() -> bool:
                    chain.check()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(1.0):
                            await all_seen.wait()
                    return all_seen.is_set()
                await until(evicted, f"{chain.label}: every binding off member1",
                            interval=0.0, timeout=1800.0)
                if at_first is not None and paused is not None:  # both read ours' /metrics
                    assert url is not None
                    result.pauses = {
                        PAUSE_WINDOWS[0]: (await at_first).since(paused),
                        PAUSE_WINDOWS[1]: (await asyncio.to_thread(usage.pauses_of, url)
                                           ).since(paused)}

            async def ready() -> bool:
                total = 0
                for other in others:
                    counts = await member_counts(clients[other])
                    total += sum(1 for v in counts.values() if v == 2)
                return total == count
            await until(ready, f"{chain.label}: every Deployment's 2 replicas Ready elsewhere",
                        interval=0.5, timeout=1800.0)
            result.all_ready = time.monotonic() - began
            window_usage(result, before, await Reading.take(servers, pids),
                         bench_requests(informers))
        finally:
            if at_first is not None:
                at_first.cancel()  # a round that failed before the first binding went off
                await asyncio.gather(at_first, return_exceptions=True)
            await restart_node(env, "member1")
        back = time.monotonic()
        times = sorted(at - began for at in evicted_at.values())
        result.first_eviction = times[0]
        result.all_evicted = times[-1]
        result.rate = (count - 1) / (times[-1] - times[0]) if times[-1] > times[0] else float(
            "inf")
        async with env.client("member1") as m1:
            async def stale_gone() -> bool:
                return not await member_counts(m1)
            await until(stale_gone, f"{chain.label}: member1's stale copies removed",
                        interval=1.0, timeout=1800.0)
        result.stale_gone = time.monotonic() - back
    finally:
        for api in clients.values():
            await api.close()
    await clean_up(env, cp, FLEET_MEMBERS)
    return result


QUIET = 3.0
"""Seconds without a write to any binding before a fleet round's kill."""
SETTLE_TIMEOUT = 600.0


async def at_rest(cp: kube.ApiClient, chain: Chain) -> float:
    """When the bench namespace's bindings were last written, once :data:`QUIET` s passed since.

    Placing is done when the members run every Deployment, but the chain may still be
    writing the bindings' status (ours' bindingStatus queue held 430 of 1,000 bindings
    then): a kill at that moment puts the failover's writes, and the benchmark's watch
    events, behind that backlog.  Both chains are killed from rest.  Its own informer, closed
    before the measured windows begin.  Returns ``time.monotonic()`` of the last write seen
    (the end of the first list when none came).
    """
    cache = informer.Informer(cp, resources.RESOURCE_BINDINGS, namespace=NAMESPACE)
    last = [time.monotonic()]

    def seen(event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if cache.synced:
            last[0] = time.monotonic()
    cache.add_handler(seen)
    task = asyncio.create_task(cache.run(), name="bench:bindings-at-rest")
    try:
        await cache.wait_synced()
        last[0] = time.monotonic()
        deadline = last[0] + SETTLE_TIMEOUT
        while (wait := last[0] + QUIET - time.monotonic()) > 0:
            chain.check()
            if time.monotonic() > deadline:
                raise SystemExit(f"bench.failover_peer: {chain.label}: bindings still written "
                                 f"{SETTLE_TIMEOUT:.0f} s after they were placed")
            await asyncio.sleep(wait)
        return last[0]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


PAUSE_WINDOWS = ("kill -> first binding off", "kill -> all bindings off")
"""The windows ours' controller manager's pauses are read over (from just before the kill:
the bench reads them, then waits for the kill's moment, at most a second)."""


async def pauses_after(seen: asyncio.Event, url: str) -> usage.Pauses:
    """The process's pauses read once ``seen`` is set."""
    await seen.wait()
    return await asyncio.to_thread(usage.pauses_of, url)


@contextlib.asynccontextmanager
async def watching_evictions(cp: kube.ApiClient, count: int, evicted_at: dict[str, float],
                             registry: prometheus_client.CollectorRegistry,
                             first: asyncio.Event | None = None
                             ) -> AsyncIterator[asyncio.Event]:
    """Stamp each binding (monotonic time) off member1 as its watch event arrives.

    A shared informer of the bench namespace's bindings (one list, then a watch);
    ``evicted_at`` gets a binding's name and ``time.monotonic()`` the first time
    an event shows it without member1.  The event yielded is set once ``count`` are
    stamped (the finish line of both chains).  Listing all bindings again and again
    instead made the API server's answer late under load (issue 22: 28 timed-out lists
    in one round), and a late list stamps late.  Its lists and watches are counted in
    ``registry`` (:func:`bench_requests`).  ``first`` is set with the first stamp.
    """
    cache = informer.Informer(cp, resources.RESOURCE_BINDINGS, namespace=NAMESPACE,
                              metrics=informer.InformerMetrics(registry))
    done = asyncio.Event()

    def seen(event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = str(obj["metadata"]["name"])
        if event != "DELETED" and name not in evicted_at and "member1" not in targets(obj):
            evicted_at[name] = time.monotonic()
            if first is not None:
                first.set()
        if len(evicted_at) >= count:
            done.set()
    cache.add_handler(seen)
    task = asyncio.create_task(cache.run(), name="bench:bindings")
    try:
        await cache.wait_synced()
        if evicted_at:
            raise SystemExit("bench.failover_peer: bindings off member1 before the kill: "
                             f"{sorted(evicted_at)[:5]}")
        yield done
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def fleet_phase(rounds: int, timers: Timers, logs: pathlib.Path,
                      count: int) -> list[FleetRound]:
    config = environment.EnvironmentConfig(
        members=FLEET_MEMBERS, control_plane="karmada",
        workloads=workloads.WorkloadSettings(node_pods=max(110, count)),
        karmada=timers.karmada_settings(), workdir=logs.parent / "fleet",
        start_timeout=300.0)
    async with environment.LocalEnvironment(config) as env, env.client() as cp:
        chains: dict[str, Chain] = {"ours": Ours(timers, logs), "karmada": Karmadas()}
        await chains["karmada"].stop(env, cp)
        with contextlib.suppress(errors.Conflict):
            await cp.create(resources.NAMESPACES, {"metadata": {"name": NAMESPACE}})
        results = []
        for name in order(rounds):
            chain = chains[name]
            async with chain_running(chain, env, cp, FLEET_MEMBERS):
                result = await fleet_round(env, cp, chain, timers, count)
            results.append(result)
            takeover.progress(f"fleet: {result}")
        return results


# --- the storm phase: 3 of 5 members at once ----------------------------------------------


STORM_MEMBERS = tuple(f"member{i}" for i in range(1, 6))
STORM_KILLED = STORM_MEMBERS[:3]


@dataclasses.dataclass
class StormRound:
    chain: str
    evicted: int = 0
    """Placements on the killed members evicted within the window."""
    placements: int = 0
    """Placements on the killed members before the fault."""
    bindings_evicted: int = 0
    """Bindings off at least one killed member within the window: the taint manager's
    evictions (one write takes a binding off every cluster due at once)."""
    bindings: int = 0
    guard: bool = False
    """Whether the Clusters showed the storm guard's condition."""
    replicas_during: dict[str, int] = dataclasses.field(default_factory=dict)
    replicas_after: dict[str, int] = dataclasses.field(default_factory=dict)
    window: float = 0.0
    """Seconds watched beyond the timers."""


async def storm_round(env: environment.LocalEnvironment, cp: kube.ApiClient, chain: Chain,
                      timers: Timers, count: int, window: float) -> StormRound:
    result = StormRound(chain.name, window=window)
    for member in STORM_KILLED:
        async with env.client(member) as api:
            await workloads.wait_runs_pods(api)
    await cp.create(resources.PROPAGATION_POLICIES, policy(
        "storm", {"labelSelector": {"matchLabels": {"bench": "storm"}}},
        dict.fromkeys(STORM_MEMBERS, 1), chain.toleration(timers)), namespace=NAMESPACE)
    for index in range(count):
        await cp.create(resources.DEPLOYMENTS, deployment(
            f"s{index:03d}", len(STORM_MEMBERS), {"bench": "storm"}), namespace=NAMESPACE)

    async def spread() -> bool:
        chain.check()
        items = await bindings(cp)
        return len(items) == count and all(
            targets(b) == dict.fromkeys(STORM_MEMBERS, 1) for b in items)
    await until(spread, f"{chain.label}: {count} bindings over the 5 members", interval=0.5)
    result.placements = count * len(STORM_KILLED)
    result.bindings = count
    await at_kill_phase()
    await asyncio.gather(*(kill_node(env, m) for m in STORM_KILLED))
    began = time.monotonic()
    try:
        await asyncio.sleep(timers.configured + window)
        items = await bindings(cp)
        result.evicted = sum(1 for b in items for m in STORM_KILLED if m not in targets(b))
        result.bindings_evicted = sum(
            1 for b in items if any(m not in targets(b) for m in STORM_KILLED))
        replicas: Counter[str] = Counter()
        for item in items:
            replicas.update(targets(item))
        result.replicas_during = dict(sorted(replicas.items()))
        for member in STORM_KILLED:
            cluster = await cp.get(resources.CLUSTERS, member)
            result.guard |= condition(cluster, STORM_GUARD) == "True"
        takeover.progress(f"{chain.label}: {time.monotonic() - began:.0f} s after the fault, "
                          f"{result.evicted} of {result.placements} placements "
                          f"({result.bindings_evicted} of {count} bindings) evicted")
    finally:  # together, as a healed partition brings them back
        await asyncio.gather(*(restart_node(env, member) for member in STORM_KILLED))
    await until(lambda: clusters_healthy(cp, STORM_MEMBERS),
                f"{chain.label}: the 5 members Ready again")
    await asyncio.sleep(30.0)
    replicas = Counter()
    for item in await bindings(cp):
        replicas.update(targets(item))
    result.replicas_after = dict(sorted(replicas.items()))
    await clean_up(env, cp, STORM_MEMBERS)
    return result


async def storm_phase(rounds: int, timers: Timers, logs: pathlib.Path, count: int,
                      window: float) -> list[StormRound]:
    config = environment.EnvironmentConfig(
        members=STORM_MEMBERS, control_plane="karmada", workloads=workloads.WorkloadSettings(),
        karmada=timers.karmada_settings(), workdir=logs.parent / "storm")
    async with environment.LocalEnvironment(config) as env, env.client() as cp:
        chains: dict[str, Chain] = {"ours": Ours(timers, logs), "karmada": Karmadas()}
        await chains["karmada"].stop(env, cp)
        with contextlib.suppress(errors.Conflict):
            await cp.create(resources.NAMESPACES, {"metadata": {"name": NAMESPACE}})
        results = []
        for name in order(rounds):
            chain = chains[name]
            async with chain_running(chain, env, cp, STORM_MEMBERS):
                result = await storm_round(env, cp, chain, timers, count, window)
            results.append(result)
            takeover.progress(f"storm: {result}")
        return results


# --- the defaults phase: each chain as shipped ------------------------------------------


SHIPPED_TOLERATION = 300
"""What our webhook adds to a policy without tolerations (``--default-*-toleration-seconds``)."""


@dataclasses.dataclass
class DefaultsRound:
    setup: str
    """Which chain, configured how."""
    runs_3: float | None
    """Kill -> member2 runs 3 Ready Pods (None: not within the observation)."""
    observed: float


async def defaults_round(env: environment.LocalEnvironment, cp: kube.ApiClient, chain: Chain,
                         setup: str, toleration: int | None, observe: float) -> DefaultsRound:
    """Seed 000 (no load balancer) with the policy a user of that chain would write."""
    members = ("member1", "member2")
    async with env.client("member1") as m1:
        await workloads.wait_runs_pods(m1)
    body = policy(APP, {"name": APP}, {"member1": 1, "member2": 2}, toleration or 0)
    if toleration is None:  # Karmada >= 1.15 adds no default toleration
        body["spec"]["placement"].pop("clusterTolerations")
    await cp.create(resources.PROPAGATION_POLICIES, body, namespace=NAMESPACE)
    await cp.create(resources.DEPLOYMENTS, deployment(APP, 3), namespace=NAMESPACE)
    async with env.client("member2") as m2:
        async with env.client("member1") as m1:
            async def split() -> bool:
                chain.check()
                return [(await member_counts(api)).get(APP) for api in (m1, m2)] == [1, 2]
            await until(split, f"{setup}: 1:2 running", timeout=300.0)
        await at_kill_phase()
        began = time.monotonic()
        await kill_node(env, "member1")
        runs_3: float | None = None
        try:
            async def moved() -> bool:
                chain.check()
                return (await member_counts(m2)).get(APP) == 3
            with contextlib.suppress(SystemExit):
                await until(moved, f"{setup}: member2 running 3", timeout=observe, interval=0.5)
                runs_3 = time.monotonic() - began
        finally:
            await restart_node(env, "member1")
    took = f"{runs_3:.1f} s" if runs_3 is not None else f"not within {observe:.0f} s"
    takeover.progress(f"defaults: {setup}: kill -> member2 runs 3: {took}")
    await until(lambda: clusters_healthy(cp, members), f"{setup}: members healthy again",
                timeout=600.0)
    await clean_up(env, cp, members)
    return DefaultsRound(setup, runs_3, observe)


async def defaults_phase(timers: Timers, logs: pathlib.Path, observe: float
                         ) -> list[DefaultsRound]:
    """Ours as shipped; Karmada as shipped; Karmada with its failover on at its defaults."""
    with_failover = karmada.KarmadaSettings.chain(
        failover=karmada.KarmadaFailover(), status_update_frequency=10.0,
        failure_threshold=30.0, success_threshold=30.0)
    as_shipped = dataclasses.replace(with_failover, failover=None)
    config = environment.EnvironmentConfig(
        members=("member1", "member2"), control_plane="karmada",
        workloads=workloads.WorkloadSettings(), karmada=with_failover,
        workdir=logs.parent / "defaults")
    results = []
    async with environment.LocalEnvironment(config) as env, env.client() as cp:
        assert env.karmada is not None
        karmadas = Karmadas()
        await karmadas.stop(env, cp)
        with contextlib.suppress(errors.Conflict):
            await cp.create(resources.NAMESPACES, {"metadata": {"name": NAMESPACE}})
        ours = Ours(timers, logs, shipped=True)
        async with chain_running(ours, env, cp, ("member1", "member2")):
            results.append(await defaults_round(
                env, cp, ours, "ours as shipped (tolerations 300 s, as our webhook adds)",
                SHIPPED_TOLERATION, observe))
        for setup, settings in (("Karmada as shipped (Failover gate off)", as_shipped),
                                ("Karmada, failover switched on, its default timers",
                                 with_failover)):
            env.karmada.configure(settings)
            async with chain_running(karmadas, env, cp, ("member1", "member2")):
                results.append(await defaults_round(env, cp, karmadas, setup, None, observe))
    return results


def defaults_figures(rounds: Sequence[DefaultsRound]) -> list[report.Figure]:
    return [report.Figure(f"defaults, {r.setup}: kill -> member2 runs 3 Ready Pods"
                          + ("" if r.runs_3 is not None else
                             f" (none within {r.observed:.0f} s: recorded as that)"),
                          (r.runs_3 if r.runs_3 is not None else r.observed,), "s")
            for r in rounds]


# --- figures -------------------------------------------------------------------------------


def _samples(rounds: Sequence[Any], chain: str, field: str) -> tuple[float, ...]:
    return tuple(float(getattr(r, field)) for r in rounds if r.chain == chain)


def ratio_figure(name: str, ours: Sequence[float], theirs: Sequence[float],
                 target: str = "<= 1") -> report.Figure:
    """ours / Karmada per pair of rounds (round i of each), their median the verdict's."""
    pairs = tuple(mine / other if other else float("inf")
                  for mine, other in zip(ours, theirs, strict=False))
    verdict = ("pass" if statistics.median(pairs) <= 1.0 else "FAIL") if target != "-" \
        else "recorded"
    return report.Figure(f"{name}: ours / Karmada (per pair of rounds)", pairs, "x", target,
                         verdict)


def seed_figures(rounds: Sequence[SeedRound]) -> list[report.Figure]:
    figures = []
    for field, what in (("ready_false", "kill -> Ready False"),
                        ("noexecute", "kill -> NoExecute taint"),
                        ("evicted", "kill -> binding off member1"),
                        ("runs_3", "kill -> member2 runs 3 Ready Pods"),
                        ("lb_3", "kill -> HAProxy sends to member2's 3 Pods"),
                        ("stale_gone", "member1 back -> its stale copy removed")):
        ours, theirs = _samples(rounds, "ours", field), _samples(rounds, "karmada", field)
        figures += [report.Figure(f"seed, ours: {what}", ours, "s"),
                    report.Figure(f"seed, Karmada: {what}", theirs, "s"),
                    ratio_figure(f"seed: {what}", ours, theirs,
                                 "-" if field == "noexecute" else "<= 1")]
    for chain, label in (("ours", "ours"), ("karmada", "Karmada")):
        failed = _samples(rounds, chain, "failed")
        figures.append(report.Figure(
            f"seed, {label}: failed requests (of {sum(_samples(rounds, chain, 'answered')):.0f}"
            " answered)", failed, "requests", "0" if chain == "ours" else "-",
            ("pass" if max(failed) == 0 else "FAIL") if chain == "ours" else "recorded"))
        backs = [r.failback for r in rounds if r.chain == chain]
        if all(b is not None for b in backs):
            figures.append(report.Figure(f"seed, {label}: member1 back -> 1:2 again (failback)",
                                         tuple(float(b or 0) for b in backs), "s"))
    return figures


def fleet_figures(rounds: Sequence[FleetRound], count: int) -> list[report.Figure]:
    figures = []
    for field, what, target in (
            ("placed", f"first Deployment created -> the members run all {count:,}", "<= 1"),
            ("at_rest", "first Deployment created -> the bindings' last write (placing and "
             "status done; the kill comes 3 s after it)", "<= 1"),
            ("settled", "placed -> the bindings' last write (how far status trails the "
             "members)", "-"),
            ("first_eviction", "kill -> first binding off member1", "<= 1"),
            ("all_evicted", f"kill -> all {count:,} bindings off member1", "<= 1"),
            ("all_ready", "kill -> every Deployment's replicas Ready elsewhere", "<= 1"),
            ("stale_gone", "member1 back -> its stale copies removed", "<= 1")):
        ours, theirs = _samples(rounds, "ours", field), _samples(rounds, "karmada", field)
        figures += [report.Figure(f"fleet, ours: {what}", ours, "s"),
                    report.Figure(f"fleet, Karmada: {what}", theirs, "s"),
                    ratio_figure(f"fleet: {what}", ours, theirs, target)]
    for chain, label in (("ours", "ours"), ("karmada", "Karmada")):
        figures.append(report.Figure(f"fleet, {label}: eviction rate (first to last)",
                                     _samples(rounds, chain, "rate"), "bindings/s"))
    return figures + usage_figures(rounds, count) + pause_figures(rounds)


def pause_figures(rounds: Sequence[FleetRound]) -> list[report.Figure]:
    """What held ours' controller manager's event loop in each window (Karmada's is Go)."""
    figures = []
    for window in PAUSE_WINDOWS:
        read = [r.pauses[window] for r in rounds if r.chain == "ours" and window in r.pauses]
        if not read:
            continue
        who = f"fleet, ours' controller manager ({window})"
        figures += [
            report.Figure(f"{who}: event-loop lags over 0.1 s",
                          tuple(float(p.over(0.1)) for p in read), "lags"),
            report.Figure(f"{who}: event-loop lags over 0.25 s",
                          tuple(float(p.over(0.25)) for p in read), "lags"),
            report.Figure(f"{who}: the longest event-loop lag, at most",
                          tuple(p.longest() for p in read), "s"),
            report.Figure(f"{who}: full collections", tuple(p.full_collections for p in read),
                          "collections"),
            report.Figure(f"{who}: seconds in the cycle collector (every generation)",
                          tuple(p.collection_seconds for p in read), "s")]
    return figures


WINDOW = "kill -> all Ready"


def usage_figures(rounds: Sequence[FleetRound], count: int) -> list[report.Figure]:
    """Control-plane requests per failed-over binding and CPU seconds, kill -> all Ready."""
    per_binding = {chain: tuple(sum(r.requests.values()) / count
                                for r in rounds if r.chain == chain)
                   for chain in ("ours", "karmada")}
    what = f"control-plane API requests per failed-over binding ({WINDOW})"
    figures = [report.Figure(f"fleet, ours: {what}", per_binding["ours"], "requests"),
               report.Figure(f"fleet, Karmada: {what}", per_binding["karmada"], "requests"),
               ratio_figure(f"fleet: {what}", per_binding["ours"], per_binding["karmada"], "-")]
    for group, label in CPU_GROUPS.items():
        cpu = {chain: tuple(r.cpu[group] for r in rounds if r.chain == chain)
               for chain in ("ours", "karmada")}
        figures += [report.Figure(f"fleet, ours: CPU of {label} ({WINDOW})", cpu["ours"], "s"),
                    report.Figure(f"fleet, Karmada: CPU of {label} ({WINDOW})", cpu["karmada"],
                                  "s")]
        if group == "chain":
            figures.append(ratio_figure(f"fleet: CPU of {label} ({WINDOW})", cpu["ours"],
                                        cpu["karmada"], "-"))
    return figures


def request_notes(rounds: Sequence[FleetRound], count: int) -> list[str]:
    """Per kind of request: ours and Karmada per failed-over binding (medians of rounds)."""
    def medians(chain: str) -> dict[str, float]:
        counted = [r.requests for r in rounds if r.chain == chain]
        kinds = {kind for c in counted for kind in c}
        return {kind: statistics.median(c[kind] for c in counted) / count for kind in kinds}
    ours, theirs = medians("ours"), medians("karmada")
    kinds = sorted(ours.keys() | theirs.keys(),
                   key=lambda k: (theirs.get(k, 0.0) - ours.get(k, 0.0), k))
    shown = [f"{kind} {ours.get(kind, 0.0):.2f} / {theirs.get(kind, 0.0):.2f}" for kind in kinds
             if max(ours.get(kind, 0.0), theirs.get(kind, 0.0)) >= 0.01]
    rest = len(kinds) - len(shown)
    own = Counter[str]()
    for result in rounds:
        own.update(result.own_requests)
    return [f"fleet: control-plane API requests per failed-over binding by kind "
            f"(apiserver_request_total of kube-apiserver plus karmada-aggregated-apiserver, "
            f"which serves the Clusters; {WINDOW}), ours / Karmada, most more in ours first: "
            + "; ".join(shown) + (f"; {rest} kinds under 0.01 in both" if rest else "")
            + ". Left out: the bench's own requests in the windows ("
            + ", ".join(f"{kind} {n}" for kind, n in sorted(own.items())) + ").",
            "fleet: CPU seconds are each process's CPU clock (children excluded) over "
            f"{WINDOW}; member1's killed API server, controller manager and scheduler are left "
            "out (its kwok counts); one etcd serves every API server of the environment."]


def storm_bound(window: float) -> int:
    """The most evictions ours may make while the guard holds: the shipped secondary rate.

    An eviction is one binding write (``--secondary-eviction-rate`` counts those), and it
    takes the binding off every cluster due at once: up to 3 placements here.
    """
    return math.floor(product_options.Eviction().secondary_rate * window) + 1


def storm_figures(rounds: Sequence[StormRound]) -> list[report.Figure]:
    figures = []
    for chain, label in (("ours", "ours"), ("karmada", "Karmada")):
        mine = [r for r in rounds if r.chain == chain]
        bound = storm_bound(mine[0].window)
        figures.append(report.Figure(
            f"storm, {label}: bindings evicted from the killed members (of {mine[0].bindings})",
            tuple(float(r.bindings_evicted) for r in mine), "bindings",
            f"<= {bound} (guard pace)" if chain == "ours" else "-",
            ("pass" if all(r.bindings_evicted <= bound for r in mine) else "FAIL")
            if chain == "ours" else "recorded"))
        figures.append(report.Figure(
            f"storm, {label}: placements evicted from the 3 killed members "
            f"(of {mine[0].placements})", tuple(float(r.evicted) for r in mine), "placements"))
    return figures


def storm_notes(rounds: Sequence[StormRound]) -> list[str]:
    notes = []
    for result in rounds:
        notes.append(f"storm round ({result.chain}): storm-guard condition "
                     f"{'shown' if result.guard else 'not shown'}; replicas per member "
                     f"during the outage {result.replicas_during}, 30 s after the 3 came back "
                     f"{result.replicas_after}.")
    return notes


def main(argv: Sequence[str] | None = None) -> int:
    """Measure the phases, print the table, optionally update the Markdown section."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench.failover_peer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phases", default="seed,fleet,storm")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per chain and phase")
    parser.add_argument("--bindings", type=int, default=1000, help="the fleet phase's")
    parser.add_argument("--storm-bindings", type=int, default=100)
    parser.add_argument("--storm-window", type=float, default=60.0,
                        help="seconds beyond the timers the storm phase watches")
    parser.add_argument("--failback-observe", type=float, default=40.0,
                        help="seconds after member1's return the seed phase waits for 1:2")
    parser.add_argument("--defaults-observe", type=float, default=900.0,
                        help="seconds the defaults phase waits for a failover")
    parser.add_argument("--markdown", type=pathlib.Path)
    parser.add_argument("--section", default=SECTION_TITLE,
                        help="the Markdown section to write (a run of some phases apart)")
    options = parser.parse_args(args)
    phases = [p for p in options.phases.split(",") if p]
    unknown = set(phases) - {"seed", "fleet", "storm", "defaults"}
    if unknown or options.rounds < 1:
        parser.error(f"--phases: seed, fleet, storm, defaults (not {sorted(unknown)}); "
                     "--rounds >= 1")
    timers = Timers()
    figures: list[report.Figure] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="clusterhealth-bench-") as tmp:
        logs = pathlib.Path(tmp) / "logs"
        takeover.progress(f"logs in {logs}")
        if "seed" in phases:
            seed = asyncio.run(seed_phase(options.rounds, timers, logs,
                                          options.failback_observe))
            figures += seed_figures(seed)
        if "fleet" in phases:
            fleet = asyncio.run(fleet_phase(options.rounds, timers, logs, options.bindings))
            figures += fleet_figures(fleet, options.bindings)
            notes += request_notes(fleet, options.bindings)
        if "defaults" in phases:
            defaults = asyncio.run(defaults_phase(timers, logs, options.defaults_observe))
            figures += defaults_figures(defaults)
        if "storm" in phases:
            storm = asyncio.run(storm_phase(options.rounds, timers, logs,
                                            options.storm_bindings, options.storm_window))
            figures += storm_figures(storm)
            notes += storm_notes(storm)
    print(report.text_table(figures))
    for note in notes:
        print(note)
    if options.markdown is not None:
        command = report.command_line("bench.failover_peer", args)
        report.write_section(options.markdown, options.section,
                             report.section(options.section, figures, NOTES + notes, command))
    return 0


NOTES = [
    "One Karmada-mode environment per phase (Karmada v1.18.2's aggregated Cluster API and "
    "CRDs; members run kube-controller-manager, kube-scheduler and kwok). The chains take "
    "turns, ours first; only one runs at a time, and every round starts from members Ready "
    "and untainted with no workload left.",
    "Ours: python -m clusterhealth_controlplane (every controller) and its scheduler, "
    "processes, no leader election: --cluster-status-update-frequency=0.5s "
    "--cluster-failure-threshold=2s --cluster-success-threshold=1s "
    "--failover-eviction-timeout=2s --graceful-eviction-timeout=60s "
    "--failback-stabilization-window=10s --eviction-rate=0 --member-concurrent-requests=16 "
    "(the probe timeout and the "
    "storm guard at their defaults: 5 s; 55 %, then 0.1 evictions/s); the policy tolerates "
    "the NoExecute taints 2 s.",
    "Karmada: karmada-controller-manager --controllers=cluster,namespace,binding,"
    "bindingStatus,execution,workStatus,clusterStatus,clustertaintpolicy,gracefulEviction "
    "--feature-gates=Failover=true --enable-no-execute-taint-eviction=true "
    "--no-execute-taint-eviction-purge-mode=Gracefully --cluster-status-update-frequency=0.5s "
    "--cluster-failure-threshold=2s --cluster-success-threshold=1s "
    "--graceful-eviction-timeout=60s, limits raised (--resource-eviction-rate=1000000, "
    "--rate-limiter-qps/--rate-limiter-bucket-size 1000000, --kube-api-qps/--kube-api-burst "
    "10000); karmada-scheduler (no estimator, qps 10000), karmada-webhook "
    "--allow-no-execute-taint-policy; ClusterTaintPolicies Ready False -> not-ready:NoExecute, "
    "Unknown -> unreachable:NoExecute (added at once, so the policy tolerates 4 s: both wait "
    "6 s by configuration).",
    "A member is killed as a control-plane node crash: its API server, controller manager "
    "and scheduler SIGKILLed, its kwok Nodes (and the Pods' HTTP servers) running on.",
]


if __name__ == "__main__":
    raise SystemExit(main())
