"""API models (or their wire dicts) to the pure scheduler's views, and the applied placement.

The plugins and the algorithm see :mod:`.framework`'s views only; this module is the one
place that knows the Karmada API shapes (``core.api.policy``, ``work``, ``cluster``):

- :func:`placement_view`: a (binding's) ``Placement``, with the affinity term chosen
  when the placement lists ``clusterAffinities``;
- :func:`binding_view`: ``spec.clusters`` in their order (Aggregated scale-down breaks
  ties by it), the template's UID (``spec.resource.uid``, which seeds the Webster
  tie-break as in Karmada), the ``fromCluster`` of graceful eviction tasks;
- :func:`cluster_view` and :func:`available_replicas`: labels, topology, taints, served
  APIs (``None`` until the Cluster reports any), and how many replicas of the binding
  the cluster can still take.

**Available replicas** come from ``Cluster.status.resourceSummary`` as Karmada's general
estimator computes them (``pkg/estimator/client/general.go``): the free pod count
(``allocatable - allocated - allocating`` of ``pods``), lowered by each resource of the
binding's ``replicaRequirements.resourceRequest`` (free / requested, CPU in milli-units);
a resource the summary does not list gives 0, and a Cluster without a summary gives 0.
The controller manager's ``clusterStatus`` controller fills ``resourceSummary`` while a
member is Ready; until it has, a Cluster can take 0 replicas (dynamic weights and
Aggregated division find no room there, as Karmada's estimator finds none); static
weights and Duplicated do not depend on it. Members' Nodes are not read here.

**The applied placement** is the placement last scheduled, kept in the binding's
annotation ``policy.karmada.io/applied-placement`` (Karmada's key, so either scheduler
sees what the other scheduled): :func:`placement_annotation` writes it (canonical JSON),
:func:`placement_changed` compares it as a parsed ``Placement``, so formatting (Go's or
ours) does not count as a change.
"""

from __future__ import annotations

import dataclasses
import fractions
import json
import math
from collections.abc import Mapping
from typing import Any

from clusterhealth_controlplane import quantities
from clusterhealth_controlplane.scheduler import assignment, framework, spread
from clusterhealth_core.api import cluster, meta, policy, work

APPLIED_PLACEMENT = "policy.karmada.io/applied-placement"
"""Annotation holding the placement the binding was last scheduled with (Karmada's key)."""
CONDITION_COMPLETE_API_ENABLEMENTS = "CompleteAPIEnablements"
"""Cluster condition: True when ``status.apiEnablements`` lists every API of the member."""

CPU = "cpu"
PODS = "pods"
INT32_MAX = 2**31 - 1
"""The most replicas one cluster reports (Karmada's estimator answers an int32)."""


# --- quantities ---------------------------------------------------------------------------

def quantity(value: cluster.Quantity) -> fractions.Fraction:
    """A Kubernetes quantity (``"1.5Gi"``, ``"250m"``, ``3``) as an exact number."""
    return quantities.parse(value)


def _value(amount: fractions.Fraction, resource: str) -> int:
    """Go's ``Quantity.Value()`` (rounded up), or ``MilliValue()`` for CPU."""
    return math.ceil(amount * 1000) if resource == CPU else math.ceil(amount)


def free_resources(summary: cluster.ResourceSummary) -> dict[str, int]:
    """``allocatable - allocated - allocating`` per resource (CPU in milli-units)."""
    free: dict[str, int] = {}
    for name, allocatable in summary.allocatable.items():
        amount = quantity(allocatable)
        for taken in (summary.allocated.get(name), summary.allocating.get(name)):
            if taken is not None:
                amount -= quantity(taken)
        free[name] = _value(amount, name)
    return free


