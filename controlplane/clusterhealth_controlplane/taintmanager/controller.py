"""The taint manager's API side: Clusters and bindings in, evictions out, at a guarded pace.

* Clusters, ResourceBindings and ClusterResourceBindings are cached by shared
  informers; an index maps each cluster to the bindings targeting it.
* Queue ``taintManager`` (``--workers``): a key is a binding; its reconcile
  applies :func:`decision.plan` and either hands the binding to the eviction
  queue (the eviction is due) or asks to run again at the next deadline
  (``Result(requeue_after)``, never a poll).  Re-queued when a Cluster's
  NoExecute taints change (its bindings) and when a binding's targets or
  placement change.  The same queue writes the storm guard's condition on
  Clusters (requests of kind ``Cluster``).  Both queues are declared with the
  core's builder (the eviction queue is fed by the first one alone).
* Queue ``taintManager-eviction`` (``--eviction-workers``, so at most that
  many writes at once, after a slow start: :mod:`.slowstart`): each eviction
  first waits for the :class:`Pacer`
  (``--eviction-rate``, or ``--secondary-eviction-rate`` while the storm
  guard holds; 0 there stops it until the guard lifts), then decides again
  from the caches (a taint removed meanwhile cancels it) and writes the
  binding once: an update guarded by ``resourceVersion`` (a conflict
  re-reads the binding and decides again).
* An eviction from a Cluster seen turning unready less than
  :func:`decision.storm_window` ago is asked again once the window is over
  (:func:`decision.hold`): Clusters cut off together turn unready up to one
  probe period apart, and the guard must count them all before anything goes.
* The storm guard is recomputed on every Cluster change (incremental counts);
  a change sets ``clusterhealth_eviction_storm_guard`` /
  ``clusterhealth_unhealthy_cluster_fraction``, the pacer's rate, and
  re-queues the condition of every NoExecute-tainted Cluster (and of those
  still showing it True).  The condition is written by server-side apply
  under this controller's field manager (``status.conditions`` is a list-map
  by type, so the other writers' conditions stay); a Warning Event
  ``EvictionStormGuard`` goes with it turning True, a Normal
  ``EvictionStormGuardLifted`` with it turning False.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import prometheus_client

from clusterhealth_controlplane import manager, vocabulary
from clusterhealth_controlplane.binding import controller as binding_io
from clusterhealth_controlplane.taintmanager import decision, slowstart
from clusterhealth_core import builder, reconcile, status
from clusterhealth_core import clock as clocks
from clusterhealth_core.api import meta
from clusterhealth_core.kube import errors, informer, resources

log = logging.getLogger(__name__)

CONTROLLER = "taintManager"
EVICTION_QUEUE = f"{CONTROLLER}-eviction"
FIELD_MANAGER = "clusterhealth-taint-manager"
CLUSTER_KIND = "Cluster"
"""The kind of the requests that write a Cluster's storm guard condition."""
CONFLICT_ATTEMPTS = 5
"""Update attempts of one eviction (each after re-reading the binding)."""
RESULT_SUCCESS = "success"
RESULT_ERROR = "error"


SLOT_TOLERANCE = 1e-6
"""A slot this close is due: a timer may fire a rounding error before its deadline (a fake
loop clock rounds), and waiting again for less than that could spin without time moving."""


class Pacer:
    """Spaces evictions by a rate that can change at any time (no burst).

    ``None``: no limit; 0: none at all until the rate changes; otherwise one
    eviction per ``1 / rate`` seconds over every worker.
    """

    def __init__(self, clock: clocks.Clock) -> None:
        self.clock = clock
        self.rate: float | None = None
        self._next = 0.0
        self._changed = asyncio.Event()

    def set_rate(self, rate: float | None) -> None:
        """Use ``rate`` from now on; wake every waiter to look again."""
        if rate == self.rate:
            return
        self.rate = rate
        self._changed.set()
        self._changed = asyncio.Event()

    async def acquire(self) -> None:
        """Wait for the next slot the current rate allows."""
        while True:
            rate, changed = self.rate, self._changed
            wait: float | None = None
            if rate is None:
                return
            if rate > 0:
                now = self.clock.monotonic()
                slot = max(self._next, now)
                if slot <= now + SLOT_TOLERANCE:
                    self._next = max(slot, now) + 1.0 / rate
                    return
                wait = slot - now
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await changed.wait()


