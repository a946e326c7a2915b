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

from clusterhealth_controlplane import manager, metrics, vocabulary
from clusterhealth_controlplane.binding import controller as binding_io
from clusterhealth_controlplane.gracefuleviction import decision
from clusterhealth_core import builder, reconcile
from clusterhealth_core.kube import errors

log = logging.getLogger(__name__)

CONTROLLER = "gracefulEviction"
EVENT_ENDED = "EvictWorkloadFromClusterSucceed"
"""Karmada's Event reason when a graceful-eviction task ends."""
CONFLICT_ATTEMPTS = 3


class TaskGauge:
    """``graceful_eviction_tasks``: the tasks on every binding, counted as bindings change.

    Follows each binding event (:meth:`observe`), keeping each binding's count so
    that a change moves the total by the difference.
    """

    def __init__(self, family: metrics.FailoverMetrics) -> None:
        self.metrics = family
        self.counts: dict[str, int] = {}
        """Tasks per binding key."""
        self.total = 0

    def observe(self, event: builder.Event) -> None:
        """Count one binding's tasks again (none once it is deleted)."""
        key = vocabulary.BindingRef.of(event.obj).key
        count = 0 if event.type == builder.DELETED else len(decision.tasks(event.obj))
        self.total += count - self.counts.pop(key, 0)
        if count:
            self.counts[key] = count
        self.metrics.graceful_eviction_tasks.set(self.total)


class GracefulEvictionController(manager.Controller):
    """Ends graceful-eviction tasks (a :class:`runner.Controller`)."""

    def __init__(self, context: manager.Context) -> None:
        super().__init__(context)
        self.timeout = context.options.eviction.graceful_eviction_timeout
        self.gauge = TaskGauge(context.metrics)
        self.controller = (
            builder.Builder(CONTROLLER, self.term, workers=context.workers)
            .for_(self.bindings.informers, _with_tasks, observe=self.gauge.observe)
            .complete(self.reconcile_binding))

    async def reconcile_binding(self, request: builder.Request) -> reconcile.Result | None:
        """End the binding's tasks that are done; come back at the next deadline."""
        ref = vocabulary.BindingRef.at(request.namespace, request.name)
        obj = self.bindings.get(ref)
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

    def _report(self, ref: vocabulary.BindingRef, obj: Mapping[str, Any],
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


def _with_tasks(event: builder.Event) -> bool:
    """A binding that carries tasks (also when first listed: a restart picks them up)."""
    return event.type != builder.DELETED and bool(decision.tasks(event.obj))
