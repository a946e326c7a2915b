"""The Remedy rules as tables: affinity, matching, provenance, re-evaluation."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from clusterhealth_core.api import cluster, meta, remedy
from clusterhealth_remedy import decision

DNS = "ServiceDomainNameResolutionReady"
TC = "TrafficControl"
API_VERSION = "remedy.karmada.io/v1alpha1"
T0 = datetime.datetime(2026, 3, 1, 8, 0, 0, tzinfo=datetime.UTC)
T1 = datetime.datetime(2026, 3, 1, 9, 30, 0, tzinfo=datetime.UTC)
ALL = ("member1", "member2", "member3")

# The seed's (proposal's) two examples.  The first verbatim:
SEED_CONDITIONAL: dict[str, Any] = {
    "apiVersion": "remedy.karmada.io/v1alpha1",
    "kind": "Remedy",
    "metadata": {"name": "foo"},
    "spec": {
        "decisionMatches": [
            {
                "clusterConditionMatch": {
                    "conditionType": "ServiceDomainNameResolutionReady",
                    "operator": "Equal",
                    "conditionStatus": "False",
                }
            }
        ],
        "clusterAffinity": {"clusterNames": ["member1", "member2"]},
        "actions": ["TrafficControl"],
    },
}
# The second with its apiVersion corrected: the proposal writes
# "rededition.karmada.io/v1alpha1", a typo for remedy.karmada.io (the group the
# proposal itself declares); the API server and our models reject the typo.
SEED_IMMEDIATE: dict[str, Any] = {
    "apiVersion": "remedy.karmada.io/v1alpha1",
    "kind": "Remedy",
    "metadata": {"name": "foo"},
    "spec": {
        "clusterAffinity": {"clusterNames": ["member1"]},
        "actions": ["TrafficControl"],
    },
}

# Cluster conditions (type -> status).
DNS_FALSE = {"Ready": "True", DNS: "False"}
DNS_TRUE = {"Ready": "True", DNS: "True"}
DNS_UNKNOWN = {"Ready": "True", DNS: "Unknown"}
NO_DNS = {"Ready": "True"}
NO_CONDITIONS: dict[str, str] = {}


def seed(obj: dict[str, Any], name: str | None = None) -> remedy.Remedy:
    """A seed example, optionally renamed so both can exist side by side."""
    if name is None:
        return remedy.Remedy.from_dict(obj)
    return remedy.Remedy.from_dict({**obj, "metadata": {"name": name}})


def make(name: str, spec: dict[str, Any]) -> remedy.Remedy:
    return remedy.Remedy.from_dict(
        {"apiVersion": API_VERSION, "kind": "Remedy", "metadata": {"name": name}, "spec": spec}
    )


def when(condition_type: str, operator: str, status: str) -> dict[str, Any]:
    return {
        "clusterConditionMatch": {
            "conditionType": condition_type,
            "operator": operator,
            "conditionStatus": status,
        }
    }


def on(*names: str) -> dict[str, Any]:
    return {"clusterNames": list(names)}


DNS_DOWN = when(DNS, "Equal", "False")
DNS_NOT_UP = when(DNS, "NotEqual", "True")


@pytest.mark.parametrize(
    ("remedies", "name", "conditions", "expected"),
    [
        # --- the seed's examples ---
        pytest.param([seed(SEED_CONDITIONAL)], "member1", DNS_FALSE,
                     {"foo": f"{DNS} Equal False"}, id="seed conditional: member1 DNS down"),
        pytest.param([seed(SEED_CONDITIONAL)], "member2", DNS_FALSE,
                     {"foo": f"{DNS} Equal False"}, id="seed conditional: member2 DNS down"),
        pytest.param([seed(SEED_CONDITIONAL)], "member1", DNS_TRUE, {},
                     id="seed conditional: member1 DNS up"),
        pytest.param([seed(SEED_CONDITIONAL)], "member3", DNS_FALSE, {},
                     id="seed conditional: member3 not named"),
        pytest.param([seed(SEED_IMMEDIATE)], "member1", DNS_TRUE, {"foo": "immediately"},
                     id="seed immediate: member1 healthy still acts"),
        pytest.param([seed(SEED_IMMEDIATE)], "member2", DNS_FALSE, {},
                     id="seed immediate: member2 not named"),
        # --- affinity ---
        pytest.param([make("r", {"decisionMatches": [DNS_DOWN], "actions": [TC]})],
                     "anything", DNS_FALSE, {"r": f"{DNS} Equal False"},
                     id="affinity absent covers every cluster"),
        pytest.param([make("r", {"clusterAffinity": {}, "actions": [TC]})],
                     "anything", NO_DNS, {}, id="affinity without clusterNames covers none"),
        pytest.param([make("r", {"clusterAffinity": on(), "actions": [TC]})],
                     "anything", NO_DNS, {}, id="empty clusterNames covers none (as Karmada)"),
        pytest.param([make("r", {"clusterAffinity": on(), "decisionMatches": [DNS_DOWN],
                                 "actions": [TC]})],
                     "anything", DNS_FALSE, {}, id="empty clusterNames: not even when matching"),
        pytest.param([make("r", {"clusterAffinity": on("a", "b"), "actions": [TC]})],
                     "b", NO_DNS, {"r": "immediately"}, id="named affinity: in"),
        pytest.param([make("r", {"clusterAffinity": on("a", "b"), "actions": [TC]})],
                     "c", NO_DNS, {}, id="named affinity: out"),
        pytest.param([make("r", {"clusterAffinity": on("a"), "actions": [TC]})],
                     "A", NO_DNS, {}, id="cluster names are case-sensitive"),
        # --- Equal / NotEqual ---
        pytest.param([make("r", {"decisionMatches": [DNS_DOWN], "actions": [TC]})],
                     "c", DNS_FALSE, {"r": f"{DNS} Equal False"}, id="Equal: match"),
        pytest.param([make("r", {"decisionMatches": [DNS_DOWN], "actions": [TC]})],
                     "c", DNS_TRUE, {}, id="Equal: no match"),
        pytest.param([make("r", {"decisionMatches": [DNS_DOWN], "actions": [TC]})],
                     "c", DNS_UNKNOWN, {}, id="Equal False: Unknown is not False"),
        # (a lower-case "false" never reaches the decision: the model refuses it,
        # tests/remedy/test_remedy_invalid.py)
        pytest.param([make("r", {"decisionMatches": [DNS_NOT_UP], "actions": [TC]})],
                     "c", DNS_FALSE, {"r": f"{DNS} NotEqual True"}, id="NotEqual: match"),
        pytest.param([make("r", {"decisionMatches": [DNS_NOT_UP], "actions": [TC]})],
                     "c", DNS_UNKNOWN, {"r": f"{DNS} NotEqual True"},
                     id="NotEqual True: Unknown matches"),
        pytest.param([make("r", {"decisionMatches": [DNS_NOT_UP], "actions": [TC]})],
                     "c", DNS_TRUE, {}, id="NotEqual: no match"),
        # --- a condition type the cluster lacks matches neither operator ---
        pytest.param([make("r", {"decisionMatches": [DNS_DOWN], "actions": [TC]})],
                     "c", NO_DNS, {}, id="missing condition: Equal does not match"),
        pytest.param([make("r", {"decisionMatches": [DNS_NOT_UP], "actions": [TC]})],
                     "c", NO_DNS, {}, id="missing condition: NotEqual does not match"),
        # --- a cluster without conditions: only immediate Remedies act ---
        pytest.param([make("eq", {"decisionMatches": [DNS_DOWN], "actions": [TC]}),
                      make("ne", {"decisionMatches": [DNS_NOT_UP], "actions": [TC]}),
                      make("now", {"actions": [TC]})],
                     "c", NO_CONDITIONS, {"now": "immediately"},
                     id="no conditions: only the immediate Remedy acts"),
        # --- nil vs empty ---
        pytest.param([make("r", {"clusterAffinity": on("c")})], "c", NO_DNS, {},
                     id="actions absent: nothing to do, not listed"),
        pytest.param([make("r", {"clusterAffinity": on("c"), "actions": []})], "c", NO_DNS, {},
                     id="actions empty: nothing to do, not listed"),
        pytest.param([make("r", {"decisionMatches": [DNS_DOWN], "actions": []})],
                     "c", DNS_FALSE, {}, id="matching Remedy without actions: not listed"),
        pytest.param([make("r", {"clusterAffinity": on("c"), "actions": [TC]})],
                     "c", DNS_TRUE, {"r": "immediately"},
                     id="decisionMatches absent: immediately"),
        pytest.param([make("r", {"clusterAffinity": on("c"), "decisionMatches": [],
                                 "actions": [TC]})],
                     "c", DNS_FALSE, {}, id="decisionMatches empty: never (as Karmada)"),
        pytest.param([make("r", {"decisionMatches": [], "actions": [TC]})],
                     "c", NO_CONDITIONS, {}, id="decisionMatches empty: not even immediately"),
        # --- any one of several decision matches ---
        pytest.param([make("r", {"decisionMatches": [when("Ready", "Equal", "False"), DNS_DOWN],
                                 "actions": [TC]})],
                     "c", DNS_FALSE, {"r": f"{DNS} Equal False"},
                     id="any one of: the second holds"),
        pytest.param([make("r", {"decisionMatches": [when("Ready", "Equal", "True"), DNS_DOWN],
                                 "actions": [TC]})],
                     "c", DNS_FALSE, {"r": "Ready Equal True"},
                     id="any one of: both hold, the first is reported"),
        pytest.param([make("r", {"decisionMatches": [when("Ready", "Equal", "False"), DNS_DOWN],
                                 "actions": [TC]})],
                     "c", DNS_TRUE, {}, id="any one of: none holds"),
        pytest.param([make("r", {"decisionMatches": [when("Gone", "NotEqual", "True"), DNS_DOWN],
                                 "actions": [TC]})],
                     "c", DNS_FALSE, {"r": f"{DNS} Equal False"},
                     id="any one of: a missing condition is skipped"),
        # --- several Remedies ---
        pytest.param([make("zeta", {"actions": [TC]}),
                      make("alpha", {"decisionMatches": [DNS_DOWN], "actions": [TC]}),
                      make("mid", {"decisionMatches": [DNS_DOWN], "actions": [TC],
                                   "clusterAffinity": on("other")})],
                     "c", DNS_FALSE, {"alpha": f"{DNS} Equal False", "zeta": "immediately"},
                     id="several Remedies: those covering and matching act"),
    ],
)
def test_decide(remedies: list[remedy.Remedy], name: str, conditions: dict[str, str],
                expected: dict[str, str]) -> None:
    result = decision.decide(name, conditions, remedies)
    assert result.cluster == name
    assert {m.remedy: decision.describe(m.requirement) for m in result.matches} == expected
    assert [m.remedy for m in result.matches] == sorted(expected)
    assert result.actions == ((TC,) if expected else ())
    assert result.sources == ({TC: tuple(sorted(expected))} if expected else {})


def test_overlapping_actions_union_and_sources() -> None:
    remedies = [
        make("planned-upgrade", {"clusterAffinity": on("member1"), "actions": [TC]}),
        seed(SEED_CONDITIONAL, "dns-down"),
        make("dns-down-everywhere", {"decisionMatches": [DNS_DOWN],
                                     "actions": [TC, TC]}),  # duplicates are deduplicated
    ]
    result = decision.decide("member1", DNS_FALSE, remedies)
    assert result.actions == (TC,)
    assert result.sources == {TC: ("dns-down", "dns-down-everywhere", "planned-upgrade")}
    assert [m.actions for m in result.matches] == [(TC,), (TC,), (TC,)]
    assert decision.status_patch(result) == {
        "remedyActions": [TC],
        "remedyActionSources": [
            {"action": TC, "remedies": ["dns-down", "dns-down-everywhere", "planned-upgrade"]}
        ],
    }


def test_both_seed_examples_together() -> None:
    remedies = [seed(SEED_CONDITIONAL, "dns-down"), seed(SEED_IMMEDIATE, "upgrade-member1")]
    decisions = {n: decision.decide(n, DNS_TRUE, remedies) for n in ALL}
    assert {n: d.sources for n, d in decisions.items()} == {
        "member1": {TC: ("upgrade-member1",)},
        "member2": {},
        "member3": {},
    }
    decisions = {n: decision.decide(n, DNS_FALSE, remedies) for n in ALL}
    assert {n: d.sources for n, d in decisions.items()} == {
        "member1": {TC: ("dns-down", "upgrade-member1")},
        "member2": {TC: ("dns-down",)},
        "member3": {},
    }


@pytest.mark.parametrize(
    ("spec", "name", "covered"),
    [
        pytest.param({}, "x", True, id="absent affinity"),
        pytest.param({"clusterAffinity": {}}, "x", False, id="affinity without names"),
        pytest.param({"clusterAffinity": on()}, "x", False, id="empty names"),
        pytest.param({"clusterAffinity": on("x", "y")}, "x", True, id="named: in"),
        pytest.param({"clusterAffinity": on("x", "y")}, "z", False, id="named: out"),
    ],
)
def test_covers(spec: dict[str, Any], name: str, covered: bool) -> None:
    assert decision.covers(make("r", spec), name) is covered


@pytest.mark.parametrize(
    ("req", "conditions", "holds"),
    [
        pytest.param(DNS_DOWN, DNS_FALSE, True, id="Equal holds"),
        pytest.param(DNS_DOWN, DNS_TRUE, False, id="Equal fails"),
        pytest.param(DNS_DOWN, NO_DNS, False, id="Equal on a missing type"),
        pytest.param(DNS_NOT_UP, DNS_FALSE, True, id="NotEqual holds"),
        pytest.param(DNS_NOT_UP, DNS_TRUE, False, id="NotEqual fails"),
        pytest.param(DNS_NOT_UP, NO_DNS, False, id="NotEqual on a missing type"),
        pytest.param(DNS_NOT_UP, NO_CONDITIONS, False, id="NotEqual without conditions"),
    ],
)
def test_requirement_holds(req: dict[str, Any], conditions: dict[str, str],
                           holds: bool) -> None:
    requirement = remedy.ClusterConditionRequirement.from_dict(req["clusterConditionMatch"])
    assert decision.requirement_holds(requirement, conditions) is holds


def test_first_match() -> None:
    immediate = make("r", {"actions": [TC]})
    assert decision.first_match(immediate, NO_CONDITIONS) == (True, None)
    never = make("r", {"decisionMatches": [], "actions": [TC]})
    assert decision.first_match(never, DNS_FALSE) == (False, None)
    conditional = seed(SEED_CONDITIONAL)
    holds, req = decision.first_match(conditional, DNS_FALSE)
    assert holds
    assert req == conditional.spec.decision_matches[0].cluster_condition_match
    assert decision.first_match(conditional, DNS_TRUE) == (False, None)


def test_decision_match_without_requirement_matches_nothing() -> None:
    # The API server (minProperties: 1) and from_dict reject it; built directly,
    # it must still never fire, and must not turn the Remedy into an immediate one.
    r = remedy.Remedy(
        metadata=meta.ObjectMeta(name="r"),
        spec=remedy.RemedySpec(
            decision_matches=(remedy.DecisionMatch(),),
            actions=(remedy.RemedyAction.TRAFFIC_CONTROL,),
        ),
    )
    assert decision.first_match(r, DNS_FALSE) == (False, None)
    assert decision.decide("c", DNS_FALSE, [r]).matches == ()


@pytest.mark.parametrize(
    ("obj", "path"),
    [
        pytest.param({**SEED_IMMEDIATE, "apiVersion": "rededition.karmada.io/v1alpha1"},
                     "apiVersion", id="the seed's typo group"),
        pytest.param({"spec": {"decisionMatches": [when(DNS, "In", "False")]}},
                     "spec.decisionMatches[0].clusterConditionMatch.operator",
                     id="operator not Equal/NotEqual"),
        pytest.param({"spec": {"decisionMatches": [{"clusterConditionMatch": {
                         "operator": "Equal", "conditionStatus": "False"}}]}},
                     "spec.decisionMatches[0].clusterConditionMatch.conditionType",
                     id="conditionType missing"),
        pytest.param({"spec": {"decisionMatches": [when("", "Equal", "False")]}},
                     "spec.decisionMatches[0].clusterConditionMatch.conditionType",
                     id="conditionType empty"),
        pytest.param({"spec": {"decisionMatches": [{"clusterConditionMatch": {
                         "conditionType": DNS, "operator": "Equal"}}]}},
                     "spec.decisionMatches[0].clusterConditionMatch.conditionStatus",
                     id="conditionStatus missing"),
        pytest.param({"spec": {"actions": ["Reboot"]}}, "spec.actions[0]",
                     id="unknown action"),
        pytest.param({"spec": {"clusterAffinity": on("a", "a")}},
                     "spec.clusterAffinity.clusterNames[1]", id="duplicate clusterNames"),
        pytest.param({"spec": {"decisionMatches": [{}]}}, "spec.decisionMatches[0]",
                     id="decision match without clusterConditionMatch"),
    ],
)
def test_rejected_remedies(obj: dict[str, Any], path: str) -> None:
    # What the README's Remedy section says the API server rejects; the models reject the same.
    full = {"apiVersion": API_VERSION, "kind": "Remedy", "metadata": {"name": "r"}, **obj}
    with pytest.raises(meta.ValidationError) as error:
        remedy.Remedy.from_dict(full)
    assert error.value.path == path


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(None, {"clusterAffinity": on("a")}, {"a"}, id="create named"),
        pytest.param(None, {}, set(ALL), id="create without affinity"),
        pytest.param(None, {"clusterAffinity": on()}, set(), id="create with empty names"),
        pytest.param({"clusterAffinity": on("a", "b")}, None, {"a", "b"}, id="delete named"),
        pytest.param({}, None, set(ALL), id="delete without affinity"),
        pytest.param({"clusterAffinity": on("a")}, {"clusterAffinity": on("b")}, {"a", "b"},
                     id="update [a] to [b]"),
        pytest.param({"clusterAffinity": on("a")}, {"clusterAffinity": on("a")}, {"a"},
                     id="update [a] to [a]"),
        pytest.param({"clusterAffinity": on("a")}, {"clusterAffinity": on()}, {"a"},
                     id="update [a] to empty names"),
        pytest.param({"clusterAffinity": on("a")}, {"clusterAffinity": {}}, {"a"},
                     id="update [a] to affinity without names"),
        pytest.param({"clusterAffinity": on()}, {}, set(ALL),
                     id="update empty names to no affinity"),
        pytest.param({"clusterAffinity": on("a")}, {}, set(ALL),
                     id="update [a] to no affinity"),
        pytest.param({"clusterAffinity": on()}, {"clusterAffinity": on("b")}, {"b"},
                     id="update from empty names to [b]"),
        pytest.param({}, {"clusterAffinity": on("b")}, set(ALL),
                     id="update from no affinity to [b]"),
        pytest.param({"clusterAffinity": on("ghost")}, None, {"ghost"},
                     id="named but unknown cluster is still returned"),
        pytest.param(None, None, set(), id="nothing"),
    ],
)
def test_affected_clusters(old: dict[str, Any] | None, new: dict[str, Any] | None,
                           expected: set[str]) -> None:
    def build(spec: dict[str, Any] | None) -> remedy.Remedy | None:
        return None if spec is None else make("r", {**spec, "actions": [TC]})

    result = decision.affected_clusters(build(old), build(new), iter(ALL))
    assert result == frozenset(expected)
    assert isinstance(result, frozenset)


def test_status_patch_empty_is_empty() -> None:
    assert decision.status_patch(decision.Decision("c", ())) == {}
    assert decision.status_patch(decision.decide("c", DNS_TRUE, [seed(SEED_CONDITIONAL)])) == {}


def test_status_patch_round_trips_through_the_model() -> None:
    result = decision.decide("member1", DNS_FALSE, [seed(SEED_CONDITIONAL)])
    patch = decision.status_patch(result)
    assert patch == {"remedyActions": [TC], "remedyActionSources": [{"action": TC,
                                                                     "remedies": ["foo"]}]}
    status = cluster.ClusterStatus.from_dict(patch, strict=True)
    assert status.remedy_actions == (TC,)
    assert status.remedy_action_sources == (cluster.RemedyActionSource(action=TC,
                                                                       remedies=("foo",)),)


@pytest.mark.parametrize(
    ("before", "after", "added", "removed"),
    [
        pytest.param({}, {}, [], [], id="nothing"),
        pytest.param({}, {TC: ("a", "b")}, [(TC, ("a", "b"))], [], id="added"),
        pytest.param({TC: ("a",)}, {}, [], [(TC, ("a",))], id="removed"),
        pytest.param({TC: ("a",)}, {TC: ("a", "b")}, [], [], id="same action, more remedies"),
        pytest.param({TC: ("a",)}, {TC: ("b",)}, [], [], id="same action, other remedy"),
        pytest.param({"X": ("a",)}, {"Y": ("b",), "W": ("c",)}, [("W", ("c",)), ("Y", ("b",))],
                     [("X", ("a",))], id="sorted by action"),
    ],
)
def test_action_changes(before: dict[str, tuple[str, ...]], after: dict[str, tuple[str, ...]],
                        added: list[tuple[str, tuple[str, ...]]],
                        removed: list[tuple[str, tuple[str, ...]]]) -> None:
    assert decision.action_changes(before, after) == (added, removed)


def test_action_changes_from_decisions() -> None:
    remedies = [seed(SEED_CONDITIONAL)]
    down = decision.decide("member1", DNS_FALSE, remedies)
    up = decision.decide("member1", DNS_TRUE, remedies)
    assert decision.action_changes(up.sources, down.sources) == ([(TC, ("foo",))], [])
    assert decision.action_changes(down.sources, up.sources) == ([], [(TC, ("foo",))])


def _owned(actions: list[str], sources: dict[str, list[str]] | None = None) -> dict[str, Any]:
    owned: dict[str, Any] = {"remedyActions": actions} if actions else {}
    if sources is not None:
        owned["remedyActionSources"] = [{"action": a, "remedies": r} for a, r in sources.items()]
    return owned


CHANGE = decision.StatusChange


@pytest.mark.parametrize(
    ("live", "desired", "change"),
    [
        pytest.param({}, {}, CHANGE.NONE, id="nothing either side"),
        pytest.param(_owned([TC], {TC: ["a"]}), _owned([TC], {TC: ["a"]}), CHANGE.NONE,
                     id="the same"),
        pytest.param({}, _owned([TC], {TC: ["a"]}), CHANGE.ACTIONS, id="action added"),
        pytest.param(_owned([TC], {TC: ["a"]}), {}, CHANGE.ACTIONS, id="action removed"),
        pytest.param(_owned([TC], {TC: ["a"]}), _owned(["X", TC], {"X": ["a"], TC: ["a"]}),
                     CHANGE.ACTIONS, id="one more action, same sources too"),
        pytest.param(_owned([TC, "X"]), _owned(["X", TC]), CHANGE.ACTIONS,
                     id="same actions in another order: rewritten sorted"),
        pytest.param(_owned([TC], {TC: ["a"]}), _owned([TC], {TC: ["a", "all"]}),
                     CHANGE.PROVENANCE, id="a Remedy more behind an action"),
        pytest.param(_owned([TC], {TC: ["a", "all"]}), _owned([TC], {TC: ["a"]}),
                     CHANGE.PROVENANCE, id="a Remedy less behind an action"),
        pytest.param(_owned([TC], {TC: ["a"]}), _owned([TC], {TC: ["b"]}), CHANGE.PROVENANCE,
                     id="another Remedy behind the same action"),
        pytest.param(_owned([TC]), _owned([TC], {TC: ["a"]}), CHANGE.PROVENANCE,
                     id="sources added to actions written without"),
        pytest.param(_owned([TC], {TC: ["a"]}), _owned([TC]), CHANGE.PROVENANCE,
                     id="sources gone (a server without the field)"),
    ],
)
def test_status_change(live: dict[str, Any], desired: dict[str, Any],
                       change: decision.StatusChange) -> None:
    assert decision.status_change(live, desired) is change


def test_status_change_of_decisions_covering_every_cluster() -> None:
    """The benchmark's case: a Remedy on every Cluster joins one a named Remedy acts on."""
    named = make("named", {"clusterAffinity": {"clusterNames": ["member1"]}, "actions": [TC]})
    everywhere = make("all", {"actions": [TC]})
    before = decision.status_patch(decision.decide("member1", DNS_FALSE, [named]))
    for name, change in (("member1", CHANGE.PROVENANCE), ("member2", CHANGE.ACTIONS)):
        live = before if name == "member1" else {}
        after = decision.status_patch(decision.decide(name, DNS_FALSE, [named, everywhere]))
        assert decision.status_change(live, after) is change, name
        assert decision.status_change(after, live) is change, name


