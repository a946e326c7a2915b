"""Spread constraints as tables: group selection, min/max groups, contradictions.

Cases marked "Karmada:" come from Karmada v1.18.2's own tests and comments
(pkg/scheduler/core/spreadconstraint) with their expected results.
"""

from __future__ import annotations

import pytest

from clusterhealth_controlplane.scheduler import errors, spread

SC = spread.SpreadConstraint
G = spread.Group


def cluster(
    name: str, score: int = 0, available: int = 0, region: str = "", zones: tuple[str, ...] = (),
    provider: str = "",
) -> spread.ScoredCluster:
    return spread.ScoredCluster(name, score, available, region, zones, provider)


def names(selected: list[spread.ScoredCluster]) -> list[str]:
    return [c.name for c in selected]


@pytest.mark.parametrize(
    ("name", "groups", "minimum", "maximum", "target", "expected"),
    [
        ("Karmada: empty groups", [], 2, 3, 1, []),
        ("Karmada: no enough groups", [G("R1", 1, 80)], 2, 3, 1, []),
        ("Karmada: no enough value", [G("R1", 1, 80), G("R2", 2, 30)], 2, 3, 4, []),
        ("Karmada: select one group", [G("R1", 1, 80)], 1, 3, 1, ["R1"]),
        ("Karmada: prioritize one path",
         [G("R1", 1, 80), G("R3", 1, 80), G("R2", 1, 60), G("R5", 2, 60), G("R4", 5, 50),
          G("R6", 3, 50)], 1, 3, 10, ["R5", "R4", "R6"]),
        ("Karmada: select groups with less total number",
         [G("R1", 1, 80), G("R2", 4, 40), G("R3", 1, 30), G("R4", 3, 30), G("R5", 3, 20),
          G("R6", 5, 10)], 2, 6, 5, ["R1", "R2"]),
        ("Karmada: select groups with the highest score",
         [G("R1", 1, 60), G("R2", 1, 50), G("R3", 1, 40), G("R4", 3, 30), G("R5", 3, 20),
          G("R6", 3, 10)], 1, 3, 6, ["R1", "R4", "R5"]),
        ("Karmada: select groups that are chosen earlier",
         [G("R1", 1, 60), G("R2", 2, 50), G("R3", 3, 40), G("R4", 4, 30)], 1, 2, 5,
         ["R1", "R4"]),
        ("Karmada: select groups with greater value",
         [G("R4", 1, 60), G("R3", 3, 50), G("R1", 3, 40), G("R2", 4, 30)], 1, 2, 5,
         ["R3", "R1"]),
    ],
)
def test_select_groups(
    name: str, groups: list[spread.Group], minimum: int, maximum: int, target: int,
    expected: list[str],
) -> None:
    assert [g.name for g in spread.select_groups(groups, minimum, maximum, target)] == expected


THREE_REGIONS = [
    cluster("east-1", 100, 10, region="east"),
    cluster("east-2", 100, 5, region="east"),
    cluster("west-1", 0, 10, region="west"),
    cluster("west-2", 0, 10, region="west"),
    cluster("north-1", 100, 1, region="north"),
]


@pytest.mark.parametrize(
    ("name", "constraints", "duplicated", "replicas", "expected"),
    [
        # Duplicated: a region scores first by how many of its clusters can run every
        # replica (north cannot), then by their mean score.
        ("duplicated counts capable clusters", (SC("region", 2, 2), SC("cluster", 2, 2)), True,
         4, ["east-1", "west-1"]),
        # Divided: a region's score counts what it can take first (west takes 10+10).
        ("divided prefers capacity", (SC("region", 2, 2), SC("cluster", 2, 2)), False, 20,
         ["east-1", "west-1"]),
        # Up to 3 clusters: the best cluster of each chosen region, then the best others.
        ("then the best remaining", (SC("region", 2, 2), SC("cluster", 2, 3)), True, 4,
         ["east-1", "west-1", "east-2"]),
        ("one region", (SC("region", 1, 1), SC("cluster", 1, 5)), True, 1,
         ["east-1", "east-2"]),
        ("no constraints: all, ranked", (), True, 1,
         ["east-1", "east-2", "north-1", "west-1", "west-2"]),
        # Duplicated: the top maxGroups by score, capacity aside.
        ("by cluster, duplicated", (SC("cluster", 1, 2),), True, 100, ["east-1", "east-2"]),
        # spreadByField "" is cluster, minGroups 0 is 1 (Karmada's webhook defaults).
        ("defaults", (SC("", 0, 1),), True, 1, ["east-1"]),
    ],
)
def test_select(
    name: str, constraints: tuple[spread.SpreadConstraint, ...], duplicated: bool, replicas: int,
    expected: list[str],
) -> None:
    selected = spread.select(THREE_REGIONS, constraints, replicas=replicas, duplicated=duplicated)
    assert names(selected) == expected


