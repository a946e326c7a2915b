"""One scheduling decision: filters, then scores, then spread selection, then replica assignment.

Karmada v1.18.2's ``genericScheduler.Schedule`` (``pkg/scheduler/core/generic_scheduler.go``),
pure: the caller passes the placement, the binding and the clusters as views and gets
back either the targets with their replicas (:class:`Scheduled`) or why there are none
(:class:`Unschedulable`, with the condition reason, a message for the user and each
filtered-out cluster's reason). :func:`reschedule_trigger` says whether a binding that
was scheduled before must be scheduled again, and :func:`mode_for` how.

Timing is optional and injected: ``schedule(..., observe=callback, timer=clock)``
calls ``callback(plugin, extension_point, seconds)`` once per plugin and call, with the
time the plugin took over every cluster (``Filter`` or ``Score``), so that the scheduler
process can export per-plugin durations without this module knowing about metrics.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Callable, Mapping, Sequence, Set
from typing import TypeVar

from clusterhealth_controlplane.scheduler import (
    assignment,
    errors,
    framework,
    selectors,
    spread,
)

UNLIMITED = 2**31 - 1
"""What a cluster can take of a resource without replicas (Karmada's ``math.MaxInt32``)."""


@dataclasses.dataclass(frozen=True)
class Scheduled:
    """The binding's new targets (``spec.clusters``), sorted by name.

    ``selected`` are the clusters spread selection chose, best first (a cluster may be
    selected and get no replicas); ``scores`` the summed scores of the clusters that
    fit; ``filtered`` the clusters that did not fit and why.
    """

    targets: tuple[assignment.TargetCluster, ...]
    selected: tuple[str, ...] = ()
    scores: Mapping[str, int] = dataclasses.field(default_factory=dict)
    filtered: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Unschedulable:
    """No targets: ``reason`` and ``message`` are for the ``Scheduled=False`` condition and Event.

    ``filtered`` maps each cluster that did not fit to why (e.g. ``had untolerated taint
    {key:NoSchedule}``); ``error`` is the typed error when clusters fit but the
    placement could not be satisfied on them.
    """

    reason: str
    message: str
    filtered: Mapping[str, str] = dataclasses.field(default_factory=dict)
    error: errors.ScheduleError | None = None


ScheduleResult = Scheduled | Unschedulable

FILTER = "Filter"
SCORE = "Score"
Observe = Callable[[str, str, float], None]
"""``observe(plugin, extension_point, seconds)``: a plugin's time over all clusters of a call."""
Timer = Callable[[], float]
_R = TypeVar("_R")


class _Timing:
    """Per-plugin time spent during one :func:`schedule` call."""

    def __init__(self, timer: Timer) -> None:
        self.timer = timer
        self.spent: dict[tuple[str, str], float] = {}

    def call(
        self,
        plugin: str,
        point: str,
        method: Callable[[framework.Cycle, framework.ClusterView], _R],
        cycle: framework.Cycle,
        cluster: framework.ClusterView,
    ) -> _R:
        """``method(cycle, cluster)``, its time added to ``plugin`` at ``point``."""
        started = self.timer()
        result = method(cycle, cluster)
        key = (plugin, point)
        self.spent[key] = self.spent.get(key, 0.0) + self.timer() - started
        return result

    def report(self, observe: Observe) -> None:
        for (plugin, point), seconds in self.spent.items():
            observe(plugin, point, seconds)


def _filter(
    cycle: framework.Cycle,
    clusters: Sequence[framework.ClusterView],
    filters: Sequence[framework.FilterPlugin],
    timing: _Timing | None = None,
) -> tuple[list[framework.ClusterView], dict[str, str]]:
    feasible: list[framework.ClusterView] = []
    filtered: dict[str, str] = {}
    for cluster in sorted(clusters, key=lambda c: c.name):
        if cluster.deleting:
            # Karmada skips deleting clusters before the filters.
            filtered[cluster.name] = "is being deleted"
            continue
        for plugin in filters:
            result = (plugin.filter(cycle, cluster) if timing is None
                      else timing.call(plugin.name, FILTER, plugin.filter, cycle, cluster))
            if not result.ok:
                filtered[cluster.name] = result.reason or f"did not pass {plugin.name}"
                break
        else:
            feasible.append(cluster)
    return feasible, filtered


def fit_message(total: int, filtered: Mapping[str, str]) -> str:
    """``0/N clusters are available: NAME REASON, ...``: Karmada's ``FitError``, per cluster."""
    if not filtered:
        return f"0/{total} clusters are available: no cluster exists."
    reasons = ", ".join(f"{name} {reason}" for name, reason in sorted(filtered.items()))
    return f"0/{total} clusters are available: {reasons}."


def _score(
    cycle: framework.Cycle,
    cluster: framework.ClusterView,
    scorers: Sequence[framework.ScorePlugin],
    timing: _Timing | None = None,
) -> int:
    total = 0
    for plugin in scorers:
        value = (plugin.score(cycle, cluster) if timing is None
                 else timing.call(plugin.name, SCORE, plugin.score, cycle, cluster))
        if not framework.MIN_SCORE <= value <= framework.MAX_SCORE:
            raise ValueError(
                f"score plugin {plugin.name} gave {cluster.name} {value}, outside "
                f"{framework.MIN_SCORE}..{framework.MAX_SCORE}"
            )
        total += value
    return total


def static_weights(
    placement: framework.PlacementView, clusters: Sequence[framework.ClusterView]
) -> dict[str, int] | None:
    """Each cluster's static weight: the largest weight among the rules selecting it.

    ``None`` without a weight preference (all clusters weigh the same). Clusters no rule
    selects are left out. Negative weights raise :class:`~.errors.InvalidWeights`.
    """
    scheduling = placement.replica_scheduling
    if scheduling is None or scheduling.weight_preference is None:
        return None
    rules = scheduling.weight_preference.static_weights
    for index, rule in enumerate(rules):
        if rule.weight < 0:
            raise errors.InvalidWeights(
                f"staticWeightList[{index}] has a negative weight ({rule.weight})"
            )
    weights: dict[str, int] = {}
    for cluster in clusters:
        matched = [r.weight for r in rules if selectors.affinity_matches(r.target, cluster)]
        if matched:
            weights[cluster.name] = max(matched)
    return weights


def schedule(
    placement: framework.PlacementView,
    binding: framework.BindingView,
    clusters: Sequence[framework.ClusterView],
    registry: Mapping[str, framework.Plugin],
    *,
    mode: assignment.Mode = assignment.Mode.STEADY,
    observe: Observe | None = None,
    timer: Timer | None = None,
) -> ScheduleResult:
    """Where the binding's replicas go, given every Cluster and the enabled plugins.

    With ``observe``, each plugin's time (measured with ``timer``, which it needs: this
    module reads no clock) is reported once the decision is made, whatever it is.
    """
    if observe is not None and timer is None:
        raise ValueError("observe needs a timer")
    timing = None if observe is None or timer is None else _Timing(timer)
    try:
        return _schedule(placement, binding, clusters, registry, mode, timing)
    finally:
        if timing is not None and observe is not None:
            timing.report(observe)


@functools.lru_cache(maxsize=64)
def _split(plugins: tuple[framework.Plugin, ...]
           ) -> tuple[tuple[framework.FilterPlugin, ...], tuple[framework.ScorePlugin, ...]]:
    """The filters and the scores, in order (protocol checks are slow: done once per set)."""
    return (tuple(p for p in plugins if isinstance(p, framework.FilterPlugin)),
            tuple(p for p in plugins if isinstance(p, framework.ScorePlugin)))


def _schedule(
    placement: framework.PlacementView,
    binding: framework.BindingView,
    clusters: Sequence[framework.ClusterView],
    registry: Mapping[str, framework.Plugin],
    mode: assignment.Mode,
    timing: _Timing | None,
) -> ScheduleResult:
    filters, scorers = _split(tuple(registry.values()))
    cycle = framework.Cycle.of(placement, binding)
    feasible, filtered = _filter(cycle, clusters, filters, timing)
    if not feasible:
        return Unschedulable(
            errors.NO_CLUSTER_FIT, fit_message(len(clusters), filtered), filtered
        )
    try:
        if binding.replicas < 0:
            raise errors.InvalidReplicas(f"replicas must not be negative, got {binding.replicas}")
        scored: list[spread.ScoredCluster] = []
        allocatable: dict[str, int] = {}
        for cluster in feasible:
            # Karmada estimates no capacity for resources without replicas.
            can_take = UNLIMITED if binding.replicas == 0 else cluster.available_replicas
            allocatable[cluster.name] = can_take
            scored.append(
                spread.ScoredCluster(
                    name=cluster.name,
                    score=_score(cycle, cluster, scorers, timing),
                    available=can_take + binding.assigned(cluster.name),
                    region=cluster.region,
                    zones=cluster.zones,
                    provider=cluster.provider,
                )
            )
        strategy = placement.strategy
        selected = spread.select(
            scored,
            placement.spread_constraints,
            replicas=binding.replicas,
            duplicated=strategy is assignment.Strategy.DUPLICATED,
            ignore=placement.spread_ignored,
        )
        by_name = {cluster.name: cluster for cluster in feasible}
        weights = None
        if strategy is assignment.Strategy.STATIC_WEIGHT:
            weights = static_weights(placement, [by_name[c.name] for c in selected])
        targets = assignment.assign(
            strategy,
            binding.replicas,
            [assignment.Candidate(c.name, allocatable[c.name]) for c in selected],
            binding.clusters,
            weights=weights,
            mode=mode,
            uid=binding.uid,
            workload=binding.is_workload,
        )
    except errors.ScheduleError as error:
        message = str(error)
        if filtered:
            reasons = ", ".join(f"{name} {why}" for name, why in sorted(filtered.items()))
            message = f"{message} (not fitting: {reasons})"
        return Unschedulable(error.reason, message, filtered, error)
    return Scheduled(
        targets=targets,
        selected=tuple(c.name for c in selected),
        scores={c.name: c.score for c in scored},
        filtered=filtered,
    )


class Trigger(enum.Enum):
    """Why a binding scheduled before is scheduled again (Karmada's ``doScheduleBinding``)."""

    PLACEMENT_CHANGED = "PlacementChanged"
    REPLICAS_CHANGED = "ReplicasChanged"
    RESCHEDULE_REQUESTED = "RescheduleRequested"
    DUPLICATED = "Duplicated"
    TARGET_GONE = "TargetGone"


def replicas_changed(placement: framework.PlacementView, binding: framework.BindingView) -> bool:
    """Karmada's ``IsBindingReplicasChanged``.

    Duplicated: a target runs other than ``replicas``; Divided: the targets' sum differs
    from ``replicas``; no replica scheduling: never.
    """
    scheduling = placement.replica_scheduling
    if scheduling is None:
        return False
    if scheduling.type == framework.DIVIDED:
        return sum(target.replicas for target in binding.clusters) != binding.replicas
    return any(target.replicas != binding.replicas for target in binding.clusters)


def reschedule_trigger(
    placement: framework.PlacementView,
    binding: framework.BindingView,
    *,
    placement_changed: bool,
    reschedule_requested: bool = False,
    gone: Set[str] = frozenset(),
) -> Trigger | None:
    """Whether (and why) to schedule the binding again; ``None`` when its result stands.

    ``placement_changed``: the placement differs from the one last scheduled (or none
    was); ``reschedule_requested``: ``rescheduleTriggeredAt`` is after the last
    schedule; ``gone``: Clusters deleted or being deleted. In Karmada's order: placement,
    replicas, an explicit request, then Duplicated placements and resources without
    replicas always, then Divided ones when a target is gone.
    """
    if placement_changed:
        return Trigger.PLACEMENT_CHANGED
    if replicas_changed(placement, binding):
        return Trigger.REPLICAS_CHANGED
    if reschedule_requested:
        return Trigger.RESCHEDULE_REQUESTED
    if not binding.is_workload or placement.strategy is assignment.Strategy.DUPLICATED:
        return Trigger.DUPLICATED
    if binding.target_names & gone:
        return Trigger.TARGET_GONE
    return None


def mode_for(trigger: Trigger) -> assignment.Mode:
    """Fresh (ignore the previous division) for a changed placement or an explicit request.

    Karmada re-divides afresh only on ``rescheduleTriggeredAt``; a changed placement is
    also divided afresh here, so that a new placement is not skewed by the old one's
    division. Everything else starts from the previous result (Steady).
    """
    if trigger in (Trigger.PLACEMENT_CHANGED, Trigger.RESCHEDULE_REQUESTED):
        return assignment.Mode.FRESH
    return assignment.Mode.STEADY
