"""Status writers that respect a server they do not own, on real API servers.

Our Cluster CRD declares ``status.conditions`` a list-map; Karmada's Cluster
API does not, and Karmada's Remedy CRD has no status subresource.  These
tests install CRDs of a test group with exactly those shapes and check that
the writer, reading only what the server publishes, keeps every other
writer's conditions, leaves out undeclared fields (and says so), and writes
status through the main resource when there is no subresource.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any, cast

import prometheus_client
import pytest

import testkit
from clusterhealth_core import schema, status
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources

GROUP = "statustest.clusterhealth.io"


def _crd(plural: str, kind: str, *, list_map: bool, subresource: bool) -> dict[str, Any]:
    conditions: dict[str, Any] = {"type": "array", "items": {
        "type": "object", "required": ["type", "status"],
        "properties": {k: {"type": "string"} for k in (
            "type", "status", "reason", "message", "lastTransitionTime")}}}
    if list_map:
        conditions |= {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}
    version: dict[str, Any] = {
        "name": "v1", "served": True, "storage": True,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "status": {"type": "object", "properties": {
                "conditions": conditions,
                "actions": {"type": "array", "items": {"type": "string"}}}}}}}}
    if subresource:
        version["subresources"] = {"status": {}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Cluster", "versions": [version],
                     "names": {"plural": plural, "singular": plural[:-1], "kind": kind}}}


ATOMIC = resources.Resource(GROUP, "v1", "atomics", "Atomic", namespaced=False)
NOSTATUS = resources.Resource(GROUP, "v1", "plains", "Plain", namespaced=False)
LISTMAP = resources.Resource(GROUP, "v1", "listmaps", "ListMap", namespaced=False)


@pytest.fixture(scope="module")
async def test_kinds(env: Any) -> dict[str, schema.Kind]:
    async with env.client() as api:
        for crd in (_crd("atomics", "Atomic", list_map=False, subresource=True),
                    _crd("plains", "Plain", list_map=False, subresource=False),
                    _crd("listmaps", "ListMap", list_map=True, subresource=True)):
            with contextlib.suppress(errors.Conflict):
                await api.create(resources.CRDS, crd)
        for resource in (ATOMIC, NOSTATUS, LISTMAP):
            async def established(name: str = resource.crd_name) -> bool:
                crd = await api.get(resources.CRDS, name)
                return any(c.get("type") == "Established" and c.get("status") == "True"
                           for c in (crd.get("status") or {}).get("conditions") or [])

            await testkit.eventually(established, 10, f"CRD {resource.crd_name} established",
                                     interval=0.1)
        return {r.plural: await schema.discover(api, r) for r in (ATOMIC, NOSTATUS, LISTMAP)}


def _condition(ctype: str, value: str) -> dict[str, str]:
    return {"type": ctype, "status": value, "reason": "Test", "message": f"{ctype} {value}",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}


async def test_the_schema_says_how_to_write(test_kinds: dict[str, schema.Kind],
                                            cp: kube.ApiClient) -> None:
    atomic, plain, listmap = test_kinds["atomics"], test_kinds["plains"], test_kinds["listmaps"]
    assert (atomic.list_type("status", "conditions"), atomic.status_subresource) == (
        "atomic", True)
    assert (plain.status_subresource, listmap.list_type("status", "conditions")) == (
        False, "map")
    assert atomic.declares("status", "actions") and not atomic.declares("status", "sources")
    assert atomic.declares("spec", "anything", "below")  # preserve-unknown-fields
    ours = await schema.discover(cp, resources.CLUSTERS)
    assert ours.list_type("status", "conditions") == "map"
    assert ours.declares("status", "remedyActionSources")
    assert ours.declares("spec", "taints", "[]", "timeAdded")


async def _atomic_with_two_writers(
        test_kinds: dict[str, schema.Kind], cp: kube.ApiClient, prefix: str,
) -> tuple[str, dict[str, Any], status.StatusWriter, status.StatusWriter]:
    """A new Atomic object, and the agent's and Karmada's writers of its conditions."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    created = await cp.create(ATOMIC, {"apiVersion": f"{GROUP}/v1", "kind": "Atomic",
                                       "metadata": {"name": name}})
    kind = test_kinds["atomics"]
    agent = status.StatusWriter(cp, kind, "agent", frozenset({"conditions"}),
                                frozenset({"DNSReady"}))
    karmada = status.StatusWriter(cp, kind, "karmada", frozenset({"conditions"}),
                                  frozenset({"Ready"}))
    return name, created, agent, karmada


