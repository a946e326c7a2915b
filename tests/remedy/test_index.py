"""The controller's indexes give the answers a full scan gives, as Remedies and decisions change."""

from __future__ import annotations

import random
from typing import Any

import pytest

from clusterhealth_core.api import remedy
from clusterhealth_remedy import decision, index

DNS = "ServiceDomainNameResolutionReady"
TC = "TrafficControl"
CLUSTERS = tuple(f"c{i}" for i in range(12))


def make(name: str, spec: dict[str, Any]) -> remedy.Remedy:
    return remedy.Remedy.from_dict({"apiVersion": "remedy.karmada.io/v1alpha1", "kind": "Remedy",
                                    "metadata": {"name": name}, "spec": spec})


def dns_down(names: list[str] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"actions": [TC], "decisionMatches": [{"clusterConditionMatch": {
        "conditionType": DNS, "operator": "Equal", "conditionStatus": "False"}}]}
    if names is not None:
        spec["clusterAffinity"] = {"clusterNames": names}
    return spec


@pytest.mark.parametrize(("specs", "cluster", "candidates", "naming"), [
    pytest.param({}, "c0", set(), set(), id="no Remedy"),
    pytest.param({"all": dns_down(None)}, "c0", {"all"}, set(), id="no affinity covers all"),
    pytest.param({"a": dns_down(["c0", "c1"]), "b": dns_down(["c2"])}, "c1", {"a"}, {"a"},
                 id="named"),
    pytest.param({"empty": dns_down([])}, "c0", set(), set(), id="empty affinity: nobody"),
    pytest.param({"a": dns_down(["c0"]), "all": dns_down(None)}, "c0", {"a", "all"}, {"a"},
                 id="both kinds"),
    pytest.param({"a": dns_down(["c0"])}, "ghost", set(), set(), id="unknown cluster"),
])
def test_candidates(specs: dict[str, dict[str, Any]], cluster: str, candidates: set[str],
                    naming: set[str]) -> None:
    remedies = index.RemedyIndex()
    for name, spec in specs.items():
        remedies.put(make(name, spec))
    assert {r.metadata.name for r in remedies.candidates(cluster)} == candidates
    assert remedies.naming(cluster) == naming


def test_a_changed_affinity_moves_the_remedy() -> None:
    remedies = index.RemedyIndex()
    assert remedies.put(make("r", dns_down(["c0"]))) is None
    before = remedies.put(make("r", dns_down(["c1"])))
    assert before is not None and before.spec.cluster_affinity is not None
    assert remedies.naming("c0") == frozenset() and remedies.naming("c1") == {"r"}
    remedies.put(make("r", dns_down(None)))
    assert remedies.naming("c1") == frozenset()
    assert [r.metadata.name for r in remedies.candidates("c7")] == ["r"]
    assert remedies.remove("r") is not None and remedies.remove("r") is None
    assert remedies.candidates("c7") == [] and len(remedies) == 0


def test_random_changes_agree_with_a_full_scan() -> None:
    """Random Remedies, edits, deletions and condition flips: the indexes never drift."""
    rng = random.Random(7)
    remedies = index.RemedyIndex()
    active = index.ActiveIndex()
    conditions = {c: rng.choice(["True", "False"]) for c in CLUSTERS}
    for step in range(400):
        roll = rng.random()
        name = f"r{rng.randrange(6)}"
        if roll < 0.3:
            names = None if rng.random() < 0.25 else rng.sample(CLUSTERS, rng.randrange(4))
            remedies.put(make(name, dns_down(names)))
        elif roll < 0.4:
            remedies.remove(name)
        else:
            cluster = rng.choice(CLUSTERS)
            conditions[cluster] = rng.choice(["True", "False"])
        # the controller re-decides every cluster a change may touch; here: all of them
        for cluster in CLUSTERS:
            result = remedies.decide(cluster, {DNS: conditions[cluster]})
            assert result == decision.decide(cluster, {DNS: conditions[cluster]},
                                              remedies.remedies.values()), step
            active.put(result)
        if rng.random() < 0.1:
            gone = rng.choice(CLUSTERS)
            active.remove(gone)
            active.put(remedies.decide(gone, {DNS: conditions[gone]}))
        for remedy_name in [f"r{i}" for i in range(6)]:
            assert dict(active.acting(remedy_name)) == decision.acting(
                remedy_name, active.values()), (step, remedy_name)


