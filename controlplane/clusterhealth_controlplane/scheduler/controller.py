"""The scheduler's I/O: what it caches, when it schedules a binding, what it writes.

One controller of the core runtime (:mod:`clusterhealth_core.reconcile`), keyed by
binding: ``namespace/name`` for a ResourceBinding, ``name`` for a ClusterResourceBinding
(a name never holds a slash). Informers cache the bindings of both kinds and the
Clusters; a Cluster is turned into its view once per change (:mod:`.adapt`).

**When.** A binding is reconciled when it appears, when its generation changes (its spec
changed: status-only updates are skipped, as Karmada's scheduler skips them), when its
applied-placement annotation changes, and when a Cluster it targets changes or goes
(labels, topology, taints, APIs, deletion; not its capacity alone: a scheduled binding is
not scheduled again for it, as Karmada's scheduler ignores a Cluster's status, and on a
failover the capacity of every member changes with each Pod that moves). Bindings that
could not be scheduled are retried with a growing delay (:data:`UNSCHEDULABLE_BACKOFF`),
and at once when any Cluster appears or changes in a way the scheduler sees (capacity
too). Only bindings whose
``spec.schedulerName`` is ours (empty means ``default-scheduler``) and whose scheduling
is not suspended are touched.

**Whether.** :func:`~.algorithm.reschedule_trigger`, from the applied placement
(annotation ``policy.karmada.io/applied-placement``), the targets that are gone and
``rescheduleTriggeredAt``. Without a trigger, only ``schedulerObservedGeneration`` is
brought up to date (as Karmada does).

**What.** :func:`~.algorithm.schedule` over every cached Cluster with the selected
plugins (for ``clusterAffinities``: term after term, from the one last used, until one
fits). Scheduled: ``spec.clusters`` and the annotation by server-side apply (field
manager ``clusterhealth-scheduler``, forced: the scheduler owns them), then through a
:class:`~clusterhealth_core.status.StatusWriter` ``schedulerObservedGeneration`` (the
generation that apply produced, so one status write suffices), ``lastScheduledTime``
and ``Scheduled=True``/``Success``. Unschedulable: ``spec.clusters`` untouched,
``Scheduled=False`` with the reason and the ``0/N clusters are available: ...`` message,
and a Warning Event. Writes are skipped when the live object already says the same.

**Placement first.** The status write follows the spec write at once when nothing waits
in the queue (one binding at a time: as Karmada's scheduler, which patches the status
right after the placement in the same worker). When a backlog waits, it is deferred
instead: one pending status per binding (the latest wins), written by a second set of
workers once the queue is empty; while it is not, those that have waited
:attr:`ControllerSettings.status_delay` seconds are written by one worker at a time (never
starved); so the writes that move workloads go first. Decisions read a binding's pending
status as its live one. Those writes are :class:`~.statuswrites.StatusWrites`'.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import logging
from collections.abc import Mapping
from typing import Any

from clusterhealth_controlplane import manager
from clusterhealth_controlplane.scheduler import (
    adapt,
    algorithm,
    assignment,
    errors,
    framework,
    metrics,
    statuswrites,
)
from clusterhealth_core import builder, reconcile, retry, runner, status
from clusterhealth_core.api import meta, policy, work
from clusterhealth_core.kube import errors as kube_errors
from clusterhealth_core.kube import informer, resources

log = logging.getLogger(__name__)

COMPONENT = "clusterhealth-scheduler"
FIELD_MANAGER = "clusterhealth-scheduler"
CONTROLLER = "scheduler"
CONDITION_SCHEDULED = "Scheduled"
REASON_SUCCESS = "Success"
REASON_INVALID_BINDING = "InvalidBinding"
MESSAGE_SUCCESS = "Binding has been scheduled successfully."
STATUS_FIELDS = frozenset({"schedulerObservedGeneration", "schedulerObservingAffinityName",
                           "lastScheduledTime", "conditions"})
"""The binding status fields the scheduler writes."""
UNSCHEDULABLE_BACKOFF = retry.Backoff(initial=1.0, factor=2.0, maximum=300.0, jitter=0.1,
                                      attempts=1_000_000)
"""Delay before an unschedulable binding is tried again, by attempt (a Cluster change
retries at once)."""


@dataclasses.dataclass(frozen=True)
class ControllerSettings:
    """How the scheduler works."""

    plugins: framework.Registry
    scheduler_name: str = "default-scheduler"
    workers: int = 8
    status_delay: float = 5.0
    """Seconds a status write may be deferred behind a backlog of placements."""


@dataclasses.dataclass(frozen=True)
class _Kind:
    resource: resources.Resource
    model: type[work.ResourceBinding] | type[work.ClusterResourceBinding]


Binding = work.ResourceBinding | work.ClusterResourceBinding

RB = _Kind(resources.RESOURCE_BINDINGS, work.ResourceBinding)
CRB = _Kind(resources.CLUSTER_RESOURCE_BINDINGS, work.ClusterResourceBinding)


def kind_of(key: str) -> _Kind:
    """ResourceBinding keys are ``namespace/name``, ClusterResourceBinding keys ``name``."""
    return RB if "/" in key else CRB


def is_ours(obj: Mapping[str, Any], scheduler_name: str) -> bool:
    """Whether ``obj`` is for this scheduler and its scheduling is not suspended."""
    spec = obj.get("spec") or {}
    name = spec.get("schedulerName") or "default-scheduler"
    suspended = bool((spec.get("suspension") or {}).get("scheduling"))
    return name == scheduler_name and not suspended


def target_names(obj: Mapping[str, Any] | None) -> frozenset[str]:
    """The clusters in a binding's ``spec.clusters``."""
    if obj is None:
        return frozenset()
    return frozenset(str(t.get("name")) for t in (obj.get("spec") or {}).get("clusters") or [])


