"""The agent leader in a member with 2,000 Nodes: paged list, small cache, right verdict.

Real kubelets' Nodes are large (images, addresses, capacity, managedFields);
the leader keeps only their conditions.  The audit log shows the initial
list arrived in pages, and the leader's memory stays below the chart's
limit with room to spare (the figure itself is in the benchmarks).
"""

from __future__ import annotations

import asyncio
import pathlib
import time
import uuid
from typing import Any

import agentfleet as c

import testkit
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import dns, environment

NODES = 2000
PAGE = 100
MAX_GROWTH_MIB = 12


def _bulky_node(name: str) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": {f"label-{i}": "x" * 20 for i in range(10)},
                         "annotations": {"note": "y" * 500}},
            "spec": {"podCIDR": "192.168.0.0/24"}}


def _bulky_status() -> dict[str, object]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {"status": {
        "conditions": [{"type": "Ready", "status": "False", "reason": "Test",
                        "message": "not ready", "lastHeartbeatTime": now,
                        "lastTransitionTime": now}],
        "images": [{"names": [f"registry.example/team/image-{i}@sha256:{'a' * 64}",
                              f"registry.example/team/image-{i}:v1.2.{i}"],
                    "sizeBytes": 123456789} for i in range(20)],
        "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}


async def _make_nodes(member: kube.ApiClient, names: list[str]) -> None:
    gate = asyncio.Semaphore(16)

    async def one(name: str) -> None:
        async with gate:
            await member.create(resources.NODES, _bulky_node(name))
            await member.patch(resources.NODES, name, _bulky_status(), subresource="status",
                               patch_type="merge")

    await asyncio.gather(*(one(name) for name in names))


def _rss_mib(pid: int) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _node_lists(env: environment.LocalEnvironment) -> list[dict[str, Any]]:
    """The agents' list requests for Nodes that the member's API server answered."""
    return [e for e in env.audit_events(c.MEMBER, containing=('"clusterhealth-agent', '"list"'))
            if e.get("verb") == "list" and e.get("objectRef", {}).get("resource") == "nodes"
            and e.get("userAgent", "").startswith("clusterhealth-agent")
            and e["stage"] == "ResponseComplete"]


async def _leader_rss(fleet: c.Fleet, cp: kube.ApiClient, node: str,
                      lists: int) -> tuple[float, str]:
    """Start the agent on ``node``; once it has listed ``lists`` pages more and reported,
    settle; its RSS and the message.  (The condition is still True from an earlier run,
    so its status alone does not say the new leader has loaded its cache.)"""
    before = len(_node_lists(fleet.env))
    agent = fleet.start_agent(node)
    try:
        await testkit.eventually(
            lambda: len(_node_lists(fleet.env)) >= before + lists, timeout=180, interval=1.0,
            what=f"the leader's {lists} Node list page(s) in the audit log")
        condition, _ = await c.wait_condition(cp, "True", timeout=60)
        await asyncio.sleep(5)  # a few report periods with the full cache
        assert agent.proc.poll() is None
        return _rss_mib(agent.proc.pid), str(condition["message"])
    finally:
        agent.stop()
        del fleet.agents[node]


async def test_leader_pages_the_node_list_and_keeps_a_small_cache(
        audited_env: environment.LocalEnvironment, python: str, python_env: dict[str, str],
        tmp_path: pathlib.Path) -> None:
    suffix = uuid.uuid4().hex[:5]
    crowd = [f"crowd-{suffix}-{i}" for i in range(NODES)]
    own = f"agent-{suffix}"
    async with audited_env.client(c.MEMBER, max_connections=16) as member, \
            audited_env.client() as cp:
        await member.create(resources.NODES, {"metadata": {"name": own}})
        await c.set_node_ready(member, own)
        server = dns.DnsServer("127.0.0.1", records={
            "kubernetes.default.svc.cluster.local": "10.96.0.1"})
        await asyncio.to_thread(server.start)
        fleet = c.Fleet(audited_env, [own], {own: server}, {}, python, python_env, tmp_path)
        try:
            alone, _ = await _leader_rss(fleet, cp, own, lists=1)
            await _make_nodes(member, crowd)
            crowded, message = await _leader_rss(fleet, cp, own, lists=(NODES + 1) // PAGE)
        finally:
            await asyncio.to_thread(server.stop)
            await asyncio.gather(*(member.delete(resources.NODES, n, missing_ok=True)
                                   for n in [own, *crowd[:200]]))
    # The verdict came from the one Ready node; the 2,000 NotReady ones do not count.
    assert "1/1 Ready nodes" in message, message
    lists = _node_lists(audited_env)
    pages = [e for e in lists if "continue=" in e["requestURI"]]
    assert len(pages) >= NODES // PAGE - 1, [e["requestURI"] for e in lists]
    assert all(f"limit={PAGE}" in e["requestURI"] for e in lists)
    # ~5 KiB of JSON per Node; a cache of whole Nodes would grow by ~30 MiB.
    growth = crowded - alone
    assert growth < MAX_GROWTH_MIB, f"leader RSS {alone:.1f} -> {crowded:.1f} MiB"