@pytest.mark.parametrize(
    ("req", "text"),
    [
        pytest.param(None, "immediately", id="immediate"),
        pytest.param(DNS_DOWN, "ServiceDomainNameResolutionReady Equal False", id="Equal"),
        pytest.param(DNS_NOT_UP, "ServiceDomainNameResolutionReady NotEqual True", id="NotEqual"),
    ],
)
def test_describe(req: dict[str, Any] | None, text: str) -> None:
    requirement = (None if req is None
                   else remedy.ClusterConditionRequirement.from_dict(req["clusterConditionMatch"]))
    assert decision.describe(requirement) == text


def test_active_clusters_keeps_since() -> None:
    remedies = [seed(SEED_CONDITIONAL, "dns-down"), make("other", {"actions": [TC]})]
    decisions = [
        decision.decide("member2", DNS_FALSE, remedies),  # newly active
        decision.decide("member1", DNS_FALSE, remedies),  # already active since T0
        decision.decide("member3", DNS_FALSE, remedies),  # not in the affinity
    ]
    previous = {"member1": T0, "gone": T0}  # "gone" is no longer active: dropped
    entries, total = decision.active_clusters(decision.acting("dns-down", decisions), previous, T1)
    assert total == 2
    matched = {"conditionType": DNS, "operator": "Equal", "conditionStatus": "False"}
    assert entries == [
        {"cluster": "member1", "matchedCondition": matched, "since": "2026-03-01T08:00:00Z"},
        {"cluster": "member2", "matchedCondition": matched, "since": "2026-03-01T09:30:00Z"},
    ]
    status = remedy.RemedyStatus.from_dict({"activeClusters": entries}, strict=True)
    assert decision.active_since(remedy.Remedy(metadata=meta.ObjectMeta(name="dns-down"),
                                               spec=remedy.RemedySpec(), status=status)) == {
        "member1": T0, "member2": T1}