class StormGuard:
    """The storm guard: every Cluster's readiness counted as it changes, and the pace it sets.

    It follows each Cluster event (:meth:`observe`): counts the unhealthy Clusters,
    remembers when each turned unready (for :func:`decision.hold`), and when the
    guard changes sets ``clusterhealth_eviction_storm_guard`` /
    ``clusterhealth_unhealthy_cluster_fraction`` and the :class:`Pacer`'s rate.
    """

    def __init__(self, context: manager.Context) -> None:
        self.options = context.options.eviction
        self.metrics = context.metrics
        self.clock = context.term.clock
        self.settle = decision.resume_delay(context.options.health.success_threshold,
                                            context.options.health.update_frequency)
        """After the storm guard lifts, evictions wait this long: the other clusters of the
        storm are most likely recovering too, and report Ready within it."""
        self._resume: asyncio.TimerHandle | None = None
        self.readiness: dict[str, bool] = {}
        self.unready_since: dict[str, float] = {}
        """Cluster name -> when (monotonic) it was seen turning unready; see decision.hold."""
        self.window = decision.storm_window(context.options.health.update_frequency)
        self.unhealthy = 0
        self.state = decision.guard((), self.options.unhealthy_cluster_threshold)
        self.pacer = Pacer(self.clock)
        self.pacer.set_rate(decision.rate(False, self.options.rate, self.options.secondary_rate))
        self._set_metrics()

    def observe(self, event: builder.Event, loaded: bool) -> bool:
        """Count one Cluster event; whether the guard changed.

        ``loaded``: past the initial list (a lift then waits ``settle`` seconds).
        """
        name = str((event.obj.get("metadata") or {}).get("name"))
        was = self.readiness.pop(name, None)
        if was is False:
            self.unhealthy -= 1
        if event.type != builder.DELETED:
            now = decision.ready(event.obj)
            self.readiness[name] = now
            self.unhealthy += 0 if now else 1
            if was is True and not now:
                self.unready_since[name] = self.clock.monotonic()
            elif now:
                self.unready_since.pop(name, None)
        else:
            self.unready_since.pop(name, None)
        before = self.state
        self.state = decision.Guard(self.unhealthy, len(self.readiness), before.threshold)
        if self.state == before:
            return False
        self._set_metrics()
        if self.state.held != before.held:
            self._pace(loaded)
        return True

    def _pace(self, loaded: bool) -> None:
        if self._resume is not None:
            self._resume.cancel()
            self._resume = None
        rate = decision.rate(self.state.held, self.options.rate, self.options.secondary_rate)
        if self.state.held or not loaded:
            self.pacer.set_rate(rate)
            log.warning("storm guard %s: %s", "holds" if self.state.held else "lifted",
                        decision.guard_message(self.state, self.options.secondary_rate))
        else:
            # Like Kubernetes' node lifecycle after a full disruption: the clusters
            # still recovering get time to say so before held evictions run.
            self.pacer.set_rate(0.0)
            self._resume = asyncio.get_running_loop().call_later(
                self.settle, self.pacer.set_rate, rate)
            log.warning("storm guard lifted: %s; evictions resume in %.0f s",
                        decision.guard_message(self.state, self.options.secondary_rate),
                        self.settle)

    def hold(self, clusters: Iterable[str]) -> float:
        """Seconds an eviction from ``clusters`` waits for the outage to be seen whole."""
        return decision.hold(clusters, self.unready_since, self.window, self.clock.monotonic())

    def _set_metrics(self) -> None:
        self.metrics.storm_guard.set(1 if self.state.held else 0)
        self.metrics.unhealthy_fraction.set(self.state.fraction)


class Due:
    """The bindings whose eviction was found due, since when, until written (a gauge's depth).

    ``clusterhealth_eviction_queue_depth`` follows how many there are.
    """

    def __init__(self, depth: prometheus_client.Gauge) -> None:
        self.since: dict[builder.Request, float] = {}
        """Binding key -> when (monotonic) its eviction was found due; until written."""
        self.depth = depth
        depth.set(0)

    def __contains__(self, key: builder.Request) -> bool:
        return key in self.since

    def add(self, key: builder.Request, now: float) -> None:
        """The binding's eviction is due (from ``now``, unless it already was)."""
        if key not in self.since:
            self.since[key] = now
            self.depth.set(len(self.since))

    def forget(self, key: builder.Request) -> None:
        """The binding's eviction is written, or no longer due."""
        if self.since.pop(key, None) is not None:
            self.depth.set(len(self.since))