async def test_atomic_conditions_are_merged_never_replaced(
        test_kinds: dict[str, schema.Kind], cp: kube.ApiClient) -> None:
    name, created, agent, karmada = await _atomic_with_two_writers(test_kinds, cp, "a")
    assert agent.merge_conditions

    async def flip(writer: status.StatusWriter, ctype: str, rounds: int) -> None:
        for i in range(rounds):
            await writer.write(name, {"conditions": [
                _condition(ctype, "True" if i % 2 else "False")]})

    versions: list[dict[str, Any]] = []

    async def follow() -> None:
        async for event in cp.watch(ATOMIC, field_selector=f"metadata.name={name}",
                                    resource_version=created["metadata"]["resourceVersion"]):
            if event.type == "MODIFIED":
                versions.append(event.object)

    watcher = asyncio.create_task(follow())  # from the creation on: it misses no write
    await flip(karmada, "Ready", 1)
    await asyncio.gather(flip(agent, "DNSReady", 30), flip(karmada, "Ready", 30))
    final = await cp.get(ATOMIC, name)
    await testkit.eventually(
        lambda: versions and versions[-1]["metadata"]["resourceVersion"]
        == final["metadata"]["resourceVersion"], 10, "the watch sees the last write")
    watcher.cancel()
    await asyncio.gather(watcher, return_exceptions=True)
    assert {c["type"] for c in final["status"]["conditions"]} == {"Ready", "DNSReady"}
    after_first = [v for v in versions if any(
        c["type"] == "DNSReady" for c in (v.get("status") or {}).get("conditions") or [])]
    assert len(after_first) >= 30
    for version in versions[1:]:  # once both exist, no version ever lost one
        types = {c["type"] for c in version["status"]["conditions"]}
        assert "Ready" in types, version["status"]
    # Removing the agent's condition leaves Karmada's.
    await agent.write(name, {"conditions": []})
    final = await cp.get(ATOMIC, name)
    assert [c["type"] for c in final["status"]["conditions"]] == ["Ready"]


async def test_undeclared_fields_are_left_out_and_reported(
        test_kinds: dict[str, schema.Kind], cp: kube.ApiClient) -> None:
    name = f"m-{uuid.uuid4().hex[:6]}"
    await cp.create(LISTMAP, {"apiVersion": f"{GROUP}/v1", "kind": "ListMap",
                              "metadata": {"name": name}})
    registry = prometheus_client.CollectorRegistry()
    writer = status.StatusWriter(cp, test_kinds["listmaps"], "remedy",
                                 frozenset({"actions", "sources"}),
                                 metrics=status.SchemaMetrics(registry))
    assert writer.unsupported == {"sources"}
    assert registry.get_sample_value("clusterhealth_schema_unsupported_field",
                                     {"resource": LISTMAP.crd_name, "field": "sources"}) == 1
    await writer.write(name, {"actions": ["TrafficControl"],
                              "sources": [{"action": "TrafficControl"}]})
    assert (await cp.get(LISTMAP, name))["status"] == {"actions": ["TrafficControl"]}
    await writer.write(name, {})
    assert not (await cp.get(LISTMAP, name)).get("status")


