"""The work-status controller: member objects' status into ``Work.status.manifestStatuses``.

A key is one Work.  Its reconcile looks up each manifest's object in the
member (through the member-object cache shared with the execution
controller, which watches the objects Works applied), and writes one
``manifestStatuses`` entry per object that exists and is the Work's:
identifier, reflected status and health (see :mod:`.decision`).  It writes
only when that list changed, as ``clusterhealth-work-status``, so the
execution controller's ``Applied`` condition is never touched.  Re-queued
when a Work's spec changes and whenever a watched member object changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from clusterhealth_controlplane import manager, memberobjects
from clusterhealth_controlplane.binding import decision as binding
from clusterhealth_controlplane.execution import decision as execution
from clusterhealth_controlplane.status import decision
from clusterhealth_core import reconcile, status
from clusterhealth_core.kube import discovery, errors, resources

log = logging.getLogger(__name__)

CONTROLLER = "workStatus"
FIELD_MANAGER = "clusterhealth-work-status"
SYNC_TIMEOUT = 10.0
"""How long a reconcile waits for a member cache to load before trying again."""


class WorkStatusController:
    """Member status -> Work status."""

    def __init__(self, context: manager.Context) -> None:
        term = context.term
        self.term = term
        self.api = term.api
        self.works = term.informers.informer(resources.WORKS)
        self.clusters = term.informers.informer(resources.CLUSTERS)
        self.objects: memberobjects.MemberObjects = context.member_objects
        self.controller = reconcile.Controller(
            CONTROLLER, self.reconcile_work, metrics=term.metrics.controllers, clock=term.clock,
            settings=reconcile.ControllerSettings(workers=context.workers))
        self.works.add_handler(self._on_work)
        self.objects.add_listener(self._on_member_object)

    @property
    def synced(self) -> bool:
        """Whether the Work and Cluster caches have loaded."""
        return self.works.synced and self.clusters.synced

    async def run(self) -> None:
        """Reconcile until cancelled."""
        for cache in (self.works, self.clusters):
            await cache.wait_synced()
        await self.controller.run()

    def _on_work(self, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event == "DELETED":
            return
        if event == "MODIFIED" and old is not None and obj.get("spec") == old.get("spec") \
                and ((obj.get("status") or {}).get("conditions")
                     == (old.get("status") or {}).get("conditions")):
            return  # our own write
        self.controller.enqueue(f"{obj['metadata']['namespace']}/{obj['metadata']['name']}")

    def _on_member_object(self, cluster: str, event: str, obj: dict[str, Any] | None,
                          old: dict[str, Any] | None) -> None:
        if not event or obj is None:
            namespace = binding.execution_namespace(cluster)
            for key, work in list(self.works.store.items()):
                if work["metadata"].get("namespace") == namespace:
                    self.controller.enqueue(key)
            return
        owner = execution.work_of(obj)
        if owner is not None and binding.cluster_of(owner[0]) == cluster:
            self.controller.enqueue(f"{owner[0]}/{owner[1]}")

    async def reconcile_work(self, key: str) -> reconcile.Result | None:
        """Write the Work's ``manifestStatuses`` from its member objects."""
        work = self.works.store.get(key)
        if work is None or work["metadata"].get("deletionTimestamp"):
            return None
        namespace, name = str(work["metadata"]["namespace"]), str(work["metadata"]["name"])
        cluster_name = binding.cluster_of(namespace)
        cluster = self.clusters.store.get(cluster_name or "")
        if cluster is None:
            return None
        entries: list[dict[str, Any]] = []
        for ordinal, manifest in enumerate(execution.manifests(work)):
            api_version, kind = str(manifest.get("apiVersion")), str(manifest.get("kind"))
            try:
                resource = await self.objects.resource(cluster, api_version, kind)
            except discovery.NotServed:
                continue
            cache = await self.objects.watch(cluster, resource)
            if not cache.synced:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(SYNC_TIMEOUT):
                        await cache.wait_synced()
                if not cache.synced:
                    return reconcile.Result(requeue_after=1.0)
            meta = manifest.get("metadata") or {}
            obj_namespace = meta.get("namespace") if resource.namespaced else None
            obj = self.objects.get(str(cluster_name), resource, obj_namespace,
                                   str(meta.get("name")))
            if obj is None or not execution.owned_by(obj, namespace, name):
                continue
            entries.append(decision.manifest_status(
                ordinal, resource.group, resource.version, resource.kind, resource.plural,
                obj_namespace, str(meta.get("name")), obj))
        if entries == ((work.get("status") or {}).get("manifestStatuses") or []):
            return None
        with contextlib.suppress(errors.NotFound):
            await status.apply_status(self.api, resources.WORKS, name,
                                      {"manifestStatuses": entries},
                                      field_manager=FIELD_MANAGER, namespace=namespace)
        return None
