"""When a binding leaves a NoExecute-tainted cluster, and how: pure, table-tested.

Karmada v1.18.2's taint manager (``pkg/controllers/cluster/taint_manager.go``),
as facts:

* only ``NoExecute`` taints count; a binding targeting a cluster with one is
  evicted at once when some NoExecute taint is tolerated by none of the
  placement's ``clusterTolerations``; otherwise at the earliest
  ``timeAdded + tolerationSeconds`` over the tolerations used (the first
  toleration matching each taint) and the taints each of them tolerates; a
  toleration without ``tolerationSeconds`` (or a taint without
  ``timeAdded``) gives no deadline: tolerated for ever;
* the tolerations are those of the placement the binding was scheduled with
  (annotation ``policy.karmada.io/applied-placement``, written by either
  scheduler); we fall back to ``spec.placement`` (the detector's copy of the
  policy) when the annotation is absent, where Karmada retries an error
  forever; a binding with neither tolerates nothing;
* an eviction removes the cluster from ``spec.clusters`` and appends a
  graceful-eviction task ``{fromCluster, replicas (only when > 0), reason
  TaintUntolerated, producer TaintManager, purgeMode}``, unless a task from
  that cluster is already there (then only the removal); ``purgeMode`` is
  the binding's ``spec.failover.cluster.purgeMode`` (``Gracefully`` when that
  block is present without one), else the process-wide default
  (``--no-execute-taint-eviction-purge-mode``, ``Gracefully``).  Karmada adds
  the task for ``Directly`` too (the graceful-eviction controller then acts
  on it at once), and so do we.  Beyond Karmada, the task carries its
  ``creationTimestamp`` (Karmada's graceful-eviction controller stamps it
  later) and a ``message`` naming the taint.

**The storm guard** is ours (no anchor ships it): when more than
``--unhealthy-cluster-threshold`` of all Clusters are unhealthy (``Ready``
not ``True``, a Cluster without the condition included) at once, the fault is
most likely the control plane's own network, so evictions run at
``--secondary-eviction-rate`` (0: not at all) until it lifts.  It shows as the
condition :data:`CONDITION` on every NoExecute-tainted Cluster (see
:func:`guard_condition`).  Clusters cut off together do not turn unready in the
same instant: each is probed on its own period, so their ``Ready`` turns False
up to one ``--cluster-status-update-frequency`` apart (plus write latency).
An eviction from a cluster that turned unready less than :func:`storm_window`
ago therefore waits out the window (:func:`hold`), so that the guard has
counted the rest of the outage before anything leaves.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from clusterhealth_controlplane.scheduler import framework

NO_EXECUTE = "NoExecute"
EVICTION_REASON = "TaintUntolerated"
"""Karmada's ``EvictionReasonTaintUntolerated``: the task's and the metric's reason."""
PRODUCER = "TaintManager"
"""Karmada's ``EvictionProducerTaintManager``."""
GRACEFULLY = "Gracefully"
APPLIED_PLACEMENT = "policy.karmada.io/applied-placement"
"""The placement the binding was last scheduled with (Karmada's annotation)."""
TASK_MESSAGE_LIMIT = 1024
"""Karmada's bound on ``gracefulEvictionTasks[].message``."""

CONDITION = "EvictionStormGuard"
"""Cluster condition: True while the storm guard holds the evictions from this cluster."""
REASON_HELD = "TooManyUnhealthyClusters"
REASON_CLEAR = "EnoughHealthyClusters"
REASON_UNTAINTED = "NoExecuteTaintGone"
READY = "Ready"

IMMEDIATELY = datetime.datetime.min.replace(tzinfo=datetime.UTC)
"""The deadline of an eviction due at once (before any ``now``)."""


