"""Works applied into the execution namespaces, by every controller that writes them.

The binding controller (a Work per binding and cluster) and the namespace sync (a Work per
namespace and cluster) write Works the same way: the execution namespace
``karmada-es-<cluster>`` is made when missing, a Work being deleted is not applied again
until it is gone, and each writer applies with its own field manager.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, informer, resources

log = logging.getLogger(__name__)


class WorkWriter:
    """Apply and delete Works as one field manager, over the term's Work cache."""

    def __init__(self, api: kube.ApiClient, works: informer.Informer, field_manager: str) -> None:
        self.api = api
        self.works = works
        self.field_manager = field_manager
        self.namespaces: set[str] = set()
        """Execution namespaces known to exist."""

    async def apply(self, body: Mapping[str, Any]) -> None:
        """Server-side apply a Work, making its execution namespace first when missing."""
        meta = body["metadata"]
        namespace, name = str(meta["namespace"]), str(meta["name"])
        if namespace not in self.namespaces:
            with contextlib.suppress(errors.Conflict):
                await self.api.create(resources.NAMESPACES, {"metadata": {"name": namespace}})
            self.namespaces.add(namespace)
        current = self.works.store.get(f"{namespace}/{name}")
        if current is not None and (current.get("metadata") or {}).get("deletionTimestamp"):
            raise errors.KubeError(f"Work {namespace}/{name} is being deleted; applying it "
                                   "again once it is gone")
        try:
            await self.api.apply(resources.WORKS, body, field_manager=self.field_manager)
        except errors.NotFound:
            self.namespaces.discard(namespace)  # the namespace went away: make it again
            raise

    async def delete(self, work: Mapping[str, Any]) -> None:
        """Delete a Work (not one already being deleted); a Work already gone is fine."""
        meta = work["metadata"]
        if meta.get("deletionTimestamp"):
            return
        log.info("deleting Work %s/%s", meta["namespace"], meta["name"])
        await self.api.delete(resources.WORKS, meta["name"], namespace=meta["namespace"],
                              missing_ok=True)