def test_a_deleted_cluster_leaves_no_active_entry() -> None:
    active = index.ActiveIndex()
    remedies = index.RemedyIndex()
    remedies.put(make("all", dns_down(None)))
    active.put(remedies.decide("c0", {DNS: "False"}))
    assert set(active.acting("all")) == {"c0"}
    assert active.remove("c0") is not None
    assert active.acting("all") == {} and active.get("c0") is None


def test_a_refused_remedy_is_kept_apart_once_per_problem() -> None:
    def obj(spec: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "remedy.karmada.io/v1alpha1", "kind": "Remedy",
                "metadata": {"name": "r"}, "spec": spec}

    bad = dns_down(["c0"])
    bad["decisionMatches"][0]["clusterConditionMatch"]["operator"] = "Sometimes"
    worse = dns_down(["c0"])
    worse["actions"] = ["Reboot"]
    remedies = index.RemedyIndex()
    assert remedies.update("r", obj(dns_down(["c0"]))) is None and remedies.naming("c0")
    refused = remedies.update("r", obj(bad))
    assert refused is not None and remedies.invalid == {"r": refused} and not refused.told
    assert remedies.get("r") is None and not remedies.naming("c0")  # acts nowhere
    refused.told = True
    assert remedies.update("r", obj(bad)) is None and remedies.invalid["r"].told  # same: told
    again = remedies.update("r", obj(worse))
    assert again is not None and again.problem != refused.problem and not again.told
    assert remedies.update("r", obj(dns_down(["c0"]))) is None and not remedies.invalid
    assert remedies.update("r", obj(bad)) is not None  # invalid again: news again
    assert remedies.update("r", None) is None and not remedies.invalid and not len(remedies)


OLD = {"remedyActions": [TC], "remedyActionSources": [{"action": TC, "remedies": ["a"]}]}
NEW = {"remedyActions": [TC], "remedyActionSources": [{"action": TC, "remedies": ["a", "b"]}]}


@pytest.mark.parametrize(
    ("queued", "acting", "now", "wait"),
    [
        pytest.param(0, False, 0.0, None, id="nothing queued: written now"),
        pytest.param(3, False, 0.0, 30.0, id="Clusters queued: waits, at most the bound"),
        pytest.param(0, True, 0.0, 30.0, id="a write that acts in flight: waits"),
        pytest.param(3, False, 12.5, 17.5, id="still queued later: the rest of the bound"),
        pytest.param(3, False, 30.0, None, id="bound reached: written though queued"),
    ],
)
def test_a_provenance_write_waits_while_writes_that_act_are_due(
        queued: int, acting: bool, now: float, wait: float | None) -> None:
    writes = index.ClusterWrites(hold_max=30.0)
    if acting:
        writes.start("other", NEW, acts=True)
    if now:  # first held at 0, looked at again now
        assert writes.hold("c1", OLD, queued, 0.0) == 30.0
    assert writes.hold("c1", OLD, queued, now) == wait
    assert writes.expected("c1", OLD) is (wait is not None)  # its own echo is no disturbance


@pytest.mark.parametrize(
    ("answered_at", "first_held", "now", "wait"),
    [
        pytest.param(None, 0.0, 0.0, None, id="no write that acts yet: written now"),
        pytest.param(10.0, 0.0, 10.25, 0.75, id="one answered just now: the rest of the second"),
        pytest.param(10.0, 0.0, 11.0, None, id="a quiet second passed: written now"),
        pytest.param(29.5, 0.0, 29.75, 0.25, id="the bound is near: the shorter of the two"),
        pytest.param(29.9, 0.0, 30.0, None, id="bound reached: written though not quiet"),
    ],
)
def test_a_provenance_write_waits_a_quiet_second_after_a_write_that_acts(
        answered_at: float | None, first_held: float, now: float, wait: float | None) -> None:
    writes = index.ClusterWrites(hold_max=30.0, quiet=1.0)
    if answered_at is not None:
        writes.start("other", NEW, acts=True)
        writes.finish("other", answered_at)
    if first_held != now:
        writes.hold("c1", OLD, queued=3, now=first_held)  # held first while others were queued
    assert writes.busy(queued=0) is False  # nothing queued, nothing acting in flight
    found = writes.hold("c1", OLD, queued=0, now=now)
    assert found == (None if wait is None else pytest.approx(wait))
    assert writes.expected("c1", OLD) is (wait is not None)


