"""The controlplane chart's RBAC, as rendered, in the real API server.

The ServiceAccounts, (Cluster)Roles and bindings of ``rbacOnly=true`` are
created in the control plane, then:

* the API server itself answers, by SubjectAccessReview, what each
  ServiceAccount may do: what each controller and the scheduler need, and
  nothing of what they must not (delete Clusters, read Secrets outside
  ``karmada-cluster``, touch the other component's Lease, ...);
* the controller manager runs with the chart's own arguments and a token of its
  ServiceAccount (TokenRequest API) through a whole propagation: policy status,
  bindings, Works with their finalizer, the member objects, status back to the
  Work, the binding and the template, and deletion; with no Forbidden answer.

The scheduler process is checked by the access reviews only (it is being
written beside this chart; the same run-it test belongs here once it lands).
"""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import chartkit
import cpchart
import pytest

import testkit
from clusterhealth_controlplane import vocabulary
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment, processes

NAMESPACE = cpchart.NAMESPACE
RELEASE = "rbac-live"
MANAGER = f"{RELEASE}-clusterhealth-controlplane-controller-manager"
SCHEDULER = f"{RELEASE}-clusterhealth-controlplane-scheduler"
SECRETS_NAMESPACE = "karmada-cluster"
NO_SECRET_TEMPLATES = ('templateKinds=[{"apiGroup": "apps", "resources": ["deployments"], '
                       '"status": ["deployments"]}, {"apiGroup": "", "resources": ["configmaps"]}]')
WITH_SECRET_TEMPLATES = ('templateKinds=[{"apiGroup": "", "resources": ["configmaps", '
                         '"secrets"]}]')
T = TypeVar("T")


def _render(*sets: str, set_json: str | None = None) -> list[chartkit.Manifest]:
    return cpchart.render(RELEASE, *sets, set_json=set_json)


_install = cpchart.install
_uninstall = cpchart.uninstall


@pytest.fixture
async def rbac(cp: kube.ApiClient) -> AsyncIterator[list[chartkit.Manifest]]:
    """The chart's rbacOnly objects with the default values, created (and removed after)."""
    documents = _render("rbacOnly=true")
    await _install(cp, documents)
    try:
        yield documents
    finally:
        await _uninstall(cp, documents)


# --- what the API server says each ServiceAccount may do -------------------------------

async def _allowed(cp: kube.ApiClient, account: str, verb: str, item: str,
                   namespace: str = "", name: str = "") -> bool:
    """The API server's answer: may ``account`` do ``verb`` on ``plural[.group][/sub]``?"""
    plural_group, _, subresource = item.partition("/")
    plural, _, group = plural_group.partition(".")
    attributes = {"verb": verb, "group": group, "resource": plural,
                  "subresource": subresource, "namespace": namespace, "name": name}
    review = await cp.request(
        "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        body={"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"user": f"system:serviceaccount:{NAMESPACE}:{account}",
                       "groups": ["system:serviceaccounts",
                                  f"system:serviceaccounts:{NAMESPACE}",
                                  "system:authenticated"],
                       "resourceAttributes": {k: v for k, v in attributes.items() if v}}})
    return bool(review["status"].get("allowed"))