@dataclasses.dataclass(frozen=True)
class Taint:
    """A NoExecute taint of a Cluster, with when it was added (None: unknown)."""

    key: str
    value: str
    time_added: datetime.datetime | None

    @property
    def view(self) -> framework.Taint:
        """The scheduler's view, for ``Toleration.tolerates``."""
        return framework.Taint(self.key, NO_EXECUTE, self.value)

    def __str__(self) -> str:
        """``key=value:NoExecute`` (Kubernetes' ``Taint.ToString``)."""
        return str(self.view)


def parse_time(value: Any) -> datetime.datetime | None:
    """An RFC 3339 time of the API (None when absent or unreadable)."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=datetime.UTC)


def format_time(value: datetime.datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ`` (metav1.Time)."""
    return value.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


READY_TAINT_KEYS = frozenset({"cluster.karmada.io/not-ready", "cluster.karmada.io/unreachable"})
"""The taints the cluster taint controller derives from ``Ready`` (and removes when True)."""


def no_execute_taints(cluster_obj: Mapping[str, Any] | None) -> tuple[Taint, ...]:
    """The Cluster's NoExecute taints that still stand (entries without a key are skipped).

    A ``not-ready`` / ``unreachable`` taint on a Cluster whose ``Ready`` is
    already True is on its way out (the taint controller removes it right after
    the status write that this cache may have seen first): it evicts nothing.
    Other taints (a ClusterTaintPolicy's, a user's) stand whatever ``Ready`` says.
    """
    if cluster_obj is None:
        return ()
    recovered = ready(cluster_obj)
    return tuple(
        Taint(str(raw["key"]), str(raw.get("value") or ""), parse_time(raw.get("timeAdded")))
        for raw in (cluster_obj.get("spec") or {}).get("taints") or []
        if isinstance(raw, Mapping) and raw.get("effect") == NO_EXECUTE and raw.get("key")
        and not (recovered and raw["key"] in READY_TAINT_KEYS))


def toleration(raw: Mapping[str, Any]) -> framework.Toleration:
    """A ``clusterTolerations[]`` entry (absent operator: Equal)."""
    seconds = raw.get("tolerationSeconds")
    return framework.Toleration(
        key=str(raw.get("key") or ""), operator=str(raw.get("operator") or "Equal"),
        value=str(raw.get("value") or ""), effect=str(raw.get("effect") or ""),
        toleration_seconds=seconds if isinstance(seconds, int) else None)


def tolerations(binding: Mapping[str, Any]) -> tuple[framework.Toleration, ...]:
    """The ``clusterTolerations`` of the placement the binding was scheduled with.

    The applied-placement annotation first (Karmada's source), else
    ``spec.placement``; none when neither is readable.
    """
    annotations = (binding.get("metadata") or {}).get("annotations") or {}
    placement: Any = None
    text = annotations.get(APPLIED_PLACEMENT)
    if isinstance(text, str) and text:
        try:
            placement = json.loads(text)
        except ValueError:
            placement = None
    if not isinstance(placement, Mapping):
        placement = (binding.get("spec") or {}).get("placement")
    if not isinstance(placement, Mapping):
        return ()
    return tuple(toleration(t) for t in placement.get("clusterTolerations") or []
                 if isinstance(t, Mapping))


@dataclasses.dataclass(frozen=True)
class Verdict:
    """When a binding must leave one cluster, and why."""

    evict_at: datetime.datetime | None
    """None: tolerated for ever (or no NoExecute taint); :data:`IMMEDIATELY`: now."""
    why: str

    def due(self, now: datetime.datetime) -> bool:
        """Whether the eviction is due at ``now``."""
        return self.evict_at is not None and self.evict_at <= now


