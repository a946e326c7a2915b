"""Failback, decided: which bindings go back to a recovered cluster, and when.  Pure.

Karmada evicts workloads from a failed cluster but never brings them back
(asked in its issues 1189 and 7441): a Divided 1:2 split over member1 and
member2 stays 0:3 after member1 recovers.  Failback restores it, for the
policies that ask:

* **Opt-in** per (Cluster)PropagationPolicy, by the annotation
  :data:`OPT_IN` set to ``"true"``.  Karmada's CRDs prune unknown fields, so an
  annotation is the only way to say it that a Karmada control plane keeps.
  The binding names its policy (the detector's claim annotations); the
  controller reads the policy's current annotation, so turning the opt-in
  off stops failbacks at once.
* **Record**: a graceful-eviction task from the taint manager (producer
  ``TaintManager``, reason ``TaintUntolerated``) is recorded on the binding
  as ``{cluster: time}`` in the annotation :data:`EVICTED_FROM` when first
  seen (the task itself ends once the replacement is healthy).
* **Which bindings**: Divided with static weights (``Weighted`` with a
  ``staticWeightList`` and no ``dynamicWeight``), the only strategy whose
  split is the user's and is lost by a failover.  Duplicated bindings are
  left alone (the scheduler places a Duplicated binding on every fitting
  cluster whenever it schedules it); dynamic weights follow free capacity by
  design; Aggregated packs on purpose.
* **When**: the recorded cluster has been Ready (condition True) with no
  NoSchedule/NoExecute taint for the stabilisation window
  (``--failback-stabilization-window``), no graceful-eviction task from it is
  left on the binding (the scheduler would skip it), and the placement still
  selects it (its affinity term and a static weight > 0).  A record whose
  cluster is back in ``spec.clusters``, gone, or no longer selected is
  dropped.
* **How**: ``spec.rescheduleTriggeredAt`` set to now (after
  ``lastScheduledTime``, so the scheduler sees it), which makes the scheduler
  divide afresh by the static weights (Karmada's WorkloadRebalancer uses the
  same field); the annotation :data:`TRIGGERED` holds the same time, so that
  the binding counts as *in flight* until the scheduler has observed the
  trigger (``lastScheduledTime`` reaches it) or :data:`IN_FLIGHT_LIMIT`
  passed; at most ``--failback-batch`` bindings are in flight at a time.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Iterable, Mapping
from typing import Any

from clusterhealth_controlplane import wiretime
from clusterhealth_controlplane.scheduler import assignment, framework, selectors

OPT_IN = "clusterhealth.io/failback"
"""Annotation on a (Cluster)PropagationPolicy: ``"true"`` turns failback on for its bindings."""
EVICTED_FROM = "clusterhealth.io/evicted-from"
"""Annotation on a binding: JSON ``{cluster: RFC 3339 time}`` of the evictions recorded."""
TRIGGERED = "clusterhealth.io/failback-triggered-at"
"""Annotation on a binding: the ``rescheduleTriggeredAt`` failback wrote."""

PRODUCER = "TaintManager"
REASON = "TaintUntolerated"
IN_FLIGHT_LIMIT = 300.0
"""Seconds after which a trigger the scheduler has not observed stops holding a batch slot."""

PP_NAME = "propagationpolicy.karmada.io/name"
PP_NAMESPACE = "propagationpolicy.karmada.io/namespace"
CPP_NAME = "clusterpropagationpolicy.karmada.io/name"

TAINT_EFFECTS = ("NoSchedule", "NoExecute")

DROP_BACK = "back"
"""A record dropped: the cluster is in ``spec.clusters`` again."""
DROP_GONE = "gone"
"""A record dropped: the Cluster no longer exists."""
DROP_UNSELECTED = "unselected"
"""A record dropped: the placement no longer selects the cluster."""
DROP_NOT_WANTED = "not_opted_in"
"""Every record dropped: the policy does not ask for failback, or the binding is not static."""


def opted_in(policy_obj: Mapping[str, Any] | None) -> bool:
    """Whether a (Cluster)PropagationPolicy asks for failback."""
    annotations = ((policy_obj or {}).get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(OPT_IN, "")).strip().lower() == "true"


def policy_key(binding: Mapping[str, Any]) -> str | None:
    """The policy claiming the binding, keyed as its cache keys it.

    ``ns/name`` for a PropagationPolicy, ``name`` for a ClusterPropagationPolicy.
    """
    meta_ = binding.get("metadata") or {}
    marks = {**(meta_.get("labels") or {}), **(meta_.get("annotations") or {})}
    if marks.get(PP_NAME):
        namespace = marks.get(PP_NAMESPACE) or meta_.get("namespace")
        return f"{namespace}/{marks[PP_NAME]}"
    if marks.get(CPP_NAME):
        return str(marks[CPP_NAME])
    return None


def record(binding: Mapping[str, Any]) -> dict[str, str]:
    """The evictions recorded on the binding (a malformed annotation records nothing)."""
    text = (((binding.get("metadata") or {}).get("annotations") or {}).get(EVICTED_FROM))
    if not text:
        return {}
    try:
        value = json.loads(str(text))
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    found: dict[str, str] = {}
    for cluster, when in value.items():
        if wiretime.parse_time(when) is not None:
            found[str(cluster)] = str(when)
    return found


def record_text(entries: Mapping[str, str]) -> str | None:
    """The annotation's value for ``entries`` (None: remove it)."""
    return json.dumps(dict(sorted(entries.items())), separators=(",", ":")) if entries else None


