"""The execution controller's API side: Works applied in their members, and cleaned up.

* Works and Clusters are cached by shared informers; the member objects by
  :class:`~clusterhealth_core.members.MemberKinds` (shared with the
  work-status controller).
* A key is one Work (``karmada-es-<cluster>/<name>``).  Its reconcile puts
  the finalizer ``karmada.io/execution-controller`` on the Work, resolves
  every manifest's kind through the member's discovery (one kind missing:
  ``Applied=False`` and nothing applied), then applies each manifest by
  server-side apply as ``clusterhealth-execution`` with ``force`` (a hand
  edit of a field we apply is put back), creating the member's namespace
  when missing (:mod:`.namespaces`), and writes the ``Applied`` condition.
* A Work being deleted: its member objects are deleted (those that are
  still the Work's) once the member is reachable; until then the finalizer
  stays and the reconcile comes back.  A Cluster that no longer exists has
  nothing left to clean: the finalizer goes.
* A member object changed (in its desired state) or deleted re-queues its
  Work, found by the annotations it was applied with.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from clusterhealth_controlplane import manager, vocabulary
from clusterhealth_controlplane.execution import decision, namespaces
from clusterhealth_core import builder, members, reconcile, status
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import discovery, errors, resources

log = logging.getLogger(__name__)

CONTROLLER = "execution"
FIELD_MANAGER = "clusterhealth-execution"
RETRY_UNREACHABLE = 10.0
"""Seconds between attempts while a member with no Ready condition does not answer."""
RETRY_NOT_READY = 300.0
"""Seconds between looks at a Work while its Cluster is not Ready: a backstop only.  The
Cluster's Ready change queues every Work of it at once (the ``watches`` of the Clusters), so
a Work need not poll a member that is down (it did every 10 s: 16,465 reconciles of Works
of one dead member in the window of a 1,000-binding failover)."""
RETRY_REFUSED = 30.0
"""Seconds between attempts while a member refuses a manifest (or does not serve its kind),
or while a member object of the same name is another's (conflictResolution Abort)."""
RETRY_NAMESPACE = 1.0
"""Seconds between looks while a workload waits for its namespace's own Work."""
PROBE_TIMEOUT = 5.0


