"""Why one Remedy acts, or does not act, on one cluster: in words, from the controller's rules.

``remedy test`` prints this under a failing case and ``explain cluster`` for
every Remedy covering the cluster.  The answer is computed with the remedy
controller's own functions (:mod:`clusterhealth_remedy.decision`: ``covers``,
``first_match``, ``requirement_holds``), so the words cannot drift from what
the controller does; the actions themselves always come from
``decision.decide``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from clusterhealth_core.api import remedy
from clusterhealth_remedy import decision


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One Remedy against one cluster."""

    remedy: str
    covers: bool
    """Its ``clusterAffinity`` selects the cluster."""
    acts: bool
    """It adds its actions to the cluster's ``remedyActions``."""
    matched: str | None
    """The decision match that held (``decision.describe``), ``"immediately"``, or None."""
    actions: tuple[str, ...]
    """Its actions, sorted."""
    why: str
    """One sentence for people."""


def _affinity(r: remedy.Remedy) -> str:
    affinity = r.spec.cluster_affinity
    if affinity is None:
        return "every cluster"
    return ", ".join(affinity.cluster_names) or "no cluster"


def _failed(req: remedy.ClusterConditionRequirement, conditions: Mapping[str, str]) -> str:
    status = conditions.get(req.condition_type)
    seen = (f"the cluster has no {req.condition_type} condition" if status is None
            else f"it is {status}")
    return f"{decision.describe(req)} ({seen})"


def verdict(r: remedy.Remedy, cluster_name: str, conditions: Mapping[str, str]) -> Verdict:
    """Whether ``r`` acts on the cluster with ``conditions`` (type to status), and why."""
    name = r.metadata.name
    actions = tuple(sorted({action.value for action in r.spec.actions}))
    if not decision.covers(r, cluster_name):
        why = (f"does not cover {cluster_name}: its clusterAffinity names no cluster, so it "
               "acts nowhere" if r.spec.cluster_affinity is not None
               and not r.spec.cluster_affinity.cluster_names
               else f"does not cover {cluster_name} (clusterAffinity: {_affinity(r)})")
        return Verdict(name, False, False, None, actions, why)
    holds, requirement = decision.first_match(r, conditions)
    if not holds:
        matches = r.spec.decision_matches or ()
        if not matches:
            why = "covers it but never acts: decisionMatches is an empty list"
        else:
            failed = "; ".join(_failed(m.cluster_condition_match, conditions)
                               for m in matches if m.cluster_condition_match is not None)
            why = f"covers it, but no decision match holds: {failed}"
        return Verdict(name, True, False, None, actions, why)
    matched = decision.describe(requirement)
    trigger = ("immediately (no decisionMatches)" if requirement is None
               else f"because {matched} holds")
    if not actions:
        return Verdict(name, True, False, matched, actions,
                       f"would act {trigger}, but has no actions")
    return Verdict(name, True, True, matched, actions,
                   f"acts {trigger}: {', '.join(actions)}")
