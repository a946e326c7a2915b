"""The taint manager's rules as tables (fake time), and its pacer on a fake loop clock."""

from __future__ import annotations

import asyncio
import datetime
import json
from typing import Any

import pytest

from clusterhealth_controlplane.taintmanager import controller, decision
from clusterhealth_core import clock as clocks

T0 = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
NOT_READY = "cluster.karmada.io/not-ready"
UNREACHABLE = "cluster.karmada.io/unreachable"


def at(seconds: float) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


def taint(key: str, added: float | None = 0.0, effect: str = "NoExecute",
          value: str | None = None) -> dict[str, Any]:
    raw: dict[str, Any] = {"key": key, "effect": effect}
    if added is not None:
        raw["timeAdded"] = decision.format_time(at(added))
    if value is not None:
        raw["value"] = value
    return raw


def cluster(name: str, *taints: dict[str, Any], ready: str | None = "True") -> dict[str, Any]:
    conditions = [] if ready is None else [{"type": "Ready", "status": ready}]
    return {"metadata": {"name": name}, "spec": {"taints": list(taints)},
            "status": {"conditions": conditions}}


def tolerate(key: str | None, seconds: int | None = None, operator: str = "Exists",
             effect: str | None = "NoExecute") -> dict[str, Any]:
    raw: dict[str, Any] = {"operator": operator}
    if key is not None:
        raw["key"] = key
    if effect is not None:
        raw["effect"] = effect
    if seconds is not None:
        raw["tolerationSeconds"] = seconds
    return raw


def binding(*tolerations: dict[str, Any], clusters: tuple[tuple[str, int], ...] = (("m1", 2),),
            annotated: bool = False, **spec: Any) -> dict[str, Any]:
    placement = {"clusterTolerations": list(tolerations)}
    meta: dict[str, Any] = {"name": "web-deployment", "namespace": "ns"}
    if annotated:
        meta["annotations"] = {decision.APPLIED_PLACEMENT: json.dumps(placement)}
        placement = {}
    return {"metadata": meta,
            "spec": {"placement": placement, "clusters": [{"name": n, "replicas": r}
                                                          for n, r in clusters], **spec}}


def verdict_of(cluster_taints: list[dict[str, Any]],
               tolerations: list[dict[str, Any]]) -> decision.Verdict:
    return decision.verdict(decision.no_execute_taints(cluster("m1", *cluster_taints,
                                                               ready="False")),
                            decision.tolerations(binding(*tolerations)))


@pytest.mark.parametrize(("taints", "tolerations", "expected"), [
    # not tolerated -> now
    ([taint(NOT_READY)], [], decision.IMMEDIATELY),
    ([taint(NOT_READY)], [tolerate(UNREACHABLE, 300)], decision.IMMEDIATELY),
    # one of two taints untolerated -> now, whatever the other's toleration says
    ([taint(NOT_READY), taint(UNREACHABLE)], [tolerate(NOT_READY, 300)], decision.IMMEDIATELY),
    # tolerated 300 s -> timeAdded + 300
    ([taint(NOT_READY, added=10)], [tolerate(NOT_READY, 300)], at(310)),
    # the earliest over several taints and tolerations
    ([taint(NOT_READY, added=0), taint(UNREACHABLE, added=100)],
     [tolerate(NOT_READY, 600), tolerate(UNREACHABLE, 60)], at(160)),
    # a key-less Exists toleration tolerates every taint: its seconds apply to each
    ([taint(NOT_READY, added=0), taint(UNREACHABLE, added=50)], [tolerate(None, 30)], at(30)),
    # tolerated for ever (no tolerationSeconds) -> never
    ([taint(NOT_READY)], [tolerate(NOT_READY)], None),
    # the first matching toleration is the one used (Karmada): for ever here
    ([taint(NOT_READY)], [tolerate(NOT_READY), tolerate(NOT_READY, 5)], None),
    # no timeAdded: no deadline (Karmada skips it)
    ([taint(NOT_READY, added=None)], [tolerate(NOT_READY, 5)], None),
    # Equal needs the value; an effect that differs does not tolerate
    ([taint(NOT_READY, value="x")], [tolerate(NOT_READY, 5, operator="Equal")],
     decision.IMMEDIATELY),
    ([taint(NOT_READY)], [tolerate(NOT_READY, 5, effect="NoSchedule")], decision.IMMEDIATELY),
    ([taint(NOT_READY)], [tolerate(NOT_READY, 5, effect=None)], at(5)),
    # NoSchedule taints do not count
    ([taint(NOT_READY, effect="NoSchedule")], [], None),
])
def test_when_a_binding_leaves_a_tainted_cluster(
        taints: list[dict[str, Any]], tolerations: list[dict[str, Any]],
        expected: datetime.datetime | None) -> None:
    assert verdict_of(taints, tolerations).evict_at == expected


