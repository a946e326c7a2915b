"""The cluster-taint controller's decisions: a Cluster's conditions -> its ``spec.taints``.

Pure: a Cluster, the ClusterTaintPolicies and the time in, the wanted taints
out.  Two kinds of rules, applied in this order to the taints the Cluster has:

* **built in** (Karmada's cluster controller, plus the NoExecute step its
  pre-1.14 releases took): Ready False -> ``cluster.karmada.io/not-ready``
  NoSchedule, Ready Unknown -> ``cluster.karmada.io/unreachable`` NoSchedule
  (the other key's taints go), no Ready condition yet -> ``not-ready``
  NoSchedule; once the cluster has been unschedulable for
  ``failover_eviction_timeout`` the NoExecute taint of the same key follows;
  Ready True removes both keys, both effects.  Switching between False and
  Unknown does not restart that clock: the new NoSchedule taint keeps the
  ``timeAdded`` of the one it replaces, and a NoExecute taint already there
  is swapped at once (with a new ``timeAdded``, as Kubernetes swaps its node
  taints, so tolerations count from the swap).  A cluster that has never
  reported Ready gets no NoExecute taint: nothing has been seen failing.
* **ClusterTaintPolicy** (Karmada >= 1.14's controller): every policy whose
  ``targetClusters`` select the cluster, oldest first (creation time, then
  name, so two conflicting policies settle instead of flapping), adds its
  taints when all of ``addOnConditions`` match, then removes them when all
  of ``removeOnConditions`` match.  A condition the cluster lacks matches
  neither ``In`` nor ``NotIn``; an empty list never matches.

A taint is known by its key and effect.  One already on the cluster is kept as
it is (value, ``timeAdded``, position), so taints no rule manages, e.g. a
user's, are untouched, and a repeated decision writes nothing.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Sequence

from clusterhealth_controlplane.scheduler import adapt, framework, selectors
from clusterhealth_core.api import cluster, groups, meta, policy

NO_SCHEDULE = cluster.TaintEffect.NO_SCHEDULE
NO_EXECUTE = cluster.TaintEffect.NO_EXECUTE
NOT_READY = groups.TAINT_CLUSTER_NOT_READY
UNREACHABLE = groups.TAINT_CLUSTER_UNREACHABLE
BUILT_IN_KEYS = (NOT_READY, UNREACHABLE)

TaintId = tuple[str, str]
"""A taint's identity: its key and effect."""


def identity(taint: cluster.Taint) -> TaintId:
    """``(key, effect)``."""
    return taint.key, str(taint.effect)


@dataclasses.dataclass(frozen=True)
class Change:
    """A taint added or removed, and the rule that did it (for Events and logs)."""

    taint: cluster.Taint
    rule: str


@dataclasses.dataclass(frozen=True)
class Plan:
    """The taints the Cluster should have, what changes, and when to look again."""

    taints: tuple[cluster.Taint, ...]
    added: tuple[Change, ...] = ()
    removed: tuple[Change, ...] = ()
    changed: bool = False
    """Whether ``taints`` differs from the Cluster's (also when only a ``timeAdded`` was filled)."""
    requeue_after: float | None = None
    """Seconds until a NoExecute taint falls due (None: nothing is pending)."""


class _Taints:
    """The taint list being decided, remembering which rule last touched each taint."""

    def __init__(self, current: Iterable[cluster.Taint]) -> None:
        self.items: list[cluster.Taint] = list(current)
        self.rules: dict[TaintId, str] = {}

    def find(self, key: str, effect: str) -> cluster.Taint | None:
        for taint in self.items:
            if identity(taint) == (key, effect):
                return taint
        return None

    def put(self, taint: cluster.Taint, rule: str) -> None:
        """Add ``taint``, or replace the one with its key and effect in place."""
        for index, existing in enumerate(self.items):
            if identity(existing) == identity(taint):
                self.items[index] = taint
                break
        else:
            self.items.append(taint)
        self.rules[identity(taint)] = rule

    def add(self, taint: cluster.Taint, rule: str) -> None:
        """Add ``taint`` unless one with its key and effect is there."""
        if self.find(taint.key, str(taint.effect)) is None:
            self.put(taint, rule)

    def remove(self, key: str, effect: str, rule: str) -> None:
        before = len(self.items)
        self.items = [t for t in self.items if identity(t) != (key, effect)]
        if len(self.items) != before:
            self.rules[(key, effect)] = rule


def whole_seconds(moment: datetime.datetime) -> datetime.datetime:
    """``moment`` as the API stores ``timeAdded`` (metav1.Time: whole seconds)."""
    return moment.replace(microsecond=0)


