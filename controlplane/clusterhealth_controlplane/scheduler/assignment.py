"""Replica assignment: how many replicas each selected cluster gets, as Karmada v1.18.2 does it.

The strategies (``pkg/scheduler/core/assignment.go``):

- ``Duplicated``: every selected cluster gets all replicas.
- ``StaticWeight`` (Divided, Weighted, static weight list): the replicas are divided by
  the Webster (Sainte-Laguë) method over the clusters' weights
  (``pkg/util/helper/webstermethod.go``), computed afresh each time. A divisor method
  hands out seats one at a time in a fixed order, so one replica more (or less) changes
  exactly one cluster by one.
- ``DynamicWeight`` (Divided, Weighted, ``dynamicWeight: AvailableReplicas``) and
  ``Aggregated``: relative to the previous result (``division_algorithm.go``). Scaling up
  divides only the new replicas, by the clusters' available replicas, and adds them to
  the previous result; scaling down divides the new total by the previous result (so
  replicas are taken away proportionally); Aggregated first keeps as few clusters as
  possible (previous targets first). ``Fresh`` mode ignores the previous result except
  as capacity the clusters already give this binding.

All functions are pure. Results are tuples of :class:`TargetCluster` sorted by name,
without clusters that get no replicas (Karmada's ``removeZeroReplicasCluster``), except
for non-workloads, which go to every candidate with 0 replicas.
"""

from __future__ import annotations

import dataclasses
import enum
import heapq
from collections.abc import Mapping, Sequence

from clusterhealth_controlplane.scheduler import errors


