"""The detector's pure rules: which policy claims a template, and the binding it gets."""

from __future__ import annotations

from typing import Any

import pytest

from clusterhealth_controlplane import vocabulary
from clusterhealth_controlplane.detector import decision
from clusterhealth_core.api import policy


def pp(name: str, selectors: list[dict[str, Any]], *, namespace: str = "default",
       priority: int = 0, preemption: str = "Never", kind: str = decision.PP,
       placement: dict[str, Any] | None = None) -> decision.Policy:
    spec = policy.PropagationSpec.from_dict({
        "resourceSelectors": selectors, "priority": priority, "preemption": preemption,
        "placement": placement or {}})
    return decision.Policy(kind, namespace if kind == decision.PP else None, name,
                           f"uid-{name}", spec)


def cpp(name: str, selectors: list[dict[str, Any]], **kwargs: Any) -> decision.Policy:
    return pp(name, selectors, kind=decision.CPP, **kwargs)


def deployment(name: str = "nginx", namespace: str = "default", replicas: int | None = 3,
               labels: dict[str, str] | None = None,
               annotations: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": [
        {"name": "a", "image": "nginx", "resources": {"requests": {"cpu": "250m",
                                                                    "memory": "64Mi"}}},
        {"name": "b", "image": "side", "resources": {"requests": {"cpu": "1",
                                                                   "memory": "1Gi"}}}]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "uid": "u1",
                         "resourceVersion": "7", "labels": labels or {},
                         "annotations": annotations or {}},
            "spec": spec}


BY_NAME = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}
BY_LABEL = {"apiVersion": "apps/v1", "kind": "Deployment",
            "labelSelector": {"matchLabels": {"app": "nginx"}}}
BY_KIND = {"apiVersion": "apps/v1", "kind": "Deployment"}
OTHER_NAME = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "other"}
CONFIGMAPS = {"apiVersion": "v1", "kind": "ConfigMap"}


@pytest.mark.parametrize(("selector", "labels", "expected"), [
    (BY_NAME, {}, decision.PRIORITY_NAME),
    (OTHER_NAME, {}, 0),
    (BY_LABEL, {"app": "nginx"}, decision.PRIORITY_LABELS),
    (BY_LABEL, {"app": "other"}, 0),
    (BY_KIND, {}, decision.PRIORITY_KIND),
    (CONFIGMAPS, {}, 0),
    ({**BY_KIND, "apiVersion": "apps/v1beta1"}, {}, 0),
    ({**BY_KIND, "namespace": "other"}, {}, 0),
    ({"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {"matchExpressions": [
        {"key": "tier", "operator": "NotIn", "values": ["db"]}]}}, {"tier": "web"},
     decision.PRIORITY_LABELS),
    ({"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {"matchExpressions": [
        {"key": "tier", "operator": "Exists"}]}}, {}, 0),
])
def test_selector_priority(selector: dict[str, Any], labels: dict[str, str],
                           expected: int) -> None:
    parsed = policy.ResourceSelector.from_dict(selector)
    assert decision.selector_priority(parsed, deployment(labels=labels), None) == expected


@pytest.mark.parametrize(("candidates", "winner"), [
    ([pp("kind", [BY_KIND]), pp("name", [BY_NAME])], "name"),
    ([pp("kind", [BY_KIND]), pp("label", [BY_LABEL])], "label"),
    ([pp("name", [BY_NAME]), pp("kind", [BY_KIND], priority=5)], "kind"),
    ([cpp("cluster", [BY_NAME], priority=100), pp("ns", [BY_KIND])], "ns"),
    ([pp("b", [BY_KIND]), pp("a", [BY_KIND])], "a"),
    ([pp("elsewhere", [BY_NAME], namespace="other")], None),
    ([pp("none", [OTHER_NAME, CONFIGMAPS])], None),
    ([cpp("c2", [BY_KIND]), cpp("c1", [{**BY_KIND, "namespace": "default"}])], "c1"),
])
def test_best_policy(candidates: list[decision.Policy], winner: str | None) -> None:
    chosen = decision.best_policy(deployment(labels={"app": "nginx"}), candidates)
    assert (chosen.name if chosen else None) == winner


def claimed_by(chosen: decision.Policy) -> dict[str, Any]:
    labels, annotations = decision.claim_marks(chosen)
    return deployment(labels={"app": "nginx", **labels}, annotations=annotations)


def test_a_claimed_template_stays_with_its_policy() -> None:
    old, better = pp("old", [BY_KIND]), pp("better", [BY_NAME], priority=9)
    assert decision.choose(claimed_by(old), [old, better]) is old


def test_a_preempting_policy_takes_over_a_lower_priority_claim() -> None:
    old, better = pp("old", [BY_KIND]), pp("better", [BY_NAME], priority=9, preemption="Always")
    assert decision.choose(claimed_by(old), [old, better]) is better


def test_preemption_needs_a_higher_priority_within_the_kind() -> None:
    old = pp("old", [BY_KIND], priority=9)
    same = pp("same", [BY_NAME], priority=9, preemption="Always")
    assert decision.choose(claimed_by(old), [old, same]) is old


def test_a_propagation_policy_preempts_a_cluster_policy() -> None:
    old = cpp("cluster", [BY_KIND], priority=100)
    local = pp("local", [BY_KIND], preemption="Always")
    assert decision.choose(claimed_by(old), [old, local]) is local


@pytest.mark.parametrize("remaining", [[], [pp("old", [OTHER_NAME])]])
def test_a_claim_whose_policy_is_gone_or_no_longer_selects_goes_to_the_best(
        remaining: list[decision.Policy]) -> None:
    other = pp("other", [BY_KIND])
    assert decision.choose(claimed_by(pp("old", [BY_KIND])), [*remaining, other]) is other


