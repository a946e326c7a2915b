"""Handover from another field manager, and what Karmada does worse, on the real API server.

A user switching from Karmada's remedy controller leaves ``remedyActions``
owned by Karmada's field manager; a server-side apply of ``{}`` would leave
them in place.  The controller must make the Cluster end up as computed,
without touching anybody else's conditions.  Played here by a test writer
on our control plane, and by Karmada's own remedy controller (in
``karmada-controller-manager``) on Karmada's API.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import remedykit as k

import testkit
from clusterhealth_core import status
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment

TC = ["TrafficControl"]
KARMADA = "karmada-remedy-controller"
OURS = "clusterhealth-remedy"
Start = Callable[..., k.Controller]


async def _cluster(cp: kube.ApiClient, cleanup: dict[str, list[str]], dns: str = "True") -> str:
    name = testkit.unique("hand")
    await testkit.make_cluster(cp, name)
    cleanup["clusters"].append(name)
    await k.set_condition(cp, name, dns, manager="agent-like")
    return name


async def _foreign_write(cp: kube.ApiClient, cluster: str, how: str) -> None:
    """Karmada's controller wrote remedyActions (apply, or an update as client-go does)."""
    if how == "apply":
        await status.apply_status(cp, resources.CLUSTERS, cluster, {"remedyActions": TC},
                                  field_manager=KARMADA)
    else:
        await cp.patch(resources.CLUSTERS, cluster, {"status": {"remedyActions": TC}},
                       subresource="status", field_manager=KARMADA)


def _owners(obj: dict[str, Any], field: str) -> set[str]:
    return {e["manager"] for e in obj["metadata"].get("managedFields") or []
            if f"f:{field}" in ((e.get("fieldsV1") or {}).get("f:status") or {})}


def _agent_condition(obj: dict[str, Any]) -> dict[str, Any]:
    (condition,) = [c for c in obj["status"]["conditions"] if c["type"] == k.DNS]
    return dict(condition)


async def _events(cp: kube.ApiClient, name: str, reason: str) -> list[dict[str, Any]]:
    found = await cp.list(resources.EVENTS, namespace="default",
                          field_selector=f"involvedObject.name={name},reason={reason}")
    return list(found["items"])


@pytest.mark.parametrize("how", ["apply", "update"])
async def test_actions_of_another_manager_are_cleared(
        controllers: Start, cp: kube.ApiClient, cleanup: dict[str, list[str]],
        how: str) -> None:
    cluster = await _cluster(cp, cleanup)
    await _foreign_write(cp, cluster, how)
    before = await cp.get(resources.CLUSTERS, cluster)
    assert before["status"]["remedyActions"] == TC
    assert _owners(before, "remedyActions") == {KARMADA}
    agent_before = _agent_condition(before)

    controllers()  # no Remedy asks for TrafficControl on this cluster
    await k.eventually(lambda: _is(cp, cluster, []))
    after = await cp.get(resources.CLUSTERS, cluster)
    assert "remedyActions" not in after["status"]
    assert _owners(after, "remedyActions") == set()
    assert _agent_condition(after) == agent_before  # another writer's condition, untouched
    assert "agent-like" in {e["manager"] for e in after["metadata"]["managedFields"]}

    removed = await k.eventually(lambda: _events(cp, cluster, "RemedyActionRemoved"))
    assert "TrafficControl removed" in removed[0]["message"]
    assert KARMADA in removed[0]["message"]
    await asyncio.sleep(1)
    assert await k.actions(cp, cluster) == []  # and it stays so