@pytest.mark.parametrize("duplicated", [True, False])
def test_min_max_two_of_three_regions_picks_the_two_best_scored(duplicated: bool) -> None:
    # The example: min 2 / max 2 regions over 3 regions.
    clusters = [
        cluster("tokyo", 40, 10, region="ap"),
        cluster("paris", 90, 10, region="eu"),
        cluster("ohio", 70, 10, region="us"),
    ]
    constraints = (SC("region", 2, 2), SC("cluster", 2, 2))
    selected = spread.select(clusters, constraints, replicas=6, duplicated=duplicated)
    assert names(selected) == ["paris", "ohio"]


def test_select_by_cluster_swaps_for_capacity() -> None:
    # Karmada's comment on selectClustersByAvailableResource: 2 clusters for 80 replicas;
    # member1 and member2 score best but hold 70, so member3 replaces member2.
    clusters = [cluster("member1", 60, 40), cluster("member2", 50, 30), cluster("member3", 40, 60)]
    selected = spread.select(clusters, (SC("cluster", 1, 2),), replicas=80, duplicated=False)
    assert names(selected) == ["member1", "member3"]
    with pytest.raises(errors.SpreadUnsatisfiable, match="no 2 feasible clusters together"):
        spread.select(clusters, (SC("cluster", 1, 2),), replicas=101, duplicated=False)


def test_static_weights_ignore_spread_constraints() -> None:
    selected = spread.select(
        THREE_REGIONS, (SC("cluster", 1, 1),), replicas=1, duplicated=False, ignore=True
    )
    assert len(selected) == len(THREE_REGIONS)


@pytest.mark.parametrize(
    ("field", "clusters", "expected"),
    [
        ("zone", [cluster("a", 10, zones=("z1",)), cluster("b", 5, zones=("z2",)),
                  cluster("c", 1, zones=("z1", "z2"))], ["a", "b"]),
        # A cluster in two zones is the best of both: selected once, then the next best.
        ("zone", [cluster("a", 10, zones=("z1", "z2")), cluster("b", 5, zones=("z2",)),
                  cluster("c", 1, zones=("z1",))], ["a", "b"]),
        ("provider", [cluster("a", 10, provider="p1"), cluster("b", 50, provider="p1"),
                      cluster("c", 1, provider="p2")], ["b", "c"]),
    ],
)
def test_zone_and_provider_group_like_regions(
    field: str, clusters: list[spread.ScoredCluster], expected: list[str]
) -> None:
    selected = spread.select(
        clusters, (SC(field, 2, 2), SC("cluster", 2, 2)), replicas=1, duplicated=True
    )
    assert names(selected) == expected


@pytest.mark.parametrize(
    ("constraints", "message"),
    [
        ((SC("region", 3, 2), SC("cluster", 1, 3)),
         "spread by region: minGroups 3 is greater than maxGroups 2"),
        ((SC("cluster", 2, 0),), r"minGroups 2 is greater than maxGroups 0 \(unset\)"),
        ((SC("cluster", 1, 0),), r"minGroups 1 is greater than maxGroups 0 \(unset\)"),
        ((SC("region", 1, 2),), "spread by region needs a spread constraint by cluster too"),
        ((SC("cluster", 1, 2), SC("cluster", 1, 3)), "more than one spread constraint by cluster"),
        ((SC("cluster", -1, 2),), "must not be negative"),
        ((SC("label", 1, 2),), "unknown spreadByField 'label'"),
        ((SC("region", 3, 3), SC("cluster", 1, 2)),
         "minGroups 3 needs at least 3 clusters but the cluster constraint's maxGroups is 2"),
    ],
)
def test_contradictory_constraints(
    constraints: tuple[spread.SpreadConstraint, ...], message: str
) -> None:
    with pytest.raises(errors.ContradictorySpread, match=message) as raised:
        spread.select(THREE_REGIONS, constraints, replicas=1, duplicated=True)
    assert isinstance(raised.value, errors.InvalidPlacement)
    # Checked even when static weights make the scheduler ignore the constraints.
    with pytest.raises(errors.ContradictorySpread):
        spread.select(THREE_REGIONS, constraints, replicas=1, duplicated=False, ignore=True)


@pytest.mark.parametrize(
    ("constraints", "message"),
    [
        ((SC("region", 4, 4), SC("cluster", 4, 4)),
         r"in 3 regions \(east, north, west\), fewer than the spread constraint's minGroups 4"),
        ((SC("cluster", 6, 6),),
         "5 feasible clusters, fewer than the spread constraint's minGroups 6"),
        # Two regions but the cluster constraint wants 5 clusters in them: east+west hold 4.
        ((SC("region", 2, 2), SC("cluster", 5, 5)),
         "no 2 to 2 regions hold the 5 clusters the cluster constraint's minGroups asks for"),
        ((SC("zone", 1, 1), SC("cluster", 1, 1)), r"in 0 zones, fewer than"),
    ],
)
def test_too_few_groups(constraints: tuple[spread.SpreadConstraint, ...], message: str) -> None:
    with pytest.raises(errors.SpreadUnsatisfiable, match=message):
        spread.select(THREE_REGIONS, constraints, replicas=1, duplicated=True)


def test_rank_is_score_then_available_then_name() -> None:
    clusters = [cluster("b", 0, 5), cluster("a", 0, 5), cluster("c", 0, 9), cluster("d", 100, 0)]
    assert names(spread.rank(clusters)) == ["d", "c", "a", "b"]
