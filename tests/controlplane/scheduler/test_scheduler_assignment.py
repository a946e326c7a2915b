"""Replica assignment as tables: Webster static weights, dynamic weights, Aggregated, scaling.

Cases marked "Karmada:" are the cases of Karmada v1.18.2's own tests
(pkg/scheduler/core/assignment_test.go, pkg/util/helper/webstermethod_test.go) with
their expected results.
"""

from __future__ import annotations

import random

import pytest

from clusterhealth_controlplane.scheduler import assignment, errors

Strategy = assignment.Strategy
T = assignment.TargetCluster
C = assignment.Candidate


def as_dict(targets: tuple[assignment.TargetCluster, ...]) -> dict[str, int]:
    return {target.name: target.replicas for target in targets}


# --- Webster ---------------------------------------------------------------------

CLASSIC = {"A": 100000, "B": 80000, "C": 30000, "D": 20000}


@pytest.mark.parametrize(
    ("seats", "expected"),
    [
        # Karmada: "classic example, round 1..8"
        (1, {"A": 1, "B": 0, "C": 0, "D": 0}),
        (2, {"A": 1, "B": 1, "C": 0, "D": 0}),
        (3, {"A": 2, "B": 1, "C": 0, "D": 0}),
        (4, {"A": 2, "B": 1, "C": 1, "D": 0}),
        (5, {"A": 2, "B": 2, "C": 1, "D": 0}),
        (6, {"A": 2, "B": 2, "C": 1, "D": 1}),
        (7, {"A": 3, "B": 2, "C": 1, "D": 1}),
        (8, {"A": 3, "B": 3, "C": 1, "D": 1}),
    ],
)
def test_webster_classic_rounds(seats: int, expected: dict[str, int]) -> None:
    assert assignment.webster(seats, CLASSIC) == expected


@pytest.mark.parametrize(
    ("votes", "initial", "seats", "uid", "expected"),
    [
        # Karmada: equal priority, fewer seats wins (A 3 votes 0 seats vs B 1 vote 0 seats:
        # first seat A (3 > 1); then A 3/3 = 1 ties B 1/1: B has fewer seats).
        ({"A": 3, "B": 1}, None, 2, "", {"A": 1, "B": 1}),
        # Karmada: all equal, the smaller name wins without a UID.
        ({"A": 1, "B": 1}, None, 1, "", {"A": 1, "B": 0}),
        # Karmada: a new party joins an existing allocation and takes the new seats.
        ({"A": 1, "New": 1}, {"A": 5}, 1, "", {"A": 5, "New": 1}),
        # A party only in the initial assignment keeps its seats and gets none (0 votes).
        ({"B": 1}, {"A": 2}, 2, "", {"A": 2, "B": 2}),
        ({}, None, 3, "", {}),
        ({"A": 100, "B": 200}, None, 0, "", {"A": 0, "B": 0}),
    ],
)
def test_webster_ties_and_initial(
    votes: dict[str, int],
    initial: dict[str, int] | None,
    seats: int,
    uid: str,
    expected: dict[str, int],
) -> None:
    assert assignment.webster(seats, votes, initial, uid=uid) == expected


def _uid_with_parity(odd: bool) -> str:
    for index in range(100):
        uid = f"uid-{index}"
        if assignment.names_descending_on_tie(uid) is odd:
            return uid
    raise AssertionError("no UID found")


def test_webster_tie_breaker_follows_the_uid_hash() -> None:
    # FNV-1a 32 of "" is never used: an empty UID means names ascending.
    assert not assignment.names_descending_on_tie("")
    ascending, descending = _uid_with_parity(False), _uid_with_parity(True)
    votes = {"member1": 1, "member2": 1, "member3": 1}
    assert assignment.webster(1, votes, uid=ascending)["member1"] == 1
    assert assignment.webster(1, votes, uid=descending)["member3"] == 1


