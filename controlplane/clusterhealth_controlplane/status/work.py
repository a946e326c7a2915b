"""The work-status controller: member objects' status into ``Work.status.manifestStatuses``.

A key is one Work.  Its reconcile looks up each manifest's object in the
member (through the member-object cache shared with the execution
controller, which watches the objects Works applied), and writes one
``manifestStatuses`` entry per object that exists and is the Work's:
identifier, reflected status and health (see :mod:`.decision`).  It writes
only when that list changed, as ``clusterhealth-work-status``, so the
execution controller's ``Applied`` condition is never touched.  "Changed" is
judged against the cached Work, or against this controller's last write while
the cache has not shown it (:class:`clusterhealth_core.status.UnseenWrites`: its
own writes do not queue the Work again, so a list put back while the cache lags
must not be taken as written).  Re-queued when a Work's spec changes and
whenever a watched member object changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from clusterhealth_controlplane import manager, vocabulary
from clusterhealth_controlplane.execution import decision as execution
from clusterhealth_controlplane.status import decision
from clusterhealth_core import builder, members, reconcile, status
from clusterhealth_core.kube import discovery, errors, resources

log = logging.getLogger(__name__)

CONTROLLER = "workStatus"
FIELD_MANAGER = "clusterhealth-work-status"
SYNC_TIMEOUT = 10.0
"""How long a reconcile waits for a member cache to load before trying again."""


class WorkStatusController(manager.Controller):
    """Member status -> Work status."""

    def __init__(self, context: manager.Context) -> None:
        super().__init__(context)
        self.objects: members.MemberKinds = context.member_objects
        self.unseen = status.UnseenWrites(self.term.clock)
        """The ``manifestStatuses`` last written, until the Work cache shows them."""
        self.controller = (
            builder.Builder(CONTROLLER, self.term, workers=context.workers)
            .for_(self.works, builder.not_deleted, builder.changed(_work_carried))
            .uses(self.clusters)
            .complete(self.reconcile_work))
        self.objects.add_listener(manager.MemberWorks(self.works, self.controller).listener)

    async def reconcile_work(self, request: builder.Request) -> reconcile.Result | None:
        """Write the Work's ``manifestStatuses`` from its member objects."""
        work = self.works.store.get(request.key)
        if work is None or work["metadata"].get("deletionTimestamp"):
            self.unseen.forget(request.key)
            return None
        namespace, name = str(work["metadata"]["namespace"]), str(work["metadata"]["name"])
        cluster_name = vocabulary.cluster_of(namespace)
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
        if entries == (self.unseen.status(request.key, work).get("manifestStatuses") or []):
            return None
        fields = {"manifestStatuses": entries}
        try:
            written = await status.apply_status(self.api, resources.WORKS, name, fields,
                                                field_manager=FIELD_MANAGER, namespace=namespace)
        except errors.NotFound:
            self.unseen.forget(request.key)
            return None
        self.unseen.wrote(request.key, fields, written)
        return None


def _work_carried(work: dict[str, Any]) -> Any:
    """A Work's spec and conditions: our own write (``manifestStatuses``) changes neither."""
    return work.get("spec"), (work.get("status") or {}).get("conditions")