def test_the_applied_placement_is_read_before_spec_placement() -> None:
    obj = binding(tolerate(NOT_READY, 300), annotated=True)
    assert obj["spec"]["placement"] == {}
    assert [t.toleration_seconds for t in decision.tolerations(obj)] == [300]
    unreadable = {**obj, "metadata": {**obj["metadata"],
                                      "annotations": {decision.APPLIED_PLACEMENT: "{"}}}
    assert decision.tolerations(unreadable) == ()


def test_the_plan_evicts_now_waits_for_the_deadline_and_forgets_a_removed_taint() -> None:
    obj = binding(tolerate(NOT_READY, 300), clusters=(("m1", 2), ("m2", 1), ("m3", 3)))
    clusters = {"m1": cluster("m1", taint(UNREACHABLE), ready="Unknown"),  # untolerated
                "m2": cluster("m2", taint(NOT_READY, added=0), ready="False"),  # 300 s
                "m3": cluster("m3")}
    first = decision.plan(obj, clusters, at(10))
    assert set(first.due) == {"m1"} and "not tolerated" in first.due["m1"]
    assert first.next_at == at(300)
    assert set(decision.plan(obj, clusters, at(300)).due) == {"m1", "m2"}
    # the taints go before the deadline: nothing to do, nothing to wait for
    clean = {name: cluster(name) for name in clusters}
    assert decision.plan(obj, clean, at(299)) == decision.Plan({}, None)
    # a binding being deleted is left alone
    deleting = {**obj, "metadata": {**obj["metadata"], "deletionTimestamp": "x"}}
    assert decision.plan(deleting, clusters, at(10)) == decision.Plan({}, None)


def test_an_eviction_moves_the_cluster_into_a_graceful_eviction_task() -> None:
    spec = binding(clusters=(("m1", 2), ("m2", 1), ("m3", 0)))["spec"]
    evicted = decision.evicted_spec(spec, {"m1": "taint a:NoExecute is not tolerated",
                                           "m3": "why"}, "Gracefully", at(0))
    assert evicted["clusters"] == [{"name": "m2", "replicas": 1}]
    assert evicted["gracefulEvictionTasks"] == [
        {"fromCluster": "m1", "purgeMode": "Gracefully", "reason": "TaintUntolerated",
         "message": "cluster m1: taint a:NoExecute is not tolerated", "producer": "TaintManager",
         "creationTimestamp": "2026-01-01T12:00:00Z", "replicas": 2},
        {"fromCluster": "m3", "purgeMode": "Gracefully", "reason": "TaintUntolerated",
         "message": "cluster m3: why", "producer": "TaintManager",
         "creationTimestamp": "2026-01-01T12:00:00Z"}]  # no replicas when 0 (Karmada)
    assert spec["clusters"][0] == {"name": "m1", "replicas": 2}  # the input is not changed


