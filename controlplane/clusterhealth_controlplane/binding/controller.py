"""The binding controller's API side: bindings and templates in, Works out.

* Bindings (ResourceBinding, ClusterResourceBinding) and Works are cached by
  shared informers; templates by one informer per kind (shared with the
  detector), made when a binding first references the kind (resolved
  through the control plane's discovery).
* A key is one binding.  Its reconcile applies one Work per target cluster
  (server-side apply, field manager ``clusterhealth-binding``; skipped
  when the cached Work already carries it, see :func:`decision.carried`),
  creating the execution namespace when missing, and deletes the binding's Works no
  longer wanted (see :func:`decision.orphans`).  A binding gone or being
  deleted takes all its Works with it (the execution controller's finalizer
  then removes the member objects first).
* Re-queued when the binding changes, when its template's desired state
  changes, and when one of its Works changes or is deleted (so a Work
  deleted by hand comes back).
"""

from __future__ import annotations

import logging
from typing import Any

from clusterhealth_controlplane import manager, vocabulary, workwriter
from clusterhealth_controlplane.binding import decision
from clusterhealth_core import builder, reconcile
from clusterhealth_core.kube import discovery, informer, resources

log = logging.getLogger(__name__)

CONTROLLER = "binding"
FIELD_MANAGER = "clusterhealth-binding"
SYNC_POLL = 1.0
"""Seconds between looks at a template kind's cache while it loads (a worker never waits for
one: a kind the controller manager may not read never loads)."""
SYNC_TIMEOUT = 10.0
"""A template kind whose cache has not loaded after this long is reported, then retried."""
RETRY_UNREADABLE = 30.0


def resource_of(ref: vocabulary.BindingRef) -> resources.Resource:
    """The API of the binding ``ref`` names: ResourceBindings, or ClusterResourceBindings."""
    return resources.CLUSTER_RESOURCE_BINDINGS if ref.cluster_scoped \
        else resources.RESOURCE_BINDINGS


class BindingController(manager.Controller):
    """Bindings -> Works, one per target cluster."""

    def __init__(self, context: manager.Context) -> None:
        super().__init__(context)
        self.index = manager.work_index()
        self.templates = manager.Templates(context, self._watch_template)
        self.writer = workwriter.WorkWriter(self.api, self.works, FIELD_MANAGER)
        self.credentials_namespace = context.secret_namespace
        self.controller = (
            builder.Builder(CONTROLLER, self.term, workers=context.workers)
            .for_(self.bindings.informers, builder.changed(builder.spec_and_deletion))  # not status
            .owns(self.works, manager.binding_of_work, builder.changed(_work_carried),
                  observe=self.index.observe)
            .complete(self.reconcile_binding))

    def _to_binding(self, kind: str, event: builder.Event) -> list[builder.Request]:
        meta = event.obj.get("metadata") or {}
        name = vocabulary.binding_name(kind, str(meta["name"]))  # list items may lack their kind
        return [builder.Request(str(meta.get("namespace") or ""), name)]

    # --- reconcile ----------------------------------------------------------

    def _watch_template(self, api_version: str, kind: str, cache: informer.Informer) -> None:
        self.controller.watch(cache, lambda event: self._to_binding(kind, event),
                              builder.changed(decision.template_state))

    async def reconcile_binding(self, request: builder.Request) -> reconcile.Result | None:
        """Make the binding's Works what its spec and template ask for."""
        ref = vocabulary.BindingRef.at(request.namespace, request.name)
        key = request.key
        binding = self.bindings.get(ref)
        existing = [w for w in (self.works.store.get(k) for k in sorted(self.index.on(request)))
                    if w is not None]
        if binding is None or (binding.get("metadata") or {}).get("deletionTimestamp"):
            await self._delete(decision.orphans(None, existing, ()))
            return None
        refused = decision.refusal(binding, self.credentials_namespace)
        if refused is not None:
            # never acted on: no Work is made, changed or deleted for it
            log.warning("binding %s refused: %s", key, refused.message)
            self.term.recorder.record(_with_kind(binding, ref), "Warning", refused.reason,
                                      refused.message)
            return None
        reference = (binding.get("spec") or {}).get("resource") or {}
        try:
            cached = await self.templates.get(str(reference.get("apiVersion")),
                                              str(reference.get("kind")))
        except discovery.NotServed:
            log.warning("binding %s: the control plane does not serve %s %s; asking again later",
                        key, reference.get("kind"), reference.get("apiVersion"))
            return reconcile.Result(requeue_after=30.0)
        if not cached[1].synced:
            if cached[1].loading_for() < SYNC_TIMEOUT:
                return reconcile.Result(requeue_after=SYNC_POLL)
            log.warning("binding %s: %s %s cannot be listed (%s); asking again later", key,
                        reference.get("kind"), reference.get("apiVersion"),
                        cached[1].last_error or "its list has not loaded")
            return reconcile.Result(requeue_after=RETRY_UNREADABLE)
        namespace = reference.get("namespace")
        template = cached[1].store.get(f"{namespace}/{reference.get('name')}" if namespace
                                       else str(reference.get("name")))
        if template is None or (template.get("metadata") or {}).get("deletionTimestamp"):
            return None  # the detector deletes the binding; its Works follow then
        template = {**template, "apiVersion": reference.get("apiVersion"),
                    "kind": reference.get("kind")}
        desired = decision.desired_works(binding, template)
        for work in desired:
            await self._apply(work)
        await self._delete(decision.orphans(binding, existing, desired))
        return None

    async def _apply(self, work: decision.DesiredWork) -> None:
        body = work.body()
        if decision.carried(body, self.works.store.get(f"{work.namespace}/{work.name}")):
            return  # nothing to write: the Work (in the cache) already says all of it
        await self.writer.apply(body)

    async def _delete(self, works: list[Any]) -> None:
        for work in works:
            await self.writer.delete(work)


def _work_carried(work: dict[str, Any]) -> Any:
    """What of a Work its binding cares for: not its status.

    A hand edit of any of these re-queues the binding, which applies the Work again (see
    :func:`decision.carried`).
    """
    return work.get("spec"), builder.meta(work, "labels"), builder.meta(work, "annotations")


def _with_kind(binding: dict[str, Any], ref: vocabulary.BindingRef) -> dict[str, Any]:
    """The binding with its apiVersion and kind (list items may lack them), for an Event."""
    resource = resource_of(ref)
    return {**binding, "apiVersion": resource.api_version, "kind": resource.kind}
