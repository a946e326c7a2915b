"""The binding-status and work-status controllers write a value put back while their cache lags.

Their own status writes do not queue the object again.  So when a status goes
A -> B (written) -> A while the informer still shows A, the second A must be
compared with the B just written, not with the stale A, or it is skipped and B
stays.  These tests call the controllers' write steps with fakes for the API
and the caches, the cache held back on purpose.
"""

from __future__ import annotations

import types
from typing import Any, cast

from clusterhealth_controlplane import vocabulary
from clusterhealth_controlplane.status import binding as binding_status
from clusterhealth_controlplane.status import decision
from clusterhealth_controlplane.status import work as work_status
from clusterhealth_core import builder, clock, status
from clusterhealth_core.kube import resources

TEMPLATE = {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "ns", "name": "web"}


class Ticking(clock.Clock):
    """Time stands still (these tests run within the horizon)."""

    def monotonic(self) -> float:
        return 0.0


class FakeApi:
    """Answers each write with the object at the next resourceVersion."""

    def __init__(self) -> None:
        self.version = 10
        self.written: list[dict[str, Any]] = []

    async def apply(self, resource: resources.Resource, body: dict[str, Any],
                    **_: Any) -> dict[str, Any]:
        self.version += 1
        self.written.append(body["status"])
        return {**body, "metadata": {**body["metadata"],
                                     "resourceVersion": str(self.version)}}


class FakeCache:
    synced = True

    def __init__(self, template: dict[str, Any]) -> None:
        self.store = {"ns/web": template}


class FakeTemplates:
    def __init__(self, cache: FakeCache) -> None:
        self.cache = cache

    async def get(self, api_version: str, kind: str) -> tuple[resources.Resource, FakeCache]:
        return resources.DEPLOYMENTS, self.cache


def _template(replicas: int, version: str) -> dict[str, Any]:
    counts = dict.fromkeys(decision.DEPLOYMENT_COUNTS, replicas)
    counts["unavailableReplicas"] = 0
    return {"metadata": {"name": "web", "namespace": "ns", "generation": 4,
                         "resourceVersion": version},
            "status": {**counts, "observedGeneration": 4}}


def _items(replicas: int) -> list[dict[str, Any]]:
    return [{"clusterName": "member1", "status": {
        **dict.fromkeys(decision.DEPLOYMENT_COUNTS, replicas), "unavailableReplicas": 0,
        "generation": 2, "observedGeneration": 2, "resourceTemplateGeneration": 4}}]


async def test_a_template_status_put_back_is_written_while_the_cache_lags() -> None:
    api, cache = FakeApi(), FakeCache(_template(3, "10"))
    controller = types.SimpleNamespace(
        api=api, templates=FakeTemplates(cache),
        unseen_templates=status.UnseenWrites(Ticking()))
    write = binding_status.BindingStatusController._write_template
    found = {"spec": {"resource": TEMPLATE}}
    this = cast(binding_status.BindingStatusController, controller)
    await write(this, found, _items(3))
    assert api.written == []  # the cache shows it
    await write(this, found, _items(6))
    assert [w["replicas"] for w in api.written] == [6]
    await write(this, found, _items(3))  # the cache still shows 3, not our 6
    assert [w["replicas"] for w in api.written] == [6, 3]
    cache.store["ns/web"] = _template(6, "11")  # the 6 arrives, then the 3
    await write(this, found, _items(3))
    cache.store["ns/web"] = _template(3, "12")
    await write(this, found, _items(3))
    assert [w["replicas"] for w in api.written] == [6, 3]


class FakeWriter:
    """The binding's status writer: every write answered at the API's next version."""

    def __init__(self, api: FakeApi) -> None:
        self.api = api

    async def write(self, name: str, fields: dict[str, Any], *, namespace: str | None,
                    cached: dict[str, Any] | None, reread: bool) -> dict[str, Any]:
        self.api.version += 1
        self.api.written.append(fields)
        return {"metadata": {"name": name, "resourceVersion": str(self.api.version)},
                "status": fields}


