"""Spread constraints: which scored, feasible clusters are selected, as Karmada v1.18.2 does it.

Karmada's ``pkg/scheduler/core/spreadconstraint``:

- Clusters are ranked by score (descending), then available replicas (descending), then
  name (``sortClusters``).
- Without spread constraints, or when they are ignored (static weights), every feasible
  cluster is selected in that order.
- By ``cluster``: at least ``minGroups`` feasible clusters, the best ``maxGroups`` of
  them; for divided replicas the last ranked ones are swapped for clusters with more
  available replicas until together they can take the replicas
  (``selectClustersByAvailableResource``).
- By ``region``: groups are scored (``calcGroupScore``), the best combination of
  ``minGroups``..``maxGroups`` regions with enough clusters for the cluster constraint's
  ``minGroups`` is chosen (``selectGroups``, a depth-first search over combinations), the
  best cluster of each chosen region is taken, then the best remaining clusters up to
  the cluster constraint's ``maxGroups``.

Karmada selects only by cluster and region; ``zone`` and ``provider`` here follow the
region algorithm over their own groups (a cluster in several zones counts in each, and
is selected once). With several group fields, region comes first, then zone, then
provider, and only that one groups (Karmada ignores zone and provider beside region).

Constraints are checked as Karmada's admission webhook checks them (``minGroups`` 0
means 1, a group field needs a cluster constraint, one constraint per field), and in
addition ``maxGroups`` must be set and not below ``minGroups``;
:class:`~.errors.ContradictorySpread` says which limits contradict each other.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence

from clusterhealth_controlplane.scheduler import errors

CLUSTER = "cluster"
REGION = "region"
ZONE = "zone"
PROVIDER = "provider"
FIELDS = (CLUSTER, REGION, ZONE, PROVIDER)
GROUP_FIELDS = (REGION, ZONE, PROVIDER)
"""The group fields, in the order of precedence when several are given."""

WEIGHT_UNIT = 1000
"""Karmada's ``weightUnit``: replicas count before scores in a group's score."""

_PLURAL = {REGION: "regions", ZONE: "zones", PROVIDER: "providers", CLUSTER: "clusters"}


@dataclasses.dataclass(frozen=True)
class SpreadConstraint:
    """``spreadConstraints[]``: ``spread_by_field`` "" means cluster, ``min_groups`` 0 means 1."""

    spread_by_field: str = CLUSTER
    min_groups: int = 0
    max_groups: int = 0

    @property
    def field(self) -> str:
        """The field, defaulted as Karmada's webhook does."""
        return self.spread_by_field or CLUSTER

    @property
    def minimum(self) -> int:
        """``min_groups``, defaulted as Karmada's webhook does."""
        return self.min_groups or 1


@dataclasses.dataclass(frozen=True)
class ScoredCluster:
    """A feasible cluster with its score and the spread fields.

    ``available`` is Karmada's ``AvailableReplicas``: what the cluster can still take
    plus what it already runs for this binding.
    """

    name: str
    score: int = 0
    available: int = 0
    region: str = ""
    zones: tuple[str, ...] = ()
    provider: str = ""

    def groups(self, field: str) -> tuple[str, ...]:
        """The cluster's groups by ``field`` (empty when it lacks the field)."""
        if field == REGION:
            return (self.region,) if self.region else ()
        if field == ZONE:
            return self.zones
        if field == PROVIDER:
            return (self.provider,) if self.provider else ()
        return (self.name,)


def rank(clusters: Iterable[ScoredCluster]) -> list[ScoredCluster]:
    """Best first: score, then available replicas, then name (Karmada's ``sortClusters``)."""
    return sorted(clusters, key=lambda c: (-c.score, -c.available, c.name))