def _generation(obj: Mapping[str, Any] | None) -> int:
    return int(((obj or {}).get("metadata") or {}).get("generation") or 0)


def _applied(obj: Mapping[str, Any] | None) -> str | None:
    annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    value = annotations.get(adapt.APPLIED_PLACEMENT)
    return None if value is None else str(value)


def scheduled_condition(result: algorithm.ScheduleResult, generation: int,
                        now: datetime.datetime) -> meta.Condition:
    """The ``Scheduled`` condition for a decision."""
    if isinstance(result, algorithm.Scheduled):
        return meta.Condition(type=CONDITION_SCHEDULED, status=meta.ConditionStatus.TRUE,
                              observed_generation=generation or None,
                              last_transition_time=now, reason=REASON_SUCCESS,
                              message=MESSAGE_SUCCESS)
    return meta.Condition(type=CONDITION_SCHEDULED, status=meta.ConditionStatus.FALSE,
                          observed_generation=generation or None, last_transition_time=now,
                          reason=result.reason, message=meta.bound_message(result.message))


def _inputs(obj: Mapping[str, Any]) -> tuple[Any, ...]:
    """The spec fields a decision depends on, besides the Clusters."""
    spec = obj.get("spec") or {}
    return tuple(spec.get(f) for f in ("placement", "replicas", "replicaRequirements",
                                       "gracefulEvictionTasks", "rescheduleTriggeredAt",
                                       "resource"))


def _comparable(conditions: Any) -> dict[str, tuple[Any, ...]]:
    return {str(c.get("type")): (c.get("status"), c.get("reason"), c.get("message"))
            for c in conditions or [] if c.get("type") == CONDITION_SCHEDULED}


class ClusterChange(enum.Enum):
    """What a Cluster event changed of what the scheduler sees."""

    NONE = "none"
    CAPACITY = "capacity"
    """Only its free resources (what dynamic weights and replica estimates read)."""
    VIEW = "view"
    """Anything else (or the Cluster appeared or went)."""


