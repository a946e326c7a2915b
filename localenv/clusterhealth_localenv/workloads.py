"""Members that run workloads: a controller manager, a scheduler and simulated kubelets.

A bare member (a kube-apiserver alone) stores a Deployment but never runs it.
The control plane of issue 9 propagates Deployments and reads their status
back, and the failover issue watches replicas move, so a member can also run
what turns a Deployment into Ready Pods, from real parts and without Docker:

* ``kube-controller-manager`` and ``kube-scheduler``, built from
  ``k8s.io/kubernetes`` at the API server's version (:mod:`.binaries`);
* ``kwok`` (``sigs.k8s.io/kwok``): simulated kubelets.  It manages the Nodes
  this module creates (annotated ``kwok.x-k8s.io/node: fake``), keeps their
  leases and status fresh, and moves the Pods bound to them through their
  lifecycle (Running, Ready) without containers.

Pod IPs come from a loopback range per member (``127.2.N.0/24``), never from
10/8: an EndpointSlice address is something a component may connect to.  The
API server refuses loopback addresses in EndpointSlices, though, so such Pods
are never a Service's endpoints; where that matters (``make demo``: a load
balancer in front of the Pods) ``WorkloadSettings.pod_cidrs`` gives the
ranges of a :mod:`.podnet` pod network instead, where the addresses are real.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import pathlib
import ssl
import time
from collections.abc import Sequence
from typing import Any

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import binaries as bins
from clusterhealth_localenv import pki, processes

log = logging.getLogger(__name__)

STAGES = pathlib.Path(__file__).with_name("data") / "kwok-stages.yaml"
"""kwok's Node and Pod lifecycle (kwok has no default stages of its own)."""
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
"""kwok manages the Nodes that carry this annotation with the value ``fake``."""


@dataclasses.dataclass(frozen=True)
class WorkloadSettings:
    """How the members that run workloads are made."""

    nodes: int = 2
    """Simulated Nodes per member."""
    node_cpu: str = "8"
    node_memory: str = "32Gi"
    node_pods: int = 110
    """Capacity (and allocatable) of every Node: what the member's scheduler fits Pods into."""
    kwok_version: str = bins.KWOK_VERSION
    node_labels: dict[str, str] = dataclasses.field(default_factory=dict)
    """Extra labels on every Node (e.g. ``topology.kubernetes.io/region``)."""
    pod_cidrs: tuple[str, ...] = ()
    """The Pod range (kwok's ``--cidr``) of member number N is ``pod_cidrs[N - 1]``;
    without one, ``127.2.N.0/24``: loopback, which EndpointSlices refuse (see the module's
    docstring)."""


KCM_CONTROLLERS = ("*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,"
                   "-persistentvolume-binder,-attachdetach,-bootstrapsigner,-tokencleaner")
"""What a member's controller manager runs: everything but what needs a cloud, volumes or
Pod ranges it would hand out itself (each Node's range is its own, see :mod:`.nodes`)."""


def controller_processes(
    member: str, host: str, parts: bins.WorkloadBinaries, directory: pathlib.Path,
    kubeconfig: pathlib.Path, ca: pki.CertificateAuthority, logs: pathlib.Path,
    controller_manager_flags: Sequence[str] = (),
) -> list[tuple[processes.ManagedProcess, str]]:
    """A member's ``kube-controller-manager`` and ``kube-scheduler`` (not started).

    Each serves its health on ``host`` with a certificate of ``ca`` written to
    ``directory``; returned with the ``/healthz`` URL to wait for.  ``directory`` is a
    subfolder of the member's API server folder (which holds the service-account signing
    key ``sa.key``), itself in the environment's folder (which holds ``ca.crt``).
    """
    directory.mkdir(parents=True, exist_ok=True)
    sa_key = directory.parent / "sa.key"  # the API server's signing key
    made = []
    for name, binary, extra in (
        ("kube-controller-manager", parts.kube_controller_manager, [
            f"--service-account-private-key-file={sa_key}",
            f"--root-ca-file={directory.parent.parent / 'ca.crt'}",
            f"--controllers={KCM_CONTROLLERS}",
            "--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10",
            "--kube-api-qps=200", "--kube-api-burst=400", *controller_manager_flags,
        ]),
        ("kube-scheduler", parts.kube_scheduler, [
            "--kube-api-qps=200", "--kube-api-burst=400",
        ]),
    ):
        cert, key = ca.serving(f"{member}-{name}", [host], ["localhost"]).write(directory, name)
        port = processes.free_port(host)
        argv = [str(binary), f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                f"--bind-address={host}", f"--secure-port={port}",
                f"--tls-cert-file={cert}", f"--tls-private-key-file={key}",
                "--leader-elect=false", "--profiling=false", "--v=1", *extra]
        process = processes.ManagedProcess(f"{name}[{member}]", argv,
                                           logs / f"{member}-{name}.log")
        made.append((process, f"https://{host}:{port}/healthz"))
    return made