def test_active_clusters_immediate_has_no_matched_condition() -> None:
    remedies = [seed(SEED_IMMEDIATE)]
    decisions = [decision.decide(n, NO_CONDITIONS, remedies) for n in ALL]
    assert decision.active_clusters(decision.acting("foo", decisions), {}, T1) == (
        [{"cluster": "member1", "since": "2026-03-01T09:30:00Z"}], 1)
    assert decision.active_clusters(decision.acting("other", decisions), {}, T1) == ([], 0)


def test_active_clusters_are_capped_and_counted() -> None:
    remedies = [make("everywhere", {"actions": [TC]})]
    names = [f"c{i:04d}" for i in range(2500)]
    decisions = [decision.decide(n, NO_CONDITIONS, remedies) for n in reversed(names)]
    acting = decision.acting("everywhere", decisions)
    entries, total = decision.active_clusters(acting, {"c0001": T0}, T1,
                                              limit=remedy.MAX_ACTIVE_CLUSTERS)
    assert total == 2500
    assert [e["cluster"] for e in entries] == names[:remedy.MAX_ACTIVE_CLUSTERS]
    assert entries[1]["since"] == "2026-03-01T08:00:00Z"
    # what the controller writes is a valid status
    status = remedy.RemedyStatus.from_dict({"activeClusters": entries,
                                            "activeClusterCount": total}, strict=True)
    assert status.active_cluster_count == 2500


