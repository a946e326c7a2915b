"""Writers of different Cluster status fields never lose each other's writes.

Two writers flip their own condition hundreds of times concurrently while a
third owns ``remedyActions``; a watch checks every intermediate version.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid

from clusterhealth_core import status
from clusterhealth_core.api import meta
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources

WRITES = 200


def _condition(type_: str, value: bool, n: int) -> meta.Condition:
    return meta.Condition(
        type=type_,
        status=meta.ConditionStatus.TRUE if value else meta.ConditionStatus.FALSE,
        last_transition_time=datetime.datetime.now(datetime.UTC).replace(microsecond=0),
        reason="Flip",
        message=f"write {n}",
    )


async def _writer(api: kube.ApiClient, cluster: str, type_: str, manager: str) -> None:
    for n in range(WRITES):
        await status.apply_conditions(
            api, resources.CLUSTERS, cluster, [_condition(type_, n % 2 == 0, n)],
            field_manager=manager,
        )


async def test_concurrent_writers_lose_nothing(cp: kube.ApiClient) -> None:
    name = f"writers-{uuid.uuid4().hex[:6]}"
    created = await cp.create(resources.CLUSTERS, {
        "apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"apiEndpoint": "https://127.0.0.1:1", "syncMode": "Push"},
    })
    await status.apply_status(cp, resources.CLUSTERS, name, {"remedyActions": ["TrafficControl"]},
                              field_manager="remedy-controller")
    await status.apply_conditions(cp, resources.CLUSTERS, name,
                                  [_condition("Ready", True, -1)], field_manager="cluster-status")
    await status.apply_conditions(
        cp, resources.CLUSTERS, name, [_condition("ServiceDomainNameResolutionReady", True, -1)],
        field_manager="agent",
    )
    start_rv = (await cp.get(resources.CLUSTERS, name))["metadata"]["resourceVersion"]

    seen: list[dict[str, object]] = []

    async def watch() -> None:
        async for event in cp.watch(resources.CLUSTERS, resource_version=start_rv,
                                    timeout_seconds=120):
            if event.object["metadata"]["name"] != name:
                continue
            seen.append(event.object)
            st = event.object.get("status", {})
            messages = {c["type"]: c["message"] for c in st.get("conditions", [])}
            if messages == {"Ready": f"write {WRITES - 1}",
                            "ServiceDomainNameResolutionReady": f"write {WRITES - 1}"}:
                return

    watcher = asyncio.create_task(watch())
    await asyncio.gather(
        _writer(cp, name, "Ready", "cluster-status"),
        _writer(cp, name, "ServiceDomainNameResolutionReady", "agent"),
    )
    await asyncio.wait_for(watcher, timeout=60)

    assert len(seen) >= WRITES  # the watch really saw the interleaving
    for obj in seen:
        st = obj["status"]
        assert isinstance(st, dict)
        types = sorted(c["type"] for c in st["conditions"])
        assert types == ["Ready", "ServiceDomainNameResolutionReady"], st
        assert st["remedyActions"] == ["TrafficControl"], st
    final = await cp.get(resources.CLUSTERS, name)
    by_type = {c["type"]: c for c in final["status"]["conditions"]}
    assert by_type["Ready"]["status"] == "False"  # write 199 is odd -> False
    assert by_type["ServiceDomainNameResolutionReady"]["message"] == f"write {WRITES - 1}"
    managers = {m["manager"] for m in final["metadata"]["managedFields"]}
    assert {"agent", "cluster-status", "remedy-controller"} <= managers
    assert created["metadata"]["name"] == name

    # Removing its own field is possible for a writer, and touches no other.
    await status.apply_status(cp, resources.CLUSTERS, name, {}, field_manager="remedy-controller")
    after = (await cp.get(resources.CLUSTERS, name))["status"]
    assert "remedyActions" not in after
    assert len(after["conditions"]) == 2
    await cp.delete(resources.CLUSTERS, name)


async def test_transition_time_kept_when_status_unchanged() -> None:
    early = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    late = datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)
    live = [meta.Condition(type="Ready", status=meta.ConditionStatus.TRUE,
                           last_transition_time=early, reason="A", message="a")]
    same = meta.Condition(type="Ready", status=meta.ConditionStatus.TRUE,
                          last_transition_time=late, reason="B", message="b")
    flipped = meta.Condition(type="Ready", status=meta.ConditionStatus.FALSE,
                             last_transition_time=late, reason="C", message="c")
    assert status.keep_transition_times(live, [same])[0].last_transition_time == early
    assert status.keep_transition_times(live, [same])[0].reason == "B"
    assert status.keep_transition_times(live, [flipped])[0].last_transition_time == late
