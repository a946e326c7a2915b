"""The agent end to end: real member and control-plane API servers, real dnsmasq.

Short settings (period 0.5 s, thresholds 2 s) keep the tests quick; the
behaviour is the same as with the defaults.  The outage test runs against
our control plane and against Karmada's, where ``status.conditions`` is an
atomic list that Karmada's own controller-manager writes ``Ready`` and
``CompleteAPIEnablements`` into: every version of the Cluster is checked.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import agentfleet as c
import pytest

import testkit
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import conditions, environment, waiting

THRESHOLD = 2.0
OTHERS = {"Ready": "True", "CompleteAPIEnablements": "True"}
"""Karmada's own conditions on a member (on our control plane, another writer plays it)."""
Factory = Callable[[int], Awaitable[c.Fleet]]


async def _stop_dns(fleet: c.Fleet, nodes: list[str] | None = None) -> float:
    """Stop the nodes' dnsmasq; return when the first was stopped (the earliest change)."""
    began = time.monotonic()
    for name in nodes or fleet.nodes:
        await asyncio.to_thread(fleet.servers[name].stop)
    return began


async def _start_dns(fleet: c.Fleet, nodes: list[str] | None = None) -> float:
    """Start the nodes' dnsmasq; return when the first was started (the earliest change)."""
    began = time.monotonic()
    for name in nodes or fleet.nodes:
        await asyncio.to_thread(fleet.servers[name].start)
    return began


async def _reporting(fleet_factory: Factory, nodes: int, cp: kube.ApiClient
                     ) -> tuple[c.Fleet, dict[str, Any]]:
    """A fleet of ``nodes`` with an agent on each, once it reports the member healthy."""
    fleet: c.Fleet = await fleet_factory(nodes)
    for node in fleet.nodes:
        fleet.start_agent(node)
    cond, _ = await c.wait_condition(cp, "True", timeout=30)
    return fleet, cond


async def _wait_leader(fleet: c.Fleet, timeout: float = 15) -> c.AgentProcess:
    async def leader() -> c.AgentProcess | None:
        leaders = await asyncio.to_thread(fleet.leaders)
        assert len(leaders) <= 1, [a.node for a in leaders]
        return leaders[0] if leaders else None

    found: c.AgentProcess = await testkit.eventually(leader, timeout, "an agent leads")
    return found


async def _stays_true(cp: kube.ApiClient, seconds: float) -> dict[str, Any]:
    """The member's condition, True at every look for ``seconds`` (real agents' timers)."""
    deadline = time.monotonic() + seconds
    while True:
        cond = await c.cluster_condition(cp)
        assert cond is not None and cond["status"] == "True", cond
        if time.monotonic() >= deadline:
            return cond
        await asyncio.sleep(0.2)


async def _others_written(plane: environment.LocalEnvironment, cp: kube.ApiClient) -> None:
    """Karmada has written its conditions on the member; ours: another writer has."""
    if not plane.is_karmada:
        await conditions.set_conditions(cp, c.MEMBER, OTHERS, manager="cluster-status-like")

    async def written() -> bool:
        found = conditions.statuses(await cp.get(resources.CLUSTERS, c.MEMBER))
        return all(found.get(ctype) == value for ctype, value in OTHERS.items())

    await waiting.eventually(written, timeout=60)


@pytest.mark.planes("ours", "karmada")
async def test_dns_outage_detected_and_cleared(fleet_factory: Factory,
                                               plane: environment.LocalEnvironment,
                                               cp: kube.ApiClient) -> None:
    fleet: c.Fleet = await fleet_factory(2)
    await _others_written(plane, cp)
    async with conditions.versions(cp, c.MEMBER) as versions:
        for node in fleet.nodes:
            fleet.start_agent(node)
        await c.wait_condition(cp, "True", timeout=30)

        stopped = await _stop_dns(fleet)
        cond, seen = await c.wait_condition(cp, "False", timeout=30)
        assert cond["reason"] == "ServiceDomainNameResolutionFailed"
        assert "2/2 Ready nodes failing" in cond["message"]
        assert seen - stopped >= THRESHOLD  # not before the failure threshold

        started = await _start_dns(fleet)
        cond, seen = await c.wait_condition(cp, "True", timeout=30)
        assert cond["reason"] == "ServiceDomainNameResolutionReady"
        assert seen - started >= THRESHOLD

    # No version of the Cluster lost the other writer's conditions (on Karmada's
    # atomic list an applied report would have replaced them), and the watch saw
    # the agent's condition appear and flip.
    for version in versions:
        found = conditions.statuses(version)
        assert OTHERS.keys() <= found.keys(), (version["metadata"]["resourceVersion"], found)
    reported = [conditions.statuses(v).get(c.DNS_CONDITION) for v in versions]
    flips = [s for i, s in enumerate(reported) if s and (i == 0 or reported[i - 1] != s)]
    assert flips == ["True", "False", "True"], reported