@pytest.mark.parametrize(
    ("spec", "unknown"),
    [
        pytest.param({"clusterAffinity": on("member1", "ghost", "alpha")}, ["alpha", "ghost"],
                     id="named, some unknown (sorted)"),
        pytest.param({"clusterAffinity": on("member1", "member2")}, [], id="named, all known"),
        pytest.param({}, [], id="no affinity names nothing"),
        pytest.param({"clusterAffinity": on()}, [], id="empty names name nothing"),
    ],
)
def test_unknown_clusters(spec: dict[str, Any], unknown: list[str]) -> None:
    assert decision.unknown_clusters(make("r", spec), frozenset(ALL)) == unknown


def test_conditions_of_feeds_decide() -> None:
    c = cluster.Cluster.from_dict({
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": "member1"},
        "spec": {"syncMode": "Push"},
        "status": {"conditions": [
            {"type": DNS, "status": "False", "lastTransitionTime": "2026-03-01T08:00:00Z",
             "reason": "ServiceDomainNameResolutionFailed", "message": "2/2 nodes failing"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-03-01T08:00:00Z",
             "reason": "ClusterReady", "message": "ok"},
        ]},
    })
    conditions = decision.conditions_of(c)
    assert conditions == {DNS: "False", "Ready": "True"}
    assert decision.decide("member1", conditions, [seed(SEED_CONDITIONAL)]).actions == (TC,)


