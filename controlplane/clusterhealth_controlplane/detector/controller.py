"""The detector's API side: watch templates and policies, write claims and bindings.

* Policies (PropagationPolicy, ClusterPropagationPolicy) are cached by
  shared informers.  The kinds the policies select are resolved
  through discovery and get an informer each, started when a policy first
  names them (a kind no API serves is logged and tried again later;
  :mod:`.selected`).
* Three queues, declared with the core's builder: ``detector-kinds`` (a
  request per selected kind, from the policies' selectors),
  ``detector-policies`` (a policy's ``ResourcesSelected`` condition, a
  moment after it changes) and ``detector``, whose requests are templates
  (their kind in :attr:`builder.Request.kind`), each queued again every
  resync period.  A template's reconcile
  asks :func:`decision.choose` which policy claims it, records the claim on
  the template (Karmada's labels and annotations, with our own field manager)
  and applies the binding's detector-owned fields (the scheduler owns
  ``spec.clusters``).
* A template that is gone or being deleted takes its binding with it (the
  binding's Works, and so the member objects, follow).  A template whose
  policy is deleted loses the claim and keeps its binding, as in Karmada.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from clusterhealth_controlplane import manager, vocabulary
from clusterhealth_controlplane.detector import decision, selected
from clusterhealth_core import builder, reconcile, status
from clusterhealth_core.api import meta, policy
from clusterhealth_core.kube import errors, resources

log = logging.getLogger(__name__)

CONTROLLER = "detector"
FIELD_MANAGER = "clusterhealth-detector"
POLICY_STATUS_DELAY = 1.0
"""Seconds a policy's condition waits for more claims to move (coalesced)."""
MANAGED_BY = "clusterhealth.io/managed-by"
"""Label on the bindings the detector made (it deletes only those)."""


