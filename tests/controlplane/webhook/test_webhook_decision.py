"""The default-tolerations webhook's pure answer: which tolerations a policy gets, and how."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from clusterhealth_controlplane.webhook import decision

NOT_READY = "cluster.karmada.io/not-ready"
UNREACHABLE = "cluster.karmada.io/unreachable"
DEFAULTS = decision.Defaults(not_ready_seconds=300, unreachable_seconds=120)
ADDED_NOT_READY = {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute",
                   "tolerationSeconds": 300}
ADDED_UNREACHABLE = {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
                     "tolerationSeconds": 120}


def policy(tolerations: Any = None, *, placement: Any = "default", spec: Any = "default",
           kind: str = "PropagationPolicy") -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": kind,
                            "metadata": {"name": "p", "namespace": "default"}}
    if spec == "default":
        if placement == "default":
            placement = {"clusterAffinity": {"clusterNames": ["member1"]}}
            if tolerations is not None:
                placement["clusterTolerations"] = tolerations
        spec = {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}]}
        if placement is not None:
            spec["placement"] = placement
    if spec is not None:
        body["spec"] = spec
    return body


def review(obj: Any, *, operation: str = "CREATE", kind: str = "PropagationPolicy",
           group: str = "policy.karmada.io", sub_resource: str | None = None) -> bytes:
    request: dict[str, Any] = {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": group, "version": "v1alpha1", "kind": kind},
        "resource": {"group": group, "version": "v1alpha1", "resource": "whatever"},
        "operation": operation, "object": obj}
    if sub_resource:
        request["subResource"] = sub_resource
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": request}).encode()


def applied(obj: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """``obj`` after the answer's patch: RFC 6902 ``add``, the only operation expected.

    (The live tests have the API server apply it.)"""
    response = answer["response"]
    if "patch" not in response:
        return obj
    assert response["patchType"] == "JSONPatch"
    result = copy.deepcopy(obj)
    for operation in json.loads(base64.b64decode(response["patch"])):
        assert set(operation) == {"op", "path", "value"} and operation["op"] == "add"
        *parents, last = operation["path"].split("/")[1:]
        target: Any = result
        for part in parents:
            target = target[part]
        if isinstance(target, list):
            assert last == "-"
            target.append(operation["value"])
        else:
            target[last] = operation["value"]  # sets a member, present or not (4.1)
    return result


def tolerations_after(obj: dict[str, Any], kind: str = "PropagationPolicy"
                      ) -> tuple[list[dict[str, Any]], decision.Decision]:
    answer, _, outcome = decision.admit(review(obj, kind=kind), DEFAULTS)
    assert answer["response"]["allowed"] is True
    assert answer["response"]["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"
    result = applied(obj, answer)
    # nothing but the tolerations changes
    without = json.loads(json.dumps(result))
    without.get("spec", {}).get("placement", {}).pop("clusterTolerations", None)
    original = json.loads(json.dumps(obj))
    original.get("spec", {}).get("placement", {}).pop("clusterTolerations", None)
    if "placement" not in obj.get("spec", {}):
        without.get("spec", {}).pop("placement", None)
    if "spec" not in obj:
        without.pop("spec", None)
    assert without == original
    return result["spec"]["placement"].get("clusterTolerations", []), outcome


OWN_NOT_READY = {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 30}


@pytest.mark.parametrize(("own", "added"), [
    # none: both, not-ready first (Karmada's order)
    (None, [ADDED_NOT_READY, ADDED_UNREACHABLE]),
    ([], [ADDED_NOT_READY, ADDED_UNREACHABLE]),
    # its own for one key is kept; only the other is added
    ([OWN_NOT_READY], [ADDED_UNREACHABLE]),
    ([{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}], [ADDED_NOT_READY]),
    # Equal with the taint's (empty) value tolerates it too
    ([{"key": NOT_READY, "operator": "Equal", "value": "", "effect": "NoExecute"},
      {"key": UNREACHABLE, "effect": "NoExecute", "tolerationSeconds": 5}], []),
    # no effect: every effect, NoExecute included (Karmada added a second toleration)
    ([{"key": NOT_READY, "operator": "Exists"}], [ADDED_UNREACHABLE]),
    # no key with Exists: every taint; nothing to add
    ([{"operator": "Exists"}], []),
    ([{"operator": "Exists", "effect": "NoExecute"}], []),
    # a NoSchedule toleration does not tolerate the NoExecute taint
    ([{"key": NOT_READY, "operator": "Exists", "effect": "NoSchedule"}],
     [ADDED_NOT_READY, ADDED_UNREACHABLE]),
    # a value the taint does not have does not tolerate it
    ([{"key": NOT_READY, "operator": "Equal", "value": "x", "effect": "NoExecute"}],
     [ADDED_NOT_READY, ADDED_UNREACHABLE]),
    # other keys are kept and do not count
    ([{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
     [ADDED_NOT_READY, ADDED_UNREACHABLE]),
])
def test_tolerations_added_for_the_keys_not_tolerated(own: list[dict[str, Any]] | None,
                                                      added: list[dict[str, Any]]) -> None:
    tolerations, outcome = tolerations_after(policy(own))
    assert tolerations == (own or []) + added
    assert outcome.result == (decision.MUTATED if added else decision.UNCHANGED)
    assert outcome.warnings == ()


def test_empty_key_with_equal_tolerates_per_kubernetes() -> None:
    """Kubernetes' ToleratesTaint: empty key, Equal, empty value matches an empty-valued taint
    of every key (validation forbids it on Pods, the policy CRD does not): tolerated."""
    tolerations, outcome = tolerations_after(policy([{"operator": "Equal", "value": ""}]))
    assert outcome.result == decision.UNCHANGED
    assert tolerations == [{"operator": "Equal", "value": ""}]


@pytest.mark.parametrize("shape", ["no placement", "null placement", "no spec",
                                   "null tolerations"])
def test_missing_parts_are_created(shape: str) -> None:
    obj = {"no placement": policy(placement=None),
           "null placement": policy(placement=None),
           "no spec": policy(spec=None),
           "null tolerations": policy(placement={"clusterTolerations": None})}[shape]
    if shape == "null placement":
        obj["spec"]["placement"] = None
    answer, _, outcome = decision.admit(review(obj), DEFAULTS)
    assert outcome.result == decision.MUTATED
    assert applied(obj, answer)["spec"]["placement"]["clusterTolerations"] == [
        ADDED_NOT_READY, ADDED_UNREACHABLE]


def test_patch_only_appends() -> None:
    own = [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]
    outcome = decision.decide(decision.parse_review(review(policy(own))), DEFAULTS)
    assert outcome.patch == (
        {"op": "add", "path": "/spec/placement/clusterTolerations/-", "value": ADDED_NOT_READY},
        {"op": "add", "path": "/spec/placement/clusterTolerations/-",
         "value": ADDED_UNREACHABLE})


def test_cluster_propagation_policy_and_update() -> None:
    obj = policy(kind="ClusterPropagationPolicy")
    tolerations, outcome = tolerations_after(obj, kind="ClusterPropagationPolicy")
    assert tolerations == [ADDED_NOT_READY, ADDED_UNREACHABLE]
    assert outcome.result == decision.MUTATED
    # an UPDATE that drops them gets them back, as a CREATE would
    request = decision.parse_review(review(obj, operation="UPDATE"))
    assert decision.decide(request, DEFAULTS).result == decision.MUTATED


def test_flag_values_are_used() -> None:
    defaults = decision.Defaults(not_ready_seconds=0, unreachable_seconds=86400)
    answer, _, _ = decision.admit(review(policy()), defaults)
    seconds = [t["tolerationSeconds"]
               for t in applied(policy(), answer)["spec"]["placement"]["clusterTolerations"]]
    assert seconds == [0, 86400]


@pytest.mark.parametrize("body", [
    review(policy(), operation="DELETE"),
    review(policy(), operation="CONNECT"),
    review(policy(), kind="Deployment", group="apps"),
    review(policy(), group="other.example.io"),
    review(policy(), sub_resource="status"),
])
def test_other_requests_are_allowed_unchanged(body: bytes) -> None:
    answer, _, outcome = decision.admit(body, DEFAULTS)
    assert outcome.result == decision.IGNORED
    assert answer["response"] == {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                                  "allowed": True}


@pytest.mark.parametrize(("obj", "where"), [
    (None, "the request has no object"),
    ("a string", "the request has no object"),
    (policy(spec=["x"]), "spec is not an object"),
    (policy(placement="everywhere"), "spec.placement is not an object"),
    (policy({"key": NOT_READY}), "spec.placement.clusterTolerations is not a list"),
    (policy(["not-ready"]), "spec.placement.clusterTolerations[0] is not an object"),
    (policy([{}, {"key": NOT_READY, "effect": "Sometimes"}]),
     "spec.placement.clusterTolerations[1]: effect"),
    (policy([{"key": NOT_READY, "tolerationSeconds": "300"}]),
     "spec.placement.clusterTolerations[0]: tolerationSeconds"),
])
def test_malformed_policy_is_allowed_unchanged_with_a_warning(obj: Any, where: str) -> None:
    answer, _, outcome = decision.admit(review(obj), DEFAULTS)
    assert outcome.result == decision.MALFORMED
    response = answer["response"]
    assert response["allowed"] is True
    assert "patch" not in response and "patchType" not in response
    [warning] = response["warnings"]
    assert warning.startswith(decision.WARNING_PREFIX + ": " + where), warning


@pytest.mark.parametrize(("body", "message"), [
    (b"", "the body is not JSON"),
    (b"\xff\xfe", "the body is not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (json.dumps({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
                 "request": {"uid": "u"}}).encode(), "expected an admission.k8s.io/v1"),
    (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "Pod"}).encode(),
     "expected an admission.k8s.io/v1 AdmissionReview"),
    (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
     "has no request"),
    (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                 "request": {"operation": "CREATE"}}).encode(), "has no uid"),
])
def test_a_body_that_is_no_review_is_invalid(body: bytes, message: str) -> None:
    with pytest.raises(decision.InvalidReview, match=message):
        decision.admit(body, DEFAULTS)
