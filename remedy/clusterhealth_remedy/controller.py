"""The Remedy controller's I/O: what it caches, when it reconciles, what it writes.

Two controllers declared with the core's builder (:mod:`clusterhealth_core.builder`)
share one term of leadership (:class:`clusterhealth_core.runner.Term`):

* ``remedy-cluster``, keyed by Cluster, as in Karmada: a Cluster is
  reconciled when its conditions change, when it appears, when a Remedy
  whose (old or new) affinity covers it changes, when someone else disturbs
  the fields this controller owns, and on every resync.  A reconcile
  recomputes the decision from the caches (:mod:`clusterhealth_remedy.decision`)
  — clearing happens by recomputation, never by remembering — and writes
  only ``remedyActions`` and ``remedyActionSources`` (field manager
  ``clusterhealth-remedy``), so the agent's and the cluster-status
  controller's conditions are never touched.  The write is an update (PUT)
  of the whole cached Cluster (kept as compact JSON) with these two fields
  set, guarded by its resourceVersion, as Karmada's controller writes (an
  ``Update`` in ``managedFields``): one alone costs the API server less than a
  merge patch, which cost less than a server-side apply (decisions 0008, 0010).
  One that meets a newer Cluster (409) tries again from the cache
  :data:`RACE_RETRY` later, and reads the server only if the cache has not
  moved (:class:`clusterhealth_core.status.LostRaces`).
* ``remedy-status``, keyed by Remedy: the clusters it acts on (with the
  matched condition), whether every named cluster exists, and whether its
  spec can ever act at all; derived from the latest decisions.  Its workers
  start once every Cluster had its first reconcile of the term.

Both queue every object again each ``resync_period`` (the builder's resync).
Events wait while Clusters are queued (:data:`EVENT_HOLD_MAX`): a change's
writes go first, its Events follow.  So does a Cluster write that changes
only ``remedyActionSources`` (:data:`PROVENANCE_HOLD_MAX`): the writes that
act go first, the provenance follows, both after a quiet second
(:data:`EVENT_QUIET`) in which no write that acts was answered.

**Handover.**  When the live value differs from the computed one and
another manager owns part of it (Karmada's controller, before the user
switched to this one), the merge patch is guarded by the cached
resourceVersion (a concurrent write makes it fail and retry), and a
server-side apply follows, so that this manager owns the fields even where
the value was already right (an ``Update`` takes over only what it changes).

**Rejected writes.**  A 422 on one of our own status writes is a bug (every
message is bounded, every list capped), not a transient error: it is logged,
counted (``clusterhealth_remedy_status_rejected_total``), reported as a
Warning Event on the object, and not retried until something enqueues the
object again (:class:`~clusterhealth_core.reconcile.TerminalError`).
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from clusterhealth_core import builder, floodlog, reconcile, runner
from clusterhealth_core import status as statuses
from clusterhealth_core.api import meta, remedy
from clusterhealth_core.kube import errors, informer, jsoncodec, resources
from clusterhealth_remedy import decision, index, metrics

log = logging.getLogger(__name__)

FIELD_MANAGER = "clusterhealth-remedy"
COMPONENT = "clusterhealth-remedy"
CLUSTER_CONTROLLER = "remedy-cluster"
REMEDY_CONTROLLER = "remedy-status"
OWNED_FIELDS = ("remedyActions", "remedyActionSources")
"""The Cluster status fields this controller computes."""
REASON_STATUS_REJECTED = "StatusRejected"
REASON_INVALID = "InvalidRemedy"
"""A Remedy the model refuses (``conditionStatus: "false"``, an unknown operator or action):
it acts nowhere, its ``Effective`` condition and a Warning Event say why."""
STATUS_COALESCE = 5.0
"""Seconds a Remedy's status waits for more cluster changes before it is written."""
STATUS_SETTLE_MAX = 60.0
"""While Clusters wait to be reconciled, a Remedy's status waits too, at most this long.

A mass change (a Remedy covering every Cluster edited) keeps the Cluster queue
busy for seconds; rewriting a 1,000-entry ``activeClusters`` every
:data:`STATUS_COALESCE` meanwhile costs the API server about 0.4 s of CPU per
write, taken from the status writes that act (decision 0005).  The status is
written once the queue is empty, or after this long at the latest."""
EVENT_HOLD_MAX = 30.0
"""While Clusters wait to be reconciled, Events wait too, at most this long at a time.

A mass change records an Event per Cluster; written among the Cluster writes
they made a change 20 to 30 % more requests to the API server (decision 0009).  They are written
once the queue is empty, or at the Event write rate after this long."""
EVENT_QUIET = 1.0
"""Seconds after a write that acts during which Events and provenance-only writes wait for the
next one (a condition flapping, a change arriving Cluster by Cluster, the next change).
Measured beside Karmada's controller, an Event written right after each write that acts
delayed the next flip's write, and the provenance of one mass change written as it ended
delayed the next change (decision 0009)."""
PROVENANCE_HOLD_MAX = 30.0
"""While Clusters wait to be reconciled, a write changing only provenance waits, at most this long.

A change of a Remedy covering every Cluster leaves the actions of the Clusters
another Remedy already acts on as they are and adds the Remedy to their
``remedyActionSources``: at 1,000 Clusters x 100 Remedies, 142 of 1,000 writes
(Karmada's controller, which writes no provenance, sends the other 858).  Held
back, they follow the writes that act instead of delaying them (decision 0009).
As long as :data:`EVENT_HOLD_MAX`: the Events and the provenance of one change
are written within the same bound, longer than a mass change of 1,000 Clusters
takes on a loaded machine (25 s), far shorter than the resync; a queue that
never drains delays provenance by this much, never for ever."""
RACE_RETRY = 0.1
"""Seconds before a status update that met a newer Cluster tries again from the cache (by
then the informer most likely holds the other write; if not, the retry reads the server)."""
INITIAL_PASS_TIMEOUT = 30.0
"""Remedy statuses wait for every Cluster's first reconcile of a term, at most this long."""
CONDITION_TYPES = (decision.CONDITION_EFFECTIVE, decision.CONDITION_CLUSTERS_RESOLVED)
"""The Remedy conditions this controller writes."""


