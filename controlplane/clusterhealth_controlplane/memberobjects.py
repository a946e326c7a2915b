"""The objects Works put in member clusters, watched once for every controller that needs them.

The execution controller puts back member objects changed or deleted by
hand, and the work-status controller reports their status: both watch the
same objects, so this cache keeps one informer per (member, kind), on the
objects labelled ``karmada.io/managed=true`` only, started when a Work first
carries that kind to that member.  Kinds are resolved through each member's
own discovery.  When the pool replaces a member's client (its Cluster or
Secret changed, or it answered 401), that member's informers are rebuilt
on the new client the next time a controller asks, and every listener hears
``(cluster, "", None, None)`` so it can re-queue that member's Works.  When
the pool forgets a deleted Cluster, its informers stop first.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

from clusterhealth_core import clock as clocks
from clusterhealth_core import members
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import discovery, informer, resources

log = logging.getLogger(__name__)

MANAGED_SELECTOR = "karmada.io/managed=true"

Listener = Callable[[str, str, dict[str, Any] | None, dict[str, Any] | None], None]
"""``listener(cluster, event, obj, old)``; ``event`` "" means: everything of that member."""


@dataclasses.dataclass
class _Member:
    api: kube.ApiClient
    factory: informer.InformerFactory
    discovery: discovery.Discovery


class MemberObjects:
    """Per-member informers on the kinds Works carry, shared by the controllers of a term."""

    def __init__(self, pool: members.MemberClients, *, clock: clocks.Clock,
                 settings: informer.InformerSettings | None = None) -> None:
        self.pool = pool
        self.clock = clock
        self.settings = settings or informer.InformerSettings()
        self._members: dict[str, _Member] = {}
        self._listeners: list[Listener] = []
        pool.add_listener(self._invalidated)
        pool.add_forget_handler(self.forget)

    def add_listener(self, listener: Listener) -> None:
        """Hear every change of a watched member object."""
        self._listeners.append(listener)

    def _emit(self, cluster: str, event: str, obj: dict[str, Any] | None,
              old: dict[str, Any] | None) -> None:
        for listener in self._listeners:
            try:
                listener(cluster, event, obj, old)
            except Exception:  # one listener's bug must not starve the others
                log.exception("member object listener failed for %s", cluster)

    def _invalidated(self, cluster: str) -> None:
        self._emit(cluster, "", None, None)

    async def client(self, cluster: Mapping[str, Any]) -> kube.ApiClient:
        """The member's client (its watches moved onto it if the pool replaced the last one)."""
        name = str(cluster["metadata"]["name"])
        api = await self.pool.get(cluster)
        current = self._members.get(name)
        if current is not None and current.api is api:
            return api
        factory = informer.InformerFactory(api, settings=self.settings, clock=self.clock)
        factory.start()
        made = self._members[name] = _Member(api, factory, discovery.Discovery(api))
        if current is not None:  # replaced before stopping: a concurrent caller sees the new one
            log.info("member %s: new client, restarting its object watches", name)
            for old in current.factory.informers:
                self._watch(name, made, old.resource)
            await current.factory.stop()
            self._emit(name, "", None, None)
            await self.pool.release_retired()  # the old client may be unused now
        return api

    async def resource(self, cluster: Mapping[str, Any], api_version: str,
                       kind: str) -> resources.Resource:
        """The member's resource for ``kind``; :class:`discovery.NotServed` if it has none."""
        await self.client(cluster)
        member = self._members[str(cluster["metadata"]["name"])]
        return await member.discovery.resource(api_version, kind)

    def _watch(self, name: str, member: _Member, resource: resources.Resource) -> informer.Informer:
        before = len(member.factory.informers)
        made = member.factory.informer(resource, label_selector=MANAGED_SELECTOR)
        if len(member.factory.informers) != before:
            made.add_handler(lambda event, obj, old: self._emit(name, event, obj, old))
            log.info("member %s: watching %s", name, resource.plural)
        return made

    async def watch(self, cluster: Mapping[str, Any],
                    resource: resources.Resource) -> informer.Informer:
        """The member's informer on ``resource`` (started on first use)."""
        await self.client(cluster)
        name = str(cluster["metadata"]["name"])
        return self._watch(name, self._members[name], resource)

    def get(self, cluster: str, resource: resources.Resource, namespace: str | None,
            name: str) -> dict[str, Any] | None:
        """The cached member object, if watched and present."""
        member = self._members.get(cluster)
        if member is None:
            return None
        for cache in member.factory.informers:
            if cache.resource == resource:
                return cache.store.get(f"{namespace}/{name}" if namespace else name)
        return None

    async def forget(self, cluster: str) -> None:
        """Stop watching a member (its Cluster is gone)."""
        member = self._members.pop(cluster, None)
        if member is not None:
            await member.factory.stop()

    async def close(self) -> None:
        """Stop every member's watches (the clients belong to the pool)."""
        for name in list(self._members):
            await self.forget(name)