def verdict(taints: Sequence[Taint], tolerated_by: Sequence[framework.Toleration]) -> Verdict:
    """Karmada's rule for one cluster's NoExecute ``taints`` and a placement's tolerations."""
    if not taints:
        return Verdict(None, "no NoExecute taint")
    used: list[framework.Toleration] = []
    for taint in taints:
        match = next((t for t in tolerated_by if t.tolerates(taint.view)), None)
        if match is None:
            return Verdict(IMMEDIATELY, f"taint {taint} is not tolerated")
        used.append(match)
    deadlines = [
        (taint.time_added + datetime.timedelta(seconds=used_by.toleration_seconds),
         f"taint {taint} tolerated for {used_by.toleration_seconds}s")
        for used_by in used if used_by.toleration_seconds is not None
        for taint in taints
        if taint.time_added is not None and used_by.tolerates(taint.view)]
    if not deadlines:
        return Verdict(None, "every NoExecute taint is tolerated for ever")
    at, why = min(deadlines, key=lambda d: d[0])
    return Verdict(at, why)


@dataclasses.dataclass(frozen=True)
class Plan:
    """What to do with one binding now."""

    due: Mapping[str, str]
    """Target clusters to evict from now -> why."""
    next_at: datetime.datetime | None
    """The earliest later deadline (None: none)."""


def targets(binding: Mapping[str, Any]) -> list[str]:
    """The names in ``spec.clusters``."""
    return [str(t.get("name")) for t in (binding.get("spec") or {}).get("clusters") or []
            if isinstance(t, Mapping) and t.get("name")]


def plan(binding: Mapping[str, Any], clusters: Mapping[str, Mapping[str, Any]],
         now: datetime.datetime) -> Plan:
    """Which of the binding's target clusters it leaves now, and when to look again."""
    if (binding.get("metadata") or {}).get("deletionTimestamp"):
        return Plan({}, None)
    due: dict[str, str] = {}
    later: list[datetime.datetime] = []
    tolerated_by: tuple[framework.Toleration, ...] | None = None
    for name in targets(binding):
        taints = no_execute_taints(clusters.get(name))
        if not taints:
            continue
        if tolerated_by is None:
            tolerated_by = tolerations(binding)
        found = verdict(taints, tolerated_by)
        if found.due(now):
            due[name] = found.why
        elif found.evict_at is not None:
            later.append(found.evict_at)
    return Plan(due, min(later) if later else None)


def purge_mode(binding: Mapping[str, Any], default: str) -> str:
    """The task's ``purgeMode``: the binding's cluster failover behaviour, else ``default``."""
    failover = (binding.get("spec") or {}).get("failover") or {}
    behaviour = failover.get("cluster") if isinstance(failover, Mapping) else None
    if isinstance(behaviour, Mapping):
        return str(behaviour.get("purgeMode") or GRACEFULLY)
    return default


def evicted_spec(spec: Mapping[str, Any], due: Mapping[str, str], mode: str,
                 now: datetime.datetime) -> dict[str, Any]:
    """``spec`` without the ``due`` clusters, each with its graceful-eviction task."""
    remaining = [dict(t) for t in spec.get("clusters") or []]
    tasks = [dict(t) for t in spec.get("gracefulEvictionTasks") or []]
    tasked = {t.get("fromCluster") for t in tasks}
    for name, why in due.items():
        target = next((t for t in remaining if t.get("name") == name), None)
        if target is None:
            continue
        remaining.remove(target)
        if name in tasked:
            continue
        task: dict[str, Any] = {
            "fromCluster": name, "purgeMode": mode, "reason": EVICTION_REASON,
            "message": f"cluster {name}: {why}"[:TASK_MESSAGE_LIMIT],
            "producer": PRODUCER, "creationTimestamp": format_time(now)}
        replicas = target.get("replicas")
        if isinstance(replicas, int) and replicas > 0:
            task["replicas"] = replicas
        tasks.append(task)
        tasked.add(name)
    return {**spec, "clusters": remaining, "gracefulEvictionTasks": tasks}


# --- the storm guard ---------------------------------------------------------------------