def test_a_write_held_for_the_quiet_time_comes_back_by_its_timer_not_by_release() -> None:
    writes = index.ClusterWrites(hold_max=30.0, quiet=1.0)
    for name in ("c1", "c2"):  # held during a mass change
        assert writes.hold(name, OLD, queued=5, now=0.0) == 30.0
    writes.start("x", NEW, acts=True)
    writes.finish("x", 1.0)  # its last write that acts is answered: the queue drained
    assert sorted(writes.release()) == ["c1", "c2"]
    assert writes.hold("c1", OLD, queued=1, now=1.25) == pytest.approx(0.75)  # quiet time
    # the controller releases whenever a reconcile ends with nothing busy: c1 is not named
    # again, else it would go round the queue until the quiet time is over
    assert writes.busy(queued=1) is False and writes.release() == []
    assert writes.hold("c2", OLD, queued=0, now=1.5) == pytest.approx(0.5)
    assert writes.release() == []
    # a new change queues Clusters: a quiet-held one taken meanwhile waits for it again,
    # and is released with the others once the queue drains
    assert writes.hold("c1", OLD, queued=7, now=2.0) == 28.0
    assert writes.release() == ["c1"]
    assert writes.hold("c2", OLD, queued=0, now=2.5) is None  # quiet: written now
    assert writes.expected("c2", OLD) is False


def test_a_provenance_only_write_tells_no_provenance_write_to_wait() -> None:
    writes = index.ClusterWrites(hold_max=30.0, quiet=1.0)
    writes.start("c1", NEW, acts=False)
    writes.finish("c1", 5.0)
    assert writes.hold("c2", OLD, queued=0, now=5.1) is None


def test_released_writes_do_not_hold_each_other_back() -> None:
    writes = index.ClusterWrites(hold_max=30.0)
    for name in ("c1", "c2", "c3"):
        assert writes.hold(name, OLD, queued=5, now=0.0) is not None
    assert writes.busy(queued=0) is False
    assert sorted(writes.release()) == ["c1", "c2", "c3"]
    assert writes.release() == []  # each named once
    # the three are queued again: they alone are no reason to wait
    assert writes.waiting(queued=3) is False
    assert writes.hold("c1", OLD, queued=2, now=1.0) is None  # c2, c3 still queued
    writes.start("c1", NEW, acts=False)
    assert writes.busy(queued=2) is False  # a provenance write in flight holds nobody back
    writes.finish("c1", now=0.0)
    # a Cluster queued meanwhile for its actions: the released ones wait again
    assert writes.waiting(queued=3) is True
    assert writes.hold("c2", OLD, queued=2, now=2.0) == 28.0  # the bound runs from its start
    assert writes.release() == ["c2"]  # held again: named again once the queue drains
    writes.forget("c3")  # deleted, or no longer provenance-only
    assert writes.waiting(queued=1) is False


def test_writes_in_flight_are_expected_until_answered() -> None:
    writes = index.ClusterWrites(hold_max=30.0)
    writes.start("c1", NEW, acts=True)
    assert writes.expected("c1", NEW) and not writes.expected("c1", OLD)
    assert writes.busy(queued=0)
    writes.finish("c1", now=0.0)
    assert not writes.expected("c1", NEW) and not writes.busy(queued=0)


@pytest.mark.parametrize(("acts", "answered_at", "now", "waits"), [
    (True, None, 5.0, True),      # in flight
    (True, 4.5, 5.0, True),       # answered half a second ago
    (True, 3.0, 5.0, False),      # answered two seconds ago: quiet
    (False, 4.9, 5.0, False),     # a provenance-only write tells no Event to wait
])
def test_events_wait_right_after_a_write_that_acts(acts: bool, answered_at: float | None,
                                                    now: float, waits: bool) -> None:
    writes = index.ClusterWrites(hold_max=30.0)
    assert writes.acted_within(1.0, now) is False  # nothing written yet
    writes.start("c1", NEW, acts=acts)
    if answered_at is not None:
        writes.finish("c1", answered_at)
    assert writes.acted_within(1.0, now) is waits
