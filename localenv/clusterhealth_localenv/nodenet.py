"""The network of clusters whose Nodes run containers: addresses, a bridge, one namespace per Node.

Every Node of :mod:`.nodes` is a set of namespaces of its own (network, mount,
PID, UTS), so two kube-proxies never share a ruleset and nothing a Node does to
its network touches this machine's: kubelet's and kube-proxy's rules, the CNI
bridge ``cni0``, ``net.ipv4.ip_forward`` all live in the Node's network
namespace and go with it.  This module makes what joins the Nodes to this
machine: a bridge ``chk<owner>`` holding the gateway and the clusters' API
server addresses, a veth pair per Node (``eth0`` inside), routes to each
Node's Pod range (so a process here, a load balancer later, reaches Pods) and to
each cluster's Service range through its first Node (whose kube-proxy answers for
it, as for a host on the cluster's network: the API server reaches webhooks at
their ClusterIP).  This machine forwards between the Nodes on that bridge only
(``net.ipv4.conf.<bridge>.forwarding``, gone with the bridge; the machine's
``net.ipv4.ip_forward`` is left alone), so a Pod of one cluster reaches a Pod of
another (a load balancer in the host cluster, its backends in the members); and
the block's other addresses are ``unreachable`` here, so nothing addressed to it
ever leaves the machine.

Addresses (RFC 2544's 198.18.0.0/15, never 10/8; :mod:`.netns` test hosts
keep ``198.18.128.0/17``, :mod:`.podnet` ``198.19.0.0/16``): an environment takes
block ``k`` (0..3), ``198.18.<B>.0/20`` with ``B = 64 + 16k``, the first that
has no address or route on this machine, so runs side by side do not collide.
Cluster ``c`` (0 the control plane, N member N; up to 6):

========================  =====================================================
``198.18.B.1``            this machine's side of the bridge (the Nodes' gateway)
``198.18.B.(16c+16)``     cluster c's kube-apiserver (on the bridge, ``/32``)
``198.18.B.(16c+17+n)``   Node n of cluster c (n < 4), ``eth0`` in its namespace
``198.18.(B+1+2c).0/24``  cluster c's Pods; Node n has ``.(64n)/26``
``198.18.(B+2+2c).0/24``  cluster c's Services: ``.1`` kubernetes, ``.10`` kube-dns
========================  =====================================================

Needs root and iproute2.  A network left by a killed process is removed by the
next :func:`create` (the bridge's name carries the dead process's pid).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import shutil
import subprocess

from clusterhealth_localenv import netns, processes

BLOCKS = range(4)
"""Block k is 198.18.(64 + 16k).0/20."""
MAX_CLUSTER = 6
"""Cluster indexes 0 (the control plane) .. 6."""
MAX_NODES = 4
"""Nodes per cluster (each has a /26 of the cluster's /24 of Pods)."""
PREFIX = "chk"
_BRIDGE = re.compile(rf"^{PREFIX}(\d+)b(\d)$")


class NodeNetworkError(RuntimeError):
    """The network could not be made; the message says why (root and iproute2 needed)."""


def ip(*args: str, check: bool = True) -> str:
    """Run ``ip``; :class:`NodeNetworkError` with its message when it fails (``check``)."""
    return netns.ip(*args, check=check, error=NodeNetworkError, what="Nodes")


@dataclasses.dataclass(frozen=True)
class AddressPlan:
    """The addresses of block ``block`` (pure: see the module's table)."""

    block: int

    def __post_init__(self) -> None:
        if self.block not in BLOCKS:
            raise ValueError(f"block must be in {BLOCKS.start}..{BLOCKS.stop - 1}")

    @property
    def base(self) -> int:
        """The third octet B of the block's first address."""
        return 64 + 16 * self.block

    @property
    def network(self) -> str:
        """Every address of the block."""
        return f"198.18.{self.base}.0/20"

    @property
    def link_network(self) -> str:
        """The bridge's /24: gateway, API servers, Nodes."""
        return f"198.18.{self.base}.0/24"

    @property
    def gateway(self) -> str:
        """This machine's address on the bridge."""
        return f"198.18.{self.base}.1"

    @staticmethod
    def _check(cluster: int, node: int | None = None) -> None:
        if not 0 <= cluster <= MAX_CLUSTER:
            raise ValueError(f"cluster index must be 0..{MAX_CLUSTER}")
        if node is not None and not 0 <= node < MAX_NODES:
            raise ValueError(f"node index must be 0..{MAX_NODES - 1}")

    def api_server(self, cluster: int) -> str:
        """Where cluster ``cluster``'s kube-apiserver listens."""
        self._check(cluster)
        return f"198.18.{self.base}.{16 * cluster + 16}"

    def node_ip(self, cluster: int, node: int) -> str:
        """Node ``node`` of cluster ``cluster``: its ``eth0``, its InternalIP."""
        self._check(cluster, node)
        return f"198.18.{self.base}.{16 * cluster + 17 + node}"

    def pod_range(self, cluster: int) -> str:
        """Every Pod address of the cluster (kube-proxy's ``clusterCIDR``)."""
        self._check(cluster)
        return f"198.18.{self.base + 1 + 2 * cluster}.0/24"

    def node_pod_cidr(self, cluster: int, node: int) -> str:
        """The Pod addresses of one Node (its CNI bridge's range)."""
        self._check(cluster, node)
        return f"198.18.{self.base + 1 + 2 * cluster}.{64 * node}/26"

    def service_range(self, cluster: int) -> str:
        """The cluster's ``--service-cluster-ip-range``."""
        self._check(cluster)
        return f"198.18.{self.base + 2 + 2 * cluster}.0/24"

    def kubernetes_service(self, cluster: int) -> str:
        """The ClusterIP of ``default/kubernetes`` (the range's first address)."""
        return str(ipaddress.ip_network(self.service_range(cluster))[1])

    def dns_service(self, cluster: int) -> str:
        """The ClusterIP of ``kube-system/kube-dns`` (the kubelets' ``clusterDNS``)."""
        return str(ipaddress.ip_network(self.service_range(cluster))[10])


class NodeNetwork:
    """The bridge ``chk<owner>b<block>`` on this machine and what hangs off it."""

    def __init__(self, plan: AddressPlan, owner: int | None = None) -> None:
        self.plan = plan
        self.owner = os.getpid() if owner is None else owner
        self.bridge = f"{PREFIX}{self.owner}b{plan.block}"

    @property
    def tag(self) -> str:
        """What names this network's leftovers: bridge, cgroups (``<pid>b<block>``)."""
        return self.bridge.removeprefix(PREFIX)

    def veth(self, index: int) -> str:
        """This machine's end of the link to the environment's Node number ``index``."""
        return f"{self.bridge}v{index}"

    def create(self) -> NodeNetwork:
        """Make the bridge with the gateway address, up."""
        self.destroy()
        try:
            ip("link", "add", self.bridge, "type", "bridge")
            ip("addr", "add", f"{self.plan.gateway}/24", "dev", self.bridge)
            ip("link", "set", self.bridge, "up")
            forward_on(self.bridge)
            ip("route", "add", "unreachable", self.plan.network)
        except NodeNetworkError:
            self.destroy()
            raise
        return self

    def add_address(self, address: str) -> None:
        """Put ``address`` (``/32``) on the bridge: an API server listens there."""
        ip("addr", "add", f"{address}/32", "dev", self.bridge)

    def attach(self, index: int, pid: int, address: str, routes: dict[str, str]) -> None:
        """Join the network namespace of ``pid`` as Node ``index`` at ``address``.

        Inside, ``eth0`` gets ``address/24``, the default route goes to the gateway,
        ``routes`` (Pod range -> peer Node) to the other Nodes of its cluster;
        forwarding is on (the Node routes for its Pods).
        """
        veth = self.veth(index)
        ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", str(pid))
        ip("link", "set", veth, "master", self.bridge, "up")
        for args in (("link", "set", "lo", "up"),
                     ("addr", "add", f"{address}/24", "dev", "eth0"),
                     ("link", "set", "eth0", "up"),
                     ("route", "add", "default", "via", self.plan.gateway),
                     *(("route", "add", cidr, "via", peer) for cidr, peer in routes.items())):
            in_namespace(pid, "ip", *args)
        in_namespace(pid, "sysctl", "-qw", "net.ipv4.ip_forward=1")

    def route(self, cidr: str, via: str) -> None:
        """Route ``cidr`` (a Node's Pods, a cluster's Services) here to the Node at ``via``."""
        ip("route", "replace", cidr, "via", via, "dev", self.bridge)

    def destroy(self) -> None:
        """Remove the bridge, its addresses and routes, and its veths (no error when gone)."""
        for line in ip("-o", "link", "show", "master", self.bridge, check=False).splitlines():
            name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
            if name.startswith(self.bridge):
                ip("link", "del", name, check=False)
        ip("link", "del", self.bridge, check=False)
        ip("route", "del", "unreachable", self.plan.network, check=False)


def forward_on(link: str) -> None:
    """Forward IPv4 packets that arrive on ``link`` (and only there; gone with the link)."""
    path = f"/proc/sys/net/ipv4/conf/{link}/forwarding"
    try:
        with open(path, "w") as setting:
            setting.write("1\n")
    except OSError as exc:
        raise NodeNetworkError(f"cannot turn on forwarding on {link} ({path}): {exc}") from exc


def in_namespace(pid: int, *command: str) -> str:
    """Run ``command`` in the network namespace of ``pid`` (``nsenter --net``)."""
    nsenter = shutil.which("nsenter") or "/usr/bin/nsenter"
    proc = subprocess.run([nsenter, "-t", str(pid), "-n", "--", *command],
                          capture_output=True, text=True, check=False, timeout=30)
    if proc.returncode != 0:
        raise NodeNetworkError(f"{' '.join(command)} in the namespace of {pid} failed: "
                               f"{proc.stderr.strip()}")
    return proc.stdout


def leftovers() -> list[NodeNetwork]:
    """Networks on this machine whose process has ended."""
    found = []
    for line in ip("-o", "link", "show", "type", "bridge", check=False).splitlines():
        parts = line.split(":")
        if len(parts) < 2:
            continue
        match = _BRIDGE.match(parts[1].strip())
        if match is not None and int(match.group(2)) in BLOCKS \
                and not processes.alive(int(match.group(1))):
            found.append(NodeNetwork(AddressPlan(int(match.group(2))), int(match.group(1))))
    return found


def create() -> NodeNetwork:
    """A new network on the first free block (dead runs' bridges removed beforehand)."""
    if os.geteuid() != 0:
        raise NodeNetworkError("Nodes that run containers need root")
    for block in BLOCKS:
        plan = AddressPlan(block)
        if not ip("-4", "route", "show", "root", plan.network).strip() and \
                not ip("-4", "addr", "show", "to", plan.network).strip():
            return NodeNetwork(plan).create()
    raise NodeNetworkError(f"no free block of 198.18.64.0/18 for Nodes ({len(BLOCKS)} in use)")
