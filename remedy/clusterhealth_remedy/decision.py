"""The Remedy rules as pure functions: which Remedies act on a cluster, and why.

The remedy controller is mostly plumbing (caches, queues, status writes); the
part users reason about is the rule that turns a Cluster's conditions and the
set of Remedies into ``status.remedyActions``.  Keeping that rule here, with
no I/O and no clock reads (time is passed in), lets it be tested as tables and
lets every writer of provenance (``Cluster.status.remedyActionSources``,
``Remedy.status.activeClusters``, Events) derive from one :class:`Decision`
instead of re-implementing the matching.

The rules are Karmada's remedy controller's, including where absent and
empty differ: a ``clusterAffinity`` without names selects no cluster, and
``decisionMatches: []`` never matches.  :func:`effectiveness` says when a
Remedy can never act, so the controller can tell the user on the Remedy.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import functools
import heapq
import types
from collections.abc import Container, Iterable, Mapping
from typing import Any, assert_never

from clusterhealth_core.api import cluster, meta, remedy

Requirement = remedy.ClusterConditionRequirement
"""Alias for annotations inside :class:`Match`, whose ``remedy`` field shadows the module."""

IMMEDIATELY = "immediately"
"""How :func:`describe` names the trigger of a Remedy without decision matches."""

CONDITION_EFFECTIVE = "Effective"
"""Remedy condition: False when the spec makes the Remedy act nowhere, ever."""
REASON_CAN_ACT = "CanAct"
REASON_NO_CLUSTER_SELECTED = "NoClusterSelected"
REASON_NEVER_MATCHES = "NeverMatches"
CONDITION_CLUSTERS_RESOLVED = "ClustersResolved"
"""Remedy condition: False when ``clusterNames`` names clusters that do not exist."""
REASON_ALL_CLUSTERS_FOUND = "AllClustersFound"
REASON_UNKNOWN_CLUSTERS = "UnknownClusters"


@dataclasses.dataclass(frozen=True)
class Match:
    """One Remedy acting on one cluster, with the reason it acts."""

    remedy: str
    """The Remedy's name."""
    requirement: Requirement | None
    """The first decision match that held; None for an immediate Remedy."""
    actions: tuple[str, ...]
    """The Remedy's actions, sorted and deduplicated (never empty)."""


@dataclasses.dataclass(frozen=True)
class Decision:
    """Everything the Remedies decided for one cluster."""

    cluster: str
    matches: tuple[Match, ...]
    """The Remedies acting on the cluster, sorted by Remedy name."""

    @functools.cached_property
    def actions(self) -> tuple[str, ...]:
        """The sorted union of the matching Remedies' actions."""
        return tuple(sorted({action for match in self.matches for action in match.actions}))

    @functools.cached_property
    def sources(self) -> Mapping[str, tuple[str, ...]]:
        """Action to the sorted names of the Remedies that produced it (read-only)."""
        remedies: dict[str, set[str]] = {}
        for match in self.matches:
            for action in match.actions:
                remedies.setdefault(action, set()).add(match.remedy)
        return types.MappingProxyType(
            {action: tuple(sorted(remedies[action])) for action in sorted(remedies)})

    @functools.cached_property
    def _status(self) -> Mapping[str, Any]:
        sources = tuple(
            cluster.RemedyActionSource(action=action, remedies=names)
            for action, names in self.sources.items()
        )
        status = cluster.ClusterStatus(
            remedy_actions=self.actions, remedy_action_sources=sources
        )
        return types.MappingProxyType(status.to_dict())


def covers(r: remedy.Remedy, cluster_name: str) -> bool:
    """Whether ``r``'s ``clusterAffinity`` selects the cluster.

    An absent affinity selects every cluster; a present one exactly the named
    clusters, so one without names (``{}`` or ``clusterNames: []``) selects
    none, as in Karmada's controller.
    """
    affinity = r.spec.cluster_affinity
    if affinity is None:
        return True
    return cluster_name in affinity.cluster_names


def covers_all(r: remedy.Remedy) -> bool:
    """Whether ``r`` selects every cluster, including clusters created later."""
    return r.spec.cluster_affinity is None


def effectiveness(r: remedy.Remedy) -> tuple[bool, str, str]:
    """``(effective, reason, message)`` for the Remedy's ``Effective`` condition.

    Not effective when its spec rules out ever acting: an affinity that names
    no cluster (:data:`REASON_NO_CLUSTER_SELECTED`) or an empty
    ``decisionMatches`` list (:data:`REASON_NEVER_MATCHES`); both are valid
    Karmada manifests that mean "never", easily mistaken for "always".  The
    first reason wins; the message names both.
    """
    problems: list[tuple[str, str]] = []
    affinity = r.spec.cluster_affinity
    if affinity is not None and not affinity.cluster_names:
        problems.append((REASON_NO_CLUSTER_SELECTED,
                         "clusterAffinity is present but names no cluster, so the Remedy "
                         "applies to no cluster (remove clusterAffinity to select every "
                         "cluster)"))
    if r.spec.decision_matches is not None and not r.spec.decision_matches:
        problems.append((REASON_NEVER_MATCHES,
                         "decisionMatches is an empty list, which never matches (remove it "
                         "to act immediately, or add a clusterConditionMatch)"))
    if problems:
        return False, problems[0][0], "; ".join(message for _, message in problems)
    where = ("every cluster" if affinity is None
             else f"{len(affinity.cluster_names)} named cluster(s)")
    when = ("immediately" if r.spec.decision_matches is None
            else "when one of its decision matches holds")
    return True, REASON_CAN_ACT, f"the Remedy applies to {where} and acts {when}"