class ClusterViews:
    """Every Cluster as the scheduler sees it, made once per change, and per resource request.

    Follows the Clusters' events (:meth:`observe`); a malformed Cluster (the CRD
    should have stopped it) is logged and left out.  The views with the replicas
    one resource request fits are cached until any Cluster changes.
    """

    def __init__(self) -> None:
        self.entries: dict[str, adapt.ClusterEntry] = {}
        """Every Cluster's view, made once per change."""
        self._by_request: dict[tuple[tuple[str, str], ...], list[framework.ClusterView]] = {}
        """The Cluster views with available replicas, per resource request (dropped on any
        Cluster change)."""

    def observe(self, event: builder.Event) -> ClusterChange:
        """Follow one Cluster event; what it changed of what the scheduler sees."""
        name = str(event.obj["metadata"]["name"])
        before = self.entries.get(name)
        if event.type == builder.DELETED:
            self.entries.pop(name, None)
        else:
            try:
                self.entries[name] = adapt.cluster_entry(event.obj)
            except (meta.ValidationError, ValueError) as exc:  # the CRD should have stopped it
                log.error("ignoring malformed Cluster %s: %s", name, exc)
                self.entries.pop(name, None)
        after = self.entries.get(name)
        if after == before:
            return ClusterChange.NONE
        self._by_request.clear()
        if after is not None and before is not None and after.view == before.view:
            return ClusterChange.CAPACITY
        return ClusterChange.VIEW

    def gone(self, name: str) -> bool:
        """Whether Cluster ``name`` is not there (or is being deleted)."""
        return name not in self.entries or self.entries[name].view.deleting

    def for_request(self, request: Mapping[str, Any]) -> list[framework.ClusterView]:
        """Every Cluster's view with the replicas of ``request`` it can take (cached)."""
        cache_key = tuple(sorted((k, str(v)) for k, v in request.items()))
        views = self._by_request.get(cache_key)
        if views is None:
            if len(self._by_request) > 1024:
                self._by_request.clear()
            views = [entry.for_request(request) for entry in self.entries.values()]
            self._by_request[cache_key] = views
        return views


class Placements:
    """Placements parsed once per distinct placement (by canonical JSON), and their views."""

    def __init__(self) -> None:
        self._placements: dict[str, tuple[policy.Placement, str]] = {}
        self._views: dict[tuple[str, int | None], framework.PlacementView] = {}

    def parse(self, raw: Mapping[str, Any]) -> tuple[policy.Placement, str]:
        """The parsed placement and its canonical JSON, cached by that JSON."""
        canonical = adapt.canonical_json(raw)
        found = self._placements.get(canonical)
        if found is None:
            if len(self._placements) > 4096:
                self._placements.clear()
                self._views.clear()
            parsed = policy.Placement.from_dict(raw)
            found = (parsed, adapt.canonical_placement(parsed))
            self._placements[canonical] = found
        return found

    def view(self, placement: policy.Placement, canonical: str,
             term: int | None) -> framework.PlacementView:
        """The placement's view for one affinity term (cached)."""
        key = (canonical, term)
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = adapt.placement_view(placement, term)
        return view


