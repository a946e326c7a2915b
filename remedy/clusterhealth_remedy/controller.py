"""The Remedy controller's I/O: caches, work queues, and the status it owns.

Keyed by Cluster, as in Karmada: a Cluster is reconciled when its conditions
change, when it appears, when a Remedy whose (old or new) affinity covers it
changes, when someone else disturbs the fields this controller owns, and on
every resync.  A reconcile recomputes the decision from the caches
(:mod:`clusterhealth_remedy.decision`) — clearing happens by recomputation,
never by remembering — and server-side-applies only ``remedyActions`` and
``remedyActionSources`` (field manager ``clusterhealth-remedy``), so the
agent's and the cluster-status controller's conditions are never touched.

Each Remedy's status (the clusters it acts on, with the matched condition,
and whether every named cluster exists) is derived from the latest decisions
and written by a second queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from clusterhealth_core import clock as clocks
from clusterhealth_core import events, status, workqueue
from clusterhealth_core.api import meta, remedy
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, informer, resources
from clusterhealth_remedy import decision, metrics

log = logging.getLogger(__name__)

FIELD_MANAGER = "clusterhealth-remedy"
COMPONENT = "clusterhealth-remedy"
CONDITION_CLUSTERS_RESOLVED = "ClustersResolved"
STATUS_COALESCE = 5.0
"""Seconds a Remedy's status waits for more cluster changes before it is written."""
MAX_PENDING_EVENTS = 5000
"""Events waiting to be recorded; more are dropped (events are best effort)."""


@dataclasses.dataclass(frozen=True)
class ControllerSettings:
    """How the controller works."""

    workers: int = 2
    resync_period: float = 300.0
    event_namespace: str = "default"


def condition_statuses(obj: Mapping[str, Any] | None) -> dict[str, str]:
    """A Cluster's conditions as ``type -> status``."""
    if not obj:
        return {}
    return {str(c.get("type")): str(c.get("status"))
            for c in (obj.get("status") or {}).get("conditions") or []}


