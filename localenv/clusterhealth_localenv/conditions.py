"""Setting a Cluster's conditions as another writer would, on either control plane.

Tests and benchmarks play the agent or a cluster-status controller: they set
one condition under a field manager of their own.  On our control plane a
server-side apply does that (``status.conditions`` is a list-map); on
Karmada's Cluster API the list is atomic, and the same apply replaces every
other writer's conditions, Karmada's ``Ready`` among them.  So these helpers
write through the product's :class:`~clusterhealth_core.status.StatusWriter`,
which reads the server's schema and merges where it must.

The schema is read once per client (:func:`kind`) and kept while the client
lives, so that a measured write is one write, not a discovery.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import weakref
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from clusterhealth_core import schema, status
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import waiting

_KINDS: weakref.WeakKeyDictionary[kube.ApiClient, dict[str, schema.Kind]] = (
    weakref.WeakKeyDictionary())
"""The schema each live client's server gave, by resource (test support: a cache)."""


async def kind(api: kube.ApiClient, resource: resources.Resource = resources.CLUSTERS
               ) -> schema.Kind:
    """The server's view of ``resource`` (discovered on first use by ``api``)."""
    known = _KINDS.setdefault(api, {})
    if resource.crd_name not in known:
        known[resource.crd_name] = await schema.discover(api, resource)
    return known[resource.crd_name]


async def writer(api: kube.ApiClient, manager: str, types: Iterable[str],
                 resource: resources.Resource = resources.CLUSTERS) -> status.StatusWriter:
    """A writer of the conditions ``types`` under field manager ``manager``."""
    return status.StatusWriter(api, await kind(api, resource), manager,
                               frozenset({"conditions"}), frozenset(types))


def now() -> str:
    """The current time as a condition's ``lastTransitionTime`` (whole seconds)."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(ctype: str, value: str, *, reason: str = "Test", message: str | None = None,
              transition: str | None = None) -> dict[str, str]:
    """One condition as the API holds it (``transition`` defaults to now)."""
    return {"type": ctype, "status": value, "reason": reason,
            "message": message if message is not None else f"set to {value}",
            "lastTransitionTime": transition or now()}


async def set_conditions(api: kube.ApiClient, name: str, values: Mapping[str, str], *,
                         manager: str, reason: str = "Test", transition: str | None = None,
                         resource: resources.Resource = resources.CLUSTERS) -> dict[str, Any]:
    """Make ``name``'s conditions say ``values`` (type to status); every other one stays.

    ``manager`` owns exactly these types afterwards: on a list-map, others it
    applied before are given up (as one writer's server-side apply does).
    """
    written = await (await writer(api, manager, values, resource)).write(
        name, {"conditions": [condition(ctype, value, reason=reason, transition=transition)
                              for ctype, value in values.items()]})
    assert written is not None  # conditions are declared on every Cluster API
    return written


async def set_condition(api: kube.ApiClient, name: str, ctype: str, value: str, *,
                        manager: str, reason: str = "Test", message: str | None = None,
                        transition: str | None = None,
                        resource: resources.Resource = resources.CLUSTERS) -> dict[str, Any]:
    """Make ``name``'s condition ``ctype`` say ``value``; every other condition stays."""
    written = await (await writer(api, manager, {ctype}, resource)).write(
        name, {"conditions": [condition(ctype, value, reason=reason, message=message,
                                         transition=transition)]})
    assert written is not None  # conditions are declared on every Cluster API
    return written


async def remove_conditions(api: kube.ApiClient, name: str, types: Iterable[str], *,
                            manager: str,
                            resource: resources.Resource = resources.CLUSTERS) -> None:
    """Remove ``name``'s conditions of ``types`` (those ``manager`` wrote, on a list-map)."""
    await (await writer(api, manager, types, resource)).write(name, {"conditions": []})


def statuses(obj: Mapping[str, Any]) -> dict[str, str]:
    """An object's conditions as ``{type: status}``."""
    return {str(c.get("type")): str(c.get("status"))
            for c in (obj.get("status") or {}).get("conditions") or []}


@contextlib.asynccontextmanager
async def versions(api: kube.ApiClient, name: str,
                   resource: resources.Resource = resources.CLUSTERS
                   ) -> AsyncIterator[list[dict[str, Any]]]:
    """Every version of object ``name`` while the block runs, the current one first.

    A watch from the current ``resourceVersion`` (continued where a stream
    ends); on leaving the block it waits until the watch has delivered the
    version the server holds then, so the list misses nothing written inside.
    """
    current = await api.get(resource, name)
    seen: list[dict[str, Any]] = [current]

    async def follow() -> None:
        version = str(current["metadata"]["resourceVersion"])
        while True:
            async for event in api.watch(resource, resource_version=version,
                                         field_selector=f"metadata.name={name}",
                                         timeout_seconds=60):
                version = str(event.object["metadata"].get("resourceVersion", version))
                if event.type != "BOOKMARK":
                    seen.append(event.object)

    task = asyncio.create_task(follow())
    try:
        yield seen
        latest = int((await api.get(resource, name))["metadata"]["resourceVersion"])

        async def caught_up() -> bool:
            if task.done():
                task.result()  # the watch failed: say why
            return int(seen[-1]["metadata"]["resourceVersion"]) >= latest

        await waiting.eventually(caught_up, timeout=10)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, errors.KubeError):
            await task
