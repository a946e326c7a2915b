"""Running the controller manager's propagation controllers in-process, and waiting on results."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import cpkit

from clusterhealth_controlplane import options
from clusterhealth_core import runner
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
async def running(cp: kube.ApiClient, names: Sequence[str] = PROPAGATION,
                  failover: options.Options | None = None
                  ) -> AsyncIterator[runner.ElectedController]:
    """The selected controllers as the manager runs them (one term, election disabled)."""
    async with cpkit.running_manager(cp, names, failover=failover) as run:
        yield run.replica


async def get_or_none(api: kube.ApiClient, resource: resources.Resource, name: str,
                      namespace: str | None = None) -> dict[str, Any] | None:
    try:
        return await api.get(resource, name, namespace=namespace)
    except errors.NotFound:
        return None
