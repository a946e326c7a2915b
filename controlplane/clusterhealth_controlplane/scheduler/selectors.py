"""Does a cluster match a cluster affinity? Shared by the ClusterAffinity filter and static weights.

Karmada's ``util.ClusterMatches`` (``pkg/util/selector.go``): an excluded name never
matches; otherwise the label selector, the field selector and the names must all match
(an empty part matches every cluster). The field selector's ``provider`` and ``region``
requirements follow node-selector semantics over those two fields; ``zone``
requirements are matched against the cluster's zones (``In``: any zone listed,
``NotIn``: none listed, ``Exists``/``DoesNotExist``: zones or none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from clusterhealth_controlplane.scheduler import framework


def requirement_matches(requirement: framework.Requirement, labels: Mapping[str, str]) -> bool:
    """A label (or node-selector) requirement against a label set.

    A requirement Kubernetes rejects (unknown operator, In/NotIn without values,
    Exists/DoesNotExist with values) matches nothing, as Karmada treats a selector it
    cannot parse.
    """
    if requirement.operator in ("In", "NotIn") and not requirement.values:
        return False
    if requirement.operator in ("Exists", "DoesNotExist") and requirement.values:
        return False
    present = requirement.key in labels
    value = labels.get(requirement.key, "")
    operator = requirement.operator
    if operator == "In":
        return present and value in requirement.values
    if operator == "NotIn":
        return not present or value not in requirement.values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(requirement.values) == 1:
        try:
            have, limit = int(value), int(requirement.values[0])
        except ValueError:
            return False
        return have > limit if operator == "Gt" else have < limit
    return False


def label_selector_matches(
    selector: framework.LabelSelector, labels: Mapping[str, str]
) -> bool:
    """``matchLabels`` and every ``matchExpressions`` entry match."""
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    return all(requirement_matches(r, labels) for r in selector.match_expressions)


def _zones_match(requirement: framework.Requirement, zones: Sequence[str]) -> bool:
    operator = requirement.operator
    if operator == "In":
        return any(zone in requirement.values for zone in zones)
    if operator == "NotIn":
        return not any(zone in requirement.values for zone in zones)
    if operator == "Exists":
        return bool(zones)
    if operator == "DoesNotExist":
        return not zones
    return False


def field_selector_matches(
    requirements: Sequence[framework.Requirement], cluster: framework.ClusterView
) -> bool:
    """Requirements on ``provider``, ``region`` (node-selector semantics) and ``zone``."""
    fields: dict[str, str] = {}
    if cluster.provider:
        fields["provider"] = cluster.provider
    if cluster.region:
        fields["region"] = cluster.region
    for requirement in requirements:
        if requirement.key == "zone":
            if not _zones_match(requirement, cluster.zones):
                return False
        elif not requirement_matches(requirement, fields):
            return False
    return True


def affinity_matches(
    affinity: framework.ClusterAffinity, cluster: framework.ClusterView
) -> bool:
    """Karmada's ``ClusterMatches``."""
    if cluster.name in affinity.exclude:
        return False
    if affinity.label_selector is not None and not label_selector_matches(
        affinity.label_selector, cluster.labels
    ):
        return False
    if not field_selector_matches(affinity.field_selector, cluster):
        return False
    return not affinity.cluster_names or cluster.name in affinity.cluster_names


def untolerated_taint(
    taints: Sequence[framework.Taint],
    tolerations: Sequence[framework.Toleration],
    effects: Sequence[str] = (framework.NO_SCHEDULE, framework.NO_EXECUTE),
) -> framework.Taint | None:
    """The first taint with one of ``effects`` that no toleration tolerates, if any.

    Kubernetes' ``FindMatchingUntoleratedTaint``, as Karmada's TaintToleration calls it.
    """
    for taint in taints:
        if taint.effect not in effects:
            continue
        if not any(toleration.tolerates(taint) for toleration in tolerations):
            return taint
    return None