async def test_flap_shorter_than_threshold_changes_nothing(
    fleet_factory: Factory, cp: kube.ApiClient
) -> None:
    fleet, before = await _reporting(fleet_factory, 2, cp)
    await asyncio.sleep(1.5)  # let the nodes settle on True
    await _stop_dns(fleet)
    await asyncio.sleep(THRESHOLD / 2)
    await _start_dns(fleet)
    after = await _stays_true(cp, 2 * THRESHOLD)
    assert after["lastTransitionTime"] == before["lastTransitionTime"]


async def test_leader_killed_reporting_continues_only_leader_writes(
    fleet_factory: Factory, cp: kube.ApiClient
) -> None:
    fleet, _ = await _reporting(fleet_factory, 3, cp)
    leader = await _wait_leader(fleet)
    await testkit.eventually(  # its first report written: its metrics say so
        lambda: asyncio.to_thread(
            leader.sample, "clusterhealth_agent_last_report_success_timestamp_seconds"),
        10, "the leader's report")
    for agent in fleet.agents.values():
        written = await asyncio.to_thread(
            agent.sample, "clusterhealth_agent_last_report_success_timestamp_seconds")
        assert (written is not None) == (agent is leader), agent.node

    leader.proc.kill()  # kill -9; the DaemonSet controller restarts the pod
    leader.proc.wait()
    killed_node = leader.node
    restarted = fleet.start_agent(killed_node)
    new_leader = await _wait_leader(fleet)
    assert new_leader.proc.pid != leader.proc.pid

    await _stop_dns(fleet)
    cond, _ = await c.wait_condition(cp, "False", timeout=30)
    assert "3/3 Ready nodes failing" in cond["message"]
    leaders = await asyncio.to_thread(fleet.leaders)
    assert leaders == [new_leader]
    for agent in fleet.agents.values():
        written = await asyncio.to_thread(
            agent.sample, "clusterhealth_agent_last_report_success_timestamp_seconds")
        assert (written is not None) == (agent is new_leader), agent.node
    assert restarted.proc.poll() is None


async def test_quorum(fleet_factory: Factory, cp: kube.ApiClient) -> None:
    # default quorum: one node of three failing changes nothing
    fleet, _ = await _reporting(fleet_factory, 3, cp)
    await _stop_dns(fleet, fleet.nodes[:1])
    cond = await _stays_true(cp, THRESHOLD + 3)
    assert "failing: " in cond["message"]  # visible, not acted on
    for agent in fleet.agents.values():
        agent.stop()

    # --failure-quorum 0.3: the same single failing node turns the condition False
    for node in fleet.nodes:
        fleet.start_agent(node, ["--failure-quorum", "0.3"])
    cond, _ = await c.wait_condition(cp, "False", timeout=30)
    assert "1/3 Ready nodes failing" in cond["message"]
    assert fleet.nodes[0] in cond["message"]


async def test_control_plane_restarted_during_failure(
    fleet_factory: Factory, env: environment.LocalEnvironment, cp: kube.ApiClient
) -> None:
    fleet, _ = await _reporting(fleet_factory, 2, cp)
    await env.stop_server(environment.CONTROL_PLANE)
    try:
        await _stop_dns(fleet)
        await asyncio.sleep(THRESHOLD + 2)  # the failure is detected while the CP is down
    finally:
        await env.start_server(environment.CONTROL_PLANE)
    cond, _ = await c.wait_condition(cp, "False", timeout=30)
    assert cond["reason"] == "ServiceDomainNameResolutionFailed"
    await _start_dns(fleet)
    await c.wait_condition(cp, "True", timeout=30)


async def test_member_api_server_down_stops_reporting(
    fleet_factory: Factory, env: environment.LocalEnvironment, cp: kube.ApiClient
) -> None:
    fleet, _ = await _reporting(fleet_factory, 2, cp)
    await _wait_leader(fleet)
    await env.stop_server(c.MEMBER)
    try:
        # Without its API server nobody can renew the Lease: leadership ends within
        # the renew deadline (2 s here) and nobody reports a stale result as fresh.
        async def nobody_leads() -> bool:
            return not await asyncio.to_thread(fleet.leaders)

        await testkit.eventually(nobody_leads, 10, "no agent leads without its API server")
        for agent in fleet.agents.values():
            assert agent.proc.poll() is None  # still running, still probing
    finally:
        await env.start_server(c.MEMBER)
    await _wait_leader(fleet, timeout=30)
