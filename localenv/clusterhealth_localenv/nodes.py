"""Clusters whose Nodes run containers: kubelet, containerd, runc, CNI and kube-proxy per Node.

kwok's Nodes (:mod:`.workloads`) run no process, so nothing installed into
them runs either.  To install the charts as users install them (images,
Pods, Services, DNS), a cluster here can instead have real Nodes, each made
of real parts and no Docker:

* ``containerd`` and ``runc`` (Debian's packages), with the CRI plugin,
  the overlayfs snapshotter and Debian's CNI plugins (``bridge`` with
  ``host-local`` addresses, ``loopback``);
* ``kubelet`` and ``kube-proxy`` (nftables mode by default), built from
  ``k8s.io/kubernetes`` at the API server's version (:mod:`.binaries`);
* per cluster ``kube-controller-manager`` and ``kube-scheduler``
  (:func:`.workloads.controller_processes`) and CoreDNS installed as kubeadm
  installs it (:mod:`.coredns`), its image built from the Go module proxy.

Each Node is its own set of namespaces (network, mount, PID, UTS) made by
``unshare`` with Kubernetes' ``pause`` as init: inside, ``/run`` is a fresh
tmpfs and ``/var/lib``, ``/var/log`` are the Node's folders, so containerd's
and kubelet's default paths, their mounts, sockets, Pod network namespaces and
every netfilter rule stay inside.  Killing the init kills every process of
the Node (containers included) and the kernel then drops its mounts and
links: stopping is exact by construction.  What is left on this machine is
undone explicitly: the bridge and routes (:mod:`.nodenet`), the kubelets'
cgroups and kernel settings (:mod:`.nodehost`).

Images come from a folder as a docker-archive tar (:mod:`.folderimages`) loaded with
``ctr images import`` (:meth:`NodeCluster.load_image`); there is no registry.
Machine facts this mode depends on, found on Debian 12 without
``CAP_SYS_RESOURCE``: containerd's CRI needs ``restrict_oom_score_adj``
(else every sandbox fails with "can't get final child's PID from pipe"), and
kubelet needs ``failCgroupV1: false`` on a cgroup v1 machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import pathlib
import signal
import ssl
import subprocess
import time
from collections.abc import Sequence
from typing import Any, Literal

import yaml

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import binaries as bins
from clusterhealth_localenv import (
    coredns,
    folderimages,
    nodehost,
    nodenet,
    pki,
    processes,
    workloads,
)

log = logging.getLogger(__name__)

PAUSE_IMAGE = f"localhost/clusterhealth/pause:{bins.PAUSE_VERSION}"
CNI_BIN_DIR = pathlib.Path("/usr/lib/cni")
"""Debian's ``containernetworking-plugins``."""
CLUSTER_DOMAIN = "cluster.local"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
KINDS = {
    "ServiceAccount": resources.SERVICE_ACCOUNTS,
    "ClusterRole": resources.CLUSTER_ROLES,
    "ClusterRoleBinding": resources.CLUSTER_ROLE_BINDINGS,
    "ConfigMap": resources.CONFIGMAPS,
    "Deployment": resources.DEPLOYMENTS,
    "Service": resources.SERVICES,
}
ProxyMode = Literal["nftables", "iptables"]


class NodeError(processes.StartError):
    """A Node could not be made or started; the message says why."""