def test_no_second_task_for_the_same_cluster_and_nothing_for_a_cluster_not_targeted() -> None:
    existing = {"fromCluster": "m1", "reason": "ApplicationFailure", "producer": "other"}
    spec = {**binding()["spec"], "gracefulEvictionTasks": [existing]}
    evicted = decision.evicted_spec(spec, {"m1": "x", "m9": "y"}, "Gracefully", at(0))
    assert evicted["clusters"] == []
    assert evicted["gracefulEvictionTasks"] == [existing]


@pytest.mark.parametrize(("failover", "default", "expected"), [
    (None, "Gracefully", "Gracefully"),
    (None, "Directly", "Directly"),
    ({"cluster": {"purgeMode": "Directly"}}, "Gracefully", "Directly"),
    ({"cluster": {}}, "Directly", "Gracefully"),  # the block present: its default
    ({"application": {"decisionConditions": {}}}, "Directly", "Directly"),
])
def test_purge_mode(failover: dict[str, Any] | None, default: str, expected: str) -> None:
    obj = binding(**({"failover": failover} if failover is not None else {}))
    assert decision.purge_mode(obj, default) == expected


@pytest.mark.parametrize(("ready", "threshold", "held"), [
    ([True, True, True, True], 0.55, False),
    ([False, True, True, True], 0.55, False),
    ([False, False, True, True], 0.55, False),     # 50 %
    ([False, False, False, True], 0.55, True),     # 75 %
    ([False, False, True, True], 0.5, False),      # more than: 50 % is not above 50 %
    ([False], 0.55, True),
    ([], 0.55, False),
    ([False, False], 1.0, False),                  # threshold 1: never
    ([False, True, True, True, True], 0.0, True),  # threshold 0: any
])
def test_storm_guard_thresholds(ready: list[bool], threshold: float, held: bool) -> None:
    assert decision.guard(ready, threshold).held is held


def test_the_rate_while_held_and_not() -> None:
    assert decision.rate(False, 0.0, 0.1) is None      # 0: no limit
    assert decision.rate(False, 2.0, 0.1) == 2.0
    assert decision.rate(True, 0.0, 0.1) == 0.1
    assert decision.rate(True, 2.0, 0.0) == 0.0        # stopped


def test_readiness_missing_condition_is_unhealthy() -> None:
    assert decision.ready(cluster("a"))
    assert not decision.ready(cluster("a", ready="Unknown"))
    assert not decision.ready(cluster("a", ready=None))


def test_the_guard_condition_says_why() -> None:
    held = decision.guard([False, False, False, True], 0.55)
    tainted = cluster("m1", taint(UNREACHABLE), ready="False")
    paused = decision.guard_condition(tainted, held, 0.0)
    assert paused == decision.GuardCondition(
        "True", "TooManyUnhealthyClusters",
        "3 of 4 clusters (75%) are unhealthy, above the 55% threshold: evictions paused")
    slowed = decision.guard_condition(tainted, held, 0.1)
    assert slowed is not None and slowed.message.endswith("evictions slowed to 0.1/s")
    # a Cluster without NoExecute taint and without the condition: nothing to write
    assert decision.guard_condition(cluster("m4"), held, 0.0) is None
    # the guard lifts: False on a Cluster that shows it True, nothing elsewhere
    lifted = decision.guard([False, True, True, True], 0.55)
    shown = {**tainted, "status": {"conditions": [
        {"type": decision.CONDITION, "status": "True"}]}}
    clear = decision.guard_condition(shown, lifted, 0.0)
    assert clear == decision.GuardCondition(
        "False", "EnoughHealthyClusters", "1 of 4 clusters (25%) are unhealthy, within the "
        "55% threshold: evictions run at the normal rate")
    assert decision.guard_condition(tainted, lifted, 0.0) is None
    # still held, but the taint went
    untainted = {**shown, "spec": {"taints": []}}
    gone = decision.guard_condition(untainted, held, 0.0)
    assert gone is not None and (gone.status, gone.reason) == ("False", "NoExecuteTaintGone")