class Scheduler(builder.Declared):
    """Caches bindings and Clusters; schedules bindings (a :class:`runner.Controller`)."""

    def __init__(self, term: runner.Term, settings: ControllerSettings,
                 scheduler_metrics: metrics.SchedulerMetrics) -> None:
        super().__init__(term)
        self.settings = settings
        self.metrics = scheduler_metrics
        self.bindings = manager.Bindings(term)
        self.clusters = ClusterViews()
        self.on_cluster = builder.Index(informer.key_of, target_names)
        """Cluster name to the keys of the bindings targeting it."""
        self.unschedulable: dict[str, int] = {}
        """Keys that could not be scheduled, to their failed attempts so far."""
        self.produced: dict[str, int] = {}
        """Key to the generation our own spec write produced (its update event is skipped)."""
        self.placements = Placements()
        self.writes = statuswrites.StatusWrites(
            CONTROLLER, self.clock, settings.workers, settings.status_delay,
            queued=lambda: len(self.controller.queue), writer=lambda r: self.controller.writer(r),
            cached=self._object)
        """Status writes, deferred behind a backlog (see "Placement first")."""
        self.controller = (
            builder.Builder(CONTROLLER, term, workers=settings.workers)
            .watches(self.bindings.informers, self._on_binding, observe=self.on_cluster.observe)
            .watches(resources.CLUSTERS, self._on_cluster)
            .status((RB.resource, CRB.resource), FIELD_MANAGER, STATUS_FIELDS,
                    frozenset({CONDITION_SCHEDULED}))
            .beside(self.writes.run)
            .on_terminal(self._terminal)
            .complete(self.reconcile_binding))

    # --- event handlers (synchronous, cheap) --------------------------------------------

    def _on_binding(self, event: builder.Event) -> list[builder.Request]:
        obj, old = event.obj, event.old
        key = informer.key_of(obj)
        if event.type == builder.DELETED:
            self.unschedulable.pop(key, None)
            self.produced.pop(key, None)
            self.writes.forget(key)
            return []
        if not is_ours(obj, self.settings.scheduler_name):
            return []
        produced = self.produced.get(key)
        if produced is not None and produced >= _generation(obj):
            return []  # our own write (or its status), already decided on
        self.produced.pop(key, None)
        if (old is None or event.type == builder.ADDED or _generation(old) != _generation(obj)
                or _applied(old) != _applied(obj)
                or not is_ours(old, self.settings.scheduler_name)):
            return [builder.Request.of(obj)]
        return []

    def _on_cluster(self, event: builder.Event) -> list[builder.Request]:
        change = self.clusters.observe(event)
        if change is ClusterChange.NONE:
            return []  # nothing the scheduler sees changed
        # capacity alone reschedules no scheduled binding (Karmada's scheduler ignores a
        # Cluster's status): only the unschedulable ones are tried again, they may fit now
        keys = ([] if change is ClusterChange.CAPACITY
                else list(self.on_cluster.on(str(event.obj["metadata"]["name"]))))
        if event.type != builder.DELETED:
            keys += list(self.unschedulable)
        return [builder.Request.parse(key) for key in keys]

    # --- reconcile ------------------------------------------------------------------------

    def _object(self, key: str) -> dict[str, Any] | None:
        return self.bindings.get(builder.Request.parse(key))

    async def reconcile_binding(self, request: builder.Request) -> reconcile.Result | None:
        """Schedule one binding if it needs it; write the result."""
        key = request.key
        obj = self._object(key)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            self.unschedulable.pop(key, None)
            self.writes.forget(key)
            return None
        if not is_ours(obj, self.settings.scheduler_name):
            return None
        kind = kind_of(key)
        started = self.clock.monotonic()
        try:
            raw_spec = obj.get("spec") or {}
            # the placement is parsed once per distinct placement (cached), not per binding
            binding = kind.model.from_dict(
                {**obj, "spec": {k: v for k, v in raw_spec.items() if k != "placement"}})
            raw_placement = raw_spec.get("placement")
            placement = None if raw_placement is None else self.placements.parse(raw_placement)
        except (meta.ValidationError, ValueError) as exc:
            raise reconcile.TerminalError(
                REASON_INVALID_BINDING, f"the binding cannot be read: {exc}") from exc
        if placement is None:
            unschedulable = algorithm.Unschedulable(
                errors.UNSCHEDULABLE, "the binding has no placement to schedule by")
            return await self._unschedulable(key, kind, obj, binding, unschedulable, started)
        parsed, canonical = placement
        spec = binding.spec
        view = adapt.binding_view(spec)
        gone = frozenset(name for name in view.target_names if self.clusters.gone(name))
        first_view = self.placements.view(parsed, canonical,
                                          adapt.affinity_terms(parsed, None)[0][1])
        trigger = algorithm.reschedule_trigger(
            first_view, view,
            placement_changed=_applied(obj) != canonical
            and adapt.placement_changed(parsed, binding.metadata.annotations),
            reschedule_requested=adapt.reschedule_requested(spec, binding.status),
            gone=gone)
        if trigger is None:
            self.unschedulable.pop(key, None)
            await self._observe_generation(key, kind, obj, binding)
            return None
        clusters = self.clusters.for_request(adapt.resource_request(spec))
        mode = algorithm.mode_for(trigger)
        result: algorithm.ScheduleResult | None = None
        affinity_name: str | None = None
        decided = self.clock.monotonic()
        observed = binding.status.scheduler_observed_affinity_name
        for name, index in adapt.affinity_terms(parsed, observed):
            result = algorithm.schedule(
                self.placements.view(parsed, canonical, index), view, clusters,
                self.settings.plugins,
                mode=mode, observe=self.metrics.observe_plugin, timer=self.clock.monotonic)
            affinity_name = name
            if isinstance(result, algorithm.Scheduled):
                break
        self.metrics.algorithm_duration.observe(self.clock.monotonic() - decided)
        assert result is not None
        if isinstance(result, algorithm.Unschedulable):
            return await self._unschedulable(key, kind, obj, binding, result, started)
        try:
            await self._scheduled(key, kind, obj, binding, result, canonical, affinity_name,
                                  force_time=trigger is algorithm.Trigger.RESCHEDULE_REQUESTED)
        except kube_errors.NotFound:
            return None  # deleted meanwhile
        except Exception:
            self.metrics.attempts.labels(metrics.ERROR).inc()
            self.metrics.e2e_duration.labels(metrics.ERROR).observe(
                self.clock.monotonic() - started)
            raise
        self.unschedulable.pop(key, None)
        self.metrics.attempts.labels(metrics.SCHEDULED).inc()
        self.metrics.e2e_duration.labels(metrics.SCHEDULED).observe(
            self.clock.monotonic() - started)
        return None

    async def _scheduled(self, key: str, kind: _Kind, obj: Mapping[str, Any],
                         binding: Binding,
                         result: algorithm.Scheduled, canonical: str,
                         affinity_name: str | None, *, force_time: bool) -> None:
        metadata = binding.metadata
        current = tuple(assignment.TargetCluster(t.name, t.replicas)
                        for t in binding.spec.clusters)
        generation = metadata.generation
        changed = current != result.targets or _applied(obj) != canonical
        latest = obj  # the binding as last read or written (its status write starts there)
        if changed:
            # The update event of our own write may be handled before the apply returns:
            # expect its generation now, correct it below.
            self.produced[key] = generation + (1 if current != result.targets else 0)
            ident: dict[str, Any] = {"name": metadata.name,
                                     "annotations": {adapt.APPLIED_PLACEMENT: canonical}}
            if metadata.namespace:
                ident["namespace"] = metadata.namespace
            written = await self.api.apply(
                kind.resource,
                {"metadata": ident, "spec": {"clusters": adapt.targets_wire(result.targets)}},
                field_manager=FIELD_MANAGER, force=True)
            generation, latest = _generation(written), written
            if _inputs(written) == _inputs(obj):
                # Nobody else changed the spec in between: the update event of this
                # generation needs no decision (Karmada's scheduler decides it again).
                self.produced[key] = generation
            else:
                self.produced.pop(key, None)
                self.controller.enqueue(builder.Request.parse(key))
        live = self.writes.live(key, obj)
        condition = scheduled_condition(result, generation, self._now())
        desired: dict[str, Any] = {
            "schedulerObservedGeneration": generation,
            "conditions": [c.to_dict() for c in status.keep_transition_times(
                status.live_conditions({"status": live}), [condition])],
        }
        if affinity_name is not None:
            desired["schedulerObservingAffinityName"] = affinity_name
        up_to_date = (not changed and not force_time
                      and live.get("schedulerObservedGeneration") == generation
                      and live.get("schedulerObservingAffinityName") == affinity_name
                      and _comparable(live.get("conditions"))
                      == _comparable(desired["conditions"]))
        if up_to_date:
            return
        desired["lastScheduledTime"] = meta.format_time(self._now())
        await self.writes.write(key, kind.resource, metadata, desired,
                                latest=latest)

    async def _unschedulable(self, key: str, kind: _Kind, obj: Mapping[str, Any], binding: Binding,
                             result: algorithm.Unschedulable,
                             started: float) -> reconcile.Result | None:
        """``Scheduled=False`` and an Event; ``spec.clusters`` stays as it is."""
        live = self.writes.live(key, obj)
        condition = scheduled_condition(result, binding.metadata.generation, self._now())
        desired: dict[str, Any] = {"conditions": [c.to_dict() for c in status.keep_transition_times(
            status.live_conditions({"status": live}), [condition])]}
        for field in ("schedulerObservedGeneration", "schedulerObservingAffinityName",
                      "lastScheduledTime"):
            if live.get(field) not in (None, ""):
                desired[field] = live[field]  # ours from an earlier success: kept
        attempt = self.unschedulable.get(key, 0)
        self.unschedulable[key] = attempt + 1
        log.info("cannot schedule %s %s: %s: %s", kind.resource.kind, key, result.reason,
                 result.message)
        self.recorder.record(obj, "Warning", "ScheduleBindingFailed", result.message)
        try:
            if _comparable(live.get("conditions")) != _comparable(desired["conditions"]):
                await self.writes.write(key, kind.resource, binding.metadata, desired,
                                        latest=obj)
        except kube_errors.NotFound:
            return None
        except Exception:
            self.metrics.attempts.labels(metrics.ERROR).inc()
            raise
        self.metrics.attempts.labels(metrics.UNSCHEDULABLE).inc()
        self.metrics.e2e_duration.labels(metrics.UNSCHEDULABLE).observe(
            self.clock.monotonic() - started)
        if isinstance(result.error, errors.InvalidPlacement):
            return None  # only a change of the binding can help: wait for it
        return reconcile.Result(requeue_after=UNSCHEDULABLE_BACKOFF.delay(attempt))

    async def _observe_generation(self, key: str, kind: _Kind, obj: Mapping[str, Any],
                                  binding: Binding) -> None:
        """No reschedule needed: only bring ``schedulerObservedGeneration`` up to date."""
        live = self.writes.live(key, obj)
        generation = binding.metadata.generation
        if live.get("schedulerObservedGeneration") == generation:
            return
        conditions = status.live_conditions({"status": live})
        scheduled = meta.find_condition(conditions, CONDITION_SCHEDULED)
        desired = {k: live[k] for k in ("schedulerObservingAffinityName", "lastScheduledTime")
                   if live.get(k) not in (None, "")}
        if scheduled is None and _applied(obj) is not None and target_names(obj):
            # A placement written whose status never was (a deferred write lost when the
            # process stopped): say it is scheduled.
            scheduled = meta.Condition(
                type=CONDITION_SCHEDULED, status=meta.ConditionStatus.TRUE,
                observed_generation=generation or None, last_transition_time=self._now(),
                reason=REASON_SUCCESS, message=MESSAGE_SUCCESS)
            desired["lastScheduledTime"] = meta.format_time(self._now())
        if scheduled is None or scheduled.status is not meta.ConditionStatus.TRUE:
            return  # never scheduled by anyone: nothing observed to claim
        desired["schedulerObservedGeneration"] = generation
        desired["conditions"] = [scheduled.to_dict()]
        try:
            await self.writes.write(key, kind.resource, binding.metadata, desired, latest=obj)
        except kube_errors.NotFound:
            return

    def _now(self) -> datetime.datetime:
        return self.clock.now().replace(microsecond=0)

    async def _terminal(self, request: builder.Request, exc: reconcile.TerminalError) -> None:
        obj = self._object(request.key)
        if obj is not None:
            self.recorder.record(obj, "Warning", exc.reason, exc.message)
