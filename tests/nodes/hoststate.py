"""This machine as an environment with Nodes may change it: sysctls, rules, mounts, links, cgroups.

A :class:`HostState` is taken before an environment starts and after it stops;
the teardown test compares the two.  The machine is shared with other test
runs (API servers, network namespaces of other tests), so what belongs to an
environment is told apart by its marks: its work folder, its bridge's name,
its addresses, its cgroup root, its Nodes' PID namespaces.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import os
import pathlib
import subprocess

from clusterhealth_localenv import nodehost

SYSCTLS = (*nodehost.KUBELET_SYSCTLS, "net.ipv4.ip_forward", "net.ipv4.conf.all.route_localnet",
           "net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables",
           "net.netfilter.nf_conntrack_max", "net.ipv4.conf.all.rp_filter",
           "net.ipv6.conf.all.forwarding", "vm.max_map_count", "fs.inotify.max_user_instances",
           "fs.inotify.max_user_watches")
"""Settings kubelet, kube-proxy, containerd or the CNI plugins may write."""


def _run(*argv: str) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed: {proc.stderr.strip()}")
    return proc.stdout


def _without_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


def _mounts() -> frozenset[tuple[str, str, str]]:
    found = set()
    for line in pathlib.Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        found.add((fields[4], tail[0] if tail else "", tail[1] if len(tail) > 1 else ""))
    return frozenset(found)


def _cgroup_folders() -> frozenset[str]:
    found = set()
    for hierarchy in nodehost.cgroup_hierarchies():
        for folder, _, _ in os.walk(hierarchy):
            found.add(folder)
    return frozenset(found)


def _processes() -> dict[int, tuple[str, str, str]]:
    """pid -> (command line, PID namespace, cgroups)."""
    found = {}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace")
            found[int(entry.name)] = (cmdline, os.readlink(entry / "ns" / "pid"),
                                      (entry / "cgroup").read_text())
    return found


@dataclasses.dataclass(frozen=True)
class HostState:
    """One look at the machine."""

    sysctls: dict[str, str]
    iptables: str
    ip6tables: str
    nft: str
    mounts: frozenset[tuple[str, str, str]]
    """(mount point, type, source) of this process's mount namespace."""
    links: frozenset[str]
    routes: frozenset[str]
    cgroups: frozenset[str]
    processes: dict[int, tuple[str, str, str]]

    @staticmethod
    def take() -> HostState:
        """Read everything now."""
        links = frozenset(line.split(":")[1].strip().split("@")[0]
                          for line in _run("ip", "-o", "link", "show").splitlines())
        return HostState(
            sysctls=nodehost.read_sysctls(SYSCTLS),
            iptables=_without_comments(_run("iptables-save")),
            ip6tables=_without_comments(_run("ip6tables-save")),
            nft=_run("nft", "list", "ruleset"),
            mounts=_mounts(),
            links=links,
            routes=frozenset(_run("ip", "-4", "route", "show", "table", "all").splitlines()),
            cgroups=_cgroup_folders(),
            processes=_processes(),
        )


@dataclasses.dataclass(frozen=True)
class Marks:
    """How an environment's things are recognised."""

    workdir: str
    bridge: str
    network: str
    """Its block, ``198.18.B.0/20``."""
    cgroup_root: str
    pid_namespaces: frozenset[str]
    """``pid:[inode]`` of each of its Nodes."""

    def process(self, cmdline: str, pid_ns: str, cgroups: str) -> bool:
        """Whether a process is the environment's (a Node's, a container's, a helper's)."""
        return self.workdir in cmdline or pid_ns in self.pid_namespaces or \
            f"/{self.cgroup_root}/" in cgroups

    def route(self, line: str) -> bool:
        """Whether a route is the environment's (its bridge, its addresses)."""
        if self.bridge in line.split():
            return True
        block = ipaddress.ip_network(self.network)
        for word in line.split():
            with contextlib.suppress(ValueError):
                if ipaddress.ip_network(word, strict=False).overlaps(block):
                    return True
        return False


def leftovers(before: HostState, after: HostState, marks: Marks) -> dict[str, object]:
    """What ``after`` has of the environment's that ``before`` did not (empty: exact)."""
    found: dict[str, object] = {}
    changed = {k: (v, after.sysctls.get(k)) for k, v in before.sysctls.items()
               if after.sysctls.get(k) != v}
    if changed:
        found["sysctls"] = changed
    for table in ("iptables", "ip6tables", "nft"):
        if getattr(before, table) != getattr(after, table):
            found[table] = getattr(after, table)
    mounts = [m for m in after.mounts - before.mounts
              if marks.workdir in m[0] or m[1] in ("overlay", "nsfs") or "/run/netns/cni" in m[0]
              or "kubelet" in m[0] or "containerd" in m[0]]
    if mounts:
        found["mounts"] = mounts
    links = [name for name in after.links - before.links
             if name.startswith((marks.bridge, "cni", "veth", "eth0"))]
    if links:
        found["links"] = links
    routes = [r for r in after.routes - before.routes if marks.route(r)]
    if routes:
        found["routes"] = routes
    cgroups = sorted(after.cgroups - before.cgroups)
    if cgroups:
        found["cgroups"] = cgroups[:20]
    processes = {pid: info[0] for pid, info in after.processes.items()
                 if pid not in before.processes and marks.process(*info)}
    if processes:
        found["processes"] = processes
    return found