def _binding(version: str, items: list[dict[str, Any]],
             condition: dict[str, Any] | None) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "ns", "generation": 2,
                         "resourceVersion": version},
            "spec": {"resource": TEMPLATE},
            "status": {"aggregatedStatus": items,
                       "conditions": [condition] if condition else []}}


async def test_an_aggregated_status_put_back_is_written_while_the_cache_lags() -> None:
    api = FakeApi()
    writer = FakeWriter(api)
    controller = types.SimpleNamespace(
        term=types.SimpleNamespace(clock=clock.ManualClock()), races=status.LostRaces(),
        unseen=status.UnseenWrites(Ticking()),
        controller=types.SimpleNamespace(writer=lambda target: writer))
    this = cast(binding_status.BindingStatusController, controller)
    write = binding_status.BindingStatusController._write_binding
    ref = vocabulary.BindingRef.at("ns", "web")
    applied = _items(3)
    first = _binding("10", [], None)
    assert await write(this, ref, first, applied, None)
    condition = api.written[-1]["conditions"][0]
    shown = _binding("11", applied, condition)
    assert await write(this, ref, shown, applied, None)
    assert len(api.written) == 1  # nothing changed
    assert await write(this, ref, shown, _items(6), None)
    assert await write(this, ref, shown, applied, None)  # the cache still shows 3, not 6
    assert [w["aggregatedStatus"] for w in api.written] == [applied, _items(6), applied]
    assert await write(this, ref, _binding("13", applied, condition), applied, None)
    assert len(api.written) == 3


class FakeMemberObjects:
    """One member's Deployment, as the shared member-object cache holds it."""

    def __init__(self, replicas: int) -> None:
        self.replicas = replicas

    async def resource(self, cluster: dict[str, Any], api_version: str,
                       kind: str) -> resources.Resource:
        return resources.DEPLOYMENTS

    async def watch(self, cluster: dict[str, Any], resource: resources.Resource) -> Any:
        return types.SimpleNamespace(synced=True)

    def get(self, cluster: str, resource: resources.Resource, namespace: str | None,
            name: str) -> dict[str, Any]:
        return {"apiVersion": "apps/v1", "kind": "Deployment",
                "status": {"replicas": self.replicas, "readyReplicas": self.replicas},
                "metadata": {"name": name, "namespace": namespace, "generation": 1,
                             "annotations": {
                    vocabulary.WORK_NAMESPACE: "karmada-es-member1",
                    vocabulary.WORK_NAME: "web"}}}


async def test_manifest_statuses_put_back_are_written_while_the_cache_lags() -> None:
    api, objects = FakeApi(), FakeMemberObjects(3)
    work = {"metadata": {"name": "web", "namespace": "karmada-es-member1",
                         "resourceVersion": "10"},
            "spec": {"workload": {"manifests": [{
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "ns"}}]}}}
    works = {"karmada-es-member1/web": work}
    controller = types.SimpleNamespace(
        api=api, objects=objects, works=types.SimpleNamespace(store=works),
        clusters=types.SimpleNamespace(store={"member1": {}}),
        unseen=status.UnseenWrites(Ticking()))
    this = cast(work_status.WorkStatusController, controller)
    reconcile = work_status.WorkStatusController.reconcile_work
    request = builder.Request("karmada-es-member1", "web")
    await reconcile(this, request)
    first = api.written[-1]["manifestStatuses"]
    works["karmada-es-member1/web"] = {**work, "metadata": {**work["metadata"],
                                                            "resourceVersion": "11"},
                                       "status": {"manifestStatuses": first}}
    await reconcile(this, request)
    assert len(api.written) == 1  # the cache shows it
    objects.replicas = 6  # written; then back to 3 while the cache still shows 11
    await reconcile(this, request)
    objects.replicas = 3
    await reconcile(this, request)
    assert len(api.written) == 3
    assert api.written[-1]["manifestStatuses"] == first