@pytest.mark.looptime
@pytest.mark.asyncio(loop_scope="function")  # fake time needs a loop of its own
async def test_the_pacer_spaces_evictions_and_stops_at_rate_zero() -> None:
    loop = asyncio.get_running_loop()
    pacer = controller.Pacer(clocks.Clock())
    pacer.set_rate(2.0)
    start = loop.time()
    times = []
    for _ in range(4):
        await pacer.acquire()
        times.append(loop.time() - start)
    assert times == pytest.approx([0.0, 0.5, 1.0, 1.5])

    pacer.set_rate(0.0)
    waiter = asyncio.create_task(pacer.acquire())
    await asyncio.sleep(3600)
    assert not waiter.done()                 # stopped: nothing for an hour
    pacer.set_rate(None)                     # the guard lifts, no limit
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert waiter.done()
    for _ in range(100):                     # unlimited: no wait at all
        await pacer.acquire()
    assert loop.time() == pytest.approx(start + 1.5 + 3600)


@pytest.mark.looptime
@pytest.mark.asyncio(loop_scope="function")  # fake time needs a loop of its own
async def test_the_pacer_is_shared_by_concurrent_workers() -> None:
    loop = asyncio.get_running_loop()
    pacer = controller.Pacer(clocks.Clock())
    pacer.set_rate(10.0)
    start = loop.time()
    done: list[float] = []

    async def worker() -> None:
        for _ in range(5):
            await pacer.acquire()
            done.append(loop.time() - start)
    await asyncio.gather(*(worker() for _ in range(4)))
    assert sorted(done) == pytest.approx([i / 10 for i in range(20)])


@pytest.mark.parametrize(("key", "ready", "stands"), [
    # Ready True: the taint controller is removing its own taints; this cache saw the
    # status write first. Nothing is evicted for them.
    (NOT_READY, "True", False),
    (UNREACHABLE, "True", False),
    (NOT_READY, "False", True),
    (UNREACHABLE, "Unknown", True),
    (NOT_READY, None, True),
    # any other key stands whatever Ready says (a ClusterTaintPolicy's, a user's)
    ("clusterhealth.io/dns-unavailable", "True", True),
])
def test_ready_derived_taints_on_a_ready_cluster_evict_nothing(
        key: str, ready: str | None, stands: bool) -> None:
    found = decision.no_execute_taints(cluster("m1", taint(key), ready=ready))
    assert bool(found) is stands


@pytest.mark.parametrize(("clusters", "since", "now", "wait"), [
    (["m1"], {"m1": 10.0}, 10.5, 2.0),               # turned unready 0.5 s ago: 2.5 s window
    (["m1"], {"m1": 10.0}, 12.5, 0.0),               # the window is over
    (["m1"], {"m1": 10.0}, 20.0, 0.0),
    (["m1"], {}, 10.0, 0.0),                        # unready from the start, or a policy taint
    (["m1", "m2"], {"m1": 10.0, "m2": 11.0}, 11.0, 2.5),  # the latest of them
    ([], {"m1": 10.0}, 10.0, 0.0),
])
def test_an_eviction_waits_for_the_rest_of_an_outage_to_be_counted(
        clusters: list[str], since: dict[str, float], now: float, wait: float) -> None:
    window = decision.storm_window(0.5)
    assert window == 0.5 + decision.STORM_SLACK
    assert decision.hold(clusters, since, window, now) == pytest.approx(wait)


@pytest.mark.parametrize(("success", "frequency", "delay"), [
    (1.0, 0.5, 3.5),     # the bench's timers: the storm's last Clusters came back 2.3 s late
    (30.0, 10.0, 42.0),  # the shipped defaults
    (0.0, 0.0, decision.STORM_SLACK),
])
def test_evictions_resume_once_the_rest_of_the_storm_can_be_ready(
        success: float, frequency: float, delay: float) -> None:
    assert decision.resume_delay(success, frequency) == pytest.approx(delay)