class Detector(manager.Controller):
    """Templates -> claims and bindings, for every kind a policy selects."""

    def __init__(self, context: manager.Context) -> None:
        super().__init__(context)
        self.policies = manager.Policies(self.term)
        self.selected = selected.SelectedKinds(context, lambda: self.controller,
                                               self._queue_policies_selecting)
        """The kinds the policies select, with their template caches."""
        self.parsed = builder.Parsed(_parse, _policy_request)
        """Every cached policy by request (kind PP or CPP), parsed once per change here, not
        in every template's reconcile (None: malformed or deleting)."""
        # The template caches are not waited for (nor part of ``synced``): a kind a policy
        # selects may be one the controller manager cannot read, whose cache never loads;
        # the policy says so (decision.REASON_UNREADABLE), and the process stays ready.
        self.controller = (
            builder.Builder(CONTROLLER, self.term, workers=context.workers)
            .channel()  # and the template caches, watched once a policy selects their kind
            .resync(context.resync_period, self.selected.every_template)
            .on_terminal(self._terminal)
            .complete(self.reconcile_template))
        self.kinds = (
            builder.Builder(f"{CONTROLLER}-kinds", self.term, workers=1)
            .watches(self.policies.informers, _selected, builder.SPEC,
                     observe=self.parsed.observe)
            .complete(self.selected.reconcile))
        self.policy_status = (
            builder.Builder(f"{CONTROLLER}-policies", self.term, workers=1)
            .watches(self.policies.informers, _itself, builder.not_deleted,
                     builder.SPEC, delay=POLICY_STATUS_DELAY)
            .status((resources.PROPAGATION_POLICIES, resources.CLUSTER_PROPAGATION_POLICIES),
                    FIELD_MANAGER, frozenset({"conditions"}),
                    frozenset({decision.CONDITION_SELECTED}))
            .complete(self.reconcile_policy))
        self.controllers = (self.kinds, self.controller, self.policy_status)

    # --- policies and the kinds they select ------------------------------

    def parsed_policies(self) -> list[decision.Policy]:
        """Every cached policy that parses (a malformed one is logged, not used)."""
        return self.parsed.values()

    def _queue_policies_selecting(self, api_version: str, kind: str) -> None:
        for candidate in self.parsed_policies():
            if any((s.api_version, s.kind) == (api_version, kind)
                   for s in candidate.spec.resource_selectors):
                self.policy_status.enqueue_after(_policy_key(candidate), POLICY_STATUS_DELAY)

    # --- templates ---------------------------------------------------------

    async def reconcile_template(self, request: builder.Request) -> reconcile.Result | None:
        """Claim and bind one template (or remove its binding when it is gone)."""
        key = selected.TemplateKey.of(request)
        found = self.selected.templates.known(key.api_version, key.kind)
        if found is None:
            return None  # its kind is no longer selected: nothing is watched for it
        resource, cache = found
        store_key = f"{key.namespace}/{key.name}" if key.namespace else key.name
        obj = cache.store.get(store_key)
        if obj is not None:
            obj = _with_kind(obj, key.api_version, key.kind)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            await self._delete_binding(key)
            return None
        chosen = decision.choose(obj, self.parsed_policies())
        before = decision.claim_of(obj)
        if before is not None and (chosen is None or before != _claim(chosen)):
            self.policy_status.enqueue_after(
                builder.Request(before.namespace or "", before.name, before.kind),
                POLICY_STATUS_DELAY)
        if chosen is None:
            if before is not None:
                await self._write_claim(resource, obj, None)
            return None
        if before != _claim(chosen):
            self.policy_status.enqueue_after(_policy_key(chosen), POLICY_STATUS_DELAY)
        await self._write_claim(resource, obj, chosen)
        await self._apply_binding(obj, chosen)
        return None

    async def reconcile_policy(self, key: builder.Request) -> reconcile.Result | None:
        """Write a policy's ``ResourcesSelected`` condition: what it claims, or why nothing."""
        kind, namespace, name = key.kind, key.namespace, key.name
        obj = self.policies.get(key)
        writer = self.policy_status.writer(resources.PROPAGATION_POLICIES if kind == decision.PP
                                           else resources.CLUSTER_PROPAGATION_POLICIES)
        if obj is None or not writer.writable:
            return None
        if len(self.controller.queue) or len(self.kinds.queue):
            return reconcile.Result(requeue_after=POLICY_STATUS_DELAY)  # claims still moving
        candidate = self.parsed.get(key)
        if candidate is None:
            return None
        wanted = decision.Claim(kind, namespace or None, name)
        claimed = [
            f"{template['kind']} {template['metadata'].get('namespace') or ''}/"
            f"{template['metadata']['name']}".replace(" /", " ")
            for (api_version, template_kind), (_, templates)
            in self.selected.templates.caches.items()
            for template in (_with_kind(t, api_version, template_kind)
                             for t in templates.store.values())
            if decision.claim_of(template) == wanted]
        unserved = sorted({f"{s.kind} {s.api_version}" for s in candidate.spec.resource_selectors
                           if (s.api_version, s.kind) in self.selected.unserved})
        unreadable = {f"{s.kind} {s.api_version}": self.selected.unreadable[
                          (s.api_version, s.kind)] for s in candidate.spec.resource_selectors
                      if (s.api_version, s.kind) in self.selected.unreadable}
        ok, reason, message = decision.selection_verdict(candidate, claimed, unserved,
                                                         unreadable)
        now = self.term.clock.now().replace(microsecond=0)
        condition = meta.Condition(
            type=decision.CONDITION_SELECTED,
            status=meta.ConditionStatus.TRUE if ok else meta.ConditionStatus.FALSE,
            observed_generation=(obj.get("metadata") or {}).get("generation"),
            last_transition_time=now, reason=reason, message=meta.bound_message(message))
        live = status.live_conditions(obj)
        kept = status.keep_transition_times(live, [condition])
        current = meta.find_condition(live, decision.CONDITION_SELECTED)
        if current is not None and current.to_dict() == kept[0].to_dict():
            return None
        with contextlib.suppress(errors.NotFound):  # deleted meanwhile
            await writer.write(name, {"conditions": [c.to_dict() for c in kept]},
                               namespace=namespace or None, cached=obj)
        return None

    async def _write_claim(self, resource: resources.Resource, obj: Mapping[str, Any],
                           chosen: decision.Policy | None) -> None:
        labels, annotations = decision.claim_marks(chosen) if chosen else ({}, {})
        meta_ = obj.get("metadata") or {}
        have_labels = {k: v for k, v in (meta_.get("labels") or {}).items()
                       if k in (decision.PP_ID, decision.CPP_ID)}
        have_annotations = {k: v for k, v in (meta_.get("annotations") or {}).items()
                            if k in (decision.PP_NAME, decision.PP_NAMESPACE, decision.CPP_NAME)}
        if have_labels == labels and have_annotations == annotations:
            return
        body: dict[str, Any] = {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
                                "metadata": {"name": meta_["name"], "labels": labels,
                                             "annotations": annotations}}
        if meta_.get("namespace"):
            body["metadata"]["namespace"] = meta_["namespace"]
        with contextlib.suppress(errors.NotFound):  # deleted meanwhile: its event follows
            await self.api.apply(resource, body, field_manager=FIELD_MANAGER)

    async def _apply_binding(self, obj: Mapping[str, Any], chosen: decision.Policy) -> None:
        meta_ = obj["metadata"]
        namespace = meta_.get("namespace")
        target = resources.RESOURCE_BINDINGS if namespace else resources.CLUSTER_RESOURCE_BINDINGS
        labels, annotations = decision.claim_marks(chosen)
        metadata: dict[str, Any] = {
            "name": vocabulary.binding_name(obj["kind"], meta_["name"]),
            "labels": {**labels, MANAGED_BY: FIELD_MANAGER},
            "annotations": annotations,
            "ownerReferences": [{"apiVersion": obj["apiVersion"], "kind": obj["kind"],
                                 "name": meta_["name"], "uid": meta_["uid"],
                                 "controller": True, "blockOwnerDeletion": True}],
        }
        if namespace:
            metadata["namespace"] = namespace
        await self.api.apply(target, {"metadata": metadata,
                                      "spec": decision.binding_spec(obj, chosen)},
                             field_manager=FIELD_MANAGER)

    async def _delete_binding(self, key: selected.TemplateKey) -> None:
        name = vocabulary.binding_name(key.kind, key.name)
        namespace = key.namespace or None
        target = (resources.RESOURCE_BINDINGS if key.namespace
                  else resources.CLUSTER_RESOURCE_BINDINGS)
        # Read it from the server, not the cache: a binding written a moment ago
        # may not be cached yet, and deletions are rare.
        try:
            found = await self.api.get(target, name, namespace=namespace)
        except errors.NotFound:
            return
        reference = (found.get("spec") or {}).get("resource") or {}
        if ((found["metadata"].get("labels") or {}).get(MANAGED_BY) != FIELD_MANAGER
                or reference.get("kind") != key.kind or reference.get("name") != key.name):
            return  # not ours, or for another template
        log.info("template %s %s/%s is gone: deleting binding %s", key.kind, key.namespace,
                 key.name, name)
        await self.api.delete(target, name, namespace=namespace, missing_ok=True)

    async def _terminal(self, key: builder.Request, exc: reconcile.TerminalError) -> None:
        log.warning("detector: %s: %s", key, exc)


