"""The graceful-eviction rules, at fixed times: when a task ends, why, and when to look again.

Cases named after Karmada's issues are the ways its tasks got stuck, or ended
too early: 5803/3747 (a binding that cannot be scheduled again keeps its task
forever), 7455 (no targets counted as "all healthy"), 7184/7186 (one task's
grace period leaking into the next), 7129 (a health reported before the
replicas moved taken for the replacement's).
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from clusterhealth_controlplane.gracefuleviction import decision

T0 = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
TIMEOUT = 600.0


def stamp(seconds: float) -> str:
    return (T0 + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def task(cluster: str = "member1", created: float | None = 0.0, **extra: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"fromCluster": cluster, "reason": "TaintUntolerated",
                             "producer": "TaintManager", "replicas": 1, **extra}
    if created is not None:
        found["creationTimestamp"] = stamp(created)
    return found


def binding(tasks: list[dict[str, Any]], *, targets: dict[str, str] | None = None,
            generation: int = 3, observed: int = 3, scheduled: str = "True",
            applied_generation: int | None = 3) -> dict[str, Any]:
    """``targets``: cluster -> health in aggregatedStatus ("" = no entry)."""
    targets = {"member2": "Healthy"} if targets is None else targets
    conditions: list[dict[str, Any]] = [{"type": "Scheduled", "status": scheduled}]
    if applied_generation is not None:
        conditions.append({"type": "FullyApplied", "status": "True",
                           "observedGeneration": applied_generation})
    return {"metadata": {"name": "web-deployment", "namespace": "default",
                         "generation": generation, "resourceVersion": "77"},
            "spec": {"clusters": [{"name": c, "replicas": 3} for c in targets],
                     "gracefulEvictionTasks": tasks},
            "status": {"schedulerObservedGeneration": observed, "conditions": conditions,
                       "aggregatedStatus": [{"clusterName": c, "health": h, "applied": True}
                                            for c, h in targets.items() if h]}}


def at(seconds: float) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


def test_a_new_task_is_stamped_and_kept_until_its_deadline() -> None:
    verdict = decision.assess(binding([task(created=None)], targets={"member2": ""}), at(5),
                              TIMEOUT)
    assert verdict.kept == [{**task(created=None), "creationTimestamp": stamp(5)}]
    assert verdict.changed and verdict.ended == []
    assert verdict.next_check == TIMEOUT


def test_a_new_task_is_stamped_even_when_the_replacement_is_already_healthy() -> None:
    # Karmada: the first pass only stamps; the next one (right after the write) ends it
    verdict = decision.assess(binding([task(created=None)]), at(5), TIMEOUT)
    assert len(verdict.kept) == 1 and verdict.ended == []
    again = decision.assess(binding(verdict.kept), at(6), TIMEOUT)
    assert again.kept == [] and again.ended == [decision.Ended("member1", "healthy")]


def test_kept_while_the_replacement_is_not_healthy_and_looks_again_at_the_deadline() -> None:
    verdict = decision.assess(binding([task()], targets={"member2": "Unhealthy"}), at(100),
                              TIMEOUT)
    assert verdict.kept == [task()] and not verdict.changed
    assert verdict.next_check == pytest.approx(500.0)


@pytest.mark.parametrize("seconds", [600.0, 601.0, 86400.0])
def test_ended_at_the_timeout(seconds: float) -> None:
    verdict = decision.assess(binding([task()], targets={"member2": "Unhealthy"}), at(seconds),
                              TIMEOUT)
    assert verdict.kept == [] and verdict.ended == [decision.Ended("member1", "timeout")]
    assert verdict.changed and verdict.next_check is None


def test_the_tasks_own_grace_period_wins_and_does_not_leak_into_the_next() -> None:
    # Karmada 7184/7186: a per-task grace period leaked into later tasks
    tasks = [task("member1", gracePeriodSeconds=30), task("member3")]
    verdict = decision.assess(binding(tasks, targets={"member2": "Unhealthy"}), at(30), TIMEOUT)
    assert verdict.ended == [decision.Ended("member1", "grace_period")]
    assert verdict.kept == [task("member3")]
    assert verdict.next_check == pytest.approx(570.0)


def test_a_grace_period_longer_than_the_timeout_is_honoured() -> None:
    tasks = [task(gracePeriodSeconds=3600)]
    verdict = decision.assess(binding(tasks, targets={"member2": "Unhealthy"}), at(601), TIMEOUT)
    assert verdict.kept == tasks and verdict.next_check == pytest.approx(2999.0)


def test_ended_when_scheduled_and_every_target_healthy() -> None:
    targets = {"member2": "Healthy", "member3": "Healthy"}
    verdict = decision.assess(binding([task()], targets=targets), at(10), TIMEOUT)
    assert verdict.kept == [] and verdict.ended == [decision.Ended("member1", "healthy")]


@pytest.mark.parametrize(("why", "changes"), [
    ("one target unhealthy", {"targets": {"member2": "Healthy", "member3": "Unhealthy"}}),
    ("one target not reported yet", {"targets": {"member2": "Healthy", "member3": ""}}),
    ("health unknown", {"targets": {"member2": "Unknown"}}),
    ("not scheduled for this generation", {"generation": 4, "observed": 3,
                                           "applied_generation": 4}),
    ("Scheduled False (5803: nowhere to go)", {"scheduled": "False"}),
    ("no targets at all (7455)", {"targets": {}}),
    ("status from an older generation (7129)", {"applied_generation": 2}),
    ("no FullyApplied yet", {"applied_generation": None}),
])
def test_kept_when_the_replacement_is_not_proven(why: str, changes: dict[str, Any]) -> None:
    verdict = decision.assess(binding([task()], **changes), at(10), TIMEOUT)
    assert verdict.kept == [task()], why
    assert verdict.next_check == pytest.approx(590.0)


def test_an_unschedulable_binding_still_loses_its_task_at_the_deadline() -> None:
    # Karmada 5803/3747: the only cluster evicted, the scheduler finds nothing, the
    # generation is never observed: the task must not stay forever
    stuck = binding([task()], targets={}, generation=5, observed=4, scheduled="False")
    assert decision.assess(stuck, at(599), TIMEOUT).next_check == pytest.approx(1.0)
    assert decision.assess(stuck, at(600), TIMEOUT).ended == [decision.Ended("member1",
                                                                              "timeout")]


def test_suppress_deletion_true_keeps_the_task_for_good() -> None:
    kept = task(suppressDeletion=True)
    for seconds in (10.0, 600.0, 10**6):
        verdict = decision.assess(binding([kept]), at(seconds), TIMEOUT)
        assert verdict.kept == [kept] and not verdict.changed
        assert verdict.next_check is None  # nothing timed: only a user's change ends it


def test_suppress_deletion_false_ends_the_task_at_once() -> None:
    verdict = decision.assess(binding([task(suppressDeletion=False)],
                                      targets={"member2": "Unhealthy"}), at(1), TIMEOUT)
    assert verdict.kept == [] and verdict.ended == [decision.Ended("member1", "confirmed")]


def test_next_check_is_the_earliest_deadline_among_the_kept_tasks() -> None:
    tasks = [task("member1", created=0), task("member3", created=100, gracePeriodSeconds=60),
             task("member4", suppressDeletion=True)]
    verdict = decision.assess(binding(tasks, targets={"member2": "Unhealthy"}), at(120), TIMEOUT)
    assert verdict.next_check == pytest.approx(40.0)
    assert [t["fromCluster"] for t in verdict.kept] == ["member1", "member3", "member4"]


def test_the_patch_replaces_the_list_and_is_guarded_by_the_resource_version() -> None:
    obj = binding([task()])
    assert decision.tasks_patch(obj, []) == {"metadata": {"resourceVersion": "77"},
                                            "spec": {"gracefulEvictionTasks": None}}
    assert decision.tasks_patch(obj, [task()])["spec"]["gracefulEvictionTasks"] == [task()]