def requirement_holds(
    req: remedy.ClusterConditionRequirement, conditions: Mapping[str, str]
) -> bool:
    """Whether one condition requirement holds for a cluster's conditions.

    ``conditions`` maps condition type to status (``"True"``, ``"False"``,
    ``"Unknown"``).  A condition type the cluster lacks satisfies neither
    ``Equal`` nor ``NotEqual`` (as in Karmada): an absent condition is not
    evidence of anything.  Statuses compare case-sensitively.
    """
    status = conditions.get(req.condition_type)
    if status is None:
        return False
    if req.operator is remedy.ClusterConditionOperator.EQUAL:
        return status == req.condition_status
    if req.operator is remedy.ClusterConditionOperator.NOT_EQUAL:
        return status != req.condition_status
    assert_never(req.operator)


def first_match(
    r: remedy.Remedy, conditions: Mapping[str, str]
) -> tuple[bool, remedy.ClusterConditionRequirement | None]:
    """Whether ``r``'s decision matches hold, and the first one that does.

    Returns ``(True, None)`` for a Remedy without decision matches (absent:
    it acts immediately), ``(True, requirement)`` when any match holds (the
    first in spec order), ``(False, None)`` otherwise, in particular for an
    empty list (Karmada: never).  A decision match without a
    ``clusterConditionMatch`` never holds (the API server rejects it anyway).
    Affinity is not considered here: see :func:`covers`.
    """
    if r.spec.decision_matches is None:
        return True, None
    for decision_match in r.spec.decision_matches:
        req = decision_match.cluster_condition_match
        if req is not None and requirement_holds(req, conditions):
            return True, req
    return False, None


def decide(
    cluster_name: str, conditions: Mapping[str, str], remedies: Iterable[remedy.Remedy]
) -> Decision:
    """Which Remedies act on the cluster, why, and with which actions.

    A Remedy acts when its affinity covers the cluster, one of its decision
    matches holds (or it has none) and it has at least one action: a Remedy
    without actions performs nothing, so it is not listed as acting.
    """
    matches: list[Match] = []
    for r in remedies:
        if not covers(r, cluster_name):
            continue
        holds, requirement = first_match(r, conditions)
        actions = tuple(sorted({action.value for action in r.spec.actions}))
        if holds and actions:
            matches.append(Match(r.metadata.name, requirement, actions))
    matches.sort(key=lambda match: match.remedy)
    return Decision(cluster_name, tuple(matches))


def conditions_of(c: cluster.Cluster) -> dict[str, str]:
    """A Cluster's conditions as ``type -> status``, the input of :func:`decide`."""
    return {condition.type: condition.status.value for condition in c.status.conditions}


def affected_clusters(
    old: remedy.Remedy | None, new: remedy.Remedy | None, all_clusters: Iterable[str]
) -> frozenset[str]:
    """The clusters to re-evaluate after a Remedy was created, updated or deleted.

    ``old`` is None for a creation, ``new`` is None for a deletion.  An update
    re-evaluates the union of the old and the new affinity, so clusters that
    left the affinity lose the Remedy's actions; when either side has no
    affinity (every cluster), the answer is ``all_clusters`` (an update to an
    empty affinity once crashed Karmada's controller).  Named clusters are returned even when
    they are not in ``all_clusters``: re-evaluating a missing cluster is a no-op.
    """
    sides = [r for r in (old, new) if r is not None]
    if any(covers_all(r) for r in sides):
        return frozenset(all_clusters)
    names: set[str] = set()
    for r in sides:
        affinity = r.spec.cluster_affinity
        if affinity is not None:
            names.update(affinity.cluster_names)
    return frozenset(names)


def status_patch(decision: Decision) -> dict[str, Any]:
    """The Cluster status fields the remedy controller owns, in wire shape.

    ``{"remedyActions": [...], "remedyActionSources": [{"action", "remedies"}]}``,
    or ``{}`` when no action applies: the fields are absent when empty, and
    applying ``{}`` with server-side apply removes the ones this field manager
    set before.
    """
    return dict(decision._status)  # computed once per decision (a mass change compares twice)


class StatusChange(enum.Enum):
    """What writing a Cluster's computed remedy status over its live one changes."""

    NONE = "none"
    """The same: no write."""
    ACTIONS = "actions"
    """``remedyActions`` differ: the write acts, it is never held back."""
    PROVENANCE = "provenance"
    """Only ``remedyActionSources`` differ: the write records why, and may wait."""