@dataclasses.dataclass(frozen=True)
class TargetCluster:
    """A cluster and the replicas it runs for the binding (``spec.clusters[]``)."""

    name: str
    replicas: int


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A selected cluster, in the order the selection ranked it (best first).

    ``allocatable`` is how many more replicas of this workload the cluster can take
    (Karmada's ``AllocatableReplicas``), not counting what it already runs for the binding.
    """

    name: str
    allocatable: int = 0


class Strategy(enum.Enum):
    """How replicas are divided (Karmada's ``strategyType``)."""

    DUPLICATED = "Duplicated"
    STATIC_WEIGHT = "StaticWeight"
    DYNAMIC_WEIGHT = "DynamicWeight"
    AGGREGATED = "Aggregated"


class Mode(enum.Enum):
    """Whether the previous result is the starting point (Karmada's ``assignmentMode``)."""

    STEADY = "Steady"
    FRESH = "Fresh"


def _fnv32a(text: str) -> int:
    value = 2166136261
    for byte in text.encode():
        value = ((value ^ byte) * 16777619) & 0xFFFFFFFF
    return value


def names_descending_on_tie(uid: str) -> bool:
    """Whether ties go to the larger name for this binding (``tieBreakerByUID``).

    Karmada hashes the binding's UID (FNV-1a, 32 bits): odd hashes prefer larger names,
    even hashes and an empty UID smaller names, so ties are stable per binding but do
    not always favour the same clusters across bindings.
    """
    return bool(uid) and _fnv32a(uid) & 1 == 1


class _Party:
    """One cluster in the Webster queue; ``a < b`` means ``a`` gets the next seat first."""

    __slots__ = ("descending", "name", "seats", "votes")

    def __init__(self, name: str, votes: int, seats: int, descending: bool) -> None:
        self.name = name
        self.votes = votes
        self.seats = seats
        self.descending = descending

    def __lt__(self, other: _Party) -> bool:
        # votes/(2*seats+1), compared exactly (Karmada compares float64 quotients).
        mine = self.votes * (2 * other.seats + 1)
        theirs = other.votes * (2 * self.seats + 1)
        if mine != theirs:
            return mine > theirs
        if self.seats != other.seats:
            return self.seats < other.seats
        return self.name > other.name if self.descending else self.name < other.name


def webster(
    seats: int,
    votes: Mapping[str, int],
    initial: Mapping[str, int] | None = None,
    *,
    uid: str = "",
) -> dict[str, int]:
    """Hand out ``seats`` one at a time to the party with the highest ``votes/(2*seats+1)``.

    Ties go to the party with fewer seats, then by name (see
    :func:`names_descending_on_tie`). Parties in ``initial`` keep their seats and take
    part with 0 votes when absent from ``votes``. Returns every party's seats.
    """
    descending = names_descending_on_tie(uid)
    parties: dict[str, _Party] = {}
    for name, held in (initial or {}).items():
        parties[name] = _Party(name, 0, held, descending)
    for name, weight in votes.items():
        if name in parties:
            parties[name].votes = weight
        else:
            parties[name] = _Party(name, weight, 0, descending)
    if not parties:
        return {}
    queue = list(parties.values())
    heapq.heapify(queue)
    for _ in range(seats):
        party = queue[0]
        party.seats += 1
        heapq.heapreplace(queue, party)
    return {name: party.seats for name, party in parties.items()}


def _result(seats: Mapping[str, int]) -> tuple[TargetCluster, ...]:
    return tuple(
        TargetCluster(name, count) for name, count in sorted(seats.items()) if count > 0
    )


def _check_replicas(replicas: int) -> None:
    if replicas < 0:
        raise errors.InvalidReplicas(f"replicas must not be negative, got {replicas}")


def duplicated(replicas: int, candidates: Sequence[str]) -> tuple[TargetCluster, ...]:
    """Every candidate gets all replicas."""
    _check_replicas(replicas)
    return _result({name: replicas for name in candidates})


def static_weight(
    replicas: int,
    candidates: Sequence[str],
    weights: Mapping[str, int] | None,
    *,
    uid: str = "",
) -> tuple[TargetCluster, ...]:
    """Divide ``replicas`` by static weights with the Webster method.

    ``weights`` maps a candidate to its weight (the largest weight of the static weight
    rules matching it); ``None`` (no weight preference) weighs all candidates equally.
    Candidates without a positive weight get nothing. When the weights name no
    candidate at all, all candidates are weighed equally (Karmada's
    ``getStaticWeightInfoList``). Negative weights, and weights that name candidates
    but sum to zero, raise :class:`~.errors.InvalidWeights`.
    """
    _check_replicas(replicas)
    if weights is None:
        weights = {}
    negative = sorted(f"{name}={weight}" for name, weight in weights.items() if weight < 0)
    if negative:
        raise errors.InvalidWeights(f"static weights must not be negative: {', '.join(negative)}")
    named = {name: weights[name] for name in candidates if name in weights}
    if named and sum(named.values()) == 0:
        raise errors.InvalidWeights(
            "static weights sum to zero over the candidate clusters "
            f"{', '.join(sorted(named))}: no cluster can be given replicas"
        )
    votes = {name: weight for name, weight in named.items() if weight > 0}
    if not votes:
        votes = dict.fromkeys(candidates, 1)
    return _result(webster(replicas, votes, uid=uid))


def _by_replicas_desc(clusters: Sequence[TargetCluster]) -> list[TargetCluster]:
    # Karmada sorts with sort.Sort (unstable); stable here, so equal counts keep rank order.
    return sorted(clusters, key=lambda target: -target.replicas)


def _divide(
    strategy: Strategy,
    target: int,
    available: list[TargetCluster],
    scheduled: Sequence[TargetCluster],
    uid: str,
    what: str,
) -> tuple[TargetCluster, ...]:
    """Karmada's ``dynamicDivideReplicas``: ``target`` replicas over ``available``."""
    total = sum(cluster.replicas for cluster in available)
    if total < target:
        raise errors.NotEnoughReplicas(total, target, what=what)
    if strategy is Strategy.AGGREGATED:
        prior = {cluster.name for cluster in scheduled if cluster.replicas > 0}
        if prior:
            available = [c for c in available if c.name in prior] + [
                c for c in available if c.name not in prior
            ]
        running = 0
        for index, cluster in enumerate(available):
            running += cluster.replicas
            if running >= target:
                available = available[: index + 1]
                break
    seats = webster(target, {cluster.name: cluster.replicas for cluster in available}, uid=uid)
    for cluster in scheduled:
        seats[cluster.name] = seats.get(cluster.name, 0) + cluster.replicas
    return _result(seats)


def dynamic(
    strategy: Strategy,
    replicas: int,
    candidates: Sequence[Candidate],
    previous: Sequence[TargetCluster] = (),
    *,
    mode: Mode = Mode.STEADY,
    uid: str = "",
) -> tuple[TargetCluster, ...]:
    """Divide by available replicas (DynamicWeight) or onto few clusters (Aggregated).

    ``candidates`` come in the selection's rank order and ``previous`` in the binding's
    ``spec.clusters`` order: Aggregated breaks ties between equal capacities by them.
    Raises :class:`~.errors.NotEnoughReplicas` when the clusters cannot take them.
    """
    if strategy not in (Strategy.DYNAMIC_WEIGHT, Strategy.AGGREGATED):
        raise ValueError(f"dynamic assignment does not do {strategy.value}")
    _check_replicas(replicas)
    names = {candidate.name for candidate in candidates}
    # Previous targets that are no longer candidates do not count: their replicas are
    # placed again like new ones (buildScheduledClusters).
    scheduled = [target for target in previous if target.name in names]
    assigned = sum(target.replicas for target in scheduled)
    if mode is Mode.FRESH:
        held = {target.name: target.replicas for target in scheduled}
        available = _by_replicas_desc(
            [TargetCluster(c.name, c.allocatable + held.get(c.name, 0)) for c in candidates]
        )
        return _divide(strategy, replicas, available, (), uid, "replicas")
    if assigned > replicas:
        # Scale down: the previous result is the weight, as if scheduling for the first time.
        return _divide(strategy, replicas, _by_replicas_desc(scheduled), (), uid, "replicas")
    if assigned < replicas:
        # Scale up (a first schedule included): only the new replicas are divided.
        available = _by_replicas_desc([TargetCluster(c.name, c.allocatable) for c in candidates])
        return _divide(
            strategy, replicas - assigned, available, scheduled, uid, "new replicas"
        )
    return _result({target.name: target.replicas for target in scheduled})


def assign(
    strategy: Strategy,
    replicas: int,
    candidates: Sequence[Candidate],
    previous: Sequence[TargetCluster] = (),
    *,
    weights: Mapping[str, int] | None = None,
    mode: Mode = Mode.STEADY,
    uid: str = "",
    workload: bool = True,
) -> tuple[TargetCluster, ...]:
    """Assign ``replicas`` to ``candidates`` by ``strategy`` (Karmada's ``AssignReplicas``).

    ``workload`` is false for resources without replicas (a ConfigMap, a Service): they
    go to every candidate with 0 replicas. ``weights`` is for ``StaticWeight`` only.
    """
    _check_replicas(replicas)
    if not candidates:
        raise errors.NoClusters("no clusters are left to assign replicas to")
    if not workload:
        return tuple(TargetCluster(name, 0) for name in sorted(c.name for c in candidates))
    if strategy is Strategy.DUPLICATED:
        return duplicated(replicas, [c.name for c in candidates])
    if strategy is Strategy.STATIC_WEIGHT:
        return static_weight(replicas, [c.name for c in candidates], weights, uid=uid)
    return dynamic(strategy, replicas, candidates, previous, mode=mode, uid=uid)