def test_fnv32a_matches_the_reference_values() -> None:
    # Reference values of FNV-1a 32 (the "a" and "foobar" test vectors).
    assert assignment._fnv32a("") == 0x811C9DC5
    assert assignment._fnv32a("a") == 0xE40C292C
    assert assignment._fnv32a("foobar") == 0xBF9CF968


# --- Static weights ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replicas", "candidates", "weights", "expected"),
    [
        # The and the reference's example.
        (8, ["A", "B", "C", "D"], CLASSIC, {"A": 3, "B": 3, "C": 1, "D": 1}),
        # Seed 000: Divided 1:2 with 3 replicas.
        (3, ["member1", "member2"], {"member1": 1, "member2": 2}, {"member1": 1, "member2": 2}),
        # Seed 001: member1 gone, member2 takes all three.
        (3, ["member2"], {"member1": 1, "member2": 2}, {"member2": 3}),
        # Karmada: replica 12/13/14, weight 3:2:1.
        (12, ["m1", "m2", "m3"], {"m1": 3, "m2": 2, "m3": 1}, {"m1": 6, "m2": 4, "m3": 2}),
        (13, ["m1", "m2", "m3"], {"m1": 3, "m2": 2, "m3": 1}, {"m1": 7, "m2": 4, "m3": 2}),
        (14, ["m1", "m2", "m3"], {"m1": 3, "m2": 2, "m3": 1}, {"m1": 7, "m2": 5, "m3": 2}),
        # Karmada: default weight (no weight preference) divides equally.
        (12, ["m1", "m2", "m3"], None, {"m1": 4, "m2": 4, "m3": 4}),
        # Karmada: 0 replicas leave every cluster out of the result.
        (0, ["m1", "m2"], {"m1": 1, "m2": 1}, {}),
        # Karmada: a selected cluster without weight is ignored.
        (2, ["m1", "m2"], {"m1": 1}, {"m1": 2}),
        # Weights naming no candidate: all candidates weigh the same (Karmada's fallback).
        (4, ["m1", "m2"], {"elsewhere": 5}, {"m1": 2, "m2": 2}),
        # A cluster given weight 0 among positive weights gets nothing.
        (4, ["m1", "m2"], {"m1": 0, "m2": 3}, {"m2": 4}),
    ],
)
def test_static_weight(
    replicas: int,
    candidates: list[str],
    weights: dict[str, int] | None,
    expected: dict[str, int],
) -> None:
    assert as_dict(assignment.static_weight(replicas, candidates, weights)) == expected


