"""Start and stop are exact: after an environment with Nodes stops, nothing of it is left.

Its own environment (not ``node_env``, which lives for the whole session): a
host cluster, the control plane's own cluster with one Node (the mode the
add-ons' charts are installed into; ``node_env`` has Nodes in a member),
running CoreDNS and a Pod of the test image, kube-proxy in iptables mode
(``node_env`` runs nftables mode, so both are exercised).  The machine is
looked at before the start, while it runs (the marks must find its processes,
links, routes and cgroups, so the comparison can fail) and after the stop:
sysctls, ``iptables-save``, ``ip6tables-save``, ``nft list ruleset``,
``/proc/self/mountinfo``, ``ip link``, routes, cgroup folders, processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import shutil
import subprocess
import tempfile

import hoststate
import nodekit
import pytest

from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment, folderimages, nodehost, nodenet, nodes


@pytest.mark.timeout(300)
async def test_an_environment_with_nodes_leaves_the_machine_as_it_found_it(
        tmp_path: pathlib.Path) -> None:
    config = environment.EnvironmentConfig(
        members=(), workdir=tmp_path / "env",
        nodes=nodes.NodeSettings(control_plane_nodes=1, coredns_replicas=1,
                                 proxy_mode="iptables"))
    image = await asyncio.to_thread(folderimages.busybox_image, tmp_path / "busybox.tar",
                                    nodekit.IMAGE)
    before = await asyncio.to_thread(hoststate.HostState.take)
    env = environment.LocalEnvironment(config)
    try:
        await env.start()
        assert env.node_env is not None
        network = env.node_env.network
        cgroups = env.node_env.cgroups
        assert network is not None
        assert cgroups is not None
        host = env.node_cluster(environment.CONTROL_PLANE)
        assert host.node_names == ["control-plane-node-0"]
        await host.load_image(image.archive)
        async with env.client() as api:
            await nodekit.ensure_namespace(api, "teardown")
            await api.create(resources.PODS, nodekit.pod("sleeper", "teardown", "sleep 100000"),
                             namespace="teardown")
            await nodekit.wait_running(api, "sleeper", "teardown")
        pid_namespaces = frozenset(os.readlink(f"/proc/{node.init_pid}/ns/pid")
                                   for node in host.nodes)
        marks = hoststate.Marks(str(env.workdir), network.bridge, network.plan.network,
                                cgroups.name, pid_namespaces)
        during = await asyncio.to_thread(hoststate.HostState.take)
        seen = hoststate.leftovers(before, during, marks)
        # The marks find the environment while it runs: the comparison below can fail.
        assert {"links", "routes", "cgroups", "processes"} <= set(seen), seen
        running = seen["processes"]
        assert isinstance(running, dict)
        names = " ".join(str(cmd) for cmd in running.values())
        for part in ("kubelet", "kube-proxy", "containerd", "coredns", "sleep 100000"):
            assert part in names, part
        # Containers' mounts and the Nodes' rules live in the Nodes' namespaces only.
        assert "mounts" not in seen, seen.get("mounts")
        assert host.nodes[0].init_pid is not None
        inside = await asyncio.to_thread(nodenet.in_namespace, host.nodes[0].init_pid,
                                         "iptables-save")
        assert "-A KUBE-SERVICES" in inside  # kube-proxy's iptables mode, in the Node
        for table in ("iptables", "ip6tables", "nft"):
            assert table not in seen, seen.get(table)
    finally:
        await env.stop()
    after = await asyncio.to_thread(hoststate.HostState.take)
    assert hoststate.leftovers(before, after, marks) == {}


def test_what_a_killed_run_left_is_removed_by_the_next() -> None:
    """A run killed outright (its Nodes die with it) leaves a bridge with routes, cgroup
    folders and kernel settings: the next start removes and restores them."""
    dead = int(pathlib.Path("/proc/sys/kernel/pid_max").read_text()) + 7  # never a live pid
    network = nodenet.NodeNetwork(nodenet.AddressPlan(3), owner=dead)
    cgroups = nodehost.CgroupRoot(network.tag)
    state = pathlib.Path(tempfile.mkdtemp(prefix="clusterhealth-sweep-")) / "sysctls.json"
    names = ("kernel.panic",)
    original = nodehost.read_sysctls(names)
    try:
        network.create()
        network.route(nodenet.AddressPlan(3).node_pod_cidr(1, 0), "198.18.112.33")
        cgroups.create(["member1-node-0"])
        (pathlib.Path("/sys/fs/cgroup/memory") / cgroups.name / "member1-node-0" / "kubepods"
         ).mkdir()
        # what the dead run's kubelet set, and its record of what was there before
        state.write_text(json.dumps({"holders": [dead], "values": original}))
        nodehost.write_sysctls({"kernel.panic": str(int(original["kernel.panic"]) + 9)})

        removed = nodes.sweep(nodehost.KernelSettings(names, state))
        assert {network.bridge, cgroups.name, "sysctls"} <= set(removed)
        assert nodehost.read_sysctls(names) == original
        assert not state.exists()
        assert network.bridge not in subprocess.run(
            ["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
        assert "198.18.113.0/26" not in subprocess.run(
            ["ip", "-4", "route"], capture_output=True, text=True, check=True).stdout
        assert cgroups.folders() == []
    finally:
        network.destroy()
        cgroups.destroy()
        nodehost.write_sysctls(original)
        shutil.rmtree(state.parent, ignore_errors=True)
