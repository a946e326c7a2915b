"""Running the controller manager's propagation controllers in-process, and waiting on results."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import prometheus_client

from clusterhealth_controlplane import controllers, manager
from clusterhealth_core import clock as clocks
from clusterhealth_core import election, runner
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources

T = TypeVar("T")
PROPAGATION = ("detector", "binding", "execution", "workStatus", "bindingStatus")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


async def eventually(check: Callable[[], Awaitable[T | None]], timeout: float = 60.0,
                     what: str = "condition") -> T:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    last: Any = None
    try:
        async with asyncio.timeout(timeout):
            while True:
                try:
                    last = await check()
                except errors.NotFound as exc:
                    last = exc
                else:
                    if last:
                        return last
                await asyncio.sleep(0.2)
    except TimeoutError:
        raise AssertionError(f"{what} not reached within {timeout}s (last: {last!r})") from None


@contextlib.asynccontextmanager
async def running(cp: kube.ApiClient, names: Sequence[str] = PROPAGATION
                  ) -> AsyncIterator[runner.ElectedController]:
    """The selected controllers as the manager runs them (one term, election disabled)."""
    registry = prometheus_client.CollectorRegistry()
    entries = controllers.selected(names)
    replica = runner.ElectedController(
        cp, False, election.ElectionConfig("controlplane-test", "default"), clocks.Clock(),
        make=lambda term: manager.Manager(manager.Context(term, 2, 300.0), entries),
        leader_gauge=prometheus_client.Gauge("leader", "", registry=registry),
        metrics=runner.ProcessMetrics(registry),
        term=runner.TermSettings("clusterhealth-controlplane"))
    task = asyncio.create_task(replica.run())

    async def ready() -> bool:
        if task.done():
            task.result()
        return replica.current is not None and replica.current.synced

    try:
        await eventually(ready, what="controllers synced")
        yield replica
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def get_or_none(api: kube.ApiClient, resource: resources.Resource, name: str,
                      namespace: str | None = None) -> dict[str, Any] | None:
    try:
        return await api.get(resource, name, namespace=namespace)
    except errors.NotFound:
        return None