def built_in(ready: meta.Condition | None, work: _Taints, now: datetime.datetime,
             timeout: float) -> float | None:
    """Apply the Ready rules to ``work``; return the seconds until NoExecute falls due."""
    status = None if ready is None else ready.status
    if status is meta.ConditionStatus.TRUE:
        for key in BUILT_IN_KEYS:
            for effect in (NO_SCHEDULE, NO_EXECUTE):
                work.remove(key, effect, "Ready is True")
        return None
    key, other = ((NOT_READY, UNREACHABLE) if status in (None, meta.ConditionStatus.FALSE)
                  else (UNREACHABLE, NOT_READY))
    rule = "no Ready condition yet" if status is None else f"Ready is {status}"
    held = work.find(key, NO_SCHEDULE)
    replaced = work.find(other, NO_SCHEDULE)
    since = next((t.time_added for t in (held, replaced) if t is not None and t.time_added),
                 whole_seconds(now))
    if held is None or held.time_added is None:
        work.put(cluster.Taint(key=key, effect=NO_SCHEDULE, value=held.value if held else None,
                               time_added=since), rule)
    work.remove(other, NO_SCHEDULE, rule)
    if status is None:
        return None
    evicting = work.find(other, NO_EXECUTE)
    work.remove(other, NO_EXECUTE, rule)
    if work.find(key, NO_EXECUTE) is not None:
        return None
    due = since + datetime.timedelta(seconds=timeout)
    if evicting is None and now < due:
        return (due - now).total_seconds()
    why = (f"{rule}; {other} was NoExecute already" if evicting is not None
           else f"{rule}, unschedulable since {meta.format_time(since)}")
    work.put(cluster.Taint(key=key, effect=NO_EXECUTE, time_added=whole_seconds(now)), why)
    return None


def condition_matches(conditions: Sequence[meta.Condition],
                      match: policy.MatchCondition) -> bool:
    """One match condition against the cluster's conditions (absent: no match)."""
    found = meta.find_condition(conditions, match.condition_type)
    if found is None:
        return False
    if match.operator is policy.MatchConditionOperator.IN:
        return found.status in match.status_values
    return found.status not in match.status_values


def conditions_match(conditions: Sequence[meta.Condition],
                     matches: Sequence[policy.MatchCondition]) -> bool:
    """All of ``matches`` hold (an empty list never matches)."""
    return bool(matches) and all(condition_matches(conditions, m) for m in matches)


def view(obj: cluster.Cluster) -> framework.ClusterView:
    """What cluster selection reads from a Cluster (the scheduler's view of it)."""
    return adapt.cluster_view(obj)


def targets(candidate: policy.ClusterTaintPolicy, view: framework.ClusterView) -> bool:
    """Whether the policy's ``targetClusters`` select the cluster (absent: every cluster).

    Karmada's ``ClusterMatches``, as the scheduler's ClusterAffinity filter uses it.
    """
    affinity = candidate.spec.target_clusters
    return affinity is None or selectors.affinity_matches(adapt.affinity(affinity), view)


_NEVER = datetime.datetime.max.replace(tzinfo=datetime.UTC)


def ordered(policies: Iterable[policy.ClusterTaintPolicy]) -> list[policy.ClusterTaintPolicy]:
    """Oldest first, then by name (Karmada sorts by creation time)."""
    return sorted(policies, key=lambda p: (p.metadata.creation_timestamp or _NEVER,
                                           p.metadata.name))


def apply_policy(candidate: policy.ClusterTaintPolicy, conditions: Sequence[meta.Condition],
                 work: _Taints, now: datetime.datetime) -> None:
    """Add the policy's taints if its add conditions match, then remove them if the others do."""
    rule = f"ClusterTaintPolicy {candidate.metadata.name}"
    spec = candidate.spec
    if conditions_match(conditions, spec.add_on_conditions):
        for taint in spec.taints:
            work.add(cluster.Taint(key=taint.key, effect=cluster.TaintEffect(taint.effect.value),
                                   value=taint.value, time_added=whole_seconds(now)), rule)
    if conditions_match(conditions, spec.remove_on_conditions):
        for taint in spec.taints:
            work.remove(taint.key, taint.effect.value, rule)


def plan(obj: cluster.Cluster, policies: Iterable[policy.ClusterTaintPolicy],
         now: datetime.datetime, timeout: float) -> Plan:
    """The Cluster's taints after the built-in rules and every policy targeting it."""
    current = obj.spec.taints
    conditions = obj.status.conditions
    work = _Taints(current)
    wait = built_in(meta.find_condition(conditions, groups.CONDITION_READY), work, now, timeout)
    seen = view(obj)
    for candidate in ordered(policies):
        if targets(candidate, seen):
            apply_policy(candidate, conditions, work, now)
    wanted = {identity(t): t for t in work.items}
    had = {identity(t): t for t in current}
    # Taints that stay keep their place and fields (a filled-in timeAdded aside); new ones follow.
    kept = [t if t.time_added is not None else wanted[identity(t)]
            for t in current if identity(t) in wanted]
    new = [t for t in work.items if identity(t) not in had]
    taints = (*kept, *new)
    return Plan(
        taints=taints,
        added=tuple(Change(t, work.rules.get(identity(t), "")) for t in new),
        removed=tuple(Change(t, work.rules.get(identity(t), "")) for t in current
                      if identity(t) not in wanted),
        changed=[t.to_dict() for t in taints] != [t.to_dict() for t in current],
        requeue_after=wait,
    )