def ready(cluster_obj: Mapping[str, Any]) -> bool:
    """Whether the Cluster's ``Ready`` condition is ``True``."""
    for condition in (cluster_obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == READY:
            return condition.get("status") == "True"
    return False


@dataclasses.dataclass(frozen=True)
class Guard:
    """How many Clusters are unhealthy, and whether that holds the evictions back."""

    unhealthy: int
    total: int
    threshold: float

    @property
    def fraction(self) -> float:
        """Unhealthy Clusters over all (0 with none)."""
        return self.unhealthy / self.total if self.total else 0.0

    @property
    def held(self) -> bool:
        """More than ``threshold`` of the Clusters are unhealthy."""
        return self.total > 0 and self.fraction > self.threshold


def guard(readiness: Iterable[bool], threshold: float) -> Guard:
    """The guard over the Clusters' readiness (True: Ready)."""
    states = list(readiness)
    return Guard(sum(1 for r in states if not r), len(states), threshold)


STORM_SLACK = 2.0
"""Seconds on top of one probe period for the other Clusters' ``Ready`` writes to arrive."""


def storm_window(update_frequency: float) -> float:
    """How far apart Clusters failing together may turn unready: one probe period + slack."""
    return update_frequency + STORM_SLACK


def resume_delay(success_threshold: float, update_frequency: float) -> float:
    """How long held evictions wait after the storm guard lifts.

    The guard lifts with the first Clusters of the storm Ready again; the rest,
    back together with them, turn Ready up to :func:`storm_window` later (each
    after its success threshold), and must not lose their bindings meanwhile.
    """
    return success_threshold + storm_window(update_frequency)


def hold(clusters: Iterable[str], unready_since: Mapping[str, float], window: float,
         now: float) -> float:
    """Seconds an eviction from ``clusters`` waits for the guard to see the outage whole.

    ``unready_since`` holds when (monotonic) each Cluster was seen turning
    unready; a Cluster unready from the start, or Ready again, is not in it.
    0: evict now.
    """
    waits = [unready_since[name] + window - now for name in clusters if name in unready_since]
    return max([0.0, *waits])


def rate(held: bool, normal: float, secondary: float) -> float | None:
    """Evictions per second now: None for no limit, 0 for none at all."""
    if held:
        return secondary
    return normal if normal > 0 else None


def _pace(held: bool, secondary: float) -> str:
    if not held:
        return "evictions run at the normal rate"
    return "evictions paused" if secondary <= 0 else f"evictions slowed to {secondary:g}/s"


def guard_message(state: Guard, secondary: float) -> str:
    """``3 of 4 clusters (75%) are unhealthy, above the 55% threshold: evictions paused``."""
    where = "above" if state.held else "within"
    return (f"{state.unhealthy} of {state.total} clusters ({state.fraction:.0%}) are "
            f"unhealthy, {where} the {state.threshold:.0%} threshold: "
            f"{_pace(state.held, secondary)}")


@dataclasses.dataclass(frozen=True)
class GuardCondition:
    """The :data:`CONDITION` a Cluster should carry (metav1.Condition's fields)."""

    status: str
    reason: str
    message: str


def guard_condition(cluster_obj: Mapping[str, Any], state: Guard,
                    secondary: float) -> GuardCondition | None:
    """The :data:`CONDITION` this Cluster should carry, or None to leave it alone.

    True on a NoExecute-tainted Cluster while the guard holds; False once it
    lifts (or the taint goes) on a Cluster that has it True; otherwise no
    write (a Cluster never held never gets the condition).
    """
    live = next((c for c in (cluster_obj.get("status") or {}).get("conditions") or []
                 if isinstance(c, Mapping) and c.get("type") == CONDITION), None)
    if state.held and no_execute_taints(cluster_obj):
        return GuardCondition("True", REASON_HELD, guard_message(state, secondary))
    if live is not None and live.get("status") == "True":
        if state.held:
            return GuardCondition("False", REASON_UNTAINTED,
                                  "no NoExecute taint left: nothing to evict")
        return GuardCondition("False", REASON_CLEAR, guard_message(state, secondary))
    return None