@pytest.mark.parametrize("namespace", ["kube-system", "karmada-system", "karmada-cluster",
                                       "karmada-es-member1", "kube-public"])
def test_reserved_namespaces_are_never_propagated(namespace: str) -> None:
    mine = pp("p", [BY_KIND], namespace=namespace)
    assert decision.choose(deployment(namespace=namespace), [mine]) is None


def test_claim_marks_are_karmadas_keys() -> None:
    labels, annotations = decision.claim_marks(pp("nginx-propagation", [BY_NAME]))
    assert labels == {decision.PP_ID: "uid-nginx-propagation"}
    assert annotations == {decision.PP_NAME: "nginx-propagation", decision.PP_NAMESPACE: "default"}
    assert decision.claim_of(deployment(annotations=annotations)) == decision.Claim(
        decision.PP, "default", "nginx-propagation")


@pytest.mark.parametrize(("obj", "replicas", "requirements"), [
    (deployment(), 3, {"resourceRequest": {"cpu": "1250m", "memory": str(64 * 2**20 + 2**30)},
                       "namespace": "default"}),
    (deployment(replicas=None), 1, {"resourceRequest": {"cpu": "1250m",
                                                        "memory": str(64 * 2**20 + 2**30)},
                                    "namespace": "default"}),
    (deployment(replicas=0), 0, {"resourceRequest": {"cpu": "1250m",
                                                     "memory": str(64 * 2**20 + 2**30)},
                                 "namespace": "default"}),
    ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, 0, None),
])
def test_replica_requirements(obj: dict[str, Any], replicas: int,
                              requirements: dict[str, Any] | None) -> None:
    assert decision.replica_requirements(obj) == (replicas, requirements)


def test_node_claim_comes_from_the_pod_spec() -> None:
    obj = deployment()
    pod = obj["spec"]["template"]["spec"]
    pod["nodeSelector"] = {"disk": "ssd"}
    pod["tolerations"] = [{"key": "k", "operator": "Exists"}]
    _, requirements = decision.replica_requirements(obj)
    assert requirements is not None
    assert requirements["nodeClaim"] == {"nodeSelector": {"disk": "ssd"},
                                         "tolerations": [{"key": "k", "operator": "Exists"}]}


def test_binding_spec_carries_the_reference_replicas_and_placement() -> None:
    placement = {"clusterAffinity": {"clusterNames": ["member1", "member2"]},
                 "replicaScheduling": {"replicaSchedulingType": "Divided",
                                       "replicaDivisionPreference": "Weighted"}}
    chosen = pp("nginx-propagation", [BY_NAME], placement=placement)
    spec = decision.binding_spec(deployment(), chosen)
    assert spec["resource"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx",
                                "namespace": "default", "uid": "u1", "resourceVersion": "7"}
    assert spec["replicas"] == 3
    assert spec["placement"]["clusterAffinity"] == {"clusterNames": ["member1", "member2"]}
    parsed = policy.Placement.from_dict(spec["placement"])
    assert parsed.replica_scheduling is not None
    assert parsed.replica_scheduling.replica_scheduling_type == policy.ReplicaSchedulingType.DIVIDED
    assert vocabulary.binding_name("Deployment", "nginx") == "nginx-deployment"


def test_selection_verdict_names_what_is_claimed_or_why_nothing() -> None:
    mine = pp("p", [BY_NAME, BY_LABEL])
    assert decision.selection_verdict(mine, ["Deployment default/nginx"]) == (
        True, decision.REASON_SELECTED, "claims 1 resource template(s): Deployment default/nginx")
    ok, reason, message = decision.selection_verdict(mine, [])
    assert (ok, reason) == (False, decision.REASON_NO_MATCH)
    assert "in namespace default" in message
    assert "Deployment apps/v1 name=nginx; Deployment apps/v1 labels=app=nginx" in message
    many = [f"ConfigMap default/c{i:02d}" for i in range(12)]
    assert decision.selection_verdict(mine, many)[2].endswith("c09 and 2 more")


def test_selection_verdict_names_kinds_the_server_does_not_serve() -> None:
    mine = pp("p", [{"apiVersion": "example.com/v1", "kind": "Widget"}])
    ok, reason, message = decision.selection_verdict(mine, [], ["Widget example.com/v1"])
    assert (ok, reason) == (False, decision.REASON_NO_MATCH)
    assert message.endswith("; not served by this API server: Widget example.com/v1")


def test_selection_verdict_says_which_kinds_cannot_be_read() -> None:
    mine = pp("p", [BY_NAME, {"apiVersion": "rbac.authorization.k8s.io/v1",
                              "kind": "ClusterRole"}])
    unreadable = {"ClusterRole rbac.authorization.k8s.io/v1": "Forbidden: 403 Forbidden"}
    ok, reason, message = decision.selection_verdict(
        mine, ["Deployment default/nginx"], (), unreadable)
    assert (ok, reason) == (False, decision.REASON_UNREADABLE)
    assert message.startswith("claims 1 resource template(s): Deployment default/nginx; the "
                              "controller manager cannot read ClusterRole "
                              "rbac.authorization.k8s.io/v1 (Forbidden: 403 Forbidden)")
    assert "templateKinds" in message
    ok, reason, message = decision.selection_verdict(mine, [], (), unreadable)
    assert (ok, reason) == (False, decision.REASON_UNREADABLE)
    assert message.startswith("the controller manager cannot read ClusterRole")