class TaintManager(manager.Controller):
    """Bindings off NoExecute-tainted clusters; the storm guard on their pace."""

    def __init__(self, context: manager.Context) -> None:
        super().__init__(context)
        self.options = context.options.eviction
        self.guard = StormGuard(context)
        self.on_cluster = builder.Index(builder.Request.of, decision.targets)
        """Cluster name -> the bindings targeting it."""
        self.due = Due(self.metrics.eviction_queue_depth)
        self.slow_start = slowstart.SlowStart(self.options.workers, context.term.clock)
        self.controller = (
            builder.Builder(CONTROLLER, context.term, workers=context.workers)
            .watches(self.clusters, self._on_cluster)
            .watches(self.bindings.informers, self._on_binding, builder.changed(_evicts_by),
                     observe=self.on_cluster.observe)  # not a status write
            .status(resources.CLUSTERS, FIELD_MANAGER, frozenset({"conditions"}),
                    frozenset({decision.CONDITION}))
            .on_start(self._queue_guard_conditions)  # a condition left by an earlier term too
            .complete(self.reconcile))
        self.evictions = (
            builder.Builder(EVICTION_QUEUE, context.term, workers=self.options.workers)
            .channel().complete(self.reconcile_eviction))
        self.controllers = (self.controller, self.evictions)
        for result in (RESULT_SUCCESS, RESULT_ERROR):
            self.metrics.evictions.labels(result, decision.EVICTION_REASON)

    # --- events -------------------------------------------------------------

    def _on_cluster(self, event: builder.Event) -> list[builder.Request]:
        name = str((event.obj.get("metadata") or {}).get("name"))
        tainted = event.type == builder.DELETED or \
            decision.no_execute_taints(event.obj) != decision.no_execute_taints(event.old)
        found = sorted(self.on_cluster.on(name)) if tainted else []
        if self.guard.observe(event, self.synced):
            # the initial list: every Cluster is looked at once it is loaded
            found += self._guard_conditions() if self.synced else []
        elif tainted and event.type != builder.DELETED:
            found.append(builder.Request("", name, CLUSTER_KIND))  # tainted while held, or not
        return found

    def _guard_conditions(self) -> list[builder.Request]:
        return [builder.Request("", name, CLUSTER_KIND)
                for name, obj in self.clusters.store.items()
                if decision.no_execute_taints(obj) or _shows_guard(obj)]

    def _queue_guard_conditions(self) -> None:
        for request in self._guard_conditions():
            self.controller.enqueue(request)

    def _on_binding(self, event: builder.Event) -> list[builder.Request]:
        key = builder.Request.of(event.obj)
        tainted = any(decision.no_execute_taints(self.clusters.store.get(name))
                      for name in self.on_cluster.of(key))
        return [key] if tainted or key in self.due else []

    # --- decisions ------------------------------------------------------------

    async def reconcile(self, key: builder.Request) -> reconcile.Result | None:
        """A binding: due -> the eviction queue; later -> again at the deadline."""
        if key.kind == CLUSTER_KIND:
            await self._write_guard_condition(key.name)
            return None
        binding = self.bindings.get(key)
        if binding is None:
            self.due.forget(key)
            return None
        now = self.clock.now()
        found = decision.plan(binding, self.clusters.store, now)
        if found.due:
            wait = self.guard.hold(found.due)
            if wait > 0:  # the rest of an outage may not have been counted yet
                return reconcile.Result(requeue_after=wait)
            self.due.add(key, self.clock.monotonic())
            self.evictions.enqueue(key)
        else:
            self.due.forget(key)
        if found.next_at is not None:
            return reconcile.Result(requeue_after=max(0.0, (found.next_at - now).total_seconds()))
        return None

    # --- evictions ------------------------------------------------------------

    async def reconcile_eviction(self, key: builder.Request) -> None:
        """One binding's due evictions, in one write, when the pacer allows."""
        if key not in self.due:
            return
        await self.guard.pacer.acquire()
        since = self.due.since.get(key)
        if since is None:
            return  # no longer due while waiting
        resource = binding_io.resource_of(vocabulary.BindingRef.at(key.namespace, key.name))
        binding = self.bindings.get(key)
        for attempt in range(CONFLICT_ATTEMPTS):
            if binding is None:
                self.due.forget(key)
                return
            found = decision.plan(binding, self.clusters.store, self.clock.now())
            if not found.due:
                self.due.forget(key)  # the taint went, or a toleration came, meanwhile
                if found.next_at is not None:
                    self.controller.enqueue(key)
                return
            try:
                async with self.slow_start.slot(neutral=(errors.Conflict, errors.NotFound)):
                    await self._evict(resource, binding, found, since)
                return
            except errors.Conflict:
                if attempt == CONFLICT_ATTEMPTS - 1:
                    raise
                binding = await self._fresh(resource, binding)
            except errors.NotFound:
                self.due.forget(key)
                return
            except (errors.KubeError, OSError) as exc:
                self.metrics.evictions.labels(RESULT_ERROR, decision.EVICTION_REASON).inc()
                self.term.recorder.record(
                    _with_kind(binding, resource), "Warning", "EvictWorkloadFromClusterFailed",
                    f"Evict from cluster(s) {', '.join(found.due)} failed: {exc}")
                raise

    async def _fresh(self, resource: resources.Resource,
                     binding: Mapping[str, Any]) -> dict[str, Any] | None:
        meta_ = binding.get("metadata") or {}
        try:
            return await self.api.get(resource, str(meta_["name"]),
                                      namespace=meta_.get("namespace"))
        except errors.NotFound:
            return None

    async def _evict(self, resource: resources.Resource, binding: Mapping[str, Any],
                     found: decision.Plan, since: float) -> None:
        mode = decision.purge_mode(binding, self.options.purge_mode)
        spec = decision.evicted_spec(binding.get("spec") or {}, found.due, mode,
                                     self.clock.now().replace(microsecond=0))
        await self.api.update(resource, {**_with_kind(binding, resource), "spec": spec})
        key = builder.Request.of(binding)
        self.metrics.evictions.labels(RESULT_SUCCESS, decision.EVICTION_REASON).inc(
            len(found.due))
        self.metrics.eviction_latency.observe(self.clock.monotonic() - since)
        self.due.forget(key)
        log.info("evicted %s from %s (%s)", key, ", ".join(found.due), mode)

    # --- the storm guard's condition ------------------------------------------

    async def _write_guard_condition(self, name: str) -> None:
        obj = self.clusters.store.get(name)
        writer = self.controller.writer(resources.CLUSTERS)
        if obj is None or not writer.writable:
            return
        found = decision.guard_condition(obj, self.guard.state, self.options.secondary_rate)
        if found is None:
            return
        wanted = meta.Condition(type=decision.CONDITION, status=meta.ConditionStatus(found.status),
                                reason=found.reason, message=found.message,
                                last_transition_time=self.clock.now().replace(microsecond=0))
        live = status.live_conditions(obj)
        kept = status.keep_transition_times(live, [wanted])
        current = meta.find_condition(live, decision.CONDITION)
        if current is not None and current.to_dict() == kept[0].to_dict():
            return
        try:
            await writer.write(name, {"conditions": [c.to_dict() for c in kept]}, cached=obj)
        except errors.NotFound:
            return
        turned = current is None or current.status != wanted.status
        if turned and wanted.status is meta.ConditionStatus.TRUE:
            self.term.recorder.record(_with_kind(obj, resources.CLUSTERS), "Warning",
                                      decision.CONDITION, wanted.message)
        elif turned:
            self.term.recorder.record(_with_kind(obj, resources.CLUSTERS), "Normal",
                                      f"{decision.CONDITION}Lifted", wanted.message)


def _with_kind(obj: Mapping[str, Any], resource: resources.Resource) -> dict[str, Any]:
    return {**obj, "apiVersion": resource.api_version, "kind": resource.kind}


def _evicts_by(obj: informer.Object) -> Any:
    """What an eviction depends on: the spec, the deletion mark, the applied placement."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return builder.spec_and_deletion(obj), annotations.get(decision.APPLIED_PLACEMENT)


def _shows_guard(obj: Mapping[str, Any]) -> bool:
    return any(c.get("type") == decision.CONDITION and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or []
               if isinstance(c, Mapping))