def _with_kind(obj: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    """List items may lack apiVersion and kind; templates need them."""
    if obj.get("apiVersion") and obj.get("kind"):
        return obj
    return {**obj, "apiVersion": api_version, "kind": kind}


def _parse(obj: Mapping[str, Any]) -> decision.Policy | None:
    """A policy's model (None: malformed, or being deleted)."""
    kind = _policy_request(obj).kind
    meta_ = obj.get("metadata") or {}
    try:
        spec = policy.PropagationSpec.from_dict(obj.get("spec") or {})
    except meta.ValidationError as exc:  # the CRD schema should have stopped it
        log.error("ignoring malformed %s %s: %s", kind, meta_.get("name"), exc)
        return None
    if meta_.get("deletionTimestamp"):
        return None
    return decision.Policy(kind, meta_.get("namespace") if kind == decision.PP else None,
                           str(meta_.get("name")), str(meta_.get("uid", "")), spec)


def _claim(chosen: decision.Policy) -> decision.Claim:
    return decision.Claim(chosen.kind, chosen.namespace, chosen.name)


def _policy_key(candidate: decision.Policy) -> builder.Request:
    return builder.Request(candidate.namespace or "", candidate.name, candidate.kind)


def _policy_request(obj: Mapping[str, Any]) -> builder.Request:
    """A policy's request: kind PP (namespaced) or CPP."""
    found = builder.Request.of(obj)
    return dataclasses.replace(found, kind=decision.PP if found.namespace else decision.CPP)


def _itself(event: builder.Event) -> list[builder.Request]:
    """A policy's own request (its kind told)."""
    return [_policy_request(event.obj)]


def _selected(event: builder.Event) -> list[builder.Request]:
    """The kinds a policy's old and new selectors name (name: the kind, kind: apiVersion)."""
    return [builder.Request("", str(selector.get("kind")), str(selector.get("apiVersion")))
            for body in (event.obj, event.old)
            for selector in ((body or {}).get("spec") or {}).get("resourceSelectors") or []]