@pytest.mark.parametrize(
    ("replicas", "weights", "error", "message"),
    [
        (3, {"m1": 0, "m2": 0}, errors.InvalidWeights, "static weights sum to zero"),
        (3, {"m1": -1, "m2": 2}, errors.InvalidWeights, "must not be negative: m1=-1"),
        (-1, {"m1": 1}, errors.InvalidReplicas, "replicas must not be negative, got -1"),
    ],
)
def test_static_weight_errors(
    replicas: int, weights: dict[str, int], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as raised:
        assignment.static_weight(replicas, ["m1", "m2"], weights)
    assert isinstance(raised.value, errors.InvalidPlacement)
    assert raised.value.reason == errors.UNSCHEDULABLE


@pytest.mark.parametrize(
    "weights",
    [CLASSIC, {"A": 1, "B": 1, "C": 1, "D": 1}, {"A": 7, "B": 3, "C": 3, "D": 1}, {"A": 1, "B": 2}],
)
def test_static_weight_changes_one_cluster_by_one_per_replica(weights: dict[str, int]) -> None:
    names = sorted(weights)
    previous = as_dict(assignment.static_weight(0, names, weights))
    for replicas in range(1, 40):
        current = as_dict(assignment.static_weight(replicas, names, weights))
        changes = {
            name: current.get(name, 0) - previous.get(name, 0)
            for name in names
            if current.get(name, 0) != previous.get(name, 0)
        }
        assert list(changes.values()) == [1], (replicas, previous, current)
        previous = current


def test_static_weight_random_vectors_sum_and_stay_non_negative() -> None:
    rng = random.Random(20260301)
    for _ in range(500):
        count = rng.randint(1, 8)
        names = [f"member{i}" for i in range(count)]
        choices = [0, 1, 2, 3, 10, 100, rng.randint(1, 100000)]
        weights = {name: rng.choice(choices) for name in names}
        if not any(weights.values()):
            weights[names[0]] = 1
        replicas = rng.randint(0, 200)
        uid = rng.choice(["", f"uid-{rng.randint(0, 10**6)}"])
        result = as_dict(assignment.static_weight(replicas, names, weights, uid=uid))
        assert sum(result.values()) == replicas
        assert all(value > 0 for value in result.values())
        assert all(weights[name] > 0 for name in result)


# --- Dynamic weights and Aggregated ----------------------------------------------------

M = ("member1", "member2", "member3", "member4")


def cands(*allocatable: int, names: tuple[str, ...] = M) -> list[assignment.Candidate]:
    return [C(name, count) for name, count in zip(names, allocatable, strict=False)]


@pytest.mark.parametrize(
    ("name", "strategy", "replicas", "candidates", "previous", "expected"),
    [
        ("issue: 12 over available 6/12/18", Strategy.DYNAMIC_WEIGHT, 12, cands(6, 12, 18), [],
         {"member1": 2, "member2": 4, "member3": 6}),
        # Karmada: Test_dynamicScaleUp
        ("Karmada: replica 12, dynamic weight 6:8:10", Strategy.DYNAMIC_WEIGHT, 12,
         cands(6, 8, 10), [], {"member1": 3, "member2": 4, "member3": 5}),
        ("Karmada: replica 12, dynamic weight 8:8:10", Strategy.DYNAMIC_WEIGHT, 12,
         cands(8, 8, 10), [], {"member1": 4, "member2": 4, "member3": 4}),
        ("Karmada: replica 12, aggregated 6:8:10", Strategy.AGGREGATED, 12, cands(6, 8, 10), [],
         {"member2": 5, "member3": 7}),
        ("Karmada: replica 12, aggregated 12:8:10", Strategy.AGGREGATED, 12, cands(12, 8, 10),
         [], {"member1": 12}),
        ("Karmada: dynamic 3:3, cluster3 disappeared and cluster2 appeared",
         Strategy.DYNAMIC_WEIGHT, 12, cands(3, 3),
         [T("member1", 6), T("member3", 6)], {"member1": 9, "member2": 3}),
        # Karmada: Test_dynamicScale
        ("Karmada: replica 12 -> 6, dynamic weighted 1:1:1", Strategy.DYNAMIC_WEIGHT, 6,
         cands(1, 1, 1), [T("member1", 2), T("member2", 4), T("member3", 6)],
         {"member1": 1, "member2": 2, "member3": 3}),
        ("Karmada: replica 12 -> 24, dynamic weighted 10:10:10", Strategy.DYNAMIC_WEIGHT, 24,
         cands(10, 10, 10), [T("member1", 2), T("member2", 4), T("member3", 6)],
         {"member1": 6, "member2": 8, "member3": 10}),
        ("Karmada: replica 12 -> 6, aggregated 1:1:1", Strategy.AGGREGATED, 6, cands(1, 1, 1),
         [T("member1", 4), T("member2", 8)], {"member2": 6}),
        ("Karmada: replica 12 -> 8, aggregated 100:100", Strategy.AGGREGATED, 8,
         cands(100, 100), [T("member1", 4), T("member2", 8)], {"member2": 8}),
        ("Karmada: replica 12 -> 24, aggregated 4:6:8", Strategy.AGGREGATED, 24, cands(4, 6, 8),
         [T("member1", 4), T("member2", 8)], {"member1": 7, "member2": 12, "member3": 5}),
        ("Karmada: replica 12 -> 24, aggregated 6:6:20", Strategy.AGGREGATED, 24,
         cands(6, 6, 20), [T("member1", 4), T("member2", 8)], {"member1": 10, "member2": 14}),
        ("Karmada: aggregated 4:8:12, cluster2 disappeared and cluster4 appeared",
         Strategy.AGGREGATED, 24,
         cands(4, 8, 12, names=("member1", "member3", "member4")),
         [T("member1", 4), T("member2", 8)], {"member1": 7, "member3": 7, "member4": 10}),
        # Unchanged replicas: the previous result stands (restricted to the candidates).
        ("steady", Strategy.DYNAMIC_WEIGHT, 6, cands(0, 0, 0),
         [T("member1", 2), T("member2", 4)], {"member1": 2, "member2": 4}),
        # Aggregated prefers the clusters it already runs on, even when others are larger.
        ("aggregated keeps its cluster", Strategy.AGGREGATED, 6, cands(2, 50),
         [T("member1", 4)], {"member1": 6}),
    ],
)
def test_dynamic(
    name: str,
    strategy: assignment.Strategy,
    replicas: int,
    candidates: list[assignment.Candidate],
    previous: list[assignment.TargetCluster],
    expected: dict[str, int],
) -> None:
    assert as_dict(assignment.dynamic(strategy, replicas, candidates, previous)) == expected


@pytest.mark.parametrize(
    ("strategy", "replicas", "candidates", "previous", "available", "needed"),
    [
        # Karmada: replica 12 -> 24, dynamic weighted 1:1:1 (12 new, room for 3).
        (Strategy.DYNAMIC_WEIGHT, 24, cands(1, 1, 1),
         [T("member1", 2), T("member2", 4), T("member3", 6)], 3, 12),
        # Karmada: replica 12, dynamic weight 3:3:3 / aggregated 3:3:3.
        (Strategy.DYNAMIC_WEIGHT, 12, cands(3, 3, 3), [], 9, 12),
        (Strategy.AGGREGATED, 12, cands(3, 3, 3), [], 9, 12),
        # Karmada: replica 12 -> 24, aggregated 1:1:1.
        (Strategy.AGGREGATED, 24, cands(1, 1, 1), [T("member1", 4), T("member2", 8)], 3, 12),
    ],
)
def test_dynamic_not_enough_replicas(
    strategy: assignment.Strategy,
    replicas: int,
    candidates: list[assignment.Candidate],
    previous: list[assignment.TargetCluster],
    available: int,
    needed: int,
) -> None:
    with pytest.raises(errors.NotEnoughReplicas) as raised:
        assignment.dynamic(strategy, replicas, candidates, previous)
    error = raised.value
    assert (error.available, error.needed, error.missing) == (available, needed, needed - available)
    assert f"{needed - available} missing" in str(error)
    assert error.reason == errors.UNSCHEDULABLE


def test_scale_up_adds_to_the_previous_result() -> None:
    previous = [T("member1", 2), T("member2", 4), T("member3", 6)]
    # 3 new replicas over room 10/10/10: one each, the previous kept.
    result = as_dict(assignment.dynamic(Strategy.DYNAMIC_WEIGHT, 15, cands(10, 10, 10), previous))
    assert result == {"member1": 3, "member2": 5, "member3": 7}
    # One more replica changes exactly one cluster, by one.
    one_more = as_dict(
        assignment.dynamic(Strategy.DYNAMIC_WEIGHT, 13, cands(10, 10, 10), previous)
    )
    diff = [one_more[c.name] - c.replicas for c in previous if one_more[c.name] != c.replicas]
    assert diff == [1]


@pytest.mark.parametrize(
    ("previous", "replicas", "expected"),
    [
        # Proportional to the previous result: 2/4/6 -> 1/2/3, 3/6/9 -> 1/2/3 of 6.
        ({"member1": 2, "member2": 4, "member3": 6}, 6, {"member1": 1, "member2": 2, "member3": 3}),
        ({"member1": 3, "member2": 6, "member3": 9}, 6, {"member1": 1, "member2": 2, "member3": 3}),
        ({"member1": 10, "member2": 10}, 10, {"member1": 5, "member2": 5}),
        # Webster over 1:2 for 2 seats: member2 (2/1), then member1 (1/1 > 2/3).
        ({"member1": 1, "member2": 2}, 2, {"member1": 1, "member2": 1}),
    ],
)
def test_scale_down_takes_away_proportionally(
    previous: dict[str, int], replicas: int, expected: dict[str, int]
) -> None:
    targets = [T(name, count) for name, count in previous.items()]
    result = assignment.dynamic(Strategy.DYNAMIC_WEIGHT, replicas, cands(0, 0, 0), targets)
    assert as_dict(result) == expected
    assert all(result_count <= previous[name] for name, result_count in as_dict(result).items())


def test_fresh_mode_ignores_the_previous_division() -> None:
    previous = [T("member1", 9), T("member2", 3)]
    steady = assignment.dynamic(Strategy.DYNAMIC_WEIGHT, 6, cands(0, 9), previous)
    # Steady: 12 -> 6 divided by the previous 9:3. Fresh: by what each can take plus
    # what it runs, 9:12.
    fresh = assignment.dynamic(
        Strategy.DYNAMIC_WEIGHT, 6, cands(0, 9), previous, mode=assignment.Mode.FRESH
    )
    assert as_dict(steady) == {"member1": 4, "member2": 2}
    assert as_dict(fresh) == {"member1": 3, "member2": 3}


def test_dynamic_random_vectors_sum_and_stay_non_negative() -> None:
    rng = random.Random(9)
    failures: list[errors.NotEnoughReplicas] = []
    for _ in range(500):
        count = rng.randint(1, 6)
        names = tuple(f"member{i}" for i in range(count))
        room = [rng.randint(0, 50) for _ in names]
        previous = [T(n, rng.randint(0, 10)) for n in names if rng.random() < 0.5]
        replicas = rng.randint(0, 60)
        strategy = rng.choice([Strategy.DYNAMIC_WEIGHT, Strategy.AGGREGATED])
        mode = rng.choice(list(assignment.Mode))
        try:
            result = as_dict(
                assignment.dynamic(strategy, replicas, cands(*room, names=names), previous,
                                   mode=mode)
            )
        except errors.NotEnoughReplicas as error:
            failures.append(error)
            continue
        assert sum(result.values()) == replicas
        assert all(value > 0 for value in result.values())
        assert set(result) <= set(names)
    # Some draws cannot fit; each says how many replicas are missing.
    assert failures
    assert all(error.missing > 0 for error in failures)


# --- assign(): the dispatcher ----------------------------------------------------------


def test_duplicated_gives_every_cluster_all_replicas() -> None:
    result = assignment.assign(Strategy.DUPLICATED, 3, cands(0, 0, 0))
    assert as_dict(result) == {"member1": 3, "member2": 3, "member3": 3}


def test_non_workload_goes_everywhere_with_zero_replicas() -> None:
    result = assignment.assign(Strategy.STATIC_WEIGHT, 0, cands(0, 0), workload=False)
    assert result == (T("member1", 0), T("member2", 0))


def test_no_candidates_is_an_error() -> None:
    with pytest.raises(errors.NoClusters):
        assignment.assign(Strategy.DUPLICATED, 1, [])


def test_negative_replicas_is_an_error_for_every_strategy() -> None:
    for strategy in Strategy:
        with pytest.raises(errors.InvalidReplicas, match="got -2"):
            assignment.assign(strategy, -2, cands(1))