@dataclasses.dataclass(frozen=True)
class ControllerSettings:
    """How the controller works."""

    workers: int = 2
    resync_period: float = 300.0


# --- what the Cluster cache keeps ---------------------------------------------------------

_KEEP_CLUSTER = informer.keep_fields("status.conditions", *(f"status.{f}" for f in OWNED_FIELDS))
WHOLE_OBJECT = "clusterhealth.io/whole-object"
"""Key of the cached Cluster holding the whole Cluster as compact JSON (bytes), without
``metadata.managedFields``: what the update is made from (decision 0010).  The update must
carry the spec and metadata as read: Karmada's aggregated Cluster API stores them as sent
on a status update.  As bytes, a real member's Cluster (``apiEnablements``, summaries) is
5,648 bytes, and its cache entry 7.4 KiB in all; kept as objects its status alone cost
about 32 KiB (decision 0010)."""


def _owning_entries(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``managedFields`` entries that own one of :data:`OWNED_FIELDS`, reduced to them."""
    reduced: list[dict[str, Any]] = []
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        fields = ((entry.get("fieldsV1") or {}).get("f:status")) or {}
        owned: dict[str, Any] = {f"f:{name}": {} for name in OWNED_FIELDS
                                 if f"f:{name}" in fields}
        if owned:
            reduced.append({"manager": entry.get("manager", ""),
                            "operation": entry.get("operation", ""),
                            "fieldsV1": {"f:status": owned}})
    return reduced


def cluster_transform(obj: informer.Object) -> informer.Object:
    """What the Cluster cache keeps: identity, condition types and statuses, our fields.

    Plus ``metadata.managedFields`` reduced to the entries that own
    ``remedyActions``/``remedyActionSources`` (for the handover), instead of
    the whole object with every manager's field sets; and the whole Cluster
    but its ``managedFields`` as compact JSON under :data:`WHOLE_OBJECT`, which
    the write is made from (:func:`whole_object`).
    """
    meta_ = obj.get("metadata") or {}
    whole = jsoncodec.dumps({**obj, "metadata": {k: v for k, v in meta_.items()
                                                 if k != "managedFields"}})
    kept = _KEEP_CLUSTER(obj)
    st = kept.get("status")
    if st is not None and "conditions" in st:
        st["conditions"] = [{"type": c.get("type"), "status": c.get("status")}
                            for c in st["conditions"] or [] if isinstance(c, dict)]
    kept[WHOLE_OBJECT] = whole
    owners = _owning_entries(obj)
    if owners:
        kept["metadata"]["managedFields"] = owners
    return kept


def whole_object(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The whole Cluster (no ``managedFields``) that :func:`cluster_transform` kept."""
    whole: dict[str, Any] = jsoncodec.loads(obj[WHOLE_OBJECT])
    return whole


def condition_statuses(obj: Mapping[str, Any] | None) -> dict[str, str]:
    """A Cluster's conditions as ``type -> status``."""
    if not obj:
        return {}
    return {str(c.get("type")): str(c.get("status"))
            for c in (obj.get("status") or {}).get("conditions") or []}


def owned_status(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    """The Cluster status fields this controller computes, as they are on the server."""
    st = (obj or {}).get("status") or {}
    owned: dict[str, Any] = {}
    if st.get("remedyActions"):
        owned["remedyActions"] = list(st["remedyActions"])
    if st.get("remedyActionSources"):
        owned["remedyActionSources"] = [
            {"action": s.get("action"), "remedies": list(s.get("remedies") or [])}
            for s in st["remedyActionSources"]
        ]
    return owned


def sources_of(obj: Mapping[str, Any] | None) -> dict[str, tuple[str, ...]]:
    """``action -> remedies`` as recorded on a Cluster (actions without a source: ``()``)."""
    owned = owned_status(obj)
    result: dict[str, tuple[str, ...]] = {a: () for a in owned.get("remedyActions", [])}
    for source in owned.get("remedyActionSources", []):
        result[str(source["action"])] = tuple(source["remedies"])
    return result


def foreign_owners(obj: Mapping[str, Any] | None) -> list[str]:
    """Field managers other than ours owning ``remedyActions``/``remedyActionSources``."""
    return sorted({str(e["manager"]) for e in _owning_entries(obj or {})
                   if e["manager"] != FIELD_MANAGER})


def _reference(resource: resources.Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
    """Enough of ``obj`` for an Event's involvedObject."""
    meta_ = obj.get("metadata") or {}
    return {"apiVersion": resource.api_version, "kind": resource.kind,
            "metadata": {k: meta_[k] for k in ("name", "uid", "resourceVersion") if k in meta_}}


class RemedyController(builder.Declared):
    """Caches Clusters and Remedies; reconciles Clusters and Remedy statuses."""

    def __init__(
        self,
        term: runner.Term,
        settings: ControllerSettings,
        remedy_metrics: metrics.RemedyMetrics,
    ) -> None:
        super().__init__(term)
        self.metrics = remedy_metrics
        self.clusters = term.informers.informer(resources.CLUSTERS, transform=cluster_transform)
        self.remedies = term.informers.informer(resources.REMEDIES)
        self.remedy_index = index.RemedyIndex()
        """The parsed Remedies, by the clusters they can cover, and those refused."""
        self.decisions = index.ActiveIndex()
        """Every Cluster's latest decision, and the Clusters each Remedy acts on."""
        self.writes = index.ClusterWrites(PROVENANCE_HOLD_MAX, quiet=EVENT_QUIET)
        """Cluster status writes in flight or held back (their echo needs no reconcile)."""
        self.races = statuses.LostRaces()
        """Clusters whose status update met a newer Cluster (tried again from the cache)."""
        self._status_due: dict[str, float] = {}
        """Remedy to when its status was first held back for busy Clusters (monotonic)."""
        self.change_log = floodlog.SampledLog(log, "cluster change(s)", clock=term.clock)
        """One line per Cluster whose actions change, summarised in a mass change."""
        # The status writers say how this server holds what we write: Karmada's Cluster API
        # has no remedyActionSources, its Remedy CRD no status (logged and counted once).
        self.cluster_controller = (
            builder.Builder(CLUSTER_CONTROLLER, term, workers=settings.workers)
            .for_(self.clusters, builder.not_deleted, self._cluster_changed,
                  on_deleted=self._cluster_gone)
            .watches(self.remedies, self._clusters_affected, builder.SPEC,
                     observe=self._index_remedy)
            .status(resources.CLUSTERS, FIELD_MANAGER, frozenset(OWNED_FIELDS))
            .resync(settings.resync_period)
            .on_stop(self.change_log.flush)  # the summarised change log says the rest
            .on_terminal(self._warn_on(resources.CLUSTERS, self.clusters))
            .complete(self.reconcile_cluster))
        self.remedy_controller = (
            builder.Builder(REMEDY_CONTROLLER, term, workers=1)
            .for_(self.remedies, builder.not_deleted, builder.SPEC)
            .watches(self.clusters, builder.by_name(self.remedy_index.naming), builder.not_modified)
            .status(resources.REMEDIES, FIELD_MANAGER,
                    frozenset({"conditions", "activeClusters", "activeClusterCount"}),
                    frozenset(CONDITION_TYPES))
            # a Remedy status written before every Cluster has a decision would drop
            # activeClusters (and their since) that the first pass is about to find again
            .start_after_first_pass(self.cluster_controller, INITIAL_PASS_TIMEOUT)
            .resync(settings.resync_period,
                    lambda: map(builder.Request.parse, self.remedy_index.remedies))
            .on_terminal(self._warn_on(resources.REMEDIES, self.remedies))
            .complete(self.reconcile_remedy))
        self.controllers = (self.cluster_controller, self.remedy_controller)
        self.recorder.hold_while(self._events_wait, at_most=EVENT_HOLD_MAX)

    @property
    def cluster_writer(self) -> statuses.StatusWriter:
        """How Cluster statuses are written (made before the workers start)."""
        return self.cluster_controller.writer(resources.CLUSTERS)

    @property
    def remedy_writer(self) -> statuses.StatusWriter:
        """How Remedy statuses are written (made before the workers start)."""
        return self.remedy_controller.writer(resources.REMEDIES)

    def _clusters_queued(self) -> bool:
        """Whether Clusters wait to be reconciled (a Remedy status, Events, provenance wait).

        Held provenance-only writes queued again once the queue drained do not count.
        """
        return self.writes.waiting(len(self.cluster_controller.queue))

    def _events_wait(self) -> bool:
        """Whether Events wait: Clusters are queued, or a write that acts was just answered.

        An Event tells of a write that acted; the next change's write that acts goes first
        (Karmada's controller sends no Event).
        """
        return self._clusters_queued() or self.writes.acted_within(EVENT_QUIET,
                                                                   self.clock.monotonic())

    # --- events (synchronous, cheap: they only look and queue names) -------

    def _cluster_changed(self, event: builder.Event) -> bool:
        name = str(event.obj["metadata"]["name"])
        known = self.decisions.get(name)
        return (event.type == builder.ADDED
                or condition_statuses(event.obj) != condition_statuses(event.old)
                or known is None or self._disturbed(name, owned_status(event.obj), known))

    def _cluster_gone(self, request: builder.Request) -> None:
        self.races.forget(request.name)
        gone = self.decisions.remove(request.name)
        if gone is not None:
            self.metrics.forget(request.name)
            for match in gone.matches:
                self.remedy_controller.enqueue(builder.Request.parse(match.remedy))

    def _disturbed(self, name: str, owned: Mapping[str, Any], known: decision.Decision) -> bool:
        """Whether our fields on a Cluster differ from what we decided (or are writing).

        The echo of our own write often arrives before the write's answer, that
        is before the decision is recorded: it matches the status in flight
        and needs no reconcile; so does a status left while its provenance waits.
        """
        return owned != decision.status_patch(known) and not self.writes.expected(name, owned)

    def _index_remedy(self, event: builder.Event) -> None:
        deleted = event.type == builder.DELETED
        refused = self.remedy_index.update(str(event.obj["metadata"]["name"]),
                                           None if deleted else event.obj)
        if refused is not None:  # our CRD refuses it; Karmada's may hold it
            log.error("Remedy %s is invalid and acts nowhere: %s", refused.name, refused.problem)

    def _clusters_affected(self, event: builder.Event) -> Iterable[builder.Request]:
        """The Clusters a Remedy's (old or new) affinity covers: its spec changed."""
        before = _parsed(event.obj if event.type == builder.DELETED else event.old)
        after = None if event.type == builder.DELETED else self.remedy_index.get(
            str(event.obj["metadata"]["name"]))
        affected = decision.affected_clusters(before, after, self._cluster_names())
        return map(builder.Request.parse, affected)

    def _cluster_names(self) -> list[str]:
        return [str(o["metadata"]["name"]) for o in self.clusters.store.values()]

    # --- reconciles ---------------------------------------------------------

    async def reconcile_cluster(self, request: builder.Request) -> reconcile.Result | None:
        """Recompute and (if it differs) write one Cluster's remedy status.

        Once no Cluster waits and no write that acts is in flight any more, the held
        provenance-only writes are queued again.
        """
        try:
            return await self._reconcile_cluster(request.name)
        finally:
            if not self.writes.busy(len(self.cluster_controller.queue)):
                for held in self.writes.release():
                    self.cluster_controller.enqueue(builder.Request.parse(held))

    async def _reconcile_cluster(self, name: str) -> reconcile.Result | None:
        obj = self.clusters.store.get(name)
        if obj is None:
            self.writes.forget(name)
            return None  # deleted: its decision and series went with its DELETED event
        result = self.remedy_index.decide(name, condition_statuses(obj))
        self.metrics.evaluations.inc()
        desired = self.cluster_writer.supported(decision.status_patch(result))
        before, live = sources_of(obj), owned_status(obj)
        change = decision.status_change(self.cluster_writer.supported(live), desired)
        others = foreign_owners(obj) if change is not decision.StatusChange.NONE else []
        wait = None
        if change is decision.StatusChange.PROVENANCE and not others:  # never a take-over
            wait = self.writes.hold(name, live, len(self.cluster_controller.queue),
                                    self.clock.monotonic())
        else:
            self.writes.forget(name)
        if wait is None and change is not decision.StatusChange.NONE:
            self.writes.start(name, decision.status_patch(result),
                              acts=change is decision.StatusChange.ACTIONS)
            try:
                if not others:
                    written = await self.races.write(
                        self.cluster_writer, name, name, desired, namespace=None,
                        cached=whole_object(obj), update=True)
                    if not written:  # a newer Cluster: again from the cache, shortly
                        return reconcile.Result(requeue_after=RACE_RETRY)
                else:
                    await self._take_over(obj, desired, others)
                    if desired:  # and own them as the server-side apply of old did
                        await self.cluster_writer.write(name, desired)
            except errors.NotFound:
                return None  # deleted meanwhile: its DELETED event re-queues what matters
            except errors.Invalid as exc:
                raise self._rejected(metrics.KIND_CLUSTER, name, exc) from exc
            finally:
                self.writes.finish(name, self.clock.monotonic())
            self._record_changes(obj, before, result, others)
        # Held or not, the decision is recorded: a Remedy's activeClusters and the
        # source series say what is decided; the held sources follow on the Cluster.
        previous = self.decisions.put(result)
        self.metrics.set_actions(name, result.actions)
        self.metrics.set_sources(name, result.sources)
        if previous is None or previous.matches != result.matches:
            touched = {m.remedy for m in result.matches}
            touched |= {m.remedy for m in previous.matches} if previous else set()
            for remedy_name in touched:
                # coalesce: one Remedy may cover 1,000 clusters changing at once
                self.remedy_controller.enqueue_after(builder.Request.parse(remedy_name),
                                                     STATUS_COALESCE)
        return None if wait is None else reconcile.Result(requeue_after=wait)

    async def _take_over(self, obj: Mapping[str, Any], desired: Mapping[str, Any],
                         others: list[str]) -> None:
        """Write ``desired`` over fields other managers own (guarded by the cached version)."""
        name = str(obj["metadata"]["name"])
        log.info("cluster %s: remedy fields owned by %s; writing the computed value over them",
                 name, ", ".join(others))
        await self.cluster_writer.merge(name, desired,
                                        resource_version=obj["metadata"]["resourceVersion"])

    def _record_changes(self, obj: Mapping[str, Any], before: Mapping[str, tuple[str, ...]],
                        result: decision.Decision, others: list[str]) -> None:
        added, removed = decision.action_changes(before, result.sources)
        target = _reference(resources.CLUSTERS, obj)
        name = obj["metadata"]["name"]
        by_remedy = {m.remedy: m for m in result.matches}
        for action, remedies in added:
            why = ", ".join(
                f"Remedy {r} ({decision.describe(by_remedy[r].requirement)})"
                for r in remedies if r in by_remedy
            )
            self.change_log.log(f"{action} added", "cluster %s: %s added by %s", name, action,
                                why)
            self.recorder.record(target, "Warning", "RemedyActionAdded", f"{action} added by {why}")
        for action, remedies in removed:
            was = f" (was: {', '.join(remedies)})" if remedies else ""
            if others:
                was += f" (it was written by field manager {', '.join(others)})"
            self.change_log.log(f"{action} removed", "cluster %s: %s removed%s", name, action,
                                was)
            self.recorder.record(target, "Normal", "RemedyActionRemoved",
                                 f"{action} removed: no Remedy requires it any more{was}")

    async def reconcile_remedy(self, request: builder.Request) -> reconcile.Result | None:
        """Write a Remedy's status: where it acts, unknown cluster names, whether it can act."""
        name = request.name
        obj = self.remedies.store.get(name)
        refused = self.remedy_index.invalid.get(name)
        if obj is not None and refused is not None:
            return await self._report_invalid(obj, refused)
        parsed = self.remedy_index.get(name)
        writer = self.remedy_writer
        if obj is None or parsed is None or not writer.writable:
            self._status_due.pop(name, None)
            return None  # no Remedy status on this server (said once at start)
        if self._clusters_queued():
            held_since = self._status_due.setdefault(name, self.clock.monotonic())
            if self.clock.monotonic() - held_since < STATUS_SETTLE_MAX:
                return reconcile.Result(requeue_after=STATUS_COALESCE)
        self._status_due.pop(name, None)
        now = self.clock.now().replace(microsecond=0)
        active, total = decision.active_clusters(
            self.decisions.acting(name), decision.active_since(parsed), now,
            limit=remedy.MAX_ACTIVE_CLUSTERS)
        generation = parsed.metadata.generation or None
        conditions = [
            self._condition(decision.CONDITION_EFFECTIVE, decision.effectiveness(parsed), now,
                            generation),
            self._condition(decision.CONDITION_CLUSTERS_RESOLVED,
                            decision.clusters_resolved(parsed, self.clusters.store), now,
                            generation),
        ]
        kept = statuses.keep_transition_times(statuses.live_conditions(obj), conditions)
        desired: dict[str, Any] = {"conditions": [c.to_dict() for c in kept]}
        if active:
            desired["activeClusters"] = active
            desired["activeClusterCount"] = total
        desired = writer.supported(desired)
        if _comparable(obj.get("status") or {}) != _comparable(desired):
            try:
                await writer.write(name, desired)
            except errors.NotFound:
                return None  # deleted meanwhile
            except errors.Invalid as exc:
                raise self._rejected(metrics.KIND_REMEDY, name, exc) from exc
        return None

    async def _report_invalid(self, obj: Mapping[str, Any],
                              refused: index.Refusal) -> reconcile.Result | None:
        """A Warning Event (once per problem); ``Effective=False`` where Remedies have a status."""
        name = refused.name
        message = f"the Remedy is invalid and acts on no cluster: {refused.problem}"
        if not refused.told:
            self.recorder.record(_reference(resources.REMEDIES, obj), "Warning", REASON_INVALID,
                                 meta.bound_message(message))
            refused.told = True
        writer = self.remedy_writer
        if not writer.writable:
            return None  # Karmada's Remedy has no status: the Event says it
        generation = (obj.get("metadata") or {}).get("generation") or None
        now = self.clock.now().replace(microsecond=0)
        effective = self._condition(decision.CONDITION_EFFECTIVE,
                                    (False, REASON_INVALID, message), now, generation)
        kept = statuses.keep_transition_times(statuses.live_conditions(obj), [effective])
        desired = writer.supported({"conditions": [c.to_dict() for c in kept]})
        if _comparable(obj.get("status") or {})["conditions"] != _comparable(desired)["conditions"]:
            try:
                await writer.write(name, desired)
            except errors.NotFound:
                return None
            except errors.Invalid as exc:
                raise self._rejected(metrics.KIND_REMEDY, name, exc) from exc
        return None

    @staticmethod
    def _condition(type_: str, verdict: tuple[bool, str, str], now: datetime.datetime,
                   generation: int | None) -> meta.Condition:
        ok, reason, message = verdict
        return meta.Condition(
            type=type_,
            status=meta.ConditionStatus.TRUE if ok else meta.ConditionStatus.FALSE,
            observed_generation=generation,
            last_transition_time=now,
            reason=reason,
            message=meta.bound_message(message),
        )

    # --- rejected writes ------------------------------------------------------

    def _rejected(self, kind: str, name: str, exc: errors.Invalid) -> reconcile.TerminalError:
        self.metrics.status_rejected.labels(kind).inc()
        log.error("BUG: the API server rejected the status of %s %s written by this controller "
                  "(not retried until the %s changes): %s", kind, name, kind, exc)
        return reconcile.TerminalError(
            REASON_STATUS_REJECTED,
            f"the API server rejected the status the remedy controller wrote: {exc.message}")

    def _warn_on(self, resource: resources.Resource,
                 cache: informer.Informer) -> builder.OnTerminal:
        """The ``on_terminal`` hook of a kind: a Warning Event on the object."""
        async def warn(request: builder.Request, exc: reconcile.TerminalError) -> None:
            obj = cache.store.get(request.name)
            if obj is not None:
                self.recorder.record(_reference(resource, obj), "Warning", exc.reason,
                                     exc.message)
        return warn


def _parsed(obj: Mapping[str, Any] | None) -> remedy.Remedy | None:
    """A Remedy as the model reads it (None: none, or invalid)."""
    try:
        return None if obj is None else remedy.Remedy.from_dict(obj)
    except meta.ValidationError:
        return None


def _comparable(st: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a Remedy status this controller writes, order-insensitive."""
    conditions: Iterable[Mapping[str, Any]] = st.get("conditions") or []
    return {
        "conditions": {c.get("type"): dict(c) for c in conditions
                       if c.get("type") in CONDITION_TYPES},
        "activeClusters": st.get("activeClusters") or [],
        "activeClusterCount": st.get("activeClusterCount") or 0,
    }