@pytest.mark.parametrize(
    ("spec", "effective", "reason", "words"),
    [
        pytest.param({"actions": [TC]}, True, "CanAct", ["every cluster", "immediately"],
                     id="no affinity, no matches: every cluster, immediately"),
        pytest.param({"clusterAffinity": on("a", "b"), "decisionMatches": [DNS_DOWN],
                      "actions": [TC]}, True, "CanAct",
                     ["2 named cluster(s)", "when one of its decision matches holds"],
                     id="named clusters, on a condition"),
        pytest.param({"clusterAffinity": {}, "actions": [TC]}, False, "NoClusterSelected",
                     ["names no cluster", "remove clusterAffinity"],
                     id="affinity without names"),
        pytest.param({"clusterAffinity": on(), "actions": [TC]}, False, "NoClusterSelected",
                     ["names no cluster"], id="empty clusterNames"),
        pytest.param({"decisionMatches": [], "actions": [TC]}, False, "NeverMatches",
                     ["empty list, which never matches", "remove it to act immediately"],
                     id="empty decisionMatches"),
        pytest.param({"clusterAffinity": on(), "decisionMatches": [], "actions": [TC]}, False,
                     "NoClusterSelected", ["names no cluster", "never matches"],
                     id="both: the first reason, both messages"),
        pytest.param({"clusterAffinity": on("ghost"), "actions": [TC]}, True, "CanAct",
                     ["1 named cluster(s)"], id="unknown names are ClustersResolved's business"),
    ],
)
def test_effectiveness(spec: dict[str, Any], effective: bool, reason: str,
                       words: list[str]) -> None:
    ok, why, message = decision.effectiveness(make("r", spec))
    assert (ok, why) == (effective, reason)
    for word in words:
        assert word in message


