"""A leader cut off from the API server stops its work before anyone else may lead.

The partition is injected in the leader's own client (its requests fail as if
the network were down) while the candidate talks to the real API server.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

import testkit
from clusterhealth_core import election
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment


def _config(identity: str, lease: str) -> election.ElectionConfig:
    return election.ElectionConfig(
        lease_name=lease, lease_namespace="default", identity=identity,
        lease_duration=3.0, renew_deadline=2.0, retry_period=0.5,
    )


async def test_partitioned_leader_stops_before_takeover(
    env: environment.LocalEnvironment,
) -> None:
    lease = f"partition-{uuid.uuid4().hex[:8]}"
    loop = asyncio.get_running_loop()
    timeline: list[tuple[str, str, float]] = []
    credentials = env.servers[environment.CONTROL_PLANE].credentials()
    api_a = testkit.PartitionableClient(credentials)
    api_b = kube.ApiClient(credentials)
    a = election.LeaderElector(api_a, _config("a", lease))
    b = election.LeaderElector(api_b, _config("b", lease))

    def work(name: str) -> Any:
        async def run() -> None:
            timeline.append(("start", name, loop.time()))
            try:
                await asyncio.Event().wait()
            finally:
                timeline.append(("stop", name, loop.time()))
        return run

    task_a = asyncio.create_task(a.run(work("a")))
    await testkit.eventually(lambda: a.is_leader, interval=0.05, what="a leads")
    task_b = asyncio.create_task(b.run(work("b")))
    await asyncio.sleep(1.0)  # b campaigns a few retry periods: nothing changes
    assert not b.is_leader

    api_a.partitioned = True
    await testkit.eventually(lambda: b.is_leader, interval=0.05, what="b leads")
    stop_a = next(t for kind, who, t in timeline if kind == "stop" and who == "a")
    start_b = next(t for kind, who, t in timeline if kind == "start" and who == "b")
    assert stop_a < start_b
    assert not a.is_leader

    for task in (task_a, task_b):
        task.cancel()
    await asyncio.gather(task_a, task_b, return_exceptions=True)
    await api_a.close()
    await api_b.close()


async def test_release_on_cancel_empties_holder(
    env: environment.LocalEnvironment, cp: kube.ApiClient
) -> None:
    lease = f"release-{uuid.uuid4().hex[:8]}"
    async with env.client() as api:
        elector = election.LeaderElector(api, _config("solo", lease))
        task = asyncio.create_task(elector.run(lambda: asyncio.Event().wait()))
        await testkit.eventually(lambda: elector.is_leader, interval=0.05, what="it leads")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    spec = (await cp.get(resources.LEASES, lease, namespace="default"))["spec"]
    assert spec["holderIdentity"] == ""
    assert spec["leaseTransitions"] == 0


async def test_leader_work_returning_releases_and_returns(env: environment.LocalEnvironment,
                                                           cp: kube.ApiClient) -> None:
    lease = f"done-{uuid.uuid4().hex[:8]}"
    ran: list[bool] = []

    async def once() -> None:
        ran.append(True)

    async with env.client() as api:
        elector = election.LeaderElector(api, _config("once", lease))
        await asyncio.wait_for(elector.run(once), timeout=10)
    assert ran == [True]
    assert not elector.is_leader
    spec = (await cp.get(resources.LEASES, lease, namespace="default"))["spec"]
    assert spec["holderIdentity"] == ""


@pytest.mark.parametrize(
    ("lease", "renew", "retry", "message"),
    [
        (10, 10, 2, "lease duration"),
        (15, 2, 2, "renew deadline"),
        (15, 10, 0, "retry period"),
    ],
)
def test_invalid_timings_are_rejected(lease: float, renew: float, retry: float,
                                      message: str) -> None:
    with pytest.raises(ValueError, match=message):
        election.ElectionConfig("l", "ns", "id", lease, renew, retry)