def owned_status(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    """The Cluster status fields this controller owns, as they are on the server."""
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


class RemedyController:
    """Caches Clusters and Remedies; reconciles Clusters and Remedy statuses."""

    def __init__(
        self,
        api: kube.ApiClient,
        settings: ControllerSettings,
        remedy_metrics: metrics.RemedyMetrics,
        clock: clocks.Clock,
    ) -> None:
        self.api = api
        self.settings = settings
        self.metrics = remedy_metrics
        self.clock = clock
        self.recorder = events.EventRecorder(api, COMPONENT, clock,
                                             namespace=settings.event_namespace,
                                             max_pending=MAX_PENDING_EVENTS)
        self.clusters = informer.Informer(api, resources.CLUSTERS)
        self.remedies = informer.Informer(api, resources.REMEDIES)
        self.cluster_queue = workqueue.WorkQueue()
        self.remedy_queue = workqueue.WorkQueue()
        self.parsed: dict[str, remedy.Remedy] = {}
        self.decisions: dict[str, decision.Decision] = {}
        self.clusters.add_handler(self._on_cluster)
        self.remedies.add_handler(self._on_remedy)

    @property
    def synced(self) -> bool:
        """Whether both caches have loaded."""
        return self.clusters.synced and self.remedies.synced

    # --- event handlers (synchronous, cheap: they only queue names) -------

    def _on_cluster(self, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = str(obj["metadata"]["name"])
        if event == "DELETED":
            gone = self.decisions.pop(name, None)
            if gone is not None:
                self.metrics.set_actions(name, gone.actions, ())
                for match in gone.matches:
                    self.remedy_queue.add(match.remedy)
            self._queue_remedies_naming(name)
            return
        if event == "ADDED":
            self._queue_remedies_naming(name)
        known = self.decisions.get(name)
        if (
            event == "ADDED"
            or condition_statuses(obj) != condition_statuses(old)
            or known is None
            or owned_status(obj) != decision.status_patch(known)
        ):
            self.cluster_queue.add(name)

    def _queue_remedies_naming(self, cluster_name: str) -> None:
        for name, parsed in self.parsed.items():
            affinity = parsed.spec.cluster_affinity
            if affinity is not None and cluster_name in affinity.cluster_names:
                self.remedy_queue.add(name)

    def _parse(self, obj: Mapping[str, Any] | None) -> remedy.Remedy | None:
        if obj is None:
            return None
        try:
            return remedy.Remedy.from_dict(obj)
        except meta.ValidationError as exc:  # the CRD schema should have stopped it
            log.error("ignoring malformed Remedy %s: %s", obj.get("metadata", {}).get("name"),
                      exc)
            return None

    def _on_remedy(self, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = str(obj["metadata"]["name"])
        before = self.parsed.get(name)
        after = None if event == "DELETED" else self._parse(obj)
        if after is None:
            self.parsed.pop(name, None)
        else:
            self.parsed[name] = after
        if before is not None and after is not None and before.spec == after.spec:
            return  # a status write (ours): nothing to re-evaluate
        for cluster_name in decision.affected_clusters(before, after, self._cluster_names()):
            self.cluster_queue.add(cluster_name)
        if after is not None:
            self.remedy_queue.add(name)

    def _cluster_names(self) -> list[str]:
        return [str(o["metadata"]["name"]) for o in self.clusters.store.values()]

    # --- reconciles ---------------------------------------------------------

    async def reconcile_cluster(self, name: str) -> None:
        """Recompute and (if it differs) write one Cluster's remedy status."""
        obj = self.clusters.store.get(name)
        if obj is None:
            return
        result = decision.decide(name, condition_statuses(obj), list(self.parsed.values()))
        self.metrics.evaluations.inc()
        desired = decision.status_patch(result)
        before = sources_of(obj)
        if owned_status(obj) != desired:
            await status.apply_status(self.api, resources.CLUSTERS, name, desired,
                                      field_manager=FIELD_MANAGER)
            self._record_changes(obj, before, result)
        previous = self.decisions.get(name)
        self.decisions[name] = result
        self.metrics.set_actions(name, previous.actions if previous else tuple(before),
                                 result.actions)
        if previous is None or previous.matches != result.matches:
            touched = {m.remedy for m in result.matches}
            touched |= {m.remedy for m in previous.matches} if previous else set()
            for remedy_name in touched:
                # coalesce: one Remedy may cover 1,000 clusters changing at once
                self.remedy_queue.add_after(remedy_name, STATUS_COALESCE)

    def _record_changes(self, obj: Mapping[str, Any], before: Mapping[str, tuple[str, ...]],
                        result: decision.Decision) -> None:
        added, removed = decision.action_changes(before, result.sources)
        meta_ = obj["metadata"]
        target = {"apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
                  "metadata": {k: meta_[k] for k in ("name", "uid", "resourceVersion")
                               if k in meta_}}
        by_remedy = {m.remedy: m for m in result.matches}
        for action, remedies in added:
            why = ", ".join(
                f"Remedy {r} ({decision.describe(by_remedy[r].requirement)})"
                for r in remedies if r in by_remedy
            )
            log.info("cluster %s: %s added by %s", obj["metadata"]["name"], action, why)
            self.recorder.record(target, "Warning", "RemedyActionAdded", f"{action} added by {why}")
        for action, remedies in removed:
            was = f" (was: {', '.join(remedies)})" if remedies else ""
            log.info("cluster %s: %s removed%s", obj["metadata"]["name"], action, was)
            self.recorder.record(target, "Normal", "RemedyActionRemoved",
                                 f"{action} removed: no Remedy requires it any more{was}")

    async def reconcile_remedy(self, name: str) -> None:
        """Write a Remedy's status: the clusters it acts on, and unknown cluster names."""
        obj = self.remedies.store.get(name)
        parsed = self.parsed.get(name)
        if obj is None or parsed is None:
            return
        live = obj.get("status") or {}
        now = self.clock.now()
        active = decision.active_clusters(name, self.decisions.values(),
                                          decision.active_since(parsed), now)
        unknown = decision.unknown_clusters(parsed, self._cluster_names())
        condition = meta.Condition(
            type=CONDITION_CLUSTERS_RESOLVED,
            status=meta.ConditionStatus.FALSE if unknown else meta.ConditionStatus.TRUE,
            last_transition_time=now.replace(microsecond=0),
            reason="UnknownClusters" if unknown else "AllClustersFound",
            message=(f"no Cluster named {', '.join(unknown)}" if unknown
                     else "every cluster in clusterAffinity exists"),
        )
        kept = status.keep_transition_times(status.live_conditions(obj), [condition])
        desired: dict[str, Any] = {"conditions": [c.to_dict() for c in kept]}
        if active:
            desired["activeClusters"] = active
        current = {"conditions": live.get("conditions") or []}
        if live.get("activeClusters"):
            current["activeClusters"] = live["activeClusters"]
        if current != desired:
            await status.apply_status(self.api, resources.REMEDIES, name, desired,
                                      field_manager=FIELD_MANAGER)

    # --- loops ----------------------------------------------------------------

    async def _worker(self, queue: workqueue.WorkQueue, kind: str) -> None:
        reconcile = self.reconcile_cluster if kind == "cluster" else self.reconcile_remedy
        while True:
            key = await queue.get()
            started = self.clock.monotonic()
            try:
                await reconcile(key)
                queue.forget(key)
            except errors.NotFound:
                queue.forget(key)  # deleted meanwhile: its DELETED event re-queues what matters
            except (errors.KubeError, OSError) as exc:
                self.metrics.reconcile_errors.labels(kind).inc()
                delay = queue.add_rate_limited(key)
                log.warning("reconcile of %s %s failed (%s); retry in %.2fs", kind, key, exc,
                            delay)
            finally:
                self.metrics.reconcile_duration.labels(kind).observe(
                    self.clock.monotonic() - started)
                queue.done(key)

    async def _resync(self) -> None:
        while True:
            await self.clock.sleep(self.settings.resync_period)
            for name in self._cluster_names():
                self.cluster_queue.add(name)
            for name in list(self.parsed):
                self.remedy_queue.add(name)

    async def run(self) -> None:
        """Run until cancelled."""
        tasks = [asyncio.create_task(self.remedies.run(), name="remedy-informer"),
                 asyncio.create_task(self.clusters.run(), name="cluster-informer")]
        try:
            await self.remedies.wait_synced()
            await self.clusters.wait_synced()
            for name in self._cluster_names():
                self.cluster_queue.add(name)
            tasks += [asyncio.create_task(self._worker(self.cluster_queue, "cluster"))
                      for _ in range(self.settings.workers)]
            tasks.append(asyncio.create_task(self._worker(self.remedy_queue, "remedy")))
            tasks.append(asyncio.create_task(self._resync()))
            tasks.append(asyncio.create_task(self.recorder.run(), name="events"))
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            self.cluster_queue.shutdown()
            self.remedy_queue.shutdown()