async def test_a_merge_patch_sets_only_its_fields_and_takes_them_over(
        test_kinds: dict[str, schema.Kind], cp: kube.ApiClient) -> None:
    name = f"m-{uuid.uuid4().hex[:6]}"
    await cp.create(LISTMAP, {"apiVersion": f"{GROUP}/v1", "kind": "ListMap",
                              "metadata": {"name": name}})
    kind = test_kinds["listmaps"]
    agent = status.StatusWriter(cp, kind, "agent", frozenset({"conditions"}),
                                frozenset({"DNSReady"}))
    await agent.write(name, {"conditions": [_condition("DNSReady", "True")]})
    other = status.StatusWriter(cp, kind, "karmada", frozenset({"actions"}))
    await other.write(name, {"actions": ["Old"]})
    remedy = status.StatusWriter(cp, kind, "remedy", frozenset({"actions", "sources"}))
    with pytest.raises(ValueError, match="conditions"):
        await agent.merge(name, {})

    written = await remedy.merge(name, {"actions": ["TrafficControl"], "sources": [{"a": 1}]})
    assert written is not None
    assert written["status"]["actions"] == ["TrafficControl"]
    assert "sources" not in written["status"]  # undeclared: left out
    assert [c["type"] for c in written["status"]["conditions"]] == ["DNSReady"]
    owners = {e["manager"]: e for e in written["metadata"]["managedFields"]
              if "f:actions" in (e.get("fieldsV1") or {}).get("f:status", {})}
    assert set(owners) == {"remedy"} and owners["remedy"]["operation"] == "Update"

    stale = written["metadata"]["resourceVersion"]
    await agent.write(name, {"conditions": [_condition("DNSReady", "False")]})
    with pytest.raises(errors.Conflict):
        await remedy.merge(name, {}, resource_version=stale)
    await remedy.merge(name, {})  # absent fields are removed, the others' stay
    final = await cp.get(LISTMAP, name)
    assert "actions" not in final["status"]
    assert [c["status"] for c in final["status"]["conditions"]] == ["False"]
    with pytest.raises(errors.NotFound):
        await remedy.merge("no-such-object", {})


