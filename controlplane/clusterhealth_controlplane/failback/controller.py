"""The failback controller's API side: bindings, policies and Clusters in; record and trigger out.

* Bindings of both kinds, (Cluster)PropagationPolicies and Clusters are
  cached by the shared informers.  A key is one binding (the binding
  controller's keys).
* A binding is queued when it carries a taint-manager eviction task, a
  record or a trigger; when its policy's opt-in changes; and when a Cluster
  it recorded turns healthy or unhealthy.  The controller remembers when it
  first saw each Cluster Ready and untainted (taints carry no removal time):
  after a restart a recovered cluster waits one full window again, never less.
* Its reconcile applies :func:`decision.plan`: the record (annotation
  :data:`decision.EVICTED_FROM`) is written when it changed; a failback due
  writes ``spec.rescheduleTriggeredAt`` and :data:`decision.TRIGGERED` with
  the record, one merge patch guarded by ``resourceVersion`` (a conflict reads
  the binding again and decides again), when fewer than
  ``--failback-batch`` bindings are in flight (else the binding waits for a
  slot: queued again when one frees, and every :data:`SLOT_RETRY` seconds);
  then asks to run again when the next recorded cluster's window ends.
* An Event ``Failback`` on the binding and ``failbacks`` counted for each
  trigger written.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from clusterhealth_controlplane import manager, vocabulary
from clusterhealth_controlplane.binding import controller as binding_io
from clusterhealth_controlplane.failback import decision
from clusterhealth_controlplane.scheduler import adapt, framework
from clusterhealth_core import builder, reconcile
from clusterhealth_core import clock as clocks
from clusterhealth_core.api import meta, policy
from clusterhealth_core.kube import errors, informer

log = logging.getLogger(__name__)

CONTROLLER = "failback"
EVENT_FAILBACK = "Failback"
CONFLICT_ATTEMPTS = 3
"""Guarded writes of one reconcile (each after reading the binding again)."""
SLOT_RETRY = 30.0
"""Seconds before a binding waiting for a slot looks again, besides being queued when one frees
(a slot held past :data:`decision.IN_FLIGHT_LIMIT` frees without any event)."""


def placement_of(obj: Mapping[str, Any]) -> framework.PlacementView | None:
    """The binding's placement as the scheduler sees it, with the affinity term it is on."""
    raw = (obj.get("spec") or {}).get("placement")
    if not isinstance(raw, Mapping):
        return None
    try:
        placement = policy.Placement.from_dict(raw)
    except (meta.ValidationError, ValueError, TypeError, KeyError):
        return None
    if not placement.cluster_affinities:
        return adapt.placement_view(placement)
    observed = (obj.get("status") or {}).get("schedulerObservingAffinityName")
    names = [t.affinity_name for t in placement.cluster_affinities]
    return adapt.placement_view(placement, names.index(observed) if observed in names else 0)


def _interesting(obj: Mapping[str, Any] | None) -> bool:
    """Whether failback has anything to do with the binding: a record, a trigger, an eviction."""
    if obj is None:
        return False
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get(decision.EVICTED_FROM) or annotations.get(decision.TRIGGERED)
                or decision.evicted_clusters(obj))


def _request(key: str) -> builder.Request:
    """The request for a binding's key (``BindingRef.key``, the failback's own records)."""
    ref = vocabulary.BindingRef.parse(key)
    return builder.Request(ref.namespace, ref.name)


