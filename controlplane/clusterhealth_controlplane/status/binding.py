"""The binding-status controller: Works' status into the binding, and onto the template.

A key is one binding (the binding controller's keys).  Its reconcile reads
the binding's Works (indexed by the annotations the binding controller put
on them), writes ``status.aggregatedStatus`` (one entry per cluster) and the
``FullyApplied`` condition as ``clusterhealth-binding-status`` (the
scheduler's condition and fields are left alone: on our CRDs the list-maps
merge by ``clusterName`` and ``type``; on Karmada's, where the lists are
atomic, the writer merges its condition into the live list, through
:class:`clusterhealth_core.status.StatusWriter`), and, for a Deployment, writes
the members' summed status to the template's status subresource in the
control plane.
Writes happen only when something changed: compared with the cached binding and
template, or with this controller's last write to them while the cache has not
shown it yet (:class:`clusterhealth_core.status.UnseenWrites`).  Re-queued when a
Work of the binding changes and when the binding's spec changes.

A binding status write starts from the cached binding.  When that copy is stale (a
failover writes the binding's spec three times in a few seconds: eviction, placement,
graceful-eviction tasks), the write's Conflict re-queues the binding shortly, to start
again from the cache, which the other write's event reaches in the meantime; only a
copy that is still the stale one then is read from the server.  The read after each
Conflict was one ``GET`` per failed-over binding.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from clusterhealth_controlplane import manager, vocabulary
from clusterhealth_controlplane.binding import decision as binding
from clusterhealth_controlplane.status import decision
from clusterhealth_core import builder, reconcile, status
from clusterhealth_core.kube import errors, resources

log = logging.getLogger(__name__)

CONTROLLER = "bindingStatus"
FIELD_MANAGER = "clusterhealth-binding-status"
SYNC_POLL = 1.0
SYNC_TIMEOUT = 10.0
RETRY_UNREADABLE = 30.0
"""While a template kind's cache loads it is looked at every ``SYNC_POLL`` seconds; past
``SYNC_TIMEOUT`` (a kind that cannot be listed) every ``RETRY_UNREADABLE``."""
CONFLICT_REQUEUE = 0.1
"""Seconds before a binding whose status write met a newer binding is reconciled again."""
STATUS_FIELDS = frozenset({"aggregatedStatus", "conditions"})
"""The binding status fields this controller owns (its condition: ``FullyApplied``)."""


async def _nothing() -> None:
    return None


class BindingStatusController(manager.Controller):
    """Works -> binding status -> template status."""

    def __init__(self, context: manager.Context) -> None:
        super().__init__(context)
        self.index = manager.work_index()
        self.credentials_namespace = context.secret_namespace
        self.templates = manager.Templates(context)
        self.races = status.LostRaces()
        """Bindings whose status write met a newer one (tried again from the cache)."""
        self.unseen = status.UnseenWrites(self.term.clock)
        """The binding statuses last written, until the binding cache shows them."""
        self.unseen_templates = status.UnseenWrites(self.term.clock)
        """The template statuses last written, until the template cache shows them."""
        self.controller = (
            builder.Builder(CONTROLLER, self.term, workers=context.workers)
            .for_(self.bindings.informers, builder.not_deleted, builder.SPEC)
            .owns(self.works, manager.binding_of_work,  # every Work event, status writes too
                  observe=self.index.observe)
            .status((resources.RESOURCE_BINDINGS, resources.CLUSTER_RESOURCE_BINDINGS),
                    FIELD_MANAGER, STATUS_FIELDS, frozenset({decision.FULLY_APPLIED}))
            .complete(self.reconcile_binding))

    async def reconcile_binding(self, request: builder.Request) -> reconcile.Result | None:
        """Aggregate the binding's Works into its status and its template's."""
        ref = vocabulary.BindingRef.at(request.namespace, request.name)
        found = self.bindings.get(ref)
        if found is None or found["metadata"].get("deletionTimestamp"):
            self.races.forget(ref)
            self.unseen.forget(ref)
            return None
        works: dict[str, dict[str, Any]] = {}
        for work_key in sorted(self.index.on(request)):
            work = self.works.store.get(work_key)
            cluster = vocabulary.cluster_of(work_key.split("/", 1)[0])
            if work is not None and cluster and not work["metadata"].get("deletionTimestamp"):
                works[cluster] = work
        items = decision.aggregated_status(works)
        refused = binding.refusal(found, self.credentials_namespace)
        # The two writes are independent: sent together, a reconcile that makes both takes
        # one round trip, not two (4 workers wrote about 70 bindings/s one after the other
        # while 1,000 Deployments were placed; the queue still held 430 when they all ran).
        # Both end before an error is raised (the binding's first), so a failed write never
        # leaves the other running past its reconcile.
        written, result = await asyncio.gather(
            self._write_binding(ref, found, items, refused),
            self._write_template(found, items) if refused is None else _nothing(),
            return_exceptions=True)
        if isinstance(written, BaseException):
            raise written
        if isinstance(result, BaseException):
            raise result
        if written:
            return result
        again = CONFLICT_REQUEUE if result is None or result.requeue_after is None \
            else min(CONFLICT_REQUEUE, result.requeue_after)
        return reconcile.Result(requeue_after=again)

    async def _write_binding(self, ref: vocabulary.BindingRef, found: dict[str, Any],
                             items: list[dict[str, Any]], refused: binding.Refusal | None
                             ) -> bool:
        """Write the binding's status if it changed; False: the cached binding was stale."""
        current = self.unseen.status(ref, found)
        conditions = current.get("conditions") or []
        condition = vocabulary.keep_transition(
            decision.fully_applied(found, items, self.term.clock.now(),
                                   (refused.reason, refused.message) if refused else None),
            conditions)
        live = next((c for c in conditions if c.get("type") == decision.FULLY_APPLIED), None)
        if (current.get("aggregatedStatus") or []) == items \
                and decision.same_condition(live, condition):
            self.races.forget(ref)
            return True
        target = resources.CLUSTER_RESOURCE_BINDINGS if ref.cluster_scoped \
            else resources.RESOURCE_BINDINGS
        fields = {"aggregatedStatus": items, "conditions": [condition]}
        try:  # a Conflict after reading the server too is raised: retried with backoff
            won = await self.races.write(self.controller.writer(target), ref, ref.name, fields,
                                         namespace=ref.namespace or None, cached=found)
        except errors.NotFound:
            self.unseen.forget(ref)
            return True
        if won is None:
            return False
        self.unseen.wrote(ref, fields, won.written)
        return True

    async def _write_template(self, found: dict[str, Any], items: list[dict[str, Any]]
                              ) -> reconcile.Result | None:
        reference = (found.get("spec") or {}).get("resource") or {}
        if not decision.is_deployment(reference):
            return None
        api_version, kind = str(reference.get("apiVersion")), str(reference.get("kind"))
        resource, cache = await self.templates.get(api_version, kind)
        if not cache.synced:  # loading, or not readable: look again, never wait here
            return reconcile.Result(requeue_after=SYNC_POLL if cache.loading_for() < SYNC_TIMEOUT
                                    else RETRY_UNREADABLE)
        namespace = str(reference.get("namespace") or "")
        key = f"{namespace}/{reference.get('name')}"
        template = cache.store.get(key)
        if template is None or template["metadata"].get("deletionTimestamp"):
            self.unseen_templates.forget(key)
            return None
        wanted = decision.deployment_status(template, items)
        shown = {"status": self.unseen_templates.status(key, template)}
        if not decision.template_status_changed(shown, wanted):
            return None
        try:
            written = await self.api.apply(
                resource, {"metadata": {"name": template["metadata"]["name"],
                                        "namespace": namespace}, "status": wanted},
                field_manager=FIELD_MANAGER, subresource="status")
        except errors.NotFound:
            self.unseen_templates.forget(key)
            return None
        self.unseen_templates.wrote(key, wanted, written)
        return None