async def test_an_update_of_the_whole_status_from_the_cache_keeps_every_other_writer(
        test_kinds: dict[str, schema.Kind], cp: kube.ApiClient) -> None:
    """An update (PUT) of the status from a cached copy: others' fields kept, their owners too.

    The cached copy is the whole object but its ``managedFields`` (here: reduced
    ones, which must not be sent); the body is that object.
    """
    name = f"u-{uuid.uuid4().hex[:6]}"
    await cp.create(LISTMAP, {"apiVersion": f"{GROUP}/v1", "kind": "ListMap",
                              "metadata": {"name": name}, "spec": {"keep": "me"}})
    kind = test_kinds["listmaps"]
    agent = status.StatusWriter(cp, kind, "agent", frozenset({"conditions"}),
                                frozenset({"DNSReady"}))
    cached = await agent.write(name, {"conditions": [_condition("DNSReady", "True")]})
    assert cached is not None
    cut = {**cached, "metadata": {**cached["metadata"], "managedFields": [
        {"manager": "remedy", "operation": "Update"}]}}
    remedy = status.StatusWriter(cp, kind, "remedy", frozenset({"actions", "sources"}))

    written = await remedy.update(name, {"actions": ["TrafficControl"], "sources": [{"a": 1}]},
                                  cached=cut)
    assert written is not None
    assert written["status"]["actions"] == ["TrafficControl"]
    assert "sources" not in written["status"]  # undeclared: left out
    assert written["status"]["conditions"] == cached["status"]["conditions"]
    assert written["spec"] == {"keep": "me"}
    owners = {e["manager"]: e["operation"] for e in written["metadata"]["managedFields"]}
    # the agent's entry is still there: the cut-down managedFields were not sent
    assert owners["agent"] == "Apply" and owners["remedy"] == "Update"

    same = await remedy.update(name, {"actions": ["TrafficControl"]}, cached=written)
    assert same is not None  # nothing to change: nothing written
    assert same["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]
    assert (await cp.get(LISTMAP, name))["metadata"]["resourceVersion"] == \
        written["metadata"]["resourceVersion"]
    # a stale copy: a Conflict (reread=False), or one read and the write (reread=True)
    await agent.write(name, {"conditions": [_condition("DNSReady", "False")]})
    with pytest.raises(errors.Conflict):
        await remedy.update(name, {}, cached=written, reread=False)
    final = await remedy.update(name, {}, cached=written)
    assert final is not None and "actions" not in final["status"]
    assert [c["status"] for c in final["status"]["conditions"]] == ["False"]
    with pytest.raises(errors.NotFound):
        await remedy.update("no-such-object", {"actions": ["X"]}, cached={"metadata": {
            "name": "no-such-object", "resourceVersion": "1"}})
    with pytest.raises(ValueError, match="resourceVersion"):
        await remedy.update(name, {"actions": ["X"]}, cached={"metadata": {"name": name}})


async def test_without_a_status_subresource_status_goes_through_the_object(
        test_kinds: dict[str, schema.Kind], cp: kube.ApiClient) -> None:
    name = f"p-{uuid.uuid4().hex[:6]}"
    await cp.create(NOSTATUS, {"apiVersion": f"{GROUP}/v1", "kind": "Plain",
                               "metadata": {"name": name}, "spec": {"keep": "me"}})
    for kind in (test_kinds["plains"],
                 schema.Kind(NOSTATUS, status_subresource=False, root=None)):
        writer = status.StatusWriter(cp, kind, "remedy", frozenset({"conditions"}),
                                     frozenset({"Effective"}))
        await writer.write(name, {"conditions": [_condition("Effective", "True")]})
        obj = await cp.get(NOSTATUS, name)
        assert [c["type"] for c in obj["status"]["conditions"]] == ["Effective"]
        assert obj["spec"] == {"keep": "me"}


async def test_a_404_on_a_status_write_to_an_existing_object_is_not_deleted(
        test_kinds: dict[str, schema.Kind], cp: kube.ApiClient) -> None:
    name = f"p-{uuid.uuid4().hex[:6]}"
    await cp.create(NOSTATUS, {"apiVersion": f"{GROUP}/v1", "kind": "Plain",
                               "metadata": {"name": name}})
    wrong = schema.Kind(NOSTATUS, status_subresource=True, root=None)  # what a guess would say
    writer = status.StatusWriter(cp, wrong, "remedy", frozenset({"conditions"}))
    with pytest.raises(status.StatusNotServed, match="exists but the status write got 404"):
        await writer.write(name, {"conditions": [_condition("Effective", "True")]})
    gone = status.StatusWriter(cp, test_kinds["plains"], "remedy", frozenset({"conditions"}))
    with pytest.raises(errors.NotFound):
        await gone.write("no-such-object", {"conditions": []})


@pytest.mark.parametrize(("current", "wanted", "expected"), [
    ({"conditions": [{"type": "Ready"}, {"type": "DNS", "status": "True"}]},
     {"conditions": [{"type": "DNS", "status": "False"}]},
     {"conditions": [{"type": "Ready"}, {"type": "DNS", "status": "False"}]}),
    ({"conditions": [{"type": "DNS"}, {"type": "Ready"}]}, {},
     {"conditions": [{"type": "Ready"}]}),
    ({"conditions": [{"type": "DNS"}]}, {}, {}),
    ({"remedyActions": ["TrafficControl"], "other": 1}, {},
     {"other": 1}),
    ({}, {"remedyActions": ["TrafficControl"], "conditions": [{"type": "DNS"}]},
     {"remedyActions": ["TrafficControl"], "conditions": [{"type": "DNS"}]}),
])
def test_merged_status(current: dict[str, Any], wanted: dict[str, Any],
                       expected: dict[str, Any]) -> None:
    assert status.merged_status(current, wanted, {"conditions", "remedyActions"},
                                {"DNS"}) == expected


def _nested_kind(items: dict[str, Any] | None, *, published: bool = True) -> schema.Kind:
    lists: dict[str, Any] = {"type": "object", "properties": {"name": {"type": "string"}}}
    if items is not None:
        lists["properties"]["parts"] = {"type": "array", "items": items}
    root = {"type": "object", "properties": {"status": {"type": "object", "properties": {
        "top": {"type": "object", "properties": {"lists": {"type": "array", "items": lists}}},
        "other": {"type": "string"}}}}}
    nests = resources.Resource(GROUP, "v1", "nests", "Nest", False)
    return schema.Kind(nests, True, root if published else None)


PART = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}