@dataclasses.dataclass(frozen=True)
class NodeSettings:
    """How clusters whose Nodes run containers are made (``EnvironmentConfig.nodes``)."""

    nodes: int = 2
    """Nodes per member cluster (1..4)."""
    members: tuple[str, ...] | None = None
    """The members that get real Nodes; None: every member.  Others stay bare API servers
    (or get kwok's Nodes with ``EnvironmentConfig.workloads``)."""
    control_plane_nodes: int = 0
    """Nodes of the control plane's own cluster (the host cluster the add-ons' charts are
    installed into); 0: the control plane stays a bare API server."""
    proxy_mode: ProxyMode = "nftables"
    coredns_replicas: int = 2
    """kubeadm's default; 0 installs CoreDNS scaled to zero."""
    coredns_readiness_period: int | None = 2
    """Seconds between CoreDNS's readiness probes; None: kubeadm's (Kubernetes' default,
    10 s).  Shorter, a started or scaled-up CoreDNS serves sooner."""
    dns_upstream: str | None = None
    """Where CoreDNS forwards names outside ``cluster.local``; None: nowhere (see
    :mod:`.coredns`)."""
    node_lease_duration: int = 10
    """kubelet's ``nodeLeaseDurationSeconds`` (it renews every quarter of it)."""
    node_monitor_grace_period: int = 10
    """Seconds without a lease renewal before the controller manager marks a Node not Ready
    (Kubernetes' default is 50)."""
    max_pods: int = 60
    """Each Node has a /26 of Pod addresses."""
    coredns_version: str = bins.COREDNS_VERSION

    def count(self, cluster: str, is_control_plane: bool) -> int:
        """How many Nodes ``cluster`` gets (0: none)."""
        if is_control_plane:
            return self.control_plane_nodes
        if self.members is not None and cluster not in self.members:
            return 0
        return self.nodes

    def validate(self) -> None:
        """:class:`ValueError` for settings no cluster can be made with."""
        for what, value in (("nodes", self.nodes), ("control_plane_nodes",
                                                    self.control_plane_nodes)):
            if not 0 <= value <= nodenet.MAX_NODES:
                raise ValueError(f"NodeSettings.{what} must be 0..{nodenet.MAX_NODES}")
        if self.proxy_mode not in ("nftables", "iptables"):
            raise ValueError(f"unknown proxy_mode {self.proxy_mode!r}")
        if not 1 <= self.max_pods <= 61:
            raise ValueError("NodeSettings.max_pods must be 1..61 (a /26 per Node)")
        if self.coredns_replicas < 0:
            raise ValueError("NodeSettings.coredns_replicas must be >= 0")


@dataclasses.dataclass(frozen=True)
class Tools:
    """The Debian executables a Node runs (``scripts/bootstrap.sh`` installs them)."""

    containerd: str
    ctr: str
    unshare: str
    nsenter: str

    @staticmethod
    def find() -> Tools:
        """Find every tool; :class:`NodeError` naming the Debian package of a missing one."""
        def need(name: str, package: str) -> str:
            return processes.find_executable(name, package, NodeError)

        need("runc", "runc")
        need("containerd-shim-runc-v2", "containerd")
        need("nft", "nftables")
        need("iptables", "iptables")
        for plugin in ("bridge", "host-local", "loopback"):
            if not (CNI_BIN_DIR / plugin).exists():
                raise NodeError(f"CNI plugin {CNI_BIN_DIR / plugin} not found: install Debian "
                                "package containernetworking-plugins")
        return Tools(need("containerd", "containerd"), need("ctr", "containerd"),
                     need("unshare", "util-linux"), need("nsenter", "util-linux"))


@dataclasses.dataclass(frozen=True)
class SystemImages:
    """The images every Node holds before kubelet starts (pause, CoreDNS)."""

    pause: folderimages.Image
    coredns: folderimages.Image

    @staticmethod
    def build(parts: bins.NodeBinaries, directory: pathlib.Path,
              coredns_version: str) -> SystemImages:
        """Write both docker-archives into ``directory``."""
        return SystemImages(
            folderimages.static_binary_image(parts.pause, directory / "pause.tar", PAUSE_IMAGE),
            folderimages.static_binary_image(parts.coredns, directory / "coredns.tar",
                                       f"localhost/clusterhealth/coredns:{coredns_version}"))


def apiserver_flags(directory: pathlib.Path, ca: pki.CertificateAuthority,
                    plan: nodenet.AddressPlan, cluster: int) -> list[str]:
    """What a cluster with Nodes needs of its kube-apiserver beyond the environment's flags.

    The Node authorizer and NodeRestriction (kubelets write their own Node and Pods only),
    a client certificate for logs and exec through kubelets, and the cluster's Service
    range.  The ServiceAccount admission plugin stays on: Pods get their tokens.
    """
    cert, key = ca.client("kube-apiserver-kubelet-client", "system:masters").write(
        directory, "kubelet-client")
    return [
        f"--service-cluster-ip-range={plan.service_range(cluster)}",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        f"--kubelet-client-certificate={cert}",
        f"--kubelet-client-key={key}",
        "--kubelet-preferred-address-types=InternalIP",
    ]