class ExecutionController(manager.Controller):
    """Works -> member objects, by server-side apply."""

    def __init__(self, context: manager.Context) -> None:
        super().__init__(context)
        self.objects: members.MemberKinds = context.member_objects
        self.namespaces = namespaces.MemberNamespaces(
            context, self.works, lambda request: self.controller.enqueue(request))
        declared = (
            builder.Builder(CONTROLLER, self.term, workers=context.workers)
            .for_(self.works, builder.not_deleted, builder.changed(_work_carried))
            .watches(self.clusters, self._cluster_works, builder.changed(decision.ready),
                     observe=self.namespaces.observe))
        if self.namespaces.sync is not None:
            declared.uses(self.namespaces.sync)  # which member namespaces the sync makes
        self.controller = declared.complete(self.reconcile_work)
        self.member_works = manager.MemberWorks(
            self.works, self.controller, decision.needs_reapply, self.namespaces.forget)
        self.objects.add_listener(self.member_works.listener)

    # --- events -------------------------------------------------------------

    def _cluster_works(self, event: builder.Event) -> list[builder.Request]:
        return self.member_works.of_cluster(str(event.obj["metadata"]["name"]))

    # --- reconcile ----------------------------------------------------------

    async def reconcile_work(self, request: builder.Request) -> reconcile.Result | None:
        """Apply the Work in its member (or clean the member up when the Work is deleted)."""
        key = request.key
        work = self.works.store.get(key)
        if work is None:
            return None
        meta = work["metadata"]
        cluster_name = vocabulary.cluster_of(str(meta["namespace"]))
        if cluster_name is None:
            return None  # not an execution namespace: not ours
        cluster = self.clusters.store.get(cluster_name)
        if meta.get("deletionTimestamp"):
            return await self._finalize(work, cluster_name, cluster)
        if cluster is None:
            await self._condition(work, False, f"cluster {cluster_name} does not exist")
            return reconcile.Result(requeue_after=RETRY_REFUSED)
        if decision.ready(cluster) is False:
            # debug: one line per Work per retry while a member is down is a flood; the
            # Cluster's Ready condition and the Work's Applied condition say it already
            log.debug("Work %s: cluster %s is not ready; not syncing it until it is", key,
                      cluster_name)
            return reconcile.Result(requeue_after=RETRY_NOT_READY)
        if not decision.has_finalizer(work):
            await self.api.apply(resources.WORKS, {"metadata": {
                "name": meta["name"], "namespace": meta["namespace"],
                "finalizers": [vocabulary.EXECUTION_FINALIZER]}}, field_manager=FIELD_MANAGER)
        if (work.get("spec") or {}).get("suspendDispatching"):
            return None
        return await self._sync(work, cluster)

    async def _sync(self, work: dict[str, Any], cluster: Mapping[str, Any]
                    ) -> reconcile.Result | None:
        name = str(cluster["metadata"]["name"])
        manifests = decision.manifests(work)
        try:
            api = await self.objects.client(cluster)
            found: list[tuple[resources.Resource, dict[str, Any]]] = []
            missing: list[tuple[str, str]] = []
            for manifest in manifests:
                api_version, kind = str(manifest.get("apiVersion")), str(manifest.get("kind"))
                try:
                    found.append((await self.objects.resource(cluster, api_version, kind),
                                  manifest))
                except discovery.NotServed:
                    missing.append((api_version, kind))
        except (errors.KubeError, OSError) as exc:
            await self._condition(work, False, f"cluster {name}: {exc}")
            raise
        refusals = [r for r in (decision.scope_refusal(name, m, res.namespaced)
                                for res, m in found) if r]
        if missing or refusals:
            message = "; ".join(([decision.unserved_message(name, missing)] if missing else [])
                                + refusals)
            await self._refuse(work, decision.APPLIED_FAILED, message)
            return reconcile.Result(requeue_after=RETRY_REFUSED)
        for resource, manifest in found:
            await self.objects.watch(cluster, resource)
            what = decision.describe(manifest)
            try:
                outcome = await self._apply(work, cluster, api, resource, manifest)
            except errors.ApiError as exc:
                await self._condition(work, False, f"cluster {name} refused {what}: {exc}")
                if exc.status >= 500 or exc.status in (404, 429):
                    raise
                return reconcile.Result(requeue_after=RETRY_REFUSED)
            except (errors.KubeError, OSError) as exc:
                await self._condition(work, False, f"cluster {name}: {exc}")
                raise
            if outcome is not None:
                return outcome
        await self._condition(work, True, "")
        return None

    async def _apply(self, work: Mapping[str, Any], cluster: Mapping[str, Any],
                     api: kube.ApiClient, resource: resources.Resource,
                     manifest: Mapping[str, Any]) -> reconcile.Result | None:
        """Apply one manifest as its verdict says; a Result when the Work must wait or stop."""
        meta = work["metadata"]
        work_namespace, work_name = str(meta["namespace"]), str(meta["name"])
        cluster_name = str(cluster["metadata"]["name"])
        obj_meta = manifest.get("metadata") or {}
        namespace = str(obj_meta.get("namespace") or "") if resource.namespaced else ""
        if namespace and not await self.namespaces.ready(cluster_name, api, namespace):
            await self._condition(dict(work), False, (
                f"waiting for namespace {namespace} in cluster {cluster_name}: the namespace "
                "sync creates it, with its labels, before anything is applied in it"))
            return reconcile.Result(requeue_after=RETRY_NAMESPACE)
        live = self.objects.get(cluster_name, resource, namespace or None,
                                str(obj_meta.get("name")))
        if live is None or not decision.owned_by(live, work_namespace, work_name):
            # not (yet) in the cache of our own objects: the member says what is there
            try:
                live = await api.get(resource, str(obj_meta.get("name")),
                                     namespace=namespace or None)
            except errors.NotFound:
                live = None
        verdict = decision.verdict(manifest, live, work_namespace, work_name)
        if verdict is decision.Verdict.CONFLICT:
            assert live is not None
            await self._refuse(work, decision.APPLIED_FAILED,
                               decision.conflict_message(cluster_name, manifest, live),
                               event_reason=decision.CONFLICT_REASON, manifest=manifest)
            return reconcile.Result(requeue_after=RETRY_REFUSED)
        if verdict is decision.Verdict.ADOPT:
            log.info("Work %s/%s adopts %s in %s (conflictResolution Overwrite)",
                     work_namespace, work_name, decision.describe(manifest), cluster_name)
        body = decision.prepare(manifest, work_namespace, work_name,
                                adopt=verdict is decision.Verdict.ADOPT
                                or decision.adopted(live))
        try:
            await api.apply(resource, body, field_manager=FIELD_MANAGER,
                            force=verdict is not decision.Verdict.CREATE)
        except errors.NotFound:
            self.namespaces.gone(cluster_name, namespace)
            raise
        return None

    async def _refuse(self, work: Mapping[str, Any], reason: str, message: str, *,
                      event_reason: str | None = None,
                      manifest: Mapping[str, Any] | None = None) -> None:
        """``Applied=False`` with ``message``, and Warning Events where the user looks.

        On the Work, its binding and the template it came from.
        """
        await self._condition(dict(work), False, message)
        why = event_reason or reason
        recorder = self.term.recorder
        recorder.record({**work, "apiVersion": resources.WORKS.api_version, "kind": "Work"},
                        "Warning", why, message)
        for involved in decision.sources(work, manifest):
            recorder.record(involved, "Warning", why, message)

    async def _condition(self, work: dict[str, Any], ok: bool, message: str) -> None:
        meta = work["metadata"]
        wanted = decision.applied_condition(ok, message, meta.get("generation"),
                                            self.term.clock.now())
        current = [c for c in (work.get("status") or {}).get("conditions") or []
                   if c.get("type") == decision.APPLIED]
        if current and all(current[0].get(k) == wanted.get(k)
                           for k in ("status", "reason", "message", "observedGeneration")):
            return
        wanted = vocabulary.keep_transition(wanted, current)
        with contextlib.suppress(errors.NotFound):  # deleted meanwhile
            await status.apply_status(self.api, resources.WORKS, str(meta["name"]),
                                      {"conditions": [wanted]}, field_manager=FIELD_MANAGER,
                                      namespace=str(meta["namespace"]))

    # --- deletion -----------------------------------------------------------

    async def _unreachable_wait(self, cluster: Mapping[str, Any]) -> float | None:
        """How long to wait before cleaning the member, or None when it can be cleaned now.

        Its Ready condition says; without one, a ``/version`` probe does.  A not-Ready
        Cluster's Ready change queues the Work again, so only a backstop is needed then.
        """
        ready = decision.ready(cluster)
        if ready is not None:
            return None if ready else RETRY_NOT_READY
        try:
            api = await self.objects.client(cluster)
            await api.request("GET", "/version", timeout=PROBE_TIMEOUT)
        except (errors.KubeError, OSError, TimeoutError) as exc:
            log.info("cluster %s does not answer (%s)", cluster["metadata"]["name"], exc)
            return RETRY_UNREACHABLE
        return None

    async def _finalize(self, work: dict[str, Any], cluster_name: str,
                        cluster: Mapping[str, Any] | None) -> reconcile.Result | None:
        meta = work["metadata"]
        if not decision.has_finalizer(work):
            return None
        preserve = (work.get("spec") or {}).get("preserveResourcesOnDeletion")
        if cluster is not None and not preserve:
            wait = await self._unreachable_wait(cluster)
            if wait is not None:
                # debug, as in the sync: one line per Work per retry while a member is down
                # floods the log (500 Works: 50 lines a second); the Cluster's Ready says it
                log.debug("Work %s/%s: cluster %s unreachable; its objects are deleted (and "
                          "the finalizer removed) once it answers", meta["namespace"],
                          meta["name"], cluster_name)
                return reconcile.Result(requeue_after=wait)
            await self._delete_objects(work, cluster)
        elif cluster is None:
            log.info("Work %s/%s: cluster %s is gone; nothing left to clean there",
                     meta["namespace"], meta["name"], cluster_name)
        await self._remove_finalizer(str(meta["namespace"]), str(meta["name"]))
        return None

    async def _delete_objects(self, work: dict[str, Any], cluster: Mapping[str, Any]) -> None:
        meta = work["metadata"]
        api = await self.objects.client(cluster)
        for manifest in decision.manifests(work):
            try:
                resource = await self.objects.resource(cluster, str(manifest.get("apiVersion")),
                                                       str(manifest.get("kind")))
            except discovery.NotServed:
                continue  # never applied
            obj_meta = manifest.get("metadata") or {}
            namespace = obj_meta.get("namespace") if resource.namespaced else None
            try:
                live = await api.get(resource, str(obj_meta.get("name")), namespace=namespace)
            except errors.NotFound:
                continue
            if not decision.owned_by(live, str(meta["namespace"]), str(meta["name"])):
                log.info("not deleting %s %s in %s: it is not Work %s/%s's", resource.kind,
                         obj_meta.get("name"), cluster["metadata"]["name"], meta["namespace"],
                         meta["name"])
                continue
            if decision.adopted(live):
                log.info("releasing %s %s in %s: Work %s/%s adopted it, and deletes only what "
                         "it created", resource.kind, obj_meta.get("name"),
                         cluster["metadata"]["name"], meta["namespace"], meta["name"])
                with contextlib.suppress(errors.NotFound):
                    await api.patch(resource, str(obj_meta.get("name")),
                                    decision.release_patch(), namespace=namespace)
                continue
            await api.delete(resource, str(obj_meta.get("name")), namespace=namespace,
                             missing_ok=True)

    async def _remove_finalizer(self, namespace: str, name: str) -> None:
        try:
            live = await self.api.get(resources.WORKS, name, namespace=namespace)
        except errors.NotFound:
            return
        finalizers = list(live["metadata"].get("finalizers") or [])
        if vocabulary.EXECUTION_FINALIZER not in finalizers:
            return
        finalizers.remove(vocabulary.EXECUTION_FINALIZER)
        live["metadata"]["finalizers"] = finalizers
        with contextlib.suppress(errors.NotFound):
            await self.api.update(resources.WORKS, live)


def _work_carried(work: dict[str, Any]) -> Any:
    """What of a Work the member objects follow: not its status."""
    return work.get("spec"), builder.meta(work, "deletionTimestamp"), decision.has_finalizer(work)
