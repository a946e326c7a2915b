"""The cluster-status controller's watches on each member's Nodes and unfinished Pods.

Why: the node and resource summaries come from caches, so nothing is listed again
every probe.  Each member gets its own informer factory (made on first use, remade
when the pool hands out a new client, stopped when the Cluster goes or the controller
stops), each cut down by a transform to what the summaries need (a Pod is its node,
its phase and its effective request).  This class holds those caches with the logic
that makes, waits for and stops them, apart from the probes.

Their watches are also the controller's first news of a member that went away:
each failure of a member's list or watch is handed to ``on_failure`` (the
controller then probes that member at once, not up to one period later).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import Callable

from clusterhealth_controlplane.clusterstatus import decision
from clusterhealth_core import clock
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import informer, resources

log = logging.getLogger(__name__)

LIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"


@dataclasses.dataclass
class Caches:
    """One member's Node and Pod caches, made from one client."""

    api: kube.ApiClient
    factory: informer.InformerFactory
    nodes: informer.Informer
    pods: informer.Informer


class MemberCaches:
    """Every member's Node and Pod caches, by Cluster name.

    ``timeout``: seconds :meth:`get` waits for a member's caches to load.
    ``on_failure``: called with the member's name and the error whenever one of
    its lists or watches fails.
    """

    def __init__(self, clock_: clock.Clock, timeout: float,
                 on_failure: Callable[[str, Exception], None] | None = None) -> None:
        self.clock = clock_
        self.timeout = timeout
        self.on_failure = on_failure
        self.caches: dict[str, Caches] = {}

    async def get(self, name: str, api: kube.ApiClient) -> Caches | None:
        """The member's Node and Pod caches (made on first use, remade on a new client)."""
        caches = self.caches.get(name)
        if caches is not None and caches.api is not api:
            log.info("member %s: new client, restarting the Node and Pod watches", name)
            await self.stop(name)
            caches = None
        if caches is None:
            factory = informer.InformerFactory(api, clock=self.clock)
            nodes = factory.informer(resources.NODES, transform=decision.node_fields)
            pods = factory.informer(resources.PODS, field_selector=LIVE_PODS,
                                    transform=decision.pod_fields)
            if self.on_failure is not None:
                for made in (nodes, pods):
                    made.add_failure_listener(functools.partial(self.on_failure, name))
            factory.start()
            caches = self.caches[name] = Caches(api, factory, nodes, pods)
        if not (caches.nodes.synced and caches.pods.synced):
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.timeout):
                    await caches.factory.wait_synced()
        if not (caches.nodes.synced and caches.pods.synced):
            log.warning("member %s: Node and Pod caches not loaded yet; summaries next time",
                        name)
            return None
        return caches

    async def stop(self, name: str) -> None:
        """Stop the member's caches (if any)."""
        caches = self.caches.pop(name, None)
        if caches is not None:
            await caches.factory.stop()

    async def close(self) -> None:
        """Stop every member's caches (the controller stops)."""
        for name in list(self.caches):
            await self.stop(name)
