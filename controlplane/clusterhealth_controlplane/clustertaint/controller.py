"""The cluster-taint controller's API side: Clusters and ClusterTaintPolicies in, taints out.

* Clusters and ClusterTaintPolicies are cached by shared informers; policies
  are parsed once per change (a malformed one is logged and left out).
* A key is one Cluster.  Its reconcile asks :func:`decision.plan` for the
  taints the built-in Ready rules and the policies want, and writes them as
  one merge patch of ``spec.taints`` carrying the ``resourceVersion`` it
  decided on: a Cluster changed meanwhile is a Conflict, and the runtime
  retries from the fresher cache.  Being the one writer of ``spec.taints``,
  two rules never race each other.
* Each taint added or removed is a Normal Event on the Cluster
  (``TaintAdded`` / ``TaintRemoved``, naming the rule) and a count in
  ``clusterhealth_cluster_taint_changes``; ``clusterhealth_cluster_taints``
  follows every taint on every Cluster, whoever wrote it.
* Re-queued when a Cluster's conditions, spec or labels change, when a
  policy is created or its spec changes (every Cluster it targets), and at
  the moment a NoExecute taint falls due (``Result.requeue_after``).
  Deleting a policy leaves its taints, as in Karmada.
"""

from __future__ import annotations

import logging
from typing import Any

from clusterhealth_controlplane import manager, metrics
from clusterhealth_controlplane.clustertaint import decision
from clusterhealth_core import builder, reconcile
from clusterhealth_core.api import cluster, groups, policy, wire
from clusterhealth_core.kube import informer, resources

log = logging.getLogger(__name__)

CONTROLLER = "clusterTaint"
FIELD_MANAGER = "clusterhealth-cluster-taint"
REASON_ADDED = "TaintAdded"
REASON_REMOVED = "TaintRemoved"


def _describe(taint: cluster.Taint) -> str:
    value = f"={taint.value}" if taint.value else ""
    return f"{taint.key}{value}:{taint.effect}"


def _watched(obj: informer.Object) -> tuple[Any, ...]:
    """What a Cluster's taints depend on: conditions, spec (taints, fields), labels."""
    return ((obj.get("status") or {}).get("conditions"), obj.get("spec"),
            builder.meta(obj, "labels"), builder.meta(obj, "deletionTimestamp"))


class TaintGauge:
    """``clusterhealth_cluster_taints``: every taint on every Cluster, whoever wrote it.

    Follows each Cluster event (:meth:`observe`), remembering the (key, effect)
    series it set per Cluster so that a taint gone (or a Cluster deleted) takes
    its series with it.
    """

    def __init__(self, family: metrics.FailoverMetrics) -> None:
        self.metrics = family
        self._gauged: dict[str, set[decision.TaintId]] = {}
        """The (key, effect) series of the taints gauge set for each Cluster."""

    def observe(self, event: builder.Event) -> None:
        """Set the series of one Cluster's taints now (none once it is deleted)."""
        name = informer.key_of(event.obj)
        now: set[decision.TaintId] = set()
        spec = {} if event.type == builder.DELETED else event.obj.get("spec") or {}
        for taint in spec.get("taints") or []:
            if isinstance(taint, dict) and taint.get("key") and taint.get("effect"):
                now.add((str(taint["key"]), str(taint["effect"])))
        for key, effect in self._gauged.get(name, set()) - now:
            self.metrics.taints.remove(name, key, effect)
        for key, effect in now:
            self.metrics.taints.labels(name, key, effect).set(1)
        if now:
            self._gauged[name] = now
        else:
            self._gauged.pop(name, None)


def _parse(obj: informer.Object) -> policy.ClusterTaintPolicy | None:
    """A policy's model (None: malformed, logged; its taints stay where they are)."""
    try:
        return policy.ClusterTaintPolicy.from_dict(
            {**obj, "apiVersion": groups.CLUSTER_TAINT_POLICY.api_version,
             "kind": groups.CLUSTER_TAINT_POLICY.kind})
    except wire.ValidationError as exc:
        log.warning("ClusterTaintPolicy %s is malformed and not applied: %s",
                    (obj.get("metadata") or {}).get("name"), exc)
        return None


class ClusterTaintController(manager.Controller):
    """Cluster conditions and ClusterTaintPolicies -> ``Cluster.spec.taints``."""

    def __init__(self, context: manager.Context) -> None:
        super().__init__(context)
        self.timeout = context.options.taints.failover_eviction_timeout
        self.policies = self.term.informers.informer(resources.CLUSTER_TAINT_POLICIES)
        self.parsed = builder.Parsed(_parse)
        """Every cached policy, parsed once per change (a malformed one is left out)."""
        self.gauge = TaintGauge(context.metrics)
        self.controller = (
            builder.Builder(CONTROLLER, self.term, workers=context.workers)
            .for_(self.clusters, builder.not_deleted, builder.changed(_watched),
                  observe=self.gauge.observe)
            .watches(self.policies, self._targeted, builder.not_deleted, builder.SPEC,
                     observe=self.parsed.observe)
            .complete(self.reconcile_cluster))

    # --- events -------------------------------------------------------------

    def _targeted(self, event: builder.Event) -> list[builder.Request]:
        parsed = self.parsed.get(builder.Request.of(event.obj))
        if parsed is None:
            return []
        found = []
        for cluster_name, cluster_obj in list(self.clusters.store.items()):
            model = self._cluster(cluster_obj)
            if model is not None and decision.targets(parsed, decision.view(model)):
                found.append(builder.Request("", cluster_name))
        return found

    # --- reconcile ----------------------------------------------------------

    @staticmethod
    def _cluster(obj: dict[str, Any]) -> cluster.Cluster | None:
        try:
            return cluster.Cluster.from_dict({**obj, "apiVersion": groups.CLUSTER.api_version,
                                              "kind": groups.CLUSTER.kind})
        except wire.ValidationError as exc:
            name = (obj.get("metadata") or {}).get("name")
            log.warning("Cluster %s cannot be read, its taints are left alone: %s", name, exc)
            return None

    async def reconcile_cluster(self, request: builder.Request) -> reconcile.Result | None:
        """Write the taints the Ready rules and the policies want on one Cluster."""
        name = request.name
        obj = self.clusters.store.get(name)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return None
        model = self._cluster(obj)
        if model is None:
            return None
        plan = decision.plan(model, self.parsed.values(), self.clock.now(), self.timeout)
        if plan.changed:
            taints = [t.to_dict() for t in plan.taints]
            await self.api.patch(
                resources.CLUSTERS, name,
                {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                 "spec": {"taints": taints or None}},
                field_manager=FIELD_MANAGER)
            self._report(obj, plan)
        if plan.requeue_after is None:
            return None
        return reconcile.Result(requeue_after=plan.requeue_after)

    def _report(self, obj: dict[str, Any], plan: decision.Plan) -> None:
        subject = {**obj, "apiVersion": groups.CLUSTER.api_version, "kind": groups.CLUSTER.kind}
        name = obj["metadata"]["name"]
        for reason, change, changes in ((REASON_ADDED, "added", plan.added),
                                        (REASON_REMOVED, "removed", plan.removed)):
            for item in changes:
                taint = item.taint
                log.info("cluster %s: taint %s %s (%s)", name, _describe(taint), change,
                         item.rule)
                self.metrics.taint_changes.labels(taint.key, str(taint.effect), change).inc()
                self.recorder.record(subject, "Normal", reason,
                                     f"Taint {_describe(taint)} {change}: {item.rule}")