# (verb, resource[.group][/subresource], namespace, name); "app" is any template namespace
MANAGER_MAY = [
    ("list", "propagationpolicies.policy.karmada.io", "", ""),
    ("watch", "clusterpropagationpolicies.policy.karmada.io", "", ""),
    ("patch", "propagationpolicies.policy.karmada.io/status", "app", "pp"),
    ("update", "clusterpropagationpolicies.policy.karmada.io/status", "", "cpp"),
    ("create", "resourcebindings.work.karmada.io", "app", ""),
    ("patch", "clusterresourcebindings.work.karmada.io", "", "x"),
    ("delete", "resourcebindings.work.karmada.io", "app", "x"),
    ("patch", "clusterresourcebindings.work.karmada.io/status", "", "x"),
    ("create", "works.work.karmada.io", "karmada-es-member1", ""),
    ("update", "works.work.karmada.io", "karmada-es-member1", "w"),
    ("delete", "works.work.karmada.io", "karmada-es-member2", "w"),
    ("patch", "works.work.karmada.io/status", "karmada-es-member1", "w"),
    ("list", "clusters.cluster.karmada.io", "", ""),
    ("patch", "clusters.cluster.karmada.io/status", "", "member1"),
    ("update", "clusters.cluster.karmada.io/status", "", "member1"),
    ("watch", "leases.coordination.k8s.io", SECRETS_NAMESPACE, ""),
    ("create", "namespaces", "", ""),
    ("watch", "namespaces", "", ""),                                       # namespaceSync
    ("get", "namespaces", "", "app"),                                      # execution
    ("create", "events", "app", ""),
    ("patch", "events", "default", "e"),
    ("watch", "deployments.apps", "", ""),
    ("patch", "deployments.apps", "app", "web"),
    ("patch", "deployments.apps/status", "app", "web"),
    ("list", "configmaps", "", ""),
    ("list", "secrets", SECRETS_NAMESPACE, ""),
    ("get", "secrets", SECRETS_NAMESPACE, "member1"),
    ("create", "leases.coordination.k8s.io", NAMESPACE, ""),
    ("update", "leases.coordination.k8s.io", NAMESPACE, MANAGER),
    # the failover controllers
    ("update", "resourcebindings.work.karmada.io", "app", "x"),            # taintManager
    ("update", "clusterresourcebindings.work.karmada.io", "", "x"),        # taintManager
    ("patch", "clusters.cluster.karmada.io", "", "member1"),               # clusterTaint
    ("watch", "clustertaintpolicies.policy.karmada.io", "", ""),           # clusterTaint
]
MANAGER_MUST_NOT = [
    ("delete", "clusters.cluster.karmada.io", "", "member1"),
    ("update", "clusters.cluster.karmada.io", "", "member1"),
    ("create", "propagationpolicies.policy.karmada.io", "app", ""),
    ("update", "leases.coordination.k8s.io", SECRETS_NAMESPACE, "member1"),
    ("delete", "propagationpolicies.policy.karmada.io", "app", "pp"),
    ("patch", "clustertaintpolicies.policy.karmada.io", "", "p"),
    ("deletecollection", "works.work.karmada.io", "karmada-es-member1", ""),
    ("delete", "namespaces", "", "app"),
    ("patch", "namespaces", "", "app"),
    ("get", "secrets", "app", "s"),                 # secrets are no template by default
    ("list", "secrets", "", ""),
    ("get", "secrets", "kube-system", "s"),
    ("delete", "deployments.apps", "app", "web"),
    ("create", "deployments.apps", "app", ""),
    ("create", "pods", "app", ""),
    ("create", "secrets", SECRETS_NAMESPACE, ""),
    ("delete", "secrets", SECRETS_NAMESPACE, "member1"),
    ("update", "leases.coordination.k8s.io", NAMESPACE, SCHEDULER),
    ("update", "leases.coordination.k8s.io", "kube-system", MANAGER),
    ("impersonate", "serviceaccounts", NAMESPACE, ""),
]
SCHEDULER_MAY = [
    ("watch", "resourcebindings.work.karmada.io", "", ""),
    ("list", "clusterresourcebindings.work.karmada.io", "", ""),
    ("patch", "resourcebindings.work.karmada.io", "app", "x"),
    ("patch", "clusterresourcebindings.work.karmada.io", "", "x"),
    ("update", "resourcebindings.work.karmada.io/status", "app", "x"),
    ("patch", "clusterresourcebindings.work.karmada.io/status", "", "x"),
    ("watch", "clusters.cluster.karmada.io", "", ""),
    ("create", "events", "app", ""),
    ("create", "events", "default", ""),
    ("create", "leases.coordination.k8s.io", NAMESPACE, ""),
    ("get", "leases.coordination.k8s.io", NAMESPACE, SCHEDULER),
]
SCHEDULER_MUST_NOT = [
    ("create", "resourcebindings.work.karmada.io", "app", ""),
    ("delete", "resourcebindings.work.karmada.io", "app", "x"),
    ("delete", "clusters.cluster.karmada.io", "", "member1"),
    ("patch", "clusters.cluster.karmada.io/status", "", "member1"),
    ("get", "secrets", SECRETS_NAMESPACE, "member1"),
    ("list", "secrets", "", ""),
    ("patch", "works.work.karmada.io", "karmada-es-member1", "w"),
    ("list", "propagationpolicies.policy.karmada.io", "", ""),
    ("watch", "deployments.apps", "", ""),
    ("update", "leases.coordination.k8s.io", NAMESPACE, MANAGER),
]


