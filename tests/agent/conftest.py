"""The ``fleet_factory`` fixture: nodes, DNS servers and agents, always cleaned up."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import agentfleet
import pytest

from clusterhealth_core.kube import resources
from clusterhealth_localenv import conditions, dns, environment


@pytest.fixture
async def fleet_factory(
    plane: environment.LocalEnvironment, python: str, python_env: dict[str, str],
    tmp_path: pathlib.Path,
) -> AsyncIterator[Callable[[int], Awaitable[agentfleet.Fleet]]]:
    fleets: list[agentfleet.Fleet] = []
    member = plane.client(agentfleet.MEMBER)

    async def make(count: int) -> agentfleet.Fleet:
        # Start from a Cluster without the agent's conditions (left by earlier tests);
        # every other writer's conditions stay, whatever the server's list semantics.
        async with plane.client() as cp:
            await conditions.remove_conditions(cp, agentfleet.MEMBER, [agentfleet.DNS_CONDITION],
                                               manager=agentfleet.FIELD_MANAGER)
        suffix = uuid.uuid4().hex[:5]
        nodes = [f"node-{suffix}-{i}" for i in range(count)]
        servers = {}
        for name in nodes:
            await member.create(resources.NODES, {"metadata": {"name": name}})
            await agentfleet.set_node_ready(member, name)
            server = dns.DnsServer("127.0.0.1", records={
                "kubernetes.default.svc.cluster.local": "10.96.0.1"})
            await asyncio.to_thread(server.start)
            servers[name] = server
        fleet = agentfleet.Fleet(plane, nodes, servers, {}, python, python_env, tmp_path)
        fleets.append(fleet)
        return fleet

    yield make

    for fleet in fleets:
        for agent in fleet.agents.values():
            agent.stop()
        for server in fleet.servers.values():
            with contextlib.suppress(Exception):
                await asyncio.to_thread(server.stop)
        for name in fleet.nodes:
            await member.delete(resources.NODES, name, missing_ok=True)
    await member.close()