class Slots:
    """``--failback-batch``: how many bindings may be failing back at once, and who waits.

    A trigger written is in flight until the cache shows it (or until
    :data:`decision.IN_FLIGHT_LIMIT` passes: the cache may never catch up); a
    binding that finds no slot waits, and is queued again when one frees.
    """

    def __init__(self, batch: int, bindings: manager.Bindings) -> None:
        self.batch = batch
        self.bindings = bindings
        self.pending: dict[str, datetime.datetime] = {}
        """Triggers written and not yet seen in the cache: key -> the trigger written."""
        self.waiting: set[str] = set()
        """Bindings with a failback due, waiting for a batch slot."""
        self.lock = asyncio.Lock()

    def forget(self, key: str) -> None:
        """A binding deleted: it holds no slot and waits for none."""
        self.pending.pop(key, None)
        self.waiting.discard(key)

    def waiters(self) -> list[builder.Request]:
        """The bindings waiting for a slot (to queue when one frees)."""
        return [_request(key) for key in sorted(self.waiting)]

    def in_flight(self, now: datetime.datetime, but: str) -> int:
        """How many bindings but ``but`` hold a slot now."""
        count = 0
        for obj in self.bindings.objects():
            key = vocabulary.BindingRef.of(obj).key
            if key == but:
                continue
            written = self.pending.get(key)
            seen = ((obj.get("metadata") or {}).get("annotations") or {}).get(decision.TRIGGERED)
            if written is not None and (seen == meta.format_time(written) or (
                    now - written).total_seconds() >= decision.IN_FLIGHT_LIMIT):
                self.pending.pop(key, None)  # the cache has caught up (or never will)
                written = None
            if written is not None or decision.in_flight(obj, now):
                count += 1
        return count


class HealthySince:
    """When each Cluster was first seen Ready and untainted, following the Clusters' events.

    This term's sightings only: taints carry no removal time.
    """

    def __init__(self, clock: clocks.Clock) -> None:
        self.clock = clock
        self.since: dict[str, datetime.datetime] = {}

    def observe(self, event: builder.Event) -> None:
        """Start a Cluster's clock when it turns healthy, stop it when it no longer is."""
        name = informer.key_of(event.obj)
        if event.type != builder.DELETED and decision.healthy(event.obj):
            self.since.setdefault(name, self.clock.now())
        else:
            self.since.pop(name, None)