async def _answers(cp: kube.ApiClient, account: str,
                   cases: list[tuple[str, str, str, str]]) -> dict[str, bool]:
    found = {}
    for verb, item, namespace, name in cases:
        found[f"{verb} {item} {namespace}/{name}"] = await _allowed(
            cp, account, verb, item, namespace, name)
    return found


async def test_each_service_account_may_do_exactly_its_part(
        cp: kube.ApiClient, rbac: list[chartkit.Manifest]) -> None:
    accounts = sorted(d["metadata"]["name"] for d in rbac if d["kind"] == "ServiceAccount")
    assert accounts == [MANAGER, SCHEDULER]
    for account, may, must_not in ((MANAGER, MANAGER_MAY, MANAGER_MUST_NOT),
                                   (SCHEDULER, SCHEDULER_MAY, SCHEDULER_MUST_NOT)):
        allowed = await _answers(cp, account, may)
        assert [k for k, v in allowed.items() if not v] == [], account
        refused = await _answers(cp, account, must_not)
        assert [k for k, v in refused.items() if v] == [], account


async def test_the_reviews_can_fail(cp: kube.ApiClient) -> None:
    """Without the chart's RBAC the same ServiceAccount may do none of it."""
    for account, may in ((MANAGER, MANAGER_MAY), (SCHEDULER, SCHEDULER_MAY)):
        allowed = await _answers(cp, account, may)
        assert not any(allowed.values()), allowed


async def test_secrets_are_readable_as_templates_only_when_listed(
        cp: kube.ApiClient, rbac: list[chartkit.Manifest]) -> None:
    # the defaults leave secrets out: the controller manager reads only the members' ones
    assert not await _allowed(cp, MANAGER, "get", "secrets", "app", "s")
    assert not await _allowed(cp, MANAGER, "list", "secrets", "", "")
    assert await _allowed(cp, MANAGER, "get", "secrets", SECRETS_NAMESPACE, "member1")
    documents = _render("rbacOnly=true", set_json=WITH_SECRET_TEMPLATES)
    await _install(cp, documents)
    # listed, they are readable everywhere: what the chart's comment warns of
    assert await _allowed(cp, MANAGER, "get", "secrets", "app", "s")
    assert await _allowed(cp, MANAGER, "get", "secrets", "kube-system", "s")
    assert await _allowed(cp, MANAGER, "patch", "configmaps", "app", "c")
    assert not await _allowed(cp, MANAGER, "patch", "services", "app", "s")
    documents = _render("rbacOnly=true", set_json=NO_SECRET_TEMPLATES)
    await _install(cp, documents)
    assert not await _allowed(cp, MANAGER, "get", "secrets", "app", "s")
    assert not await _allowed(cp, MANAGER, "patch", "services", "app", "s")


# --- the controller manager at work with only this RBAC -------------------------------

async def _eventually(check: Callable[[], Awaitable[T | None]], what: str,
                      process: processes.ManagedProcess, timeout: float = 60.0) -> T:
    return await testkit.eventually(check, timeout, what, not_yet=(errors.NotFound,),
                                    process=process)


async def _gone(api: kube.ApiClient, resource: resources.Resource, name: str,
                namespace: str) -> bool:
    try:
        await api.get(resource, name, namespace=namespace)
    except errors.NotFound:
        return True
    return False


_condition = cpchart.condition