def available_replicas(free: Mapping[str, int] | None,
                       request: Mapping[str, cluster.Quantity] | None) -> int:
    """How many more replicas a cluster with ``free`` resources takes (Karmada's estimator).

    ``free`` is :func:`free_resources` of the summary, ``None`` without one (0 replicas).
    """
    if free is None:
        return 0
    replicas = max(0, free.get(PODS, 0))
    for name, wanted in (request or {}).items():
        needed = _value(quantity(wanted), name)
        if needed <= 0:
            continue
        have = free.get(name)
        if have is None or have <= 0:
            return 0
        replicas = min(replicas, have // needed)
    return min(replicas, INT32_MAX)


# --- placement ----------------------------------------------------------------------------

def _requirement(raw: policy.LabelSelectorRequirement | policy.FieldSelectorRequirement
                 ) -> framework.Requirement:
    return framework.Requirement(str(raw.key), str(raw.operator), tuple(raw.values))


def label_selector(raw: policy.LabelSelector) -> framework.LabelSelector:
    """A label selector view."""
    return framework.LabelSelector(
        match_labels=dict(raw.match_labels),
        match_expressions=tuple(_requirement(r) for r in raw.match_expressions))


def affinity(raw: policy.ClusterAffinity) -> framework.ClusterAffinity:
    """A cluster affinity (or affinity term, or static weight target) view."""
    return framework.ClusterAffinity(
        cluster_names=tuple(raw.cluster_names),
        exclude=tuple(raw.exclude),
        label_selector=None if raw.label_selector is None else label_selector(raw.label_selector),
        field_selector=() if raw.field_selector is None else tuple(
            _requirement(r) for r in raw.field_selector.match_expressions))


def toleration(raw: policy.Toleration) -> framework.Toleration:
    """A cluster toleration view (absent operator: Equal)."""
    return framework.Toleration(
        key=raw.key or "", operator=str(raw.operator or "Equal"), value=raw.value or "",
        effect=str(raw.effect or ""), toleration_seconds=raw.toleration_seconds)


def spread_constraint(raw: policy.SpreadConstraint) -> spread.SpreadConstraint:
    """A spread constraint view (``spreadByLabel`` is not scheduled by, as in Karmada)."""
    return spread.SpreadConstraint(
        spread_by_field=str(raw.spread_by_field or ""), min_groups=raw.min_groups,
        max_groups=raw.max_groups)


def replica_scheduling(raw: policy.ReplicaSchedulingStrategy) -> framework.ReplicaScheduling:
    """The replica scheduling view."""
    preference = raw.weight_preference
    return framework.ReplicaScheduling(
        type=str(raw.replica_scheduling_type),
        division_preference=str(raw.replica_division_preference or ""),
        weight_preference=None if preference is None else framework.WeightPreference(
            static_weights=tuple(framework.StaticWeight(affinity(w.target_cluster), w.weight)
                                 for w in preference.static_weight_list),
            dynamic_weight=str(preference.dynamic_weight or "")))


def placement_view(raw: policy.Placement, term: int | None = None) -> framework.PlacementView:
    """The placement as the plugins see it.

    ``term`` picks one of ``clusterAffinities`` (which then replaces ``clusterAffinity``);
    ``None`` takes ``clusterAffinity`` (Karmada ignores ``clusterAffinity`` when
    ``clusterAffinities`` is set, so callers pass a term then: :func:`affinity_terms`).
    """
    chosen: policy.ClusterAffinity | None = raw.cluster_affinity
    if term is not None:
        chosen = raw.cluster_affinities[term]
    return framework.PlacementView(
        affinity=None if chosen is None else affinity(chosen),
        tolerations=tuple(toleration(t) for t in raw.cluster_tolerations),
        spread_constraints=tuple(spread_constraint(c) for c in raw.spread_constraints
                                 if c.spread_by_label is None or c.spread_by_field is not None),
        replica_scheduling=None if raw.replica_scheduling is None
        else replica_scheduling(raw.replica_scheduling))


def affinity_terms(raw: policy.Placement,
                   observed: str | None) -> list[tuple[str | None, int | None]]:
    """The affinity terms to try, in order: ``(affinityName, index)`` pairs.

    Without ``clusterAffinities``: one, ``(None, None)`` (``clusterAffinity``). With them,
    as Karmada's ``scheduleResourceBindingWithClusterAffinities``: from the term the
    binding was last scheduled with (``status.schedulerObservingAffinityName``), or the
    first, to the last.
    """
    if not raw.cluster_affinities:
        return [(None, None)]
    names = [t.affinity_name for t in raw.cluster_affinities]
    start = names.index(observed) if observed in names else 0
    return [(names[i], i) for i in range(start, len(names))]


def canonical_json(raw: Any) -> str:
    """Compact JSON with sorted keys (a cache key for a wire placement)."""
    return json.dumps(raw, sort_keys=True, separators=(",", ":"))


def canonical_placement(raw: policy.Placement) -> str:
    """The placement as compact JSON with sorted keys (the applied-placement annotation)."""
    return canonical_json(raw.to_dict())


def placement_annotation(raw: policy.Placement) -> dict[str, str]:
    """The annotation recording ``raw`` as the placement last scheduled."""
    return {APPLIED_PLACEMENT: canonical_placement(raw)}


def applied_placement(annotations: Mapping[str, str]) -> policy.Placement | None:
    """The placement last scheduled, from the annotation; ``None`` when absent or unreadable."""
    text = annotations.get(APPLIED_PLACEMENT)
    if not text:
        return None
    try:
        decoded = json.loads(text)
        if not isinstance(decoded, dict):
            return None
        return policy.Placement.from_dict(decoded)
    except (ValueError, meta.ValidationError):
        return None


def placement_changed(raw: policy.Placement, annotations: Mapping[str, str]) -> bool:
    """Whether ``raw`` differs from the placement last scheduled (or none was recorded)."""
    return applied_placement(annotations) != raw


# --- bindings -----------------------------------------------------------------------------

def binding_view(spec: work.ResourceBindingSpec) -> framework.BindingView:
    """The binding as the plugins see it."""
    return framework.BindingView(
        api_version=spec.resource.api_version,
        kind=spec.resource.kind,
        replicas=spec.replicas,
        clusters=tuple(assignment.TargetCluster(t.name, t.replicas) for t in spec.clusters),
        evicting_from=frozenset(t.from_cluster for t in spec.graceful_eviction_tasks),
        uid=spec.resource.uid or "",
        has_replica_requirements=spec.replica_requirements is not None)


def resource_request(spec: work.ResourceBindingSpec) -> Mapping[str, cluster.Quantity]:
    """What one replica requests (empty without requirements)."""
    if spec.replica_requirements is None:
        return {}
    return spec.replica_requirements.resource_request


def reschedule_requested(spec: work.ResourceBindingSpec,
                         status: work.ResourceBindingStatus) -> bool:
    """``rescheduleTriggeredAt`` after ``lastScheduledTime`` (Karmada's ``RescheduleRequired``)."""
    triggered = spec.reschedule_triggered_at
    if triggered is None:
        return False
    last = status.last_scheduled_time
    return last is None or triggered > last


def targets_wire(targets: tuple[assignment.TargetCluster, ...]) -> list[dict[str, Any]]:
    """``spec.clusters`` as written."""
    return [{"name": t.name, "replicas": t.replicas} for t in targets]


# --- clusters -----------------------------------------------------------------------------

def _api_enablements(status: cluster.ClusterStatus) -> dict[str, frozenset[str]] | None:
    if not status.api_enablements:
        return None
    return {e.group_version: frozenset(r.kind for r in e.resources)
            for e in status.api_enablements}


def cluster_view(raw: cluster.Cluster, available: int = 0) -> framework.ClusterView:
    """A Cluster as the plugins see it, able to take ``available`` more replicas."""
    spec = raw.spec
    complete = meta.find_condition(raw.status.conditions, CONDITION_COMPLETE_API_ENABLEMENTS)
    return framework.ClusterView(
        name=raw.metadata.name,
        labels=dict(raw.metadata.labels),
        provider=spec.provider or "",
        region=spec.region or "",
        zones=(spec.zone,) if spec.zone else (),
        taints=tuple(framework.Taint(t.key, str(t.effect), t.value or "") for t in spec.taints),
        api_enablements=_api_enablements(raw.status),
        api_enablements_complete=complete is not None
        and complete.status is meta.ConditionStatus.TRUE,
        available_replicas=available,
        deleting=raw.metadata.deletion_timestamp is not None)


@dataclasses.dataclass(frozen=True)
class ClusterEntry:
    """A cached Cluster: its view (0 available replicas) and its free resources."""

    view: framework.ClusterView
    free: Mapping[str, int] | None

    def for_request(self, request: Mapping[str, cluster.Quantity]) -> framework.ClusterView:
        """The view with the replicas of ``request`` this cluster can take."""
        if self.free is None:
            return self.view
        return dataclasses.replace(self.view,
                                   available_replicas=available_replicas(self.free, request))


def cluster_entry(obj: Mapping[str, Any]) -> ClusterEntry:
    """A Cluster's wire dict, parsed once per change (raises ``meta.ValidationError``)."""
    raw = cluster.Cluster.from_dict(obj)
    summary = raw.status.resource_summary
    return ClusterEntry(cluster_view(raw), None if summary is None else free_resources(summary))