async def test_matching_remedy_converges_and_a_later_clear_works(
        controllers: Start, cp: kube.ApiClient, cleanup: dict[str, list[str]]) -> None:
    cluster = await _cluster(cp, cleanup, dns="False")
    await _foreign_write(cp, cluster, "apply")
    remedy = testkit.unique("hand")
    await k.make_remedy(cp, remedy, [cluster])
    cleanup["remedies"].append(remedy)
    controllers()

    async def ours_too() -> dict[str, Any] | None:
        obj = await cp.get(resources.CLUSTERS, cluster)
        sources = obj["status"].get("remedyActionSources")
        ours = sources == [{"action": "TrafficControl", "remedies": [remedy]}]
        return obj if ours and OURS in _owners(obj, "remedyActions") else None

    obj = await k.eventually(ours_too)
    assert obj["status"]["remedyActions"] == TC  # the same value as Karmada's

    await k.set_condition(cp, cluster, "True", manager="agent-like")
    await k.eventually(lambda: _is(cp, cluster, []))
    after = await cp.get(resources.CLUSTERS, cluster)
    assert not {"remedyActions", "remedyActionSources"} & set(after["status"])
    assert _agent_condition(after)["status"] == "True"
    # and it acts again when asked to
    await k.set_condition(cp, cluster, "False", manager="agent-like")
    await k.eventually(lambda: _is(cp, cluster, TC))


async def test_a_stale_take_over_is_refused_not_applied(
        cp: kube.ApiClient, cleanup: dict[str, list[str]]) -> None:
    """The merge patch the controller uses is guarded by the resourceVersion it read."""
    cluster = await _cluster(cp, cleanup)
    await _foreign_write(cp, cluster, "apply")
    stale = (await cp.get(resources.CLUSTERS, cluster))["metadata"]["resourceVersion"]
    await k.set_condition(cp, cluster, "False", manager="agent-like")  # moves on meanwhile
    with pytest.raises(errors.Conflict):
        await cp.patch(resources.CLUSTERS, cluster,
                       {"metadata": {"resourceVersion": stale},
                        "status": {"remedyActions": None, "remedyActionSources": None}},
                       subresource="status", field_manager=OURS)
    assert await k.actions(cp, cluster) == TC


async def test_cluster_created_after_start_is_handled_at_once(
        controllers: Start, cp: kube.ApiClient, cleanup: dict[str, list[str]]) -> None:
    name = testkit.unique("late")
    remedy = testkit.unique("late")
    await k.make_remedy(cp, remedy, [name], match=None)  # names a cluster not there yet
    cleanup["remedies"].append(remedy)
    ctrl = controllers()
    await k.eventually(lambda: asyncio.to_thread(ctrl.is_leader))
    await testkit.make_cluster(cp, name)
    cleanup["clusters"].append(name)
    await k.eventually(lambda: _is(cp, name, TC))


async def test_remedy_deleted_while_the_controller_was_down(
        controllers: Start, cp: kube.ApiClient, cleanup: dict[str, list[str]]) -> None:
    cluster = await _cluster(cp, cleanup, dns="False")
    remedy = testkit.unique("down")
    await k.make_remedy(cp, remedy, [cluster])
    cleanup["remedies"].append(remedy)
    first = controllers()
    await k.eventually(lambda: _is(cp, cluster, TC))
    first.stop()
    await cp.delete(resources.REMEDIES, remedy)
    controllers()
    await k.eventually(lambda: _is(cp, cluster, []))


async def _is(cp: kube.ApiClient, cluster: str, wanted: list[str]) -> bool:
    return await k.actions(cp, cluster) == wanted