@pytest.mark.parametrize(("kind", "taken"), [
    pytest.param(_nested_kind({**PART, "required": ["a"]}), True, id="requires what we write"),
    pytest.param(_nested_kind({**PART, "required": ["a", "b"]}), False, id="requires more"),
    pytest.param(_nested_kind(PART), True, id="requires nothing"),
    pytest.param(_nested_kind(None), False, id="not declared"),
    pytest.param(_nested_kind(None, published=False), True, id="no schema published"),
])
def test_a_nested_field_the_server_cannot_take_is_left_out_and_reported(
        kind: schema.Kind, taken: bool) -> None:
    registry = prometheus_client.CollectorRegistry()
    writer = status.StatusWriter(cast(kube.ApiClient, None), kind, "remedy",
                                 frozenset({"top", "other"}), frozenset(),
                                 status.SchemaMetrics(registry),
                                 nested={"top.lists.parts": frozenset({"a"})})
    lists = [{"name": "x", "parts": [{"a": "1"}]}, {"name": "y"}]
    wanted = {"top": {"lists": lists}, "other": "kept"}
    left = [{"name": "x"}, {"name": "y"}]
    assert writer.supported(wanted) == (wanted if taken else
                                        {"top": {"lists": left}, "other": "kept"})
    assert wanted["top"]["lists"] == lists  # the caller's value is never changed
    reported = registry.get_sample_value("clusterhealth_schema_unsupported_field", {
        "resource": kind.resource.crd_name, "field": "top.lists.parts"})
    assert reported == (None if taken else 1.0)


async def test_a_cached_object_saves_the_read_and_a_stale_one_costs_a_conflict(
        test_kinds: dict[str, schema.Kind], cp: kube.ApiClient,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Atomic conditions are read, merged and written back: from the informer's copy
    # when the caller gives it (no GET), from the server when that copy was stale.
    name, created, agent, karmada = await _atomic_with_two_writers(test_kinds, cp, "c")
    reads: list[str] = []
    real_get = cp.get

    async def counted_get(*args: Any, **kwargs: Any) -> dict[str, Any]:
        reads.append(str(args[1]))
        return await real_get(*args, **kwargs)

    monkeypatch.setattr(cp, "get", counted_get)
    fresh = await karmada.write(name, {"conditions": [_condition("Ready", "True")]},
                                cached=created)
    assert fresh is not None and reads == []  # one PUT, no GET
    written = await agent.write(name, {"conditions": [_condition("DNSReady", "False")]},
                                cached=fresh)
    assert written is not None and reads == []
    # ``created`` is two writes behind: a Conflict, one read, Karmada's condition kept
    final = await agent.write(name, {"conditions": [_condition("DNSReady", "True")]},
                              cached=created)
    assert final is not None and reads == [name]
    assert {c["type"]: c["status"] for c in final["status"]["conditions"]} == {
        "Ready": "True", "DNSReady": "True"}
    # reread=False: the stale copy's Conflict goes to the caller, nothing read or changed
    with pytest.raises(errors.Conflict):
        await agent.write(name, {"conditions": [_condition("DNSReady", "False")]},
                          cached=fresh, reread=False)
    assert reads == [name]
    assert await agent.write(name, {"conditions": [_condition("DNSReady", "False")]},
                             cached=final, reread=False) is not None  # a current copy: written
    final = await agent.write(name, {"conditions": [_condition("DNSReady", "True")]})
    assert final is not None and reads == [name, name]
    monkeypatch.undo()
    assert (await cp.get(ATOMIC, name))["status"] == final["status"]
