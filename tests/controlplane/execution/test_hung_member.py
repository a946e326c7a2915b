"""One member that hangs delays only its own Works: the others apply, it says why it cannot.

The hung member is a real TCP server on loopback (``clusterhealth_localenv.hung``)
that completes the TLS handshake and then answers a byte a second, so every
read succeeds and only the request deadline ends a request.  It gets more
Works than the execution controller has workers, created before the healthy
members' Works, and the healthy members are the environment's real API
servers.  ``bench/hung_member.py`` measures how long the others take (with
ten of them); this test asserts what must be true whatever the timings.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import cpkit

import testkit
from clusterhealth_controlplane import vocabulary
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment, hung

DEADLINE = 3.0
HEALTHY = ("member1", "member2")
HUNG_WORKS = 8
"""Twice the controller's 4 workers."""


def work(name: str, cluster: str) -> dict[str, Any]:
    return {"apiVersion": resources.WORKS.api_version, "kind": "Work",
            "metadata": {"name": name, "namespace": vocabulary.execution_namespace(cluster)},
            "spec": {"workload": {"manifests": [{
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"}, "data": {"a": "1"}}]}}}


def applied(obj: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c["type"] == "Applied"), None)


async def test_a_hung_member_delays_only_its_own_works(
        env: environment.LocalEnvironment, cp: kube.ApiClient,
        members: dict[str, kube.ApiClient]) -> None:
    suffix = uuid.uuid4().hex[:6]
    stuck = f"hung-{suffix}"
    limits = kube.Limits(request_timeout=DEADLINE, max_in_flight=2, stall_after=1.0)
    async with hung.TricklingServer(env.ca, interval=1.0) as member:
        await member.register(cp, stuck)
        created: list[tuple[str, str]] = []
        try:
            for cluster in (stuck, *HEALTHY):
                with contextlib.suppress(errors.Conflict):
                    await cp.create(resources.NAMESPACES, {"metadata": {
                        "name": vocabulary.execution_namespace(cluster)}})
            async with cpkit.running_manager(cp, ["execution"], workers=4,
                                             member_limits=limits):
                # the hung member's Works first: they reach the workers before the others
                for index in range(HUNG_WORKS):
                    created.append((stuck, f"stuck-{suffix}-{index}"))
                for cluster in HEALTHY:
                    created += [(cluster, f"ok-{suffix}-{cluster}-{index}") for index in range(3)]
                for cluster, name in created:
                    await cp.create(resources.WORKS, work(name, cluster))

                async def healthy_applied() -> bool:
                    for cluster, name in created:
                        if cluster == stuck:
                            continue
                        obj = await cp.get(resources.WORKS, name,
                                           namespace=vocabulary.execution_namespace(cluster))
                        condition = applied(obj)
                        if condition is None or condition["status"] != "True":
                            return False
                        if await cpkit.get_or_none(members[cluster], resources.CONFIGMAPS,
                                                   name, "default") is None:
                            return False
                    return True
                await testkit.eventually(healthy_applied, timeout=90,
                                       what="the healthy members' Works applied")

                async def stuck_conditions() -> list[dict[str, Any]] | None:
                    found = []
                    for cluster, name in created:
                        if cluster != stuck:
                            continue
                        obj = await cp.get(resources.WORKS, name,
                                           namespace=vocabulary.execution_namespace(stuck))
                        condition = applied(obj)
                        if condition is None:
                            return None
                        found.append(condition)
                    return found if any("request deadline" in c["message"] for c in found) \
                        else None
                conditions = await testkit.eventually(stuck_conditions, timeout=90,
                                                    what="the hung member's Works failed")
            assert all(c["status"] == "False" for c in conditions), conditions
            by_deadline = [c["message"] for c in conditions if "request deadline" in c["message"]]
            assert f"cluster {stuck} ({member.url}): GET /api/v1: no complete answer within " \
                   f"the {DEADLINE:g}s request deadline" in by_deadline[0], by_deadline
            # the others failed at once instead of queueing on the hung member: its slots
            others = [c["message"] for c in conditions if "request deadline" not in c["message"]]
            assert all("limit: 2 at once" in m for m in others), others
            assert member.requests >= 2
        finally:
            for cluster, name in created:
                namespace = vocabulary.execution_namespace(cluster)
                with contextlib.suppress(errors.NotFound):
                    await cp.patch(resources.WORKS, name, {"metadata": {"finalizers": None}},
                                   namespace=namespace)
                await cp.delete(resources.WORKS, name, namespace=namespace, missing_ok=True)
                if cluster != stuck:
                    await members[cluster].delete(resources.CONFIGMAPS, name,
                                                  namespace="default", missing_ok=True)
            await member.unregister(cp, stuck)