@pytest.mark.parametrize(
    ("spec", "resolved", "reason", "message"),
    [
        pytest.param({"clusterAffinity": on("member1", "member2")}, True, "AllClustersFound",
                     "every cluster in clusterAffinity exists", id="all found"),
        pytest.param({"clusterAffinity": on("member1", "zz", "aa")}, False, "UnknownClusters",
                     "no Cluster named aa, zz", id="unknown names, sorted"),
        pytest.param({}, True, "AllClustersFound", "every cluster in clusterAffinity exists",
                     id="no affinity"),
        pytest.param({"clusterAffinity": on()}, True, "AllClustersFound",
                     "every cluster in clusterAffinity exists", id="empty names"),
    ],
)
def test_clusters_resolved(spec: dict[str, Any], resolved: bool, reason: str,
                           message: str) -> None:
    found = decision.clusters_resolved(make("r", spec), frozenset(ALL))
    assert found == (resolved, reason, message)


def test_clusters_resolved_message_is_bounded() -> None:
    names = [f"missing-cluster-{i:05d}" for i in range(3000)]  # 21 characters each
    ok, reason, message = decision.clusters_resolved(
        make("r", {"clusterAffinity": on(*names)}), frozenset(ALL))
    assert (ok, reason) == (False, "UnknownClusters")
    assert len(message) <= len("no Cluster named ") + meta.MESSAGE_BUDGET
    assert message.startswith("no Cluster named missing-cluster-00000, missing-cluster-00001")
    shown = message.removeprefix("no Cluster named ").split(" \u2026 ")[0].split(", ")
    assert message.endswith(f"\u2026 and {3000 - len(shown)} more")