class FailbackController(manager.Controller):
    """Rebalances opted-in static-weight bindings back onto recovered clusters."""

    def __init__(self, context: manager.Context) -> None:
        super().__init__(context)
        self.window = context.options.failback.window
        self.policies = manager.Policies(self.term)
        self.healthy = HealthySince(self.term.clock)
        self.slots = Slots(context.options.failback.batch, self.bindings)
        self.controller = (
            builder.Builder(CONTROLLER, self.term, workers=context.workers)
            .watches(self.bindings.informers, self._on_binding)
            .watches(self.policies.informers, self._on_policy,
                     builder.changed(decision.opted_in))
            .watches(self.clusters, self._on_cluster, builder.changed(decision.healthy),
                     observe=self.healthy.observe)  # turned healthy or unhealthy
            .complete(self.reconcile_binding))

    # --- events -------------------------------------------------------------

    def _all_bindings(self) -> Iterator[tuple[str, dict[str, Any]]]:
        for obj in self.bindings.objects():
            yield vocabulary.BindingRef.of(obj).key, obj

    def _on_binding(self, event: builder.Event) -> list[builder.Request]:
        obj, old = event.obj, event.old
        key = vocabulary.BindingRef.of(obj).key
        if event.type == builder.DELETED:
            self.slots.forget(key)
            return self.slots.waiters()  # a slot freed
        found = [builder.Request.of(obj)] if _interesting(obj) or _interesting(old) else []
        now = self.clock.now()
        if old is not None and decision.in_flight(old, now) and not decision.in_flight(obj, now):
            found += self.slots.waiters()  # a slot freed
        return found

    def _on_policy(self, event: builder.Event) -> list[builder.Request]:
        wanted = informer.key_of(event.obj)
        return [_request(key) for key, found in self._all_bindings()
                if decision.policy_key(found) == wanted and _interesting(found)]

    def _on_cluster(self, event: builder.Event) -> list[builder.Request]:
        name = informer.key_of(event.obj)
        return [_request(key) for key, found in self._all_bindings()
                if name in decision.record(found) or name in decision.evicted_clusters(found)]

    # --- reconcile ----------------------------------------------------------

    def _policy(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        key = decision.policy_key(obj)
        return None if key is None else self.policies.get(builder.Request.parse(key))

    def _states(self, obj: Mapping[str, Any]) -> dict[str, decision.ClusterState]:
        """The recorded (and newly evicted) clusters that exist, as :func:`decision.plan` needs."""
        found: dict[str, decision.ClusterState] = {}
        for name in {*decision.record(obj), *decision.evicted_clusters(obj)}:
            cluster = self.clusters.store.get(name)
            if cluster is None:
                continue
            try:
                view = adapt.cluster_entry(cluster).view
            except (meta.ValidationError, ValueError, TypeError, KeyError):
                log.warning("Cluster %s cannot be read; failback to it waits", name)
                continue
            found[name] = decision.ClusterState(
                view, decision.stable_since(cluster, self.healthy.since.get(name)))
        return found

    async def reconcile_binding(self, request: builder.Request) -> reconcile.Result | None:
        """Record evictions, and fail back to clusters recovered for the whole window."""
        ref = vocabulary.BindingRef.at(request.namespace, request.name)
        key = ref.key
        obj = self.bindings.get(ref)
        for attempt in range(CONFLICT_ATTEMPTS):
            if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
                self.slots.waiting.discard(key)
                return None
            try:
                return await self._reconcile(ref, obj)
            except errors.NotFound:
                return None
            except errors.Conflict:
                if attempt == CONFLICT_ATTEMPTS - 1:
                    raise
                try:  # changed since the cache saw it: decide again on the live binding
                    obj = await self.api.get(binding_io.resource_of(ref), ref.name,
                                             namespace=ref.namespace or None)
                except errors.NotFound:
                    return None
        return None

    async def _reconcile(self, ref: vocabulary.BindingRef, obj: dict[str, Any]
                         ) -> reconcile.Result | None:
        key = ref.key
        now = self.clock.now()
        wanted = decision.opted_in(self._policy(obj))
        verdict = decision.plan(obj, wanted, placement_of(obj), self._states(obj), now,
                                self.window)
        trigger: datetime.datetime | None = None
        entries = verdict.record
        waits = False
        slots = self.slots
        async with slots.lock:
            if verdict.due and key not in slots.pending and not decision.in_flight(obj, now):
                if slots.in_flight(now, key) >= slots.batch:
                    log.info("binding %s: failback to %s waits for a slot (%d in flight)", key,
                             ", ".join(verdict.due), slots.batch)
                    slots.waiting.add(key)
                    waits = True
                else:
                    trigger = decision.trigger_time(obj, now)
                    entries = {c: t for c, t in verdict.record.items() if c not in verdict.due}
            if trigger is None and not verdict.changed(obj):
                return self._next(verdict, waits)
            await self.api.patch(binding_io.resource_of(ref), ref.name,
                                 decision.failback_patch(obj, entries, trigger),
                                 namespace=ref.namespace or None)
            if trigger is not None:
                slots.waiting.discard(key)
                slots.pending[key] = trigger
        for cluster, why in verdict.dropped:
            log.info("binding %s: failback record for %s dropped (%s)", key, cluster, why)
        if trigger is not None:
            self._report(ref, obj, verdict.due)
        return self._next(verdict, waits)

    @staticmethod
    def _next(verdict: decision.Plan, waits: bool) -> reconcile.Result | None:
        delays = [d for d in (verdict.wait, SLOT_RETRY if waits else None) if d is not None]
        if not delays:
            return None
        return reconcile.Result(requeue_after=max(min(delays), 0.0))

    def _report(self, ref: vocabulary.BindingRef, obj: Mapping[str, Any],
                clusters: tuple[str, ...]) -> None:
        resource = binding_io.resource_of(ref)
        names = ", ".join(clusters)
        self.metrics.failbacks.inc()
        log.info("%s %s: failing back to %s", resource.kind, ref.key, names)
        self.term.recorder.record(
            {**obj, "apiVersion": resource.api_version, "kind": resource.kind}, "Normal",
            EVENT_FAILBACK,
            f"Cluster {names} has been Ready and untainted for {self.window:g}s: rescheduling "
            "to restore the static weights.")