def _containerd_config(node_dir: pathlib.Path) -> str:
    """containerd 1.6's configuration (version 2) for one Node."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return "\n".join([
        "version = 2",
        'disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", '
        '"io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", '
        '"io.containerd.snapshotter.v1.devmapper"]',
        "[grpc]",
        '  address = "/run/containerd/containerd.sock"',
        "[metrics]",
        '  address = ""',
        '[plugins."io.containerd.internal.v1.opt"]',
        f'  path = "{node_dir / "opt"}"',
        f"[{cri}]",
        f'  sandbox_image = "{PAUSE_IMAGE}"',
        # Without CAP_SYS_RESOURCE runc cannot lower a process's oom_score_adj.
        "  restrict_oom_score_adj = true",
        "  enable_selinux = false",
        f"[{cri}.containerd]",
        '  snapshotter = "overlayfs"',
        '  default_runtime_name = "runc"',
        f"[{cri}.containerd.runtimes.runc]",
        '  runtime_type = "io.containerd.runc.v2"',
        f"[{cri}.containerd.runtimes.runc.options]",
        "  SystemdCgroup = false",
        f"[{cri}.cni]",
        f'  bin_dir = "{CNI_BIN_DIR}"',
        f'  conf_dir = "{node_dir / "cni"}"',
        "",
    ])


def _cni_config(pod_cidr: str, node_dir: pathlib.Path) -> dict[str, Any]:
    """A bridge ``cni0`` in the Node's namespace, addresses of its Pod range."""
    return {
        "cniVersion": "0.4.0",
        "name": "clusterhealth",
        "plugins": [{
            "type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False,
            "hairpinMode": True,
            "ipam": {"type": "host-local", "ranges": [[{"subnet": pod_cidr}]],
                     "routes": [{"dst": "0.0.0.0/0"}],
                     "dataDir": str(node_dir / "ipam")},
        }],
    }


def _child_running(pid: int, program: str) -> int | None:
    """The first child of ``pid`` once it runs ``program`` (its ``exe``), else None."""
    with contextlib.suppress(OSError, ValueError):
        children = pathlib.Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if children and os.readlink(f"/proc/{children[0]}/exe") == program:
            return int(children[0])
    return None


