"""What ``clusterhealth join`` makes, as tables: names, rights, manifests, comparisons."""

from __future__ import annotations

import base64

import pytest
import yaml

from clusterhealth_cli import joinplan
from clusterhealth_core.kube import resources

MEMBER = joinplan.Member(name="member1", server="https://198.18.0.10:6443", cluster_id="uid-1",
                         ca=b"CA", insecure=False, proxy_url=None)


@pytest.mark.parametrize(("name", "ok"), [
    ("member1", True), ("a", True), ("m" * 48, True), ("m" * 49, False), ("Member1", False),
    ("-member", False), ("member.1", False), ("", False)])
def test_cluster_names_as_karmada_accepts_them(name: str, ok: bool) -> None:
    assert (joinplan.check_name(name) is None) == ok


@pytest.mark.parametrize(("text", "kinds"), [
    ("apps/deployments,services", ("apps/deployments", "services")),
    (" batch/jobs , configmaps ", ("batch/jobs", "configmaps"))])
def test_member_kinds(text: str, kinds: tuple[str, ...]) -> None:
    assert joinplan.parse_kinds(text) == kinds


@pytest.mark.parametrize("text", ["", "Deployments", "apps/", "apps/deployments/x"])
def test_member_kinds_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"GROUP/RESOURCE|at least one"):
        joinplan.parse_kinds(text)


def test_karmada_names() -> None:
    assert joinplan.member_account("member1") == "karmada-member1"
    assert joinplan.member_role("member1") == "karmada-controller-manager:karmada-member1"
    assert joinplan.agent_role("member1") == "clusterhealth-agent:member1"


def test_scoped_rights_are_what_the_controllers_do() -> None:
    rules = joinplan.member_rules("scoped", ("apps/deployments", "services"))
    assert {"nonResourceURLs": ["/readyz", "/healthz", "/livez", "/version", "/api", "/api/*",
                                "/apis", "/apis/*"], "verbs": ["get"]} in rules
    assert {"apiGroups": [""], "resources": ["nodes", "pods"],
            "verbs": ["get", "list", "watch"]} in rules
    writes = {(tuple(r["apiGroups"]), tuple(r["resources"])) for r in rules
              if "create" in r.get("verbs", [])}
    assert writes == {(("",), ("namespaces",)), (("",), ("services",)),
                      (("apps",), ("deployments",))}
    assert not any("*" in r.get("resources", []) or "secrets" in r.get("resources", [])
                   for r in rules)
    assert joinplan.member_rules("full", ()) == [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
        {"nonResourceURLs": ["*"], "verbs": ["get"]}]


def test_cluster_and_its_secret_in_karmada_s_shape() -> None:
    cluster = joinplan.cluster(MEMBER, joinplan.Options(provider="aws", region="eu"))
    assert cluster["spec"] == {
        "id": "uid-1", "apiEndpoint": "https://198.18.0.10:6443", "syncMode": "Push",
        "secretRef": {"namespace": "karmada-cluster", "name": "member1"},
        "provider": "aws", "region": "eu"}
    secret = joinplan.cluster_secret(MEMBER, "tok", {"uid": "u"})
    assert {k: base64.b64decode(v) for k, v in secret["data"].items()} == {
        "caBundle": b"CA", "token": b"tok"}
    assert secret["metadata"]["ownerReferences"] == [{"uid": "u"}]
    assert secret["metadata"]["labels"] == joinplan.MANAGED_BY


def test_agent_kubeconfig() -> None:
    plane = joinplan.ControlPlane(server="https://198.18.0.1:6443", ca=b"PLANE-CA")
    document = yaml.safe_load(joinplan.kubeconfig(plane, "agent-token", "member1"))
    assert document["clusters"][0]["cluster"] == {
        "server": "https://198.18.0.1:6443",
        "certificate-authority-data": base64.b64encode(b"PLANE-CA").decode()}
    assert document["users"][0]["user"] == {"token": "agent-token"}


@pytest.mark.parametrize(("desired", "live", "differs"), [
    ({"a": 1}, {"a": 1, "b": 2}, False),                 # extra fields on the server: fine
    ({"a": 1}, {"a": 2}, True),
    ({"a": {"b": [1, 2]}}, {"a": {"b": [1, 2]}}, False),
    ({"a": [{"x": 1}]}, {"a": [{"x": 1, "y": 2}]}, False),
    ({"a": [1]}, {"a": [1, 2]}, True),
    ({"a": 1}, None, True)])
def test_differs(desired: object, live: object, differs: bool) -> None:
    assert joinplan.differs(desired, live) is differs


def test_describe_as_kubectl_prints() -> None:
    assert joinplan.describe(resources.SERVICE_ACCOUNTS, {"metadata": {
        "name": "karmada-m", "namespace": "karmada-cluster"}}) == \
        "serviceaccount/karmada-cluster/karmada-m"
    assert joinplan.describe(joinplan.CLUSTER_ROLES, {"metadata": {"name": "r"}}) == \
        "clusterrole.rbac.authorization.k8s.io/r"
