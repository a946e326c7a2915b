"""The graceful-eviction controller's API side: bindings with tasks in, the kept tasks out.

* ResourceBindings and ClusterResourceBindings are cached by the shared
  informers; a binding is queued whenever it carries tasks (also when first
  listed, so that a restart picks up the tasks in flight).
* A key is one binding (the binding controller's keys).  Its reconcile
  applies :func:`decision.assess` and, when a task ended or was stamped,
  writes the kept tasks in one merge patch guarded by the binding's
  ``resourceVersion`` (a conflict reads the binding again and retries, as
  the taint manager writes the same list); then asks to run again at the
  earliest deadline of the kept tasks, so no task waits on an update that
  never comes.
* The binding controller deletes the Work of a cluster whose task ended; the
  execution controller removes the member objects once that member answers.
* Metrics: ``graceful_eviction_tasks`` (tasks on all bindings, kept up to date
  from the informers' events) and ``graceful_eviction_ends{why}``; an Event
  ``EvictWorkloadFromClusterSucceed`` (Karmada's reason) on the binding and
  its template for each task ended.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from clusterhealth_controlplane import manager
from clusterhealth_controlplane.binding import controller as binding_io
from clusterhealth_controlplane.binding import decision as binding
from clusterhealth_controlplane.gracefuleviction import decision
from clusterhealth_core import reconcile
from clusterhealth_core.kube import errors, resources

log = logging.getLogger(__name__)

CONTROLLER = "gracefulEviction"
EVENT_ENDED = "EvictWorkloadFromClusterSucceed"
"""Karmada's Event reason when a graceful-eviction task ends."""
CONFLICT_ATTEMPTS = 3


class GracefulEvictionController:
    """Ends graceful-eviction tasks (a :class:`runner.Controller`)."""

    def __init__(self, context: manager.Context) -> None:
        term = context.term
        self.term = term
        self.api = term.api
        self.clock = term.clock
        self.timeout = context.options.eviction.graceful_eviction_timeout
        self.metrics = context.metrics
        self.bindings = term.informers.informer(resources.RESOURCE_BINDINGS)
        self.cluster_bindings = term.informers.informer(resources.CLUSTER_RESOURCE_BINDINGS)
        self.counts: dict[str, int] = {}
        """Tasks per binding key, for the gauge."""
        self.total = 0
        self.controller = reconcile.Controller(
            CONTROLLER, self.reconcile_binding, metrics=term.metrics.controllers, clock=term.clock,
            settings=reconcile.ControllerSettings(workers=context.workers))
        self.bindings.add_handler(self._on_binding)
        self.cluster_bindings.add_handler(self._on_binding)

    @property
    def synced(self) -> bool:
        """Whether the binding caches have loaded."""
        return self.bindings.synced and self.cluster_bindings.synced

    async def run(self) -> None:
        """Reconcile until cancelled."""
        for cache in (self.bindings, self.cluster_bindings):
            await cache.wait_synced()
        await self.controller.run()

    def _on_binding(self, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = binding.BindingRef.of(obj).key
        count = 0 if event == "DELETED" else len(decision.tasks(obj))
        self.total += count - self.counts.pop(key, 0)
        if count:
            self.counts[key] = count
        self.metrics.graceful_eviction_tasks.set(self.total)
        if count:
            self.controller.enqueue(key)

    def _cached(self, ref: binding.BindingRef) -> dict[str, Any] | None:
        if ref.cluster_scoped:
            return self.cluster_bindings.store.get(ref.name)
        return self.bindings.store.get(f"{ref.namespace}/{ref.name}")

    async def reconcile_binding(self, key: str) -> reconcile.Result | None:
        """End the binding's tasks that are done; come back at the next deadline."""
        ref = binding.BindingRef.parse(key)
        obj = self._cached(ref)
        for attempt in range(CONFLICT_ATTEMPTS):
            if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp") \
                    or not decision.tasks(obj):
                return None
            verdict = decision.assess(obj, self.clock.now(), self.timeout)
            if not verdict.changed:
                return self._next(verdict)
            try:
                await self.api.patch(binding_io.resource_of(ref), ref.name,
                                     decision.tasks_patch(obj, verdict.kept),
                                     namespace=ref.namespace or None)
            except errors.NotFound:
                return None
            except errors.Conflict:
                if attempt == CONFLICT_ATTEMPTS - 1:
                    raise
                try:
                    obj = await self.api.get(binding_io.resource_of(ref), ref.name,
                                             namespace=ref.namespace or None)
                except errors.NotFound:
                    return None
                continue
            self._report(ref, obj, verdict.ended)
            return self._next(verdict)
        return None

    @staticmethod
    def _next(verdict: decision.Assessment) -> reconcile.Result | None:
        if verdict.next_check is None:
            return None
        return reconcile.Result(requeue_after=max(verdict.next_check, 0.0))

    def _report(self, ref: binding.BindingRef, obj: Mapping[str, Any],
                ended: list[decision.Ended]) -> None:
        resource = binding_io.resource_of(ref)
        about = {**obj, "apiVersion": resource.api_version, "kind": resource.kind}
        template = (obj.get("spec") or {}).get("resource") or {}
        template_ref: dict[str, Any] = {
            "apiVersion": template.get("apiVersion"), "kind": template.get("kind"),
            "metadata": {k: template[k] for k in ("namespace", "name", "uid") if template.get(k)}}
        for end in ended:
            self.metrics.graceful_eviction_ends.labels(end.why).inc()
            log.info("%s %s: graceful eviction from %s ended (%s)", resource.kind, ref.key,
                     end.cluster, end.why)
            message = (f"Graceful eviction from cluster {end.cluster} ended ({end.why}): "
                       "its copy there is removed.")
            self.term.recorder.record(about, "Normal", EVENT_ENDED, message)
            if template_ref["metadata"].get("name"):
                self.term.recorder.record(template_ref, "Normal", EVENT_ENDED, message)
