"""Seed 000's failover demo, end to end, with member API servers really stopped.

Divided 1:2, 3 replicas over member1/member2, on members that run Pods
(kube-controller-manager, kube-scheduler and kwok each).  member1's API
server is stopped: its Cluster turns Ready False only after the failure
threshold, gets the NoSchedule taint, the NoExecute taint after the eviction
timeout, and the binding is evicted after the policy's toleration; the
scheduler places the 3 replicas on member2, whose Pods become Ready.  member1
is started again: its stale Work and Deployment are removed, and the split
stays as it is unless the policy asks for failback, in which case 1:2
returns after the stabilisation window.

Every controller of the controller manager runs in-process with the timers
shortened (the values below); the scheduler runs as its own process, as
shipped.  The tests check the order of what happens and that nothing happens
before its timer, never how fast (the failover benchmark measures that).
"""

from __future__ import annotations

import asyncio
import pathlib
import subprocess
import uuid
from collections.abc import Iterator

import cpkit
import pytest
import seedkit

import testkit
from clusterhealth_controlplane import controllers
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment, workloads

EVERY_CONTROLLER = tuple(controllers.NAMES)
TIMERS = seedkit.TIMERS


@pytest.fixture
def scheduler(workload_env: environment.LocalEnvironment, python_env: dict[str, str],
              tmp_path: pathlib.Path) -> Iterator[subprocess.Popen[bytes]]:
    with cpkit.scheduler_process(workload_env, python_env, tmp_path / "scheduler.log") as proc:
        yield proc


async def run_demo(env: environment.LocalEnvironment, *, failback: bool) -> None:
    name = f"nginx-{uuid.uuid4().hex[:6]}"
    namespace = f"failover-{uuid.uuid4().hex[:6]}"
    async with env.client() as cp, cpkit.running_manager(cp, EVERY_CONTROLLER,
                                                         failover=TIMERS) as running:
        await testkit.eventually(lambda: seedkit.members_clean(cp), timeout=90,
                                 what="member1 and member2 Ready and untainted")
        await cp.create(resources.NAMESPACES, {"metadata": {"name": namespace}})
        await cp.create(resources.DEPLOYMENTS, cpkit.deployment(name, namespace),
                        namespace=namespace)
        await cp.create(resources.PROPAGATION_POLICIES,
                        seedkit.policy(name, namespace, failback=failback), namespace=namespace)
        await seedkit.wait_split(env, namespace, name, {"member1": 1, "member2": 2})
        try:
            line = await seedkit.fail_over(env, cp, namespace, [name])
        finally:
            await env.start_server("member1")
            async with env.client("member1") as member1:  # leave it as found: running Pods
                await workloads.wait_runs_pods(member1)
        # the order of the chain, and nothing before its timer
        line.check_order(TIMERS)

        evictions = running.registry.get_sample_value(
            "clusterhealth_evictions_total", {"result": "success", "reason": "TaintUntolerated"})
        assert evictions is not None and evictions >= 1, "no eviction by the taint manager"

        # member1 back: its stale Work and Deployment go; Ready again, taints removed
        async def member1_clean() -> bool:
            stale = await seedkit.member_state(env, namespace, name, "member1")
            return await seedkit.member1_clean(cp) and (stale is None or failback)
        await testkit.eventually(member1_clean, timeout=90, what="member1 Ready and clean")
        if failback:
            await seedkit.wait_split(env, namespace, name, {"member1": 1, "member2": 2})
        else:
            works = await cp.list(resources.WORKS, namespace="karmada-es-member1")
            assert not [w for w in works["items"]
                        if w["metadata"]["name"].startswith(name)], "member1's Work stayed"
            # after the window (and a margin) nothing moved back
            await asyncio.sleep(TIMERS.failback.window + 3.0)
            await seedkit.wait_split(env, namespace, name, {"member1": None, "member2": 3},
                                     timeout=5)
        await cp.delete(resources.DEPLOYMENTS, name, namespace=namespace)
        await seedkit.wait_split(env, namespace, name, {"member1": None, "member2": None})


async def test_member_stopped_fails_over_to_member2_and_stale_objects_go(
        workload_env: environment.LocalEnvironment,
        scheduler: subprocess.Popen[bytes]) -> None:
    await run_demo(workload_env, failback=False)


async def test_failback_returns_the_split_after_the_window(
        workload_env: environment.LocalEnvironment,
        scheduler: subprocess.Popen[bytes]) -> None:
    await run_demo(workload_env, failback=True)