def node_object(name: str, settings: WorkloadSettings, address: str) -> dict[str, Any]:
    """A Node kwok will manage, with the settings' capacity."""
    capacity = {"cpu": settings.node_cpu, "memory": settings.node_memory,
                "pods": str(settings.node_pods)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                       "kubernetes.io/arch": "amd64", "type": "kwok",
                       **settings.node_labels},
        },
        "spec": {},
        "status": {"allocatable": capacity, "capacity": capacity,
                   "addresses": [{"type": "InternalIP", "address": address}],
                   "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                                "kubeletVersion": "fake", "kubeProxyVersion": "fake",
                                "bootID": "", "containerRuntimeVersion": "", "kernelVersion": "",
                                "machineID": "", "osImage": "", "systemUUID": ""}},
    }


@dataclasses.dataclass
class MemberWorkloads:
    """The processes that run one member's workloads, and its Nodes."""

    member: str
    index: int
    """The member's number N: its API server is 127.0.1.N, its Pods 127.2.N.0/24 (by default)."""
    settings: WorkloadSettings
    parts: bins.WorkloadBinaries
    directory: pathlib.Path
    kubeconfig: pathlib.Path
    ca: pki.CertificateAuthority
    logs: pathlib.Path
    children: list[processes.ManagedProcess] = dataclasses.field(default_factory=list)
    health: list[tuple[processes.ManagedProcess, str]] = dataclasses.field(default_factory=list)

    @property
    def host(self) -> str:
        """The member's loopback address (its API server's too)."""
        return f"127.0.1.{self.index}"

    @property
    def pod_cidr(self) -> str:
        """The range kwok gives this member's Pods their IPs from."""
        if self.index <= len(self.settings.pod_cidrs):
            return self.settings.pod_cidrs[self.index - 1]
        return f"127.2.{self.index}.0/24"

    @property
    def node_names(self) -> list[str]:
        """The member's simulated Nodes."""
        return [f"{self.member}-node-{i}" for i in range(self.settings.nodes)]

    def prepare(self) -> None:
        """Write certificates and make the three processes (not started)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for process, url in controller_processes(
                self.member, self.host, self.parts, self.directory, self.kubeconfig, self.ca,
                self.logs):
            self.children.append(process)
            self.health.append((process, url))
        kwok_port = processes.free_port(self.host)
        kwok = processes.ManagedProcess(f"kwok[{self.member}]", [
            str(self.parts.kwok), f"--kubeconfig={self.kubeconfig}", f"--config={STAGES}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
            f"--cidr={self.pod_cidr}", f"--node-ip={self.host}",
            f"--server-address={self.host}:{kwok_port}",
            "--node-lease-duration-seconds=40",
        ], self.logs / f"{self.member}-kwok.log")
        self.children.append(kwok)
        self.health.append((kwok, f"http://{self.host}:{kwok_port}/healthz"))

    def start(self) -> None:
        """Start the controller manager, the scheduler and kwok."""
        for process in self.children:
            process.start()

    async def stop(self) -> None:
        """Stop the three processes."""
        await asyncio.gather(*(p.stop() for p in self.children))

    @property
    def controllers(self) -> list[processes.ManagedProcess]:
        """The controller manager and the scheduler: a control-plane node's, beside the API server.

        kwok's Nodes are the workers, and keep running when these stop.
        """
        return [p for p in self.children if not p.name.startswith("kwok")]

    async def stop_controllers(self, *, kill: bool = False) -> None:
        """Stop the controller manager and the scheduler (SIGKILL with ``kill``)."""
        for process in self.controllers:
            if kill:
                process.kill()
        await asyncio.gather(*(p.stop() for p in self.controllers))

    def start_controllers(self) -> None:
        """Start the controller manager and the scheduler again.

        Fresh informers list everything at once instead of waiting out client-go's watch
        backoff, and the garbage collector builds its graph anew (see ``docs/demo.md``).
        """
        for process in self.controllers:
            process.start()

    async def wait_ready(self, api: kube.ApiClient, context: ssl.SSLContext,
                         timeout: float) -> None:
        """Create the Nodes; wait for every process's health and every Node Ready."""
        for name in self.node_names:
            body = node_object(name, self.settings, self.host)
            with contextlib.suppress(errors.Conflict):  # a restarted environment's Node
                await api.create(resources.NODES, body)
        await asyncio.gather(*(
            processes.wait_answering(process, url, context if url.startswith("https") else None,
                                     timeout)
            for process, url in self.health))
        await wait_nodes_ready(api, self.node_names, timeout, self.children)


