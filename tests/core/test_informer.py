"""The informer mirrors the server through list, watch, and relist."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

import testkit
from clusterhealth_core import clock as clocks
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, informer, resources


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
        await testkit.eventually(lambda: cache.store.get(f"default/{label}-b", {})
                          .get("data", {}).get("k") == "2", timeout=10, interval=0.05)
        await cp.delete(resources.CONFIGMAPS, f"{label}-a", namespace="default")
        await testkit.eventually(lambda: f"default/{label}-a" not in cache.store, timeout=10,
                                 interval=0.05)
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


class _Script:
    """A fake API for the informer's loop: lists answer, watches fail as scripted."""

    def __init__(self, watches: list[Exception | None]) -> None:
        self.watches = watches
        self.calls: list[str] = []
        self.lists = 0

    async def list_pages(self, *args: object, **kwargs: object) -> AsyncIterator[dict[str, Any]]:
        self.lists += 1
        self.calls.append("list")
        yield {"metadata": {"resourceVersion": str(self.lists)}, "items": []}

    async def watch(self, *args: object, **kwargs: object) -> AsyncIterator[kube.WatchEvent]:
        self.calls.append("watch")
        outcome = self.watches.pop(0) if self.watches else None
        if outcome is None:
            await asyncio.Event().wait()  # a healthy watch, until the test ends
        else:
            raise outcome
        yield  # pragma: no cover  (makes this an async generator)


class _SleepLog(clocks.Clock):
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    async def sleep(self, seconds: float) -> None:
        self.calls.append("sleep")


@pytest.mark.parametrize(("watches", "expected"), [
    # after an outage (connection failures, backed off) the restarted server answers 410:
    # relist at once, as the server answers
    ([OSError("refused"), OSError("refused"), errors.Gone(410, "Gone", "too old"), None],
     ["list", "watch", "sleep", "watch", "sleep", "watch", "list", "watch"]),
    # a Gone after a healthy watch: relist at once too
    ([errors.Gone(410, "Gone", "too old"), None], ["list", "watch", "list", "watch"]),
    # a second Gone in a row backs off
    ([errors.Gone(410, "Gone", "x"), errors.Gone(410, "Gone", "x"), None],
     ["list", "watch", "list", "watch", "sleep", "list", "watch"]),
])
@testkit.fake_time  # a fake API and a clock that never sleeps: only the loop's clock
async def test_a_gone_relists_at_once_unless_it_follows_a_gone(
        watches: list[Exception | None], expected: list[str]) -> None:
    api = _Script(watches)
    cache = informer.Informer(api, resources.CONFIGMAPS,  # type: ignore[arg-type]
                              clock=_SleepLog(api.calls))
    task = asyncio.create_task(cache.run())
    try:
        await testkit.eventually(lambda: len(api.calls) >= len(expected), timeout=10, interval=0.05)
        await asyncio.sleep(0.05)  # and no more comes
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert api.calls == expected


@testkit.fake_time
async def test_each_failure_is_told_to_the_listeners_and_a_broken_listener_stops_nothing(
        ) -> None:
    refused, gone = OSError("refused"), errors.Gone(410, "Gone", "too old")
    api = _Script([refused, gone, None])
    cache = informer.Informer(api, resources.CONFIGMAPS,  # type: ignore[arg-type]
                              clock=_SleepLog(api.calls))
    told: list[Exception] = []

    def broken(exc: Exception) -> None:
        raise RuntimeError("a listener's bug")
    cache.add_failure_listener(broken)
    cache.add_failure_listener(told.append)
    task = asyncio.create_task(cache.run())
    try:
        await testkit.eventually(lambda: api.calls.count("watch") >= 3, timeout=10,
                                 interval=0.05)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert told == [refused, gone]
    assert api.calls == ["list", "watch", "sleep", "watch", "list", "watch"]