def validate(constraints: Sequence[SpreadConstraint]) -> dict[str, SpreadConstraint]:
    """The constraints by field; raises :class:`~.errors.ContradictorySpread`."""
    by_field: dict[str, SpreadConstraint] = {}
    for constraint in constraints:
        field = constraint.field
        if field not in FIELDS:
            raise errors.ContradictorySpread(
                f"unknown spreadByField {field!r}; known fields: {', '.join(FIELDS)}"
            )
        if field in by_field:
            raise errors.ContradictorySpread(f"more than one spread constraint by {field}")
        if constraint.min_groups < 0 or constraint.max_groups < 0:
            raise errors.ContradictorySpread(
                f"spread by {field}: minGroups ({constraint.min_groups}) and maxGroups "
                f"({constraint.max_groups}) must not be negative"
            )
        if constraint.max_groups < constraint.minimum:
            unset = " (unset)" if constraint.max_groups == 0 else ""
            raise errors.ContradictorySpread(
                f"spread by {field}: minGroups {constraint.minimum} is greater than "
                f"maxGroups {constraint.max_groups}{unset}: no number of {_PLURAL[field]} "
                "satisfies both"
            )
        by_field[field] = constraint
    groups = [field for field in GROUP_FIELDS if field in by_field]
    if groups and CLUSTER not in by_field:
        raise errors.ContradictorySpread(
            f"spread by {groups[0]} needs a spread constraint by cluster too "
            "(how many clusters to select)"
        )
    if groups and by_field[groups[0]].minimum > by_field[CLUSTER].max_groups:
        group = by_field[groups[0]]
        raise errors.ContradictorySpread(
            f"spread by {groups[0]}: minGroups {group.minimum} needs at least "
            f"{group.minimum} clusters but the cluster constraint's maxGroups is "
            f"{by_field[CLUSTER].max_groups}"
        )
    return by_field


def _group_score_duplicated(clusters: Sequence[ScoredCluster], replicas: int) -> int:
    """``calcGroupScoreForDuplicate``: clusters that can run all replicas, then mean score."""
    valid = [cluster for cluster in clusters if cluster.available >= replicas]
    if not valid:
        return 0
    return len(valid) * WEIGHT_UNIT + sum(c.score for c in valid) // len(valid)


def _group_score_divided(
    clusters: Sequence[ScoredCluster], replicas: int, min_groups: int, cluster_min: int
) -> int:
    """``calcGroupScore``: can the group take its share (replicas / minGroups), then score."""
    target = math.ceil(replicas / min_groups)
    needed_clusters = max(cluster_min, min_groups)
    total = score = count = 0
    for cluster in clusters:
        total += cluster.available
        score += cluster.score
        count += 1
        if count >= needed_clusters and total >= target:
            break
    if total < target:
        return total * WEIGHT_UNIT + score // len(clusters)
    return target * WEIGHT_UNIT + score // count


@dataclasses.dataclass(frozen=True)
class Group:
    """A group of clusters (a region, zone or provider) as :func:`select_groups` weighs it."""

    name: str
    value: int
    """How many feasible clusters the group has."""
    weight: int
    """The group's score (``calcGroupScore``)."""


@dataclasses.dataclass
class _Path:
    id: int
    groups: list[Group]
    weight: int
    value: int

    def has_prefix(self, shorter: _Path) -> bool:
        if len(shorter.groups) >= len(self.groups):
            return False
        return all(
            mine.name == theirs.name
            for mine, theirs in zip(self.groups, shorter.groups, strict=False)
        )


def select_groups(
    groups: Sequence[Group], minimum: int, maximum: int, target: int
) -> list[Group]:
    """Karmada's ``selectGroups``: the best combination of minimum..maximum groups.

    A combination is feasible when its groups hold at least ``target`` clusters. The
    best has the highest total score, then the most clusters, then was found first; a
    feasible combination that is a prefix of the best (by score) is preferred to it.
    """
    if not groups:
        return []
    ordered = sorted(groups, key=lambda g: (g.value, -g.weight, g.name))
    paths: list[_Path] = []
    current: list[Group] = []
    counter = 0

    def search(total: int, begin: int) -> None:
        nonlocal counter
        if total >= target and minimum <= len(current) <= maximum:
            counter += 1
            chosen = sorted(current, key=lambda g: (-g.weight, g.name))
            paths.append(
                _Path(
                    counter,
                    chosen,
                    sum(g.weight for g in chosen),
                    sum(g.value for g in chosen),
                )
            )
            return
        if len(current) >= maximum:
            return
        for index in range(begin, len(ordered)):
            current.append(ordered[index])
            search(total + ordered[index].value, index + 1)
            if len(ordered) == minimum:
                break
            current.pop()

    search(0, 0)
    if not paths:
        return []
    paths.sort(key=lambda p: (-p.weight, -p.value, p.id))
    best = paths[0]
    for path in paths[1:]:
        if best.has_prefix(path):
            best = path
    return best.groups