def evicted_clusters(binding: Mapping[str, Any]) -> set[str]:
    """The clusters the taint manager evicted the binding from (tasks still on it)."""
    return {str(t["fromCluster"]) for t in (binding.get("spec") or {}).get(
        "gracefulEvictionTasks") or [] if t.get("producer") == PRODUCER
        and t.get("reason") == REASON and t.get("fromCluster")}


def evictions(binding: Mapping[str, Any], now: datetime.datetime) -> dict[str, str]:
    """The taint manager's evictions on the binding's tasks: ``{cluster: when}``."""
    found: dict[str, str] = {}
    for task in (binding.get("spec") or {}).get("gracefulEvictionTasks") or []:
        if task.get("producer") != PRODUCER or task.get("reason") != REASON \
                or not task.get("fromCluster"):
            continue
        found.setdefault(str(task["fromCluster"]),
                         str(task.get("creationTimestamp") or wiretime.format_time(now)))
    return found


def static_weighted(placement: framework.PlacementView | None) -> bool:
    """Divided by a static weight list (the only split failback restores)."""
    if placement is None:
        return False
    scheduling = placement.replica_scheduling
    return (placement.strategy is assignment.Strategy.STATIC_WEIGHT and scheduling is not None
            and scheduling.weight_preference is not None
            and bool(scheduling.weight_preference.static_weights))


def selects(placement: framework.PlacementView, cluster: framework.ClusterView) -> bool:
    """Whether the placement still selects ``cluster``: its affinity and a static weight > 0."""
    if placement.affinity is not None \
            and not selectors.affinity_matches(placement.affinity, cluster):
        return False
    scheduling = placement.replica_scheduling
    weights = () if scheduling is None or scheduling.weight_preference is None \
        else scheduling.weight_preference.static_weights
    return any(w.weight > 0 and selectors.affinity_matches(w.target, cluster) for w in weights)


def healthy(cluster: Mapping[str, Any]) -> bool:
    """Ready True and no NoSchedule/NoExecute taint."""
    taints = (cluster.get("spec") or {}).get("taints") or []
    if any(t.get("effect") in TAINT_EFFECTS for t in taints):
        return False
    return ready_since(cluster) is not None


