"""The scheduler's deferred status writes: which copy of the binding each try starts from.

A fake status writer (no API server) answers Conflict while the copy it is given is older
than the binding "on the server"; the loop's clock is fake, so retries pass at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any, cast

import pytest

import testkit
from clusterhealth_controlplane.scheduler import statuswrites
from clusterhealth_core import clock as clocks
from clusterhealth_core import status
from clusterhealth_core.kube import errors, resources


def binding(version: int | str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "b", "namespace": "ns"}
    if version is not None:
        meta["resourceVersion"] = str(version)
    return {"metadata": meta, "status": {}}


@pytest.mark.parametrize(("ours", "cached", "expected"), [
    (binding(5), binding(7), 7),        # others wrote meanwhile: the informer's
    (binding(9), binding(7), 9),        # the informer lags our own write: ours
    (None, binding(7), 7),
    (binding(5), None, 5),
    (binding("x"), binding(7), "x"),    # not comparable: ours
])
def test_a_deferred_write_starts_from_the_newer_copy(ours: Any, cached: Any,
                                                     expected: Any) -> None:
    chosen = statuswrites.newer(ours, cached)
    assert chosen is not None and chosen["metadata"]["resourceVersion"] == str(expected)
    assert statuswrites.newer(None, None) is None


class FakeWriter:
    """Conflict unless the copy is the server's version; counts the tries that read."""

    merge_conditions = True  # atomic conditions (Karmada's CRDs): read-modify-write

    def __init__(self, server: int) -> None:
        self.server = server
        self.tries: list[tuple[int | None, bool]] = []
        self.reads = 0

    async def write(self, name: str, desired: Mapping[str, Any], *, namespace: str | None,
                    cached: Mapping[str, Any] | None, reread: bool) -> dict[str, Any]:
        start = statuswrites.version(cached)
        self.tries.append((start, reread))
        if start == self.server:
            return binding(self.server + 1)
        if not reread:
            raise errors.Conflict(409, "Conflict", "the object has been modified")
        self.reads += 1  # the real writer reads the server, then writes
        return binding(self.server + 1)


async def run_one(writer: FakeWriter, cache: dict[str, Any], latest: dict[str, Any],
                  moved: int | None) -> None:
    writes = statuswrites.StatusWrites(
        "test", clocks.Clock(), workers=1, delay=0.0, queued=lambda: 1,
        writer=lambda _: cast(status.StatusWriter, writer), cached=lambda _: cache["b"])
    meta = cast(Any, type("M", (), {"name": "b", "namespace": "ns"}))
    await writes.write("ns/b", resources.RESOURCE_BINDINGS, meta, {"conditions": []},
                       latest=latest)  # deferred: the queue is never empty here
    task = asyncio.create_task(writes.run())
    try:
        await asyncio.sleep(statuswrites.CONFLICT_RETRY / 2)
        if moved is not None:
            cache["b"] = binding(moved)  # the other write's event reaches the informer
        async with asyncio.timeout(60):
            while writes.pending:
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@testkit.fake_time
async def test_a_stale_copy_is_tried_again_from_the_informer_not_the_server(
        caplog: pytest.LogCaptureFixture) -> None:
    writer = FakeWriter(server=8)
    cache = {"b": binding(6)}  # behind the server: the write the informer has not seen
    await run_one(writer, cache, binding(5), moved=8)
    assert writer.tries == [(6, False), (8, False)]  # the informer's copy, twice
    assert writer.reads == 0
    assert "failed" not in caplog.text  # a lost race, not an error retried with backoff


@testkit.fake_time
async def test_an_informer_that_does_not_move_means_a_read(
        caplog: pytest.LogCaptureFixture) -> None:
    writer = FakeWriter(server=8)
    cache = {"b": binding(6)}
    await run_one(writer, cache, binding(5), moved=None)
    assert writer.tries == [(6, False), (6, True)]
    assert writer.reads == 1
    assert "failed" not in caplog.text