async def test_a_new_term_keeps_since_and_never_drops_active_clusters(
        controllers: Start, cp: kube.ApiClient, cleanup: dict[str, list[str]]) -> None:
    """Remedy statuses wait for the first pass over the Clusters of a new term.

    While the controller is down, Clusters that sort before the active one
    appear and need writes; a status written during the first pass would drop
    the active cluster (and its ``since``) until the pass reaches it.
    """
    cluster = await _cluster(cp, cleanup, dns="False")
    early = [f"a0-{testkit.unique('early')}-{i:02d}" for i in range(20)]
    remedy = testkit.unique("since")
    await k.make_remedy(cp, remedy, [cluster, *early])
    cleanup["remedies"].append(remedy)
    first = controllers()

    async def active() -> list[dict[str, Any]] | None:
        st = (await cp.get(resources.REMEDIES, remedy)).get("status") or {}
        return st.get("activeClusters")

    (entry,) = await k.eventually(active)
    first.stop()
    version = (await cp.get(resources.REMEDIES, remedy))["metadata"]["resourceVersion"]
    for name in early:
        await testkit.make_cluster(cp, name)
        cleanup["clusters"].append(name)
        await k.set_condition(cp, name, "False", manager="agent-like")
    await asyncio.sleep(1)  # a later second: a status rewritten now would say so
    controllers()
    for name in early:
        await k.eventually(lambda n=name: _is(cp, n, TC))  # type: ignore[misc]
    await asyncio.sleep(6)  # past the status coalescing delay of the new term
    async with asyncio.timeout(10):  # every version since the restart
        seen = [e async for e in cp.watch(resources.REMEDIES, resource_version=version,
                                          field_selector=f"metadata.name={remedy}",
                                          timeout_seconds=2)
                if e.type != "BOOKMARK"]
    assert seen  # the new clusters were added
    for event in seen:
        assert entry in event.object["status"]["activeClusters"], event.object["status"]
    final = await active()
    assert final is not None and len(final) == 21 and entry in final


async def _run_karmada(plane: environment.LocalEnvironment, *controllers: str) -> None:
    """Restart ``karmada-controller-manager`` with ``controllers`` added to its default ones."""
    karmada = plane.karmada
    assert karmada is not None
    await karmada.stop_controller_manager()
    await karmada.start_controller_manager([*plane.config.karmada.controllers, *controllers])


@pytest.mark.planes("karmada")
async def test_handover_from_karmada_s_own_remedy_controller(
        controllers: Start, plane: environment.LocalEnvironment, cp: kube.ApiClient,
        cleanup: dict[str, list[str]]) -> None:
    """Karmada's remedy controller sets TrafficControl; it is switched off; ours clears it."""
    assert plane.karmada is not None
    log = plane.karmada.controller_manager.log_path
    logged_before = log.stat().st_size
    cluster = await _cluster(cp, cleanup, dns="False")
    remedy = testkit.unique("karmada")
    try:
        await _run_karmada(plane, "remedy")
        await k.make_remedy(cp, remedy, [cluster])  # condition-driven: DNS is False
        cleanup["remedies"].append(remedy)
        await k.eventually(lambda: _is(cp, cluster, TC), timeout=30)
        by_karmada = await cp.get(resources.CLUSTERS, cluster)
        assert {m.split("/")[0] for m in _owners(by_karmada, "remedyActions")} == {
            "karmada-controller-manager"}
        assert "remedyActionSources" not in by_karmada["status"]
    finally:
        await _run_karmada(plane)  # the user switches Karmada's remedy controller off
    assert "--controllers=cluster,clusterStatus" in plane.karmada.controller_manager.argv
    await cp.delete(resources.REMEDIES, remedy)
    await asyncio.sleep(1)
    assert await k.actions(cp, cluster) == TC  # nobody clears it: Karmada's controller is off

    controllers()
    await k.eventually(lambda: _is(cp, cluster, []))
    after = await cp.get(resources.CLUSTERS, cluster)
    assert _owners(after, "remedyActions") == set()
    assert _agent_condition(after)["status"] == "False"  # the agent-like writer's, untouched
    removed = await k.eventually(lambda: _events(cp, cluster, "RemedyActionRemoved"))
    assert "karmada-controller-manager" in removed[0]["message"]
    # Karmada's remedy controller ran, and needed nothing more than the default
    # controllers give it (no error of its own in karmada-controller-manager's log).
    ran = log.read_bytes()[logged_before:].decode(errors="replace").splitlines()
    assert any('Started "remedy"' in line for line in ran), ran[-20:]
    complaints = [line for line in ran
                  if line.startswith("E") and "remedy-controller" in line]
    assert complaints == []
