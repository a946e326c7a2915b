"""The binding controller's API side: bindings and templates in, Works out.

* Bindings (ResourceBinding, ClusterResourceBinding) and Works are cached by
  shared informers; templates by one informer per kind (shared with the
  detector), made when a binding first references the kind (resolved
  through the control plane's discovery).
* A key is one binding.  Its reconcile applies one Work per target cluster
  (server-side apply, field manager ``clusterhealth-binding``), creating
  the execution namespace when missing, and deletes the binding's Works no
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

from clusterhealth_controlplane import manager, workwriter
from clusterhealth_controlplane.binding import decision
from clusterhealth_core import reconcile
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


def resource_of(ref: decision.BindingRef) -> resources.Resource:
    """The API of the binding ``ref`` names: ResourceBindings, or ClusterResourceBindings."""
    return resources.CLUSTER_RESOURCE_BINDINGS if ref.cluster_scoped \
        else resources.RESOURCE_BINDINGS


class BindingController:
    """Bindings -> Works, one per target cluster."""

    def __init__(self, context: manager.Context) -> None:
        term = context.term
        self.term = term
        self.api = term.api
        self.discovery = context.discovery
        self.bindings = term.informers.informer(resources.RESOURCE_BINDINGS)
        self.cluster_bindings = term.informers.informer(resources.CLUSTER_RESOURCE_BINDINGS)
        self.works = term.informers.informer(resources.WORKS)
        self.index = decision.WorkIndex()
        self.templates: dict[tuple[str, str], tuple[resources.Resource, informer.Informer]] = {}
        self.writer = workwriter.WorkWriter(self.api, self.works, FIELD_MANAGER)
        self.credentials_namespace = context.secret_namespace
        self.controller = reconcile.Controller(
            CONTROLLER, self.reconcile_binding, metrics=term.metrics.controllers, clock=term.clock,
            settings=reconcile.ControllerSettings(workers=context.workers))
        self.bindings.add_handler(self._on_binding)
        self.cluster_bindings.add_handler(self._on_binding)
        self.works.add_handler(self._on_work)

    @property
    def synced(self) -> bool:
        """Whether the binding and Work caches have loaded (template caches load per kind)."""
        return self.bindings.synced and self.cluster_bindings.synced and self.works.synced

    async def run(self) -> None:
        """Reconcile until cancelled."""
        for cache in (self.bindings, self.cluster_bindings, self.works):
            await cache.wait_synced()
        await self.controller.run()

    # --- events -------------------------------------------------------------

    def _on_binding(self, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if event == "MODIFIED" and old is not None and obj.get("spec") == old.get("spec") \
                and (obj.get("metadata") or {}).get("deletionTimestamp") == \
                (old.get("metadata") or {}).get("deletionTimestamp"):
            return  # a status write
        self.controller.enqueue(decision.BindingRef.of(obj).key)

    def _on_work(self, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        ref = self.index.update(event, obj)
        if ref is None:
            return
        if event == "MODIFIED" and old is not None and obj.get("spec") == old.get("spec") \
                and (obj.get("metadata") or {}).get("labels") == \
                (old.get("metadata") or {}).get("labels"):
            return  # a status write
        self.controller.enqueue(ref.key)

    def _on_template(self, kind: str, event: str, obj: dict[str, Any],
                     old: dict[str, Any] | None) -> None:
        if event == "MODIFIED" and decision.template_state(obj) == decision.template_state(old):
            return
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        name = decision.binding_name(kind, str(meta["name"]))  # list items may lack their kind
        self.controller.enqueue(decision.BindingRef(not namespace, namespace, name).key)

    # --- reconcile ----------------------------------------------------------

    def _binding(self, ref: decision.BindingRef) -> dict[str, Any] | None:
        if ref.cluster_scoped:
            return self.cluster_bindings.store.get(ref.name)
        return self.bindings.store.get(f"{ref.namespace}/{ref.name}")

    async def _template_cache(self, api_version: str, kind: str
                              ) -> tuple[resources.Resource, informer.Informer] | None:
        found = self.templates.get((api_version, kind))
        if found is None:
            try:
                resource = await self.discovery.resource(api_version, kind)
            except discovery.NotServed:
                return None
            cache = self.term.informers.informer(resource)
            cache.add_handler(lambda event, obj, old: self._on_template(kind, event, obj, old))
            found = self.templates[(api_version, kind)] = (resource, cache)
        return found

    async def reconcile_binding(self, key: str) -> reconcile.Result | None:
        """Make the binding's Works what its spec and template ask for."""
        ref = decision.BindingRef.parse(key)
        binding = self._binding(ref)
        existing = [w for w in (self.works.store.get(k) for k in self.index.works(ref))
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
        cached = await self._template_cache(str(reference.get("apiVersion")),
                                            str(reference.get("kind")))
        if cached is None:
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
        await self.writer.apply(work.body())

    async def _delete(self, works: list[Any]) -> None:
        for work in works:
            await self.writer.delete(work)


def _with_kind(binding: dict[str, Any], ref: decision.BindingRef) -> dict[str, Any]:
    """The binding with its apiVersion and kind (list items may lack them), for an Event."""
    resource = resource_of(ref)
    return {**binding, "apiVersion": resource.api_version, "kind": resource.kind}
