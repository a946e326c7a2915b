"""A write that changes only provenance follows the writes that act (decision 0009).

On the real control-plane API server: a Remedy naming many Clusters is
created; a few of them already carry its action because another Remedy acts
on them, so for those only ``remedyActionSources`` changes.  Their writes wait
while the others are queued, then land.  Order and eventual presence are
asserted, never a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import remedykit as k

import testkit
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources

TC = "TrafficControl"
CLUSTERS = 40
ALREADY = 4
"""Clusters another Remedy acts on already: 4 of 40 all written last by chance: 1 in 91,390."""
Start = Callable[..., k.Controller]


def _owned(obj: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    status = obj.get("status") or {}
    return list(status.get("remedyActions") or []), list(status.get("remedyActionSources") or [])


def _sources(*remedies: str) -> list[dict[str, Any]]:
    return [{"action": TC, "remedies": sorted(remedies)}]


async def test_provenance_only_writes_follow_the_writes_that_act(
        controllers: Start, cp: kube.ApiClient, cleanup: dict[str, list[str]]) -> None:
    names = [testkit.unique(f"prov{i}") for i in range(CLUSTERS)]
    for name in names:
        await testkit.make_cluster(cp, name)
        cleanup["clusters"].append(name)
        await k.set_condition(cp, name, "False")
    already, others = names[:ALREADY], names[ALREADY:]
    named, everywhere = testkit.unique("named"), testkit.unique("all")
    await k.make_remedy(cp, named, already)
    cleanup["remedies"].append(named)
    ctrl = controllers()

    async def settled() -> str | None:
        listing = await cp.list(resources.CLUSTERS)
        found = {i["metadata"]["name"]: _owned(i) for i in listing["items"]}
        ready = (all(found[n] == ([TC], _sources(named)) for n in already)
                 and all(found[n] == ([], []) for n in others))
        return str(listing["metadata"]["resourceVersion"]) if ready else None
    version = await k.eventually(settled)

    order: list[tuple[str, str]] = []  # (cluster, "acts" | "provenance"), in etcd's order
    expected = {**{n: ([TC], _sources(named, everywhere)) for n in already},
                **{n: ([TC], _sources(everywhere)) for n in others}}

    async def follow() -> None:
        pending = set(expected)
        async for event in cp.watch(resources.CLUSTERS, resource_version=version,
                                    timeout_seconds=60):
            if event.type == "BOOKMARK" or event.object["metadata"]["name"] not in pending:
                continue
            name = event.object["metadata"]["name"]
            actions, sources = _owned(event.object)
            if name in already:
                assert actions == [TC], f"{name}'s actions changed: {actions}"
            if (actions, sources) == expected[name]:
                order.append((name, "provenance" if name in already else "acts"))
                pending.discard(name)
            if not pending:
                return

    watching = asyncio.create_task(follow())
    await asyncio.sleep(0.2)  # the watch is open (it starts at `version` anyway)
    await k.make_remedy(cp, everywhere, names)
    cleanup["remedies"].insert(0, everywhere)
    async with asyncio.timeout(60):  # a hang guard, not a figure
        await watching

    kinds = [kind for _, kind in order]
    assert kinds == ["acts"] * len(others) + ["provenance"] * len(already), order

    # The held writes waited a quiet second after the last write that acts, each on its
    # own timer: not queued again by every reconcile that ended meanwhile (that went
    # round the queue for the whole second: thousands of evaluations).
    (evaluations,) = (await asyncio.to_thread(
        ctrl.samples, "clusterhealth_remedy_evaluations_total")).values()
    assert evaluations <= 10 * CLUSTERS, evaluations

    # The source series says what is decided; no Event is recorded for a provenance change.
    sources = await asyncio.to_thread(ctrl.samples, "clusterhealth_remedy_action_sources")
    series = {(dict(labels)["cluster"], dict(labels)["remedy"]) for labels in sources}
    assert {(n, everywhere) for n in already} <= series

    async def added_events() -> list[dict[str, Any]] | None:
        found = await cp.list(resources.EVENTS, namespace="default",
                              field_selector="reason=RemedyActionAdded")
        mine = [e for e in found["items"] if e["involvedObject"]["name"] in expected]
        return mine if len(mine) >= CLUSTERS else None  # one per Cluster whose actions changed

    for event in await k.eventually(added_events):
        name = event["involvedObject"]["name"]
        assert (everywhere in event["message"]) is (name in others), event["message"]