def _exists(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def child_pid(pid: int) -> int | None:
    """The first child of ``pid`` (``nsenter``'s: the program it runs inside a Node)."""
    with contextlib.suppress(OSError, ValueError):
        children = pathlib.Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if children:
            return int(children[0])
    return None


def descendants(roots: Sequence[int]) -> set[int]:
    """``roots`` and every process below them (from each process's parent in ``/proc``)."""
    children: dict[int, list[int]] = {}
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    return found


class Node:
    """One Node: its namespaces (held by ``pause``), containerd, kubelet and kube-proxy."""

    def __init__(self, cluster: NodeCluster, index: int, number: int) -> None:
        self.cluster = cluster
        self.index = index
        """Within its cluster (0..3)."""
        self.number = number
        """Within the environment (names its veth)."""
        self.name = f"{cluster.name}-node-{index}"
        self.ip = cluster.plan.node_ip(cluster.index, index)
        self.pod_cidr = cluster.plan.node_pod_cidr(cluster.index, index)
        self.directory = cluster.directory / self.name
        self.init_pid: int | None = None
        tools = cluster.tools
        script = (f"mount -t tmpfs -o mode=755 tmpfs /run && "
                  f"mount --bind {self.directory / 'var-lib'} /var/lib && "
                  f"mount --bind {self.directory / 'var-log'} /var/log && "
                  f"hostname {self.name} && exec {cluster.parts.pause}")
        self.holder = processes.ManagedProcess(
            f"node[{self.name}]",
            [tools.unshare, "--fork", "--pid", "--kill-child", "--mount",
             "--propagation", "private", "--net", "--uts", "--mount-proc", "--",
             "/bin/sh", "-c", script],
            self.log("init"), env={"PATH": PATH})
        self.containerd: processes.ManagedProcess | None = None
        self.kubelet: processes.ManagedProcess | None = None
        self.proxy: processes.ManagedProcess | None = None

    def pids(self) -> dict[int, str]:
        """Every process of the Node now (its init, daemons, shims, containers): pid -> name."""
        roots = [p.pid for p in self.children if p.running() and p.pid is not None]
        if self.init_pid is not None:
            roots.append(self.init_pid)
        named = {}
        for pid in descendants(roots):
            with contextlib.suppress(OSError):
                named[pid] = pathlib.Path(f"/proc/{pid}/comm").read_text().strip()
        return named

    def log(self, part: str) -> pathlib.Path:
        """The log file of one of the Node's processes."""
        return self.cluster.logs / f"{self.name}-{part}.log"

    @property
    def children(self) -> list[processes.ManagedProcess]:
        """Every process of this Node that runs now or ran."""
        return [p for p in (self.proxy, self.kubelet, self.containerd, self.holder)
                if p is not None]

    def enter(self, *command: str) -> list[str]:
        """``command`` run inside the Node (all its namespaces)."""
        if self.init_pid is None:
            raise NodeError(f"{self.name} is not running")
        return [self.cluster.tools.nsenter, "-t", str(self.init_pid), "-m", "-n", "-p", "-u",
                "--", *command]

    def _process(self, part: str, *argv: str) -> processes.ManagedProcess:
        return processes.ManagedProcess(f"{part}[{self.name}]", self.enter(*argv),
                                        self.log(part), env={"PATH": PATH})

    def prepare(self) -> None:
        """Write the Node's folders, certificates and configurations."""
        for folder in ("var-lib", "var-log", "cni", "ipam", "opt"):
            (self.directory / folder).mkdir(parents=True, exist_ok=True)
        cluster = self.cluster
        (self.directory / "containerd.toml").write_text(_containerd_config(self.directory))
        (self.directory / "cni" / "10-clusterhealth.conflist").write_text(
            json.dumps(_cni_config(self.pod_cidr, self.directory), indent=2))
        (self.directory / "resolv.conf").write_text(
            "# the Node's upstream for dnsPolicy Default: none (CoreDNS answers cluster.local)\n")
        for stem, user, group in (("kubelet", f"system:node:{self.name}", "system:nodes"),
                                  ("kube-proxy", "system:kube-proxy", None)):
            cert, key = cluster.ca.client(user, group).write(self.directory, stem)
            pki.write_kubeconfig(self.directory / f"{stem}.kubeconfig", cluster.name,
                                 cluster.api_url, cluster.ca_file, cert, key)
        settings = cluster.settings
        kubelet = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": self.ip,
            "readOnlyPort": 0,
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                               "x509": {"clientCAFile": str(cluster.ca_file)}},
            "authorization": {"mode": "AlwaysAllow"},
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": cluster.cgroups.kubelet_root(self.name),
            "failCgroupV1": False,
            "failSwapOn": False,
            "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
            "clusterDNS": [cluster.plan.dns_service(cluster.index)],
            "clusterDomain": CLUSTER_DOMAIN,
            "resolvConf": str(self.directory / "resolv.conf"),
            "maxPods": settings.max_pods,
            "nodeLeaseDurationSeconds": settings.node_lease_duration,
            "nodeStatusUpdateFrequency": "4s",
            # Images come from tars, never from a registry: never collect them.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            # The machine's disk and memory are shared: evict only when nearly exhausted.
            "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%",
                             "nodefs.inodesFree": "1%", "imagefs.available": "1%",
                             "imagefs.inodesFree": "1%"},
            "serializeImagePulls": False,
            "rotateCertificates": False,
        }
        (self.directory / "kubelet.yaml").write_text(yaml.safe_dump(kubelet, sort_keys=False))
        proxy = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(self.directory / "kube-proxy.kubeconfig")},
            "mode": settings.proxy_mode,
            "clusterCIDR": cluster.plan.pod_range(cluster.index),
            "hostnameOverride": self.name,
            "bindAddress": self.ip,
            "healthzBindAddress": f"{self.ip}:10256",
            "metricsBindAddress": "127.0.0.1:10249",
            "nodePortAddresses": [f"{self.ip}/32"],
            # 0: leave the kernel's conntrack settings alone (they are the machine's).
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s",
                          "tcpCloseWaitTimeout": "0s", "udpTimeout": "0s",
                          "udpStreamTimeout": "0s"},
        }
        (self.directory / "kube-proxy.yaml").write_text(yaml.safe_dump(proxy, sort_keys=False))

    async def start_namespaces(self, timeout: float) -> None:
        """Start the init, wait until it runs ``pause``, and join the Node to the bridge."""
        self.holder.start()
        pause = str(self.cluster.parts.pause)
        deadline = time.monotonic() + timeout
        pid = self.holder.pid
        assert pid is not None
        while self.init_pid is None:
            if not self.holder.running():
                raise NodeError(f"{self.name}: unshare exited ({self.holder.exit_code()}):\n"
                                f"{self.holder.log_tail()}")
            self.init_pid = _child_running(pid, pause)
            if self.init_pid is not None:
                break
            if time.monotonic() > deadline:
                raise NodeError(f"{self.name}: its init did not start in {timeout}s:\n"
                                f"{self.holder.log_tail()}")
            await asyncio.sleep(0.02)
        cluster = self.cluster
        peers = {n.pod_cidr: n.ip for n in cluster.nodes if n is not self}
        await asyncio.to_thread(cluster.network.attach, self.number, self.init_pid, self.ip,
                                peers)
        await asyncio.to_thread(cluster.network.route, self.pod_cidr, self.ip)

    async def start_containerd(self, timeout: float) -> None:
        """Start containerd inside the Node and wait until ``ctr version`` answers."""
        self.containerd = self._process("containerd", self.cluster.tools.containerd,
                                        f"--config={self.directory / 'containerd.toml'}")
        self.containerd.start()
        deadline = time.monotonic() + timeout
        while True:
            if not self.containerd.running():
                raise NodeError(f"{self.containerd.name} exited "
                                f"({self.containerd.exit_code()}):\n{self.containerd.log_tail()}")
            proc = await asyncio.create_subprocess_exec(
                *self.enter(self.cluster.tools.ctr, "version"),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if await proc.wait() == 0:
                return
            if time.monotonic() > deadline:
                raise NodeError(f"{self.containerd.name} not answering after {timeout}s:\n"
                                f"{self.containerd.log_tail()}")
            await asyncio.sleep(0.1)

    async def import_image(self, archive: pathlib.Path) -> None:
        """``ctr images import`` a docker-archive into the Node's ``k8s.io`` namespace."""
        proc = await asyncio.create_subprocess_exec(
            *self.enter(self.cluster.tools.ctr, "-n", "k8s.io", "images", "import",
                        str(archive)),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            raise NodeError(f"{self.name}: ctr images import {archive} failed:\n"
                            f"{out.decode(errors='replace')[-2000:]}")

    def start_kubelet(self) -> None:
        """Start (or restart) kubelet inside the Node."""
        if self.kubelet is None:
            self.kubelet = self._process(
                "kubelet", str(self.cluster.parts.kubelet),
                f"--config={self.directory / 'kubelet.yaml'}",
                f"--kubeconfig={self.directory / 'kubelet.kubeconfig'}",
                f"--hostname-override={self.name}", f"--node-ip={self.ip}", "--v=1")
        self.kubelet.start()

    def start_proxy(self) -> None:
        """Start kube-proxy inside the Node."""
        if self.proxy is None:
            self.proxy = self._process("kube-proxy", str(self.cluster.parts.kube_proxy),
                                       f"--config={self.directory / 'kube-proxy.yaml'}",
                                       "--v=1")
        self.proxy.start()

    async def stop(self) -> None:
        """Kill every process of the Node, then its init; wait for all.

        The init goes last: while it lives, so do the Node's and the Pods' network
        namespaces, and the connections of the dying processes close properly (an API
        server otherwise waits out its shutdown for peers that vanished).  Killing the
        init then kills whatever started meanwhile: the kernel ends a PID namespace whole.
        """
        init = self.init_pid
        if init is not None:
            inside = set(self.pids()) - {init, *(p.pid for p in self.children)}
            for pid in inside:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10.0
            while any(_exists(pid) for pid in inside) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        self.holder.kill()
        await asyncio.gather(*(p.stop(grace=5.0) for p in self.children))
        if init is not None:
            deadline = time.monotonic() + 10.0
            while _exists(init) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        self.init_pid = None


class NodeCluster:
    """One cluster's Nodes, controller manager, scheduler and CoreDNS."""

    def __init__(
        self, name: str, index: int, count: int, settings: NodeSettings,
        parts: bins.NodeBinaries, control: bins.WorkloadBinaries, tools: Tools,
        network: nodenet.NodeNetwork, cgroups: nodehost.CgroupRoot, system: SystemImages,
        api_url: str, api_directory: pathlib.Path, kubeconfig: pathlib.Path,
        ca: pki.CertificateAuthority, ca_file: pathlib.Path, logs: pathlib.Path,
        first_number: int,
    ) -> None:
        self.name = name
        self.index = index
        """The cluster's number c in the address plan (0: the control plane)."""
        self.settings = settings
        self.parts = parts
        self.control = control
        self.tools = tools
        self.network = network
        self.plan = network.plan
        self.cgroups = cgroups
        self.system = system
        self.api_url = api_url
        self.api_directory = api_directory
        self.kubeconfig = kubeconfig
        """The cluster's admin kubeconfig."""
        self.ca = ca
        self.ca_file = ca_file
        self.logs = logs
        self.directory = api_directory / "nodes"
        self.nodes = [Node(self, i, first_number + i) for i in range(count)]
        self.controllers: list[tuple[processes.ManagedProcess, str]] = []

    @property
    def node_names(self) -> list[str]:
        """The cluster's Nodes."""
        return [node.name for node in self.nodes]

    def node(self, name: str) -> Node:
        """One Node by name (:class:`KeyError` naming the cluster's Nodes otherwise)."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(f"{self.name} has no Node {name!r} (it has {', '.join(self.node_names)})")

    @property
    def host(self) -> str:
        """The cluster's API server address (the controllers serve their health there)."""
        return self.plan.api_server(self.index)

    async def start(self, api: kube.ApiClient, context: ssl.SSLContext, timeout: float) -> None:
        """Start everything; return once every Node is Ready and CoreDNS is available."""
        self.controllers = workloads.controller_processes(
            self.name, self.host, self.control, self.api_directory / "control", self.kubeconfig,
            self.ca, self.logs, controller_manager_flags=[
                "--node-monitor-period=1s",
                f"--node-monitor-grace-period={self.settings.node_monitor_grace_period}s"])
        for process, _ in self.controllers:
            process.start()
        for node in self.nodes:
            node.prepare()
        for node in self.nodes:
            await node.start_namespaces(timeout)
        # This machine reaches the cluster's Services as a host on its network does: through
        # a Node's kube-proxy (which masquerades traffic from outside the Pod range), so the
        # API server calls webhooks and aggregated APIs at their ClusterIP, as kubeadm's does.
        await asyncio.to_thread(self.network.route, self.plan.service_range(self.index),
                                self.nodes[0].ip)

        async def boot(node: Node) -> None:
            await node.start_containerd(timeout)
            await node.import_image(self.system.pause.archive)
            node.start_kubelet()
            node.start_proxy()
            # CoreDNS is installed once the Nodes are Ready: import it meanwhile.
            await node.import_image(self.system.coredns.archive)

        began = time.monotonic()
        booting = asyncio.ensure_future(asyncio.gather(*(boot(node) for node in self.nodes)))
        try:
            while not all(n.kubelet is not None for n in self.nodes) and not booting.done():
                await asyncio.sleep(0.05)
            if booting.done():
                booting.result()  # a Node that failed before its kubelet started
            log.debug("%s: kubelets started after %.1f s", self.name, time.monotonic() - began)
            await asyncio.gather(*(processes.wait_answering(p, url, context, timeout)
                                   for p, url in self.controllers))
            watched = [p for n in self.nodes for p in (n.kubelet, n.proxy, n.containerd)
                       if p is not None]
            await workloads.wait_nodes_ready(api, self.node_names, timeout, watched)
            log.debug("%s: Nodes Ready after %.1f s", self.name, time.monotonic() - began)
            await booting
        finally:
            if not booting.done():
                booting.cancel()
                with contextlib.suppress(BaseException):
                    await booting
        await self.install_coredns(api)
        await self.wait_coredns(api, self.settings.coredns_replicas, timeout)
        log.debug("%s: CoreDNS available after %.1f s", self.name, time.monotonic() - began)

    async def install_coredns(self, api: kube.ApiClient) -> None:
        """Create kubeadm's DNS add-on objects (:mod:`.coredns`)."""
        for kind, body in coredns.objects(
                self.system.coredns.reference, self.plan.dns_service(self.index),
                self.settings.coredns_replicas, CLUSTER_DOMAIN, self.settings.dns_upstream,
                self.settings.coredns_readiness_period):
            with contextlib.suppress(errors.Conflict):
                await api.create(KINDS[kind], body,
                                 namespace=body["metadata"].get("namespace"))

    async def wait_coredns(self, api: kube.ApiClient, replicas: int, timeout: float) -> None:
        """Until CoreDNS's Deployment reports ``replicas`` available (and no more)."""
        deadline = time.monotonic() + timeout
        while True:
            deployment = await api.get(resources.DEPLOYMENTS, coredns.DEPLOYMENT,
                                       namespace=coredns.NAMESPACE)
            status = deployment.get("status") or {}
            if (status.get("availableReplicas") or 0) == replicas and \
                    (status.get("replicas") or 0) == replicas:
                return
            if time.monotonic() > deadline:
                raise NodeError(f"{self.name}: CoreDNS not {replicas} available after "
                                f"{timeout}s: {status}")
            await asyncio.sleep(0.2)

    async def load_image(self, archive: pathlib.Path, nodes: Sequence[str] | None = None) -> None:
        """Load a docker-archive tar into the containerd of every Node (or of ``nodes``)."""
        chosen = self.nodes if nodes is None else [self.node(name) for name in nodes]
        await asyncio.gather(*(node.import_image(archive) for node in chosen))

    async def stop_kubelet(self, name: str, *, kill: bool = False) -> None:
        """Stop one Node's kubelet (SIGTERM, or SIGKILL with ``kill``); its Pods keep running."""
        kubelet = self.node(name).kubelet
        if kubelet is not None:
            if kill:
                kubelet.kill()
            await kubelet.stop()

    def start_kubelet(self, name: str) -> None:
        """Start one Node's kubelet again."""
        self.node(name).start_kubelet()

    async def stop(self) -> None:
        """Stop the Nodes (everything inside them dies), then the controllers."""
        await asyncio.gather(*(node.stop() for node in self.nodes))
        await asyncio.gather(*(p.stop() for p, _ in self.controllers))

    def pids(self) -> dict[str, int]:
        """The host pids of every running process of the cluster's own, by name."""
        named = {p.name: p.pid for n in self.nodes for p in n.children if p.running()}
        named |= {p.name: p.pid for p, _ in self.controllers if p.running()}
        return {name: pid for name, pid in named.items() if pid is not None}


def sweep(kernel: nodehost.KernelSettings | None = None) -> list[str]:
    """Undo what runs killed before they could stop left: bridges, routes, cgroups, sysctls.

    Their processes died with them (every Node's init dies with its parent).  Returns
    the names of what was removed or restored.
    """
    removed = []
    if (kernel or nodehost.KernelSettings()).sweep():
        removed.append("sysctls")
    for network in nodenet.leftovers():
        network.destroy()
        removed.append(network.bridge)
    for cgroup in nodehost.leftover_cgroups():
        cgroup.destroy()
        removed.append(cgroup.name)
    return removed


class NodeEnvironment:
    """What the clusters with Nodes of one environment share, and their start and stop.

    :meth:`prepare` (before the API servers start) finds the tools, takes a block of
    addresses and makes the bridge with the addresses of every API server of the
    environment (those of clusters without Nodes too: Pods reach them, as an agent in
    a member reaches the control plane); :meth:`start` (once they answer) starts each
    cluster's Nodes; :meth:`stop` stops them and undoes what they changed on this
    machine.  ``indexes`` maps every cluster's name to its number in the address plan,
    ``counts`` a cluster's name to its Node count.
    """

    def __init__(self, settings: NodeSettings, indexes: dict[str, int], counts: dict[str, int],
                 workdir: pathlib.Path, logs: pathlib.Path,
                 kubernetes_version: str = bins.KUBERNETES_VERSION) -> None:
        settings.validate()
        for name, index in indexes.items():
            if not 0 <= index <= nodenet.MAX_CLUSTER:
                raise ValueError(f"{name}: an environment with Nodes has at most "
                                 f"{nodenet.MAX_CLUSTER} members")
        self.settings = settings
        self.indexes = dict(indexes)
        self.wanted = {name: (indexes[name], count) for name, count in counts.items() if count}
        """The clusters that get Nodes: their number and Node count."""
        self.workdir = workdir
        self.logs = logs
        self.kubernetes_version = kubernetes_version
        self.network: nodenet.NodeNetwork | None = None
        self.cgroups: nodehost.CgroupRoot | None = None
        self.kernel = nodehost.KernelSettings(minimums=nodehost.NODE_LIMITS)
        self._held = False
        self.clusters: dict[str, NodeCluster] = {}
        self._parts: asyncio.Task[tuple[bins.NodeBinaries, bins.WorkloadBinaries]] | None = None

    def has_nodes(self, name: str) -> bool:
        """Whether cluster ``name`` gets Nodes."""
        return name in self.wanted

    async def prepare(self) -> None:
        """Build or find the parts (in the background), make the network."""
        if os.geteuid() != 0:
            raise NodeError("Nodes that run containers need root")
        await asyncio.to_thread(Tools.find)  # fail early, naming a missing Debian package
        version, dns = self.kubernetes_version, self.settings.coredns_version
        self._parts = asyncio.create_task(asyncio.to_thread(
            lambda: (bins.ensure_node_parts(version, dns), bins.ensure_workload_parts(version))))

        def make() -> nodenet.NodeNetwork:
            with nodehost.machine_lock("network"):
                sweep()
                return nodenet.create()

        self.network = await asyncio.to_thread(make)
        for index in self.indexes.values():
            await asyncio.to_thread(self.network.add_address, self.network.plan.api_server(index))

    @property
    def plan(self) -> nodenet.AddressPlan:
        """The environment's addresses (after :meth:`prepare`)."""
        if self.network is None:
            raise NodeError("the Nodes' network is not made yet (prepare() first)")
        return self.network.plan

    def api_host(self, name: str) -> str:
        """Where cluster ``name``'s API server listens."""
        return self.plan.api_server(self.indexes[name])

    def service_range(self, name: str) -> str:
        """Cluster ``name``'s Service range."""
        return self.plan.service_range(self.indexes[name])

    def apiserver_flags(self, name: str, directory: pathlib.Path,
                        ca: pki.CertificateAuthority) -> list[str]:
        """The extra kube-apiserver flags of cluster ``name``, which has Nodes."""
        return apiserver_flags(directory, ca, self.plan, self.indexes[name])

    def serving_ips(self, name: str) -> list[str]:
        """The addresses cluster ``name``'s API server certificate names."""
        index = self.indexes[name]
        return [self.plan.api_server(index), self.plan.kubernetes_service(index)]

    async def start(self, servers: dict[str, tuple[str, pathlib.Path, pathlib.Path]],
                    ca: pki.CertificateAuthority, ca_file: pathlib.Path,
                    contexts: dict[str, ssl.SSLContext], clients: dict[str, kube.ApiClient],
                    timeout: float) -> None:
        """Start every cluster's Nodes; ``servers`` maps a name to (URL, folder, kubeconfig)."""
        assert self.network is not None
        assert self._parts is not None
        parts, control = await self._parts
        tools = await asyncio.to_thread(Tools.find)
        system = await asyncio.to_thread(SystemImages.build, parts, self.workdir / "images",
                                         self.settings.coredns_version)
        self.cgroups = nodehost.CgroupRoot(self.network.tag)
        number = 0
        for name, (index, count) in self.wanted.items():
            url, directory, kubeconfig = servers[name]
            self.clusters[name] = NodeCluster(
                name, index, count, self.settings, parts, control, tools, self.network,
                self.cgroups, system, url, directory, kubeconfig, ca, ca_file, self.logs,
                number)
            number += count
        await asyncio.to_thread(self.kernel.hold)
        self._held = True
        await asyncio.to_thread(self.cgroups.create,
                                [n for c in self.clusters.values() for n in c.node_names])
        await asyncio.gather(*(cluster.start(clients[name], contexts[name], timeout)
                               for name, cluster in self.clusters.items()))

    async def stop(self) -> None:
        """Stop every cluster, remove the cgroups, restore the kernel settings.

        The network stays until :meth:`remove_network`: the API servers listen on it and
        stop cleanly only while their address exists.
        """
        if self._parts is not None and not self._parts.done():
            self._parts.cancel()
            with contextlib.suppress(BaseException):
                await self._parts
        await asyncio.gather(*(cluster.stop() for cluster in self.clusters.values()))
        problems = []
        if self.cgroups is not None:
            try:
                await asyncio.to_thread(self.cgroups.destroy)
            except nodehost.HostStateError as exc:
                problems.append(str(exc))
        if self._held:
            self._held = False
            try:
                await asyncio.to_thread(self.kernel.release)
            except nodehost.HostStateError as exc:
                problems.append(str(exc))
        if problems:
            raise NodeError("; ".join(problems))

    async def remove_network(self) -> None:
        """Remove the bridge, its addresses and routes (after the API servers stopped)."""
        if self.network is not None:
            await asyncio.to_thread(self.network.destroy)