def _select_by_cluster(
    ranked: list[ScoredCluster], constraint: SpreadConstraint, need_replicas: int | None
) -> list[ScoredCluster]:
    if len(ranked) < constraint.minimum:
        raise errors.SpreadUnsatisfiable(
            f"{len(ranked)} feasible cluster{'' if len(ranked) == 1 else 's'}, fewer than "
            "the spread constraint's "
            f"minGroups {constraint.minimum}"
        )
    count = min(len(ranked), constraint.max_groups)
    if need_replicas is None:
        return ranked[:count]
    chosen = ranked[:count]
    rest = ranked[count:]
    # Replace the lowest ranked chosen clusters by the rest's largest ones while the
    # chosen clusters cannot take the replicas (selectClustersByAvailableResource).
    index = len(chosen) - 1
    while sum(c.available for c in chosen) < need_replicas and index >= 0:
        best = -1
        most = chosen[index].available
        for position, cluster in enumerate(rest):
            if cluster.available > most:
                best, most = position, cluster.available
        if best >= 0:
            chosen[index], rest[best] = rest[best], chosen[index]
        index -= 1
    if sum(c.available for c in chosen) < need_replicas:
        raise errors.SpreadUnsatisfiable(
            f"no {count} feasible clusters together can take {need_replicas} replicas"
        )
    return chosen


def _select_by_group(
    ranked: list[ScoredCluster],
    field: str,
    by_field: dict[str, SpreadConstraint],
    replicas: int,
    duplicated: bool,
) -> list[ScoredCluster]:
    constraint = by_field[field]
    cluster_constraint = by_field[CLUSTER]
    members: dict[str, list[ScoredCluster]] = {}
    for cluster in ranked:
        for group in cluster.groups(field):
            members.setdefault(group, []).append(cluster)
    if len(members) < constraint.minimum:
        raise errors.SpreadUnsatisfiable(
            f"the feasible clusters are in {len(members)} {_PLURAL[field]}"
            f"{' (' + ', '.join(sorted(members)) + ')' if members else ''}, fewer than the "
            f"spread constraint's minGroups {constraint.minimum}"
        )
    groups = []
    for name, clusters in members.items():
        if duplicated:
            weight = _group_score_duplicated(clusters, replicas)
        else:
            weight = _group_score_divided(
                clusters, replicas, constraint.minimum, cluster_constraint.minimum
            )
        groups.append(Group(name, len(clusters), weight))
    chosen = select_groups(
        groups, constraint.minimum, constraint.max_groups, cluster_constraint.minimum
    )
    if not chosen:
        raise errors.SpreadUnsatisfiable(
            f"no {constraint.minimum} to {constraint.max_groups} {_PLURAL[field]} hold the "
            f"{cluster_constraint.minimum} clusters the cluster constraint's minGroups asks for"
        )
    selected: list[ScoredCluster] = []
    rest: list[ScoredCluster] = []
    for chosen_group in chosen:
        head, *tail = members[chosen_group.name]
        if head not in selected:
            selected.append(head)
        rest.extend(tail)
    unique_rest: list[ScoredCluster] = []
    for cluster in rest:
        if cluster not in selected and cluster not in unique_rest:
            unique_rest.append(cluster)
    wanted = min(len(selected) + len(unique_rest), cluster_constraint.max_groups)
    if wanted > len(selected):
        selected.extend(rank(unique_rest)[: wanted - len(selected)])
    return selected


def select(
    clusters: Iterable[ScoredCluster],
    constraints: Sequence[SpreadConstraint],
    *,
    replicas: int,
    duplicated: bool,
    ignore: bool = False,
) -> list[ScoredCluster]:
    """The selected clusters, best ranked first (Karmada's ``SelectBestClusters``).

    ``duplicated`` is true for Duplicated placements (and placements without replica
    scheduling): then the clusters' capacity plays no part in selecting by cluster.
    ``ignore`` is true for static weights, which Karmada lets override the spread
    constraints (they are still checked for contradictions).

    Raises :class:`~.errors.ContradictorySpread` or :class:`~.errors.SpreadUnsatisfiable`.
    """
    by_field = validate(constraints)
    ranked = rank(clusters)
    if not by_field or ignore:
        return ranked
    for field in GROUP_FIELDS:
        if field in by_field:
            return _select_by_group(ranked, field, by_field, replicas, duplicated)
    return _select_by_cluster(ranked, by_field[CLUSTER], None if duplicated else replicas)