def ready_since(cluster: Mapping[str, Any]) -> datetime.datetime | None:
    """When the Ready condition last turned True (None: not Ready)."""
    for condition in (cluster.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            if condition.get("status") != "True":
                return None
            return wiretime.parse_time(condition.get("lastTransitionTime"))
    return None


def stable_since(cluster: Mapping[str, Any],
                 seen_healthy: datetime.datetime | None) -> datetime.datetime | None:
    """Since when the cluster has been healthy: Ready's transition, or later when first seen so.

    ``seen_healthy`` is when the controller first saw it Ready and untainted
    (taints carry no removal time, so that is the earliest it can vouch for).
    """
    if not healthy(cluster) or seen_healthy is None:
        return None
    since = ready_since(cluster)
    assert since is not None
    return max(since, seen_healthy)


def in_flight(binding: Mapping[str, Any], now: datetime.datetime) -> bool:
    """Failback triggered on the binding and not yet observed by the scheduler."""
    annotations = (binding.get("metadata") or {}).get("annotations") or {}
    triggered = wiretime.parse_time(annotations.get(TRIGGERED))
    if triggered is None or triggered != wiretime.parse_time((binding.get("spec") or {}).get(
            "rescheduleTriggeredAt")):
        return False
    last = wiretime.parse_time((binding.get("status") or {}).get("lastScheduledTime"))
    if last is not None and last >= triggered:
        return False
    return (now - triggered).total_seconds() < IN_FLIGHT_LIMIT


def trigger_time(binding: Mapping[str, Any], now: datetime.datetime) -> datetime.datetime:
    """``rescheduleTriggeredAt`` to write: now, but after ``lastScheduledTime`` (whole seconds)."""
    moment = now.replace(microsecond=0)
    last = wiretime.parse_time((binding.get("status") or {}).get("lastScheduledTime"))
    if last is not None and last >= moment:
        moment = last + datetime.timedelta(seconds=1)
    return moment


@dataclasses.dataclass(frozen=True)
class ClusterState:
    """A recorded cluster as :func:`plan` needs it."""

    view: framework.ClusterView
    """How the scheduler sees it (name, labels, provider, region, zones)."""
    stable_since: datetime.datetime | None
    """Since when it has been Ready and untainted (None: it is not); see :func:`stable_since`."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """What to do with one binding."""

    record: dict[str, str]
    """The evictions to keep recorded (written when it differs from the binding's)."""
    due: tuple[str, ...] = ()
    """Recovered clusters to fail back to now (a trigger is written when a slot is free)."""
    dropped: tuple[tuple[str, str], ...] = ()
    """Records dropped: ``(cluster, why)``."""
    wait: float | None = None
    """Seconds until the next recorded cluster's window ends (None: nothing timed)."""

    def changed(self, binding: Mapping[str, Any]) -> bool:
        """Whether the record differs from the binding's."""
        return self.record != record(binding)


def plan(binding: Mapping[str, Any], wanted: bool, placement: framework.PlacementView | None,
         clusters: Mapping[str, ClusterState], now: datetime.datetime, window: float) -> Plan:
    """The record and the failbacks due for ``binding`` at ``now``.

    ``wanted``: the policy opted in; ``placement``: the binding's placement as
    the scheduler sees it (the affinity term it was last scheduled with);
    ``clusters``: the existing Clusters (at least the recorded ones) by name.
    """
    current = record(binding)
    if not wanted or not static_weighted(placement):
        return Plan({}, dropped=tuple((c, DROP_NOT_WANTED) for c in sorted(current)))
    entries = {**evictions(binding, now), **current}
    spec = binding.get("spec") or {}
    targets = {str(t.get("name")) for t in spec.get("clusters") or []}
    evicting = {str(t.get("fromCluster")) for t in spec.get("gracefulEvictionTasks") or []}
    kept: dict[str, str] = {}
    due: list[str] = []
    dropped: list[tuple[str, str]] = []
    waits: list[float] = []
    assert placement is not None
    for cluster, when in sorted(entries.items()):
        state = clusters.get(cluster)
        if cluster in evicting:
            kept[cluster] = when  # the scheduler skips it while a task is left: wait
        elif cluster in targets:
            dropped.append((cluster, DROP_BACK))
        elif state is None:
            dropped.append((cluster, DROP_GONE))
        elif not selects(placement, state.view):
            dropped.append((cluster, DROP_UNSELECTED))
        else:
            kept[cluster] = when
            since = state.stable_since
            if since is None:
                continue  # not healthy: a change of the Cluster brings it back here
            left = (since + datetime.timedelta(seconds=window) - now).total_seconds()
            if left > 0:
                waits.append(left)
            else:
                due.append(cluster)
    return Plan(kept, tuple(due), tuple(dropped), min(waits) if waits else None)


def failback_patch(binding: Mapping[str, Any], entries: Mapping[str, str],
                   trigger: datetime.datetime | None) -> dict[str, Any]:
    """A merge patch: the record, and the trigger when given.

    A trigger is guarded by the binding's resourceVersion (it was decided on the
    binding's spec as it was); the record alone is not (only this controller writes
    that annotation, and a status write in between must not hold it back).
    """
    annotations: dict[str, Any] = {EVICTED_FROM: record_text(entries)}
    body: dict[str, Any] = {"metadata": {"annotations": annotations}}
    if trigger is not None:
        stamp = wiretime.format_time(trigger)
        annotations[TRIGGERED] = stamp
        body["metadata"]["resourceVersion"] = (binding.get("metadata") or {}).get(
            "resourceVersion")
        body["spec"] = {"rescheduleTriggeredAt": stamp}
    return body


def count_in_flight(bindings: Iterable[Mapping[str, Any]], now: datetime.datetime) -> int:
    """How many of ``bindings`` hold a batch slot."""
    return sum(1 for b in bindings if in_flight(b, now))
