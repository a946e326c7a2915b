"""The informer mirrors the server through list, watch, and relist."""

from __future__ import annotations

import asyncio
import uuid

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import informer, resources


async def _eventually(predicate: object, timeout: float = 10) -> None:
    assert callable(predicate)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


async def test_informer_follows_creates_updates_deletes(cp: kube.ApiClient) -> None:
    label = f"informer-{uuid.uuid4().hex[:6]}"
    events: list[tuple[str, str]] = []
    cache = informer.Informer(cp, resources.CONFIGMAPS, namespace="default",
                              label_selector=f"test={label}")
    cache.add_handler(lambda kind, obj, old: events.append((kind, obj["metadata"]["name"])))
    await cp.create(resources.CONFIGMAPS, {"metadata": {
        "name": f"{label}-a", "namespace": "default", "labels": {"test": label}}})
    task = asyncio.create_task(cache.run())
    try:
        await asyncio.wait_for(cache.wait_synced(), 10)
        assert list(cache.store) == [f"default/{label}-a"]
        await cp.create(resources.CONFIGMAPS, {"metadata": {
            "name": f"{label}-b", "namespace": "default", "labels": {"test": label}},
            "data": {"k": "1"}})
        await cp.patch(resources.CONFIGMAPS, f"{label}-b", {"data": {"k": "2"}},
                       namespace="default")
        await _eventually(lambda: cache.store.get(f"default/{label}-b", {})
                          .get("data", {}).get("k") == "2")
        await cp.delete(resources.CONFIGMAPS, f"{label}-a", namespace="default")
        await _eventually(lambda: f"default/{label}-a" not in cache.store)
        assert events[0] == ("ADDED", f"{label}-a")
        assert ("MODIFIED", f"{label}-b") in events
        assert events[-1] == ("DELETED", f"{label}-a")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await cp.delete(resources.CONFIGMAPS, f"{label}-b", namespace="default", missing_ok=True)


def test_relist_reports_objects_that_vanished() -> None:
    cache = informer.Informer(None, resources.CONFIGMAPS)  # type: ignore[arg-type]
    seen: list[tuple[str, str]] = []
    cache.add_handler(lambda kind, obj, old: seen.append((kind, obj["metadata"]["name"])))
    obj_a = {"metadata": {"name": "a", "resourceVersion": "1"}}
    obj_b = {"metadata": {"name": "b", "resourceVersion": "1"}}
    cache._replace([obj_a, obj_b])
    cache._replace([{"metadata": {"name": "b", "resourceVersion": "2"}}])
    assert seen == [("ADDED", "a"), ("ADDED", "b"), ("DELETED", "a"), ("MODIFIED", "b")]