async def test_controller_manager_propagates_with_exactly_the_charts_rbac(
    env: environment.LocalEnvironment, cp: kube.ApiClient, rbac: list[chartkit.Manifest],
    tmp_path: pathlib.Path, python_env: dict[str, str],
) -> None:
    config = cpchart.kubeconfig(env, tmp_path / "sa.kubeconfig",
                                await cpchart.token(cp, MANAGER))
    manager = cpchart.manager_process(_render(), MANAGER, config,
                                      tmp_path / "controlplane.log", python_env)

    namespace, name = f"rbac-{uuid.uuid4().hex[:6]}", f"web-{uuid.uuid4().hex[:6]}"
    labels = {"app": name}
    await cp.create(resources.NAMESPACES, {"metadata": {"name": namespace}})
    await cp.create(resources.DEPLOYMENTS, {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                     {"name": "web", "image": "nginx:1.27"}]}}}}, namespace=namespace)
    await cp.create(resources.CONFIGMAPS, {"metadata": {"name": name, "namespace": namespace},
                                            "data": {"k": "v"}}, namespace=namespace)
    await cp.create(resources.PROPAGATION_POLICIES, {
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "pp", "namespace": namespace},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                        "name": name},
                                       {"apiVersion": "v1", "kind": "ConfigMap", "name": name}],
                 "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}}},
        namespace=namespace)
    execution = vocabulary.execution_namespace("member1")
    work = vocabulary.work_name("ConfigMap", name, namespace)
    manager.start()
    try:
        async with env.client("member1") as member:
            # detector: the policy's condition and the bindings; the test schedules them
            await _eventually(lambda: _policy_selected(cp, namespace), "policy status", manager)
            for kind in ("deployment", "configmap"):
                await _eventually(lambda kind=kind: cp.get(  # type: ignore[misc]
                    resources.RESOURCE_BINDINGS, f"{name}-{kind}", namespace=namespace),
                    f"{kind} binding", manager)
                await cp.patch(resources.RESOURCE_BINDINGS, f"{name}-{kind}",
                               {"spec": {"clusters": [{"name": "member1", "replicas": 2}]}},
                               namespace=namespace)
            # binding + execution: Works with the finalizer, the objects in the member
            await _eventually(lambda: member.get(resources.CONFIGMAPS, name,
                                                 namespace=namespace), "member ConfigMap",
                              manager)
            await _eventually(lambda: member.get(resources.DEPLOYMENTS, name,
                                                 namespace=namespace), "member Deployment",
                              manager)
            found = await cp.get(resources.WORKS, work, namespace=execution)
            assert found["metadata"].get("finalizers"), found["metadata"]
            # status back: the member's Deployment status (no kube-controller-manager in a
            # bare member: written here) -> Work -> binding -> the template
            await member.patch(resources.DEPLOYMENTS, name, {"status": {
                "observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
                "readyReplicas": 2, "availableReplicas": 2}}, namespace=namespace,
                subresource="status")

            async def template_available() -> bool:
                template = await cp.get(resources.DEPLOYMENTS, name, namespace=namespace)
                return bool((template.get("status") or {}).get("availableReplicas") == 2)

            await _eventually(template_available, "template status", manager)

            async def work_and_binding_status() -> bool:
                w = await cp.get(resources.WORKS, work, namespace=execution)
                b = await cp.get(resources.RESOURCE_BINDINGS, f"{name}-configmap",
                                 namespace=namespace)
                return bool((w.get("status") or {}).get("manifestStatuses")
                            and (b.get("status") or {}).get("aggregatedStatus"))

            await _eventually(work_and_binding_status, "Work and binding status", manager)
            # deletion: template -> binding -> Work (finalizer removed) -> member object
            await cp.delete(resources.CONFIGMAPS, name, namespace=namespace)
            await _eventually(lambda: _gone(cp, resources.RESOURCE_BINDINGS,
                                            f"{name}-configmap", namespace),
                              "binding deleted", manager)
            await _eventually(lambda: _gone(cp, resources.WORKS, work, execution),
                              "Work deleted", manager)
            await _eventually(lambda: _gone(member, resources.CONFIGMAPS, name, namespace),
                              "member ConfigMap deleted", manager)
            lease = await cp.get(resources.LEASES, MANAGER, namespace=NAMESPACE)
            assert lease["spec"].get("holderIdentity")
        log = manager.log_tail(400)
        assert "Forbidden" not in log and " 403" not in log, log
    finally:
        await manager.stop()
        await cp.delete(resources.NAMESPACES, namespace, missing_ok=True)


async def _policy_selected(cp: kube.ApiClient, namespace: str) -> bool:
    policy = await cp.get(resources.PROPAGATION_POLICIES, "pp", namespace=namespace)
    return _condition(policy, "ResourcesSelected") is not None