def status_change(live: Mapping[str, Any], desired: Mapping[str, Any]) -> StatusChange:
    """Whether a write of ``desired`` over ``live`` changes the actions or only provenance.

    Both are the owned fields in wire shape (:func:`status_patch`).  An action
    list in another order is an actions change (it is rewritten sorted):
    only a write that leaves ``remedyActions`` exactly as they are is
    provenance-only.  Karmada's controller writes no provenance, so it sends
    no such write (decision 0009).
    """
    if live == desired:
        return StatusChange.NONE
    if list(live.get("remedyActions") or ()) != list(desired.get("remedyActions") or ()):
        return StatusChange.ACTIONS
    return StatusChange.PROVENANCE


def action_changes(
    before: Mapping[str, tuple[str, ...]], after: Mapping[str, tuple[str, ...]]
) -> tuple[list[tuple[str, tuple[str, ...]]], list[tuple[str, tuple[str, ...]]]]:
    """The actions added and removed between two :attr:`Decision.sources`.

    Returns ``(added, removed)``, each a list of ``(action, remedies)`` sorted
    by action: an added action with the Remedies that now produce it, a
    removed one with the Remedies that produced it before (for Events).
    An action that stays, even with other Remedies behind it, is in neither.
    """
    added = [(action, tuple(after[action])) for action in sorted(after) if action not in before]
    removed = [
        (action, tuple(before[action])) for action in sorted(before) if action not in after
    ]
    return added, removed


def describe(req: remedy.ClusterConditionRequirement | None) -> str:
    """A requirement for humans: ``"ServiceDomainNameResolutionReady Equal False"``.

    None (an immediate Remedy) reads ``"immediately"``.
    """
    if req is None:
        return IMMEDIATELY
    return f"{req.condition_type} {req.operator.value} {req.condition_status}"


def active_since(r: remedy.Remedy) -> dict[str, datetime.datetime]:
    """Cluster to ``since`` from ``r.status.activeClusters``, for :func:`active_clusters`."""
    return {active.cluster: active.since for active in r.status.active_clusters}


def acting(remedy_name: str, decisions: Iterable[Decision]) -> dict[str, Match]:
    """The clusters ``remedy_name`` acts on among ``decisions``, with the match (a scan).

    The controller keeps this per Remedy as decisions change
    (:class:`clusterhealth_remedy.index.ActiveIndex`); this is the same answer
    from a list of decisions.
    """
    found: dict[str, Match] = {}
    for decision in decisions:
        for match in decision.matches:
            if match.remedy == remedy_name:
                found[decision.cluster] = match
                break
    return found


def active_clusters(
    acting_on: Mapping[str, Match],
    previous: Mapping[str, datetime.datetime],
    now: datetime.datetime,
    limit: int | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """``Remedy.status.activeClusters`` in wire shape, sorted by cluster, and their total.

    One entry per cluster of ``acting_on`` (cluster name to the match that
    made the Remedy act, see :func:`acting`): ``{"cluster",
    "matchedCondition"?, "since"}``; ``matchedCondition`` is absent for an
    immediate Remedy.  ``since`` is kept from ``previous`` (cluster to since,
    see :func:`active_since`) when the cluster was already active, otherwise
    it is ``now`` (which must be timezone-aware).  With ``limit``, only the
    first ``limit`` clusters by name are listed (the API bounds the list);
    the total counts them all.
    """
    names = (sorted(acting_on) if limit is None
             else heapq.nsmallest(limit, acting_on))
    entries = [
        remedy.ActiveCluster(
            cluster=name,
            matched_condition=acting_on[name].requirement,
            since=previous.get(name, now),
        ).to_dict()
        for name in names
    ]
    return entries, len(acting_on)


def clusters_resolved(r: remedy.Remedy, known: Container[str]) -> tuple[bool, str, str]:
    """``(resolved, reason, message)`` for the Remedy's ``ClustersResolved`` condition.

    The message names the unknown clusters within
    :data:`~clusterhealth_core.api.meta.MESSAGE_BUDGET` characters and counts
    the rest: a Remedy naming 3,000 clusters must not produce a message the
    API server rejects (and with it the whole status).
    """
    unknown = unknown_clusters(r, known)
    if unknown:
        return False, REASON_UNKNOWN_CLUSTERS, f"no Cluster named {meta.join_limited(unknown)}"
    return True, REASON_ALL_CLUSTERS_FOUND, "every cluster in clusterAffinity exists"


def unknown_clusters(r: remedy.Remedy, known: Container[str]) -> list[str]:
    """The clusters ``r`` names that do not exist, sorted.

    They are reported as a condition on the Remedy rather than silently
    ignored: a typo in ``clusterNames`` would otherwise leave a cluster
    unprotected without a trace.  A Remedy without affinity names none.
    """
    affinity = r.spec.cluster_affinity
    if affinity is None:
        return []
    return sorted(name for name in affinity.cluster_names if name not in known)

