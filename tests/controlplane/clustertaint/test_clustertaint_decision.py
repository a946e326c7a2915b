"""The cluster-taint decisions: Ready and ClusterTaintPolicies -> taints, on a fake clock."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from clusterhealth_controlplane.clustertaint import decision
from clusterhealth_core.api import cluster, groups, meta, policy

T0 = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
TIMEOUT = 300.0
NOT_READY, UNREACHABLE = groups.TAINT_CLUSTER_NOT_READY, groups.TAINT_CLUSTER_UNREACHABLE
DNS = groups.CONDITION_SERVICE_DOMAIN_NAME_RESOLUTION_READY


def at(seconds: float) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


def stamp(seconds: float) -> str:
    return meta.format_time(at(seconds))


def make_cluster(conditions: dict[str, str] | None = None,
                 taints: list[dict[str, Any]] | None = None,
                 labels: dict[str, str] | None = None, name: str = "member1",
                 region: str | None = None) -> cluster.Cluster:
    spec: dict[str, Any] = {"syncMode": "Push", "taints": taints or []}
    if region:
        spec["region"] = region
    return cluster.Cluster.from_dict({
        "apiVersion": groups.CLUSTER.api_version, "kind": groups.CLUSTER.kind,
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"conditions": [
            {"type": type_, "status": status, "reason": "Probed", "message": "",
             "lastTransitionTime": stamp(0)}
            for type_, status in (conditions or {}).items()]},
    })


def taint(key: str, effect: str, since: float | None = None,
          value: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "effect": effect}
    if value is not None:
        out["value"] = value
    if since is not None:
        out["timeAdded"] = stamp(since)
    return out


def wire(plan: decision.Plan) -> list[dict[str, Any]]:
    return [t.to_dict() for t in plan.taints]


def make_policy(name: str, taints: list[dict[str, Any]], *,
                add: list[dict[str, Any]] | None = None,
                remove: list[dict[str, Any]] | None = None,
                target: dict[str, Any] | None = None, created: float = 0) -> (
                    policy.ClusterTaintPolicy):
    spec: dict[str, Any] = {"taints": taints}
    if add:
        spec["addOnConditions"] = add
    if remove:
        spec["removeOnConditions"] = remove
    if target is not None:
        spec["targetClusters"] = target
    return policy.ClusterTaintPolicy.from_dict({
        "apiVersion": groups.CLUSTER_TAINT_POLICY.api_version,
        "kind": groups.CLUSTER_TAINT_POLICY.kind,
        "metadata": {"name": name, "creationTimestamp": stamp(created)},
        "spec": spec})


def match(type_: str, operator: str, *values: str) -> dict[str, Any]:
    return {"conditionType": type_, "operator": operator, "statusValues": list(values)}


# --- the built-in Ready rules -----------------------------------------------------------

@pytest.mark.parametrize(("ready", "before", "now", "after", "requeue"), [
    # Ready False: NoSchedule at once, NoExecute once unschedulable for the timeout.
    ("False", [], 0, [taint(NOT_READY, "NoSchedule", 0)], TIMEOUT),
    ("False", [taint(NOT_READY, "NoSchedule", 0)], 299.5, [taint(NOT_READY, "NoSchedule", 0)],
     0.5),
    ("False", [taint(NOT_READY, "NoSchedule", 0)], 300,
     [taint(NOT_READY, "NoSchedule", 0), taint(NOT_READY, "NoExecute", 300)], None),
    ("False", [taint(NOT_READY, "NoSchedule", 0), taint(NOT_READY, "NoExecute", 300)], 900,
     [taint(NOT_READY, "NoSchedule", 0), taint(NOT_READY, "NoExecute", 300)], None),
    # Unknown: the unreachable key, same clock.
    ("Unknown", [], 10, [taint(UNREACHABLE, "NoSchedule", 10)], TIMEOUT),
    ("Unknown", [taint(UNREACHABLE, "NoSchedule", 10)], 310,
     [taint(UNREACHABLE, "NoSchedule", 10), taint(UNREACHABLE, "NoExecute", 310)], None),
    # False -> Unknown: the key changes, the clock does not restart.
    ("Unknown", [taint(NOT_READY, "NoSchedule", 0)], 200,
     [taint(UNREACHABLE, "NoSchedule", 0)], 100),
    # ... and a NoExecute taint already there is swapped at once, timed from the swap.
    ("Unknown", [taint(NOT_READY, "NoSchedule", 0), taint(NOT_READY, "NoExecute", 300)], 400,
     [taint(UNREACHABLE, "NoSchedule", 0), taint(UNREACHABLE, "NoExecute", 400)], None),
    ("False", [taint(UNREACHABLE, "NoExecute", 300), taint(UNREACHABLE, "NoSchedule", 0)], 400,
     [taint(NOT_READY, "NoSchedule", 0), taint(NOT_READY, "NoExecute", 400)], None),
    # Ready True: both keys, both effects, go.
    ("True", [taint(NOT_READY, "NoSchedule", 0), taint(NOT_READY, "NoExecute", 300),
              taint(UNREACHABLE, "NoSchedule", 5)], 400, [], None),
    ("True", [], 0, [], None),
    # No Ready condition yet (a new cluster): not-ready NoSchedule, never NoExecute.
    (None, [], 0, [taint(NOT_READY, "NoSchedule", 0)], None),
    (None, [taint(NOT_READY, "NoSchedule", 0)], 10_000, [taint(NOT_READY, "NoSchedule", 0)],
     None),
], ids=["false-new", "false-waiting", "false-due", "false-steady", "unknown-new",
        "unknown-due", "false-to-unknown", "noexecute-swapped", "noexecute-swapped-back",
        "true-clears", "true-clean", "no-ready", "no-ready-steady"])
def test_ready_rules(ready: str | None, before: list[dict[str, Any]], now: float,
                     after: list[dict[str, Any]], requeue: float | None) -> None:
    obj = make_cluster({"Ready": ready} if ready else {}, before)
    plan = decision.plan(obj, [], at(now), TIMEOUT)
    assert wire(plan) == after
    assert plan.requeue_after == requeue
    assert plan.changed == (after != before)


def test_user_taints_are_kept_untouched_and_in_place() -> None:
    user = taint("maintenance", "NoSchedule", 5, value="planned")
    bare = taint("dedicated", "NoExecute")  # no timeAdded: not ours to fill
    obj = make_cluster({"Ready": "True"}, [user, taint(NOT_READY, "NoSchedule", 0), bare])
    plan = decision.plan(obj, [], at(60), TIMEOUT)
    assert wire(plan) == [user, bare]
    assert [c.taint.key for c in plan.removed] == [NOT_READY]
    assert plan.removed[0].rule == "Ready is True"
    obj = make_cluster({"Ready": "False"}, [user, bare])
    plan = decision.plan(obj, [], at(60), TIMEOUT)
    assert wire(plan) == [user, bare, taint(NOT_READY, "NoSchedule", 60)]


def test_a_built_in_taint_without_time_gets_one_and_keeps_its_place() -> None:
    obj = make_cluster({"Ready": "False"},
                       [taint(NOT_READY, "NoSchedule"), taint("x", "NoSchedule")])
    plan = decision.plan(obj, [], at(30), TIMEOUT)
    assert wire(plan) == [taint(NOT_READY, "NoSchedule", 30), taint("x", "NoSchedule")]
    assert plan.changed and not plan.added and not plan.removed
    assert plan.requeue_after == TIMEOUT


def test_time_added_is_whole_seconds_as_stored() -> None:
    obj = make_cluster({"Ready": "False"})
    plan = decision.plan(obj, [], at(0.75), TIMEOUT)
    assert plan.taints[0].time_added == T0
    assert plan.requeue_after == pytest.approx(TIMEOUT - 0.75)


def test_the_eviction_timeout_is_the_option() -> None:
    obj = make_cluster({"Ready": "False"}, [taint(NOT_READY, "NoSchedule", 0)])
    assert not decision.plan(obj, [], at(1), 5.0).changed
    assert [t.effect for t in decision.plan(obj, [], at(5), 5.0).taints] == [
        cluster.TaintEffect.NO_SCHEDULE, cluster.TaintEffect.NO_EXECUTE]


# --- ClusterTaintPolicy -----------------------------------------------------------------

DNS_TAINT = {"key": "clusterhealth.io/dns-failure", "effect": "NoExecute"}
DNS_POLICY = make_policy("dns", [DNS_TAINT], add=[match(DNS, "In", "False")],
                         remove=[match(DNS, "In", "True")])


@pytest.mark.parametrize(("conditions", "before", "after"), [
    ({"Ready": "True", DNS: "False"}, [], [taint(DNS_TAINT["key"], "NoExecute", 60)]),
    ({"Ready": "True", DNS: "False"}, [taint(DNS_TAINT["key"], "NoExecute", 1, value="v")],
     [taint(DNS_TAINT["key"], "NoExecute", 1, value="v")]),  # kept as it is
    ({"Ready": "True", DNS: "True"}, [taint(DNS_TAINT["key"], "NoExecute", 1)], []),
    # Neither list matches (Unknown): nothing changes either way.
    ({"Ready": "True", DNS: "Unknown"}, [], []),
    ({"Ready": "True", DNS: "Unknown"}, [taint(DNS_TAINT["key"], "NoExecute", 1)],
     [taint(DNS_TAINT["key"], "NoExecute", 1)]),
    # A condition the cluster lacks matches nothing.
    ({"Ready": "True"}, [], []),
], ids=["added", "kept", "removed", "unknown-adds-nothing", "unknown-removes-nothing",
        "absent"])
def test_policy_adds_and_removes(conditions: dict[str, str], before: list[dict[str, Any]],
                                 after: list[dict[str, Any]]) -> None:
    plan = decision.plan(make_cluster(conditions, before), [DNS_POLICY], at(60), TIMEOUT)
    assert wire(plan) == after
    if after and not before:
        assert plan.added[0].rule == "ClusterTaintPolicy dns"


def test_conditions_are_anded_and_not_in_needs_the_condition() -> None:
    both = make_policy("both", [{"key": "k", "effect": "NoSchedule"}],
                       add=[match("Ready", "NotIn", "True"), match("NetworkAvailable", "NotIn",
                                                                    "True")])
    assert wire(decision.plan(make_cluster({"Ready": "True", "NetworkAvailable": "False"}),
                              [both], T0, TIMEOUT)) == []
    # Ready False adds the built-in taint; the policy needs NetworkAvailable too.
    assert [t["key"] for t in wire(decision.plan(
        make_cluster({"Ready": "False"}), [both], T0, TIMEOUT))] == [NOT_READY]
    assert [t["key"] for t in wire(decision.plan(
        make_cluster({"Ready": "False", "NetworkAvailable": "Unknown"}), [both], T0,
        TIMEOUT))] == [NOT_READY, "k"]


def test_add_is_evaluated_before_remove() -> None:
    """Both lists matching: the taints are added, then removed (Karmada's order)."""
    odd = make_policy("odd", [{"key": "k", "effect": "NoSchedule"}],
                      add=[match("Ready", "In", "True")], remove=[match("Ready", "In", "True")])
    assert wire(decision.plan(make_cluster({"Ready": "True"}), [odd], T0, TIMEOUT)) == []


@pytest.mark.parametrize(("target", "selected"), [
    (None, True),
    ({"clusterNames": ["member1"]}, True),
    ({"clusterNames": ["member2"]}, False),
    ({"exclude": ["member1"]}, False),
    ({"labelSelector": {"matchLabels": {"env": "prod"}}}, True),
    ({"labelSelector": {"matchLabels": {"env": "dev"}}}, False),
    ({"fieldSelector": {"matchExpressions": [
        {"key": "region", "operator": "In", "values": ["eu"]}]}}, True),
    ({"fieldSelector": {"matchExpressions": [
        {"key": "region", "operator": "NotIn", "values": ["eu"]}]}}, False),
])
def test_target_clusters(target: dict[str, Any] | None, selected: bool) -> None:
    candidate = make_policy("p", [{"key": "k", "effect": "NoSchedule"}],
                            add=[match("Ready", "In", "True")], target=target)
    obj = make_cluster({"Ready": "True"}, labels={"env": "prod"}, region="eu")
    assert bool(wire(decision.plan(obj, [candidate], T0, TIMEOUT))) == selected


def test_a_cluster_no_longer_targeted_keeps_the_taint() -> None:
    candidate = make_policy("p", [{"key": "k", "effect": "NoSchedule"}],
                            remove=[match("Ready", "In", "True")],
                            target={"clusterNames": ["member2"]})
    obj = make_cluster({"Ready": "True"}, [taint("k", "NoSchedule", 0)])
    assert wire(decision.plan(obj, [candidate], T0, TIMEOUT)) == [taint("k", "NoSchedule", 0)]


def test_conflicting_policies_settle_oldest_first() -> None:
    k = [{"key": "k", "effect": "NoSchedule"}]
    adds = make_policy("adds", k, add=[match("Ready", "In", "True")], created=10)
    removes = make_policy("removes", k, remove=[match("Ready", "In", "True")], created=0)
    obj = make_cluster({"Ready": "True"})
    first = decision.plan(obj, [adds, removes], T0, TIMEOUT)
    assert wire(first) == [taint("k", "NoSchedule", 0)]  # the older removes, the newer adds
    settled = make_cluster({"Ready": "True"}, wire(first))
    assert not decision.plan(settled, [removes, adds], at(50), TIMEOUT).changed


def test_a_policy_managing_a_built_in_key_does_not_churn() -> None:
    """Built-in rules first, then policies: a policy re-adding a removed taint keeps its time."""
    keep = make_policy("keep", [{"key": NOT_READY, "effect": "NoSchedule"}],
                       add=[match("Ready", "In", "True")])
    obj = make_cluster({"Ready": "True"}, [taint(NOT_READY, "NoSchedule", 0)])
    plan = decision.plan(obj, [keep], at(100), TIMEOUT)
    assert wire(plan) == [taint(NOT_READY, "NoSchedule", 0)]
    assert not plan.changed and not plan.added and not plan.removed


def test_built_in_and_policy_together() -> None:
    obj = make_cluster({"Ready": "False", DNS: "False"},
                       [taint("user", "NoSchedule", 1), taint(NOT_READY, "NoSchedule", 0)])
    plan = decision.plan(obj, [DNS_POLICY], at(300), TIMEOUT)
    assert wire(plan) == [taint("user", "NoSchedule", 1), taint(NOT_READY, "NoSchedule", 0),
                          taint(NOT_READY, "NoExecute", 300),
                          taint(DNS_TAINT["key"], "NoExecute", 300)]
    assert [(c.taint.key, str(c.taint.effect)) for c in plan.added] == [
        (NOT_READY, "NoExecute"), (DNS_TAINT["key"], "NoExecute")]
    assert plan.added[0].rule.startswith("Ready is False, unschedulable since")