async def wait_nodes_ready(api: kube.ApiClient, names: Sequence[str], timeout: float,
                           watched: Sequence[processes.ManagedProcess] = ()) -> None:
    """Until every Node in ``names`` is Ready (:class:`processes.StartError` after ``timeout``)."""
    deadline = time.monotonic() + timeout
    waiting = set(names)
    while waiting:
        for process in watched:
            if not process.running():
                raise processes.StartError(
                    f"{process.name} exited ({process.exit_code()}):\n{process.log_tail()}")
        for name in sorted(waiting):
            try:
                node = await api.get(resources.NODES, name)
            except errors.NotFound:  # a kubelet that has not registered its Node yet
                continue
            ready = [c for c in (node.get("status") or {}).get("conditions") or []
                     if c.get("type") == "Ready"]
            if ready and ready[0].get("status") == "True":
                waiting.discard(name)
        if not waiting:
            return
        if time.monotonic() > deadline:
            tails = "\n".join(p.log_tail() for p in watched)
            raise processes.StartError(
                f"Nodes {', '.join(sorted(waiting))} not Ready after {timeout}s:\n{tails}")
        await asyncio.sleep(0.2)


PROBE_NAMESPACE = "clusterhealth-probe"


async def wait_runs_pods(api: kube.ApiClient, timeout: float = 240.0) -> float:
    """Until the member runs a new Pod again; returns how long that took.

    After its API server was stopped and started, a member's own
    kube-controller-manager, kube-scheduler and kwok come back at the pace of
    client-go's watch backoff (0.8 s doubling to 30 s, reset only after two
    quiet minutes), so after a few restarts in a row a new Deployment can wait
    a minute or more.  Tests and benchmarks that restart a member call this
    before relying on it again: a 1-replica Deployment in its own namespace,
    created, waited for until available, and deleted.
    """
    began = time.monotonic()
    with contextlib.suppress(errors.Conflict):
        await api.create(resources.NAMESPACES, {"metadata": {"name": PROBE_NAMESPACE}})
    name = f"probe-{int(time.time() * 1000) % 10**9}"
    labels = {"app": name}
    await api.create(resources.DEPLOYMENTS, {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": PROBE_NAMESPACE},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                     {"name": "probe", "image": "registry.k8s.io/pause:3.10"}]}}}},
        namespace=PROBE_NAMESPACE)
    try:
        while True:
            obj = await api.get(resources.DEPLOYMENTS, name, namespace=PROBE_NAMESPACE)
            if (obj.get("status") or {}).get("availableReplicas") == 1:
                return time.monotonic() - began
            if time.monotonic() - began > timeout:
                raise processes.StartError(
                    f"the member ran no new Pod within {timeout:.0f} s: {obj.get('status')}")
            await asyncio.sleep(0.5)
    finally:
        await api.delete(resources.DEPLOYMENTS, name, namespace=PROBE_NAMESPACE,
                         missing_ok=True)
