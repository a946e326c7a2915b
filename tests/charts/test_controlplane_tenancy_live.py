"""A control plane shared by teams: what a namespace user can and cannot make it do.

The controller manager runs as shipped: its own process, the chart's arguments,
a token of the chart's ServiceAccount and exactly the chart's RBAC.  A tenant
has ``edit`` rights in one namespace only (what Kubernetes' ``edit`` role grants
for the kinds used here, plus PropagationPolicies and ResourceBindings there, as
Karmada's ``edit`` aggregation grants).  The member's credentials are an admin token, as platforms
usually give.  Each attack a security review found is tried, and each must be
refused or contained where the tenant looks (a False condition, a Warning
Event), with the API servers' audit logs as witnesses of what the controller
manager did and did not do:

* a member object the platform made is never taken over under ``Abort``, and
  not deleted with the tenant's template; ``Overwrite`` adopts it, and deleting
  the template releases it instead of deleting it;
* a ResourceBinding cannot reach another namespace's template, ``kube-system``'s
  Secrets or the members' credentials;
* the namespace's labels (Pod Security admission) reach the member with the
  namespace, before any workload;
* a kind that is namespaced on the control plane but cluster-scoped in the
  member is refused, not created cluster-wide;
* a policy selecting a kind the controller manager may not read says so, and
  blocks no other kind;
* a Cluster whose ``secretRef`` points outside the credentials namespace is
  refused, and that Secret is never read.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import pathlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import chartkit
import cpchart
import pytest

import testkit
from clusterhealth_controlplane import vocabulary
from clusterhealth_controlplane.binding import decision as binding
from clusterhealth_controlplane.execution import decision as execution
from clusterhealth_controlplane.namespacesync import decision as namespacesync
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config as kubecfg
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment, processes

T = TypeVar("T")
RELEASE = "tenancy"
MANAGER = f"{RELEASE}-clusterhealth-controlplane-controller-manager"
MANAGER_USER = f"system:serviceaccount:{cpchart.NAMESPACE}:{MANAGER}"
MEMBER = "member2"
"""The audited environment's one member."""
GROUP = "scope.clusterhealth.test"
TEMPLATE_KINDS = json.dumps([
    {"apiGroup": "apps", "resources": ["deployments", "statefulsets", "replicasets"],
     "status": ["deployments", "statefulsets"]},
    {"apiGroup": "", "resources": ["services", "configmaps", "serviceaccounts"]},
    {"apiGroup": GROUP, "resources": ["widgets"]}])
"""The chart's default kinds, and the test's Widget (namespaced here, not in the member)."""
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}
WIDGETS = resources.Resource(GROUP, "v1", "widgets", "Widget", True)
MEMBER_WIDGETS = resources.Resource(GROUP, "v1", "widgets", "Widget", False)
ROLES = resources.Resource("rbac.authorization.k8s.io", "v1", "roles", "Role", True)
ROLE_BINDINGS = resources.Resource("rbac.authorization.k8s.io", "v1", "rolebindings",
                                   "RoleBinding", True)


def _widget_crd(scope: str) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{GROUP}"},
            "spec": {"group": GROUP, "scope": scope,
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                         "openAPIV3Schema": {"type": "object",
                                             "x-kubernetes-preserve-unknown-fields": True}}}]}}


@dataclasses.dataclass
class Platform:
    """The shared control plane as the test sees it."""

    env: environment.LocalEnvironment
    cp: kube.ApiClient
    """The platform's admin."""
    tenant: kube.ApiClient
    """A namespace user: edit rights in ``team`` only."""
    member: kube.ApiClient
    team: str
    other_team: str
    manager: processes.ManagedProcess

    async def eventually(self, check: Callable[[], Awaitable[T | None]], what: str,
                         timeout: float = 60.0) -> T:
        return await testkit.eventually(check, timeout, what, interval=0.25,
                                        not_yet=(errors.NotFound,), process=self.manager)

    async def policy(self, name: str, selectors: list[dict[str, Any]], **spec: Any) -> None:
        """The tenant's PropagationPolicy onto the member."""
        await self.tenant.create(resources.PROPAGATION_POLICIES, {
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": self.team},
            "spec": {"resourceSelectors": selectors,
                     "placement": {"clusterAffinity": {"clusterNames": [MEMBER]}}, **spec}},
            namespace=self.team)

    async def schedule(self, kind: str, name: str) -> None:
        """What the scheduler does: the detector's binding placed on the member."""
        found = await self.eventually(lambda: self.cp.get(
            resources.RESOURCE_BINDINGS, vocabulary.binding_name(kind, name), namespace=self.team),
            f"binding of {kind} {name}")
        await self.cp.patch(resources.RESOURCE_BINDINGS, found["metadata"]["name"],
                            {"spec": {"clusters": [{"name": MEMBER}]}}, namespace=self.team)

    async def work(self, kind: str, name: str, namespace: str | None) -> dict[str, Any]:
        return await self.cp.get(resources.WORKS, vocabulary.work_name(kind, name, namespace),
                                 namespace=vocabulary.execution_namespace(MEMBER))

    async def warning(self, namespace: str, name: str, reason: str,
                      api: kube.ApiClient | None = None) -> dict[str, Any] | None:
        """A Warning Event about ``name`` in ``namespace`` (read as the tenant by default)."""
        found = await (api or self.tenant).list(resources.EVENTS, namespace=namespace)
        return next((e for e in found["items"] if e.get("type") == "Warning"
                     and e.get("reason") == reason
                     and (e.get("involvedObject") or {}).get("name") == name), None)

    def member_writes(self, resource: str, name: str) -> list[dict[str, Any]]:
        """The controller manager's writes of one object, from the member's audit log."""
        return [e for e in self.env.audit_events(MEMBER)
                if (e.get("objectRef") or {}).get("resource") == resource
                and (e.get("objectRef") or {}).get("name") == name
                and e.get("verb") in ("create", "patch", "update", "delete")
                and str(e.get("userAgent", "")).startswith("clusterhealth-controlplane")]


TENANT_RULES = [
    # what Kubernetes' aggregated `edit` role grants for these kinds (the bare control plane
    # runs no kube-controller-manager, which fills `edit` in by aggregation)
    {"apiGroups": [""], "resources": ["configmaps", "secrets", "services", "pods",
                                      "serviceaccounts"], "verbs": ["*"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "replicasets"],
     "verbs": ["*"]},
    # what Karmada's `edit` aggregation adds
    {"apiGroups": ["policy.karmada.io"], "resources": ["propagationpolicies"],
     "verbs": ["*"]},
    {"apiGroups": ["work.karmada.io"], "resources": ["resourcebindings"], "verbs": ["*"]},
    # the test's own kind
    {"apiGroups": [GROUP], "resources": ["widgets"], "verbs": ["*"]},
]


async def _tenant_rights(cp: kube.ApiClient, team: str) -> str:
    """A ServiceAccount with a team's edit rights in ``team`` (only): its token."""
    await cp.create(resources.SERVICE_ACCOUNTS, {"metadata": {"name": "tenant",
                                                              "namespace": team}},
                    namespace=team)
    await cp.create(ROLES, {"metadata": {"name": "team-edit", "namespace": team},
                            "rules": TENANT_RULES}, namespace=team)
    await cp.create(ROLE_BINDINGS, {
        "metadata": {"name": "tenant-edit", "namespace": team},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "team-edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": team}]},
        namespace=team)
    return await cpchart.token(cp, "tenant", namespace=team)


@pytest.fixture(scope="module")
async def platform(audited_env: environment.LocalEnvironment,
                   tmp_path_factory: pytest.TempPathFactory,
                   python_env: dict[str, str]) -> AsyncIterator[Platform]:
    env = audited_env
    tmp = tmp_path_factory.mktemp("tenancy")
    suffix = uuid.uuid4().hex[:6]
    team, other = f"team-a-{suffix}", f"team-b-{suffix}"
    documents = cpchart.render(RELEASE, "rbacOnly=true",
                               set_json=f"templateKinds={TEMPLATE_KINDS}")
    deployment = cpchart.render(RELEASE, set_json=f"templateKinds={TEMPLATE_KINDS}")
    async with env.client() as cp, env.client(MEMBER) as member:
        await cpchart.install(cp, documents)
        for api, scope in ((cp, "Namespaced"), (member, "Cluster")):
            with contextlib.suppress(errors.Conflict):
                await api.create(resources.CRDS, _widget_crd(scope))
        await cp.create(resources.NAMESPACES, {"metadata": {"name": team,
                                                            "labels": RESTRICTED}})
        await cp.create(resources.NAMESPACES, {"metadata": {"name": other}})
        bearer = await _tenant_rights(cp, team)
        config = cpchart.kubeconfig(env, tmp / "manager.kubeconfig",
                                    await cpchart.token(cp, MANAGER))
        manager = cpchart.manager_process(deployment, MANAGER, config, tmp / "manager.log",
                                          python_env)
        tenant_credentials = kubecfg.Credentials(
            server=env.servers[environment.CONTROL_PLANE].url,
            ca_data=(env.workdir / "ca.crt").read_bytes(), token=bearer)
        manager.start()
        try:
            async with kube.ApiClient(tenant_credentials, user_agent="tenant") as tenant:
                yield Platform(env, cp, tenant, member, team, other, manager)
        finally:
            await manager.stop()
            await cpchart.uninstall(cp, documents)
            for name in (team, other):
                await cp.delete(resources.NAMESPACES, name, missing_ok=True)


async def _config_map(api: kube.ApiClient, namespace: str, name: str,
                      owner: str) -> dict[str, Any]:
    return await api.create(resources.CONFIGMAPS, {
        "metadata": {"name": name, "namespace": namespace}, "data": {"owner": owner}},
        namespace=namespace)


async def _member_namespace(platform: Platform) -> dict[str, Any]:
    """The team's namespace in the member, once the namespace sync made it."""
    return await platform.eventually(
        lambda: platform.member.get(resources.NAMESPACES, platform.team),
        f"namespace {platform.team} in {MEMBER}")


async def test_pod_security_labels_arrive_with_the_namespace(platform: Platform) -> None:
    found = await _member_namespace(platform)
    assert found["metadata"]["labels"].items() >= RESTRICTED.items()
    annotations = found["metadata"].get("annotations") or {}
    assert annotations.get(vocabulary.WORK_NAME) == namespacesync.work_name(platform.team)
    assert execution.CREATED_BY not in annotations  # the sync's, never made bare first
    # the member enforces it: a privileged Pod with a hostPath is refused there
    with pytest.raises(errors.Forbidden, match="violates PodSecurity"):
        await platform.member.request(
            "POST", resources.PODS.path(namespace=platform.team), params={"dryRun": "All"},
            body={"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "host", "namespace": platform.team},
                  "spec": {"containers": [{"name": "c", "image": "busybox",
                                           "securityContext": {"privileged": True}}],
                           "volumes": [{"name": "root", "hostPath": {"path": "/"}}]}})
    # the other team's namespace is synced too (without labels of its own)
    await platform.eventually(lambda: platform.member.get(resources.NAMESPACES,
                                                          platform.other_team),
                              f"namespace {platform.other_team} in {MEMBER}")


async def test_a_platform_object_is_never_taken_over_under_abort(platform: Platform) -> None:
    await _member_namespace(platform)
    name = "platform-config"
    made = await _config_map(platform.member, platform.team, name, "platform")
    await _config_map(platform.tenant, platform.team, name, "tenant")
    await platform.policy("take-over", [{"apiVersion": "v1", "kind": "ConfigMap",
                                         "name": name}])
    await platform.schedule("ConfigMap", name)

    async def refused() -> dict[str, Any] | None:
        work = await platform.work("ConfigMap", name, platform.team)
        applied = cpchart.condition(work, "Applied")
        return applied if applied and applied["status"] == "False" else None

    applied = await platform.eventually(refused, "Applied=False on the Work")
    assert applied["message"].startswith(
        f"ConfigMap {platform.team}/{name} already exists in cluster {MEMBER} and it was not "
        "created by this control plane")
    rb = await platform.tenant.get(resources.RESOURCE_BINDINGS,
                                   vocabulary.binding_name("ConfigMap", name),
                                   namespace=platform.team)
    assert cpchart.condition(rb, "FullyApplied")["status"] == "False"  # type: ignore[index]
    assert rb["status"]["aggregatedStatus"][0]["appliedMessage"] == applied["message"]
    event = await platform.eventually(
        lambda: platform.warning(platform.team, name, execution.CONFLICT_REASON),
        "a Warning Event on the template, readable by the tenant")
    assert "neither changed nor deleted" in event["message"]
    # the tenant deletes the template: the platform's object stays as it was
    await platform.tenant.delete(resources.CONFIGMAPS, name, namespace=platform.team)
    await platform.eventually(lambda: _gone(platform.cp, resources.WORKS,
                                            vocabulary.work_name("ConfigMap", name, platform.team),
                                            vocabulary.execution_namespace(MEMBER)),
                              "the Work deleted")
    live = await platform.member.get(resources.CONFIGMAPS, name, namespace=platform.team)
    assert live["data"] == {"owner": "platform"}
    assert live["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]
    assert platform.member_writes("configmaps", name) == []


async def test_overwrite_adopts_and_deleting_the_template_releases(platform: Platform) -> None:
    await _member_namespace(platform)
    name = "adopt-me"
    await _config_map(platform.member, platform.team, name, "platform")
    await _config_map(platform.tenant, platform.team, name, "tenant")
    await platform.policy("adopt", [{"apiVersion": "v1", "kind": "ConfigMap", "name": name}],
                          conflictResolution="Overwrite")
    await platform.schedule("ConfigMap", name)

    async def adopted() -> dict[str, Any] | None:
        live = await platform.member.get(resources.CONFIGMAPS, name, namespace=platform.team)
        return live if execution.adopted(live) else None

    live = await platform.eventually(adopted, "the member object adopted")
    assert live["data"] == {"owner": "tenant"}
    await platform.tenant.delete(resources.CONFIGMAPS, name, namespace=platform.team)

    async def released() -> dict[str, Any] | None:
        found = await platform.member.get(resources.CONFIGMAPS, name, namespace=platform.team)
        labels = found["metadata"].get("labels") or {}
        return found if vocabulary.MANAGED not in labels else None

    live = await platform.eventually(released, "the adopted object released")
    annotations = live["metadata"].get("annotations") or {}
    assert not set(annotations) & set(execution.RELEASED_ANNOTATIONS)
    writes = platform.member_writes("configmaps", name)
    assert [w["verb"] for w in writes if w["verb"] == "delete"] == []
    assert writes, "the adoption itself is in the member's audit log"


async def test_a_binding_reaches_no_other_namespace(platform: Platform) -> None:
    suffix = uuid.uuid4().hex[:6]
    await _config_map(platform.cp, platform.other_team, f"theirs-{suffix}", "team-b")
    stolen = f"stolen-{suffix}"
    await platform.cp.create(resources.SECRETS, {
        "metadata": {"name": stolen, "namespace": "kube-system"},
        "data": {"token": base64.b64encode(b"admin").decode()}}, namespace="kube-system")
    targets = [("ConfigMap", "v1", platform.other_team, f"theirs-{suffix}"),
               ("Secret", "v1", "kube-system", stolen),
               ("Secret", "v1", environment.CLUSTER_SECRET_NAMESPACE, MEMBER),
               ("ConfigMap", "v1", None, f"cluster-wide-{suffix}")]
    for i, (kind, api_version, namespace, name) in enumerate(targets):
        resource = {"apiVersion": api_version, "kind": kind, "name": name}
        if namespace:
            resource["namespace"] = namespace
        await platform.tenant.create(resources.RESOURCE_BINDINGS, {
            "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": f"reach-{i}", "namespace": platform.team},
            "spec": {"resource": resource, "clusters": [{"name": MEMBER}]}},
            namespace=platform.team)
    try:
        for i, (kind, _, namespace, name) in enumerate(targets):
            async def refused(i: int = i) -> dict[str, Any] | None:
                rb = await platform.tenant.get(resources.RESOURCE_BINDINGS, f"reach-{i}",
                                               namespace=platform.team)
                found = cpchart.condition(rb, "FullyApplied")
                return found if found and found["reason"] == \
                    binding.REFUSED_CROSS_NAMESPACE else None

            condition = await platform.eventually(refused, f"binding reach-{i} refused")
            assert condition["status"] == "False"
            assert "propagates only a resource of its own namespace" in condition["message"]
            await platform.eventually(
                lambda i=i: platform.warning(platform.team, f"reach-{i}",  # type: ignore[misc]
                                             binding.REFUSED_CROSS_NAMESPACE),
                f"a Warning Event on binding reach-{i}")
            with pytest.raises(errors.NotFound):
                await platform.cp.get(resources.WORKS, vocabulary.work_name(kind, name, namespace),
                                      namespace=vocabulary.execution_namespace(MEMBER))
        for kind, _, _, name in targets:
            plural = "configmaps" if kind == "ConfigMap" else "secrets"
            assert platform.member_writes(plural, name) == []
    finally:
        for i in range(len(targets)):
            await platform.tenant.delete(resources.RESOURCE_BINDINGS, f"reach-{i}",
                                         namespace=platform.team, missing_ok=True)
        await platform.cp.delete(resources.SECRETS, stolen, namespace="kube-system",
                                 missing_ok=True)


async def test_a_kind_cluster_scoped_in_the_member_is_refused(platform: Platform) -> None:
    await _member_namespace(platform)
    name = f"w-{uuid.uuid4().hex[:6]}"
    await platform.tenant.create(WIDGETS, {
        "apiVersion": f"{GROUP}/v1", "kind": "Widget",
        "metadata": {"name": name, "namespace": platform.team}, "spec": {"size": 1}},
        namespace=platform.team)
    await platform.policy(f"widgets-{name}", [{"apiVersion": f"{GROUP}/v1", "kind": "Widget",
                                               "name": name}])
    await platform.schedule("Widget", name)

    async def refused() -> dict[str, Any] | None:
        work = await platform.work("Widget", name, platform.team)
        applied = cpchart.condition(work, "Applied")
        return applied if applied and applied["status"] == "False" else None

    applied = await platform.eventually(refused, "Applied=False on the Widget's Work")
    assert "is namespaced on the control plane but its kind is cluster-scoped in cluster " \
        f"{MEMBER}: refused" in applied["message"]
    await platform.eventually(lambda: platform.warning(platform.team, name,
                                                       execution.APPLIED_FAILED),
                              "a Warning Event on the Widget")
    with pytest.raises(errors.NotFound):
        await platform.member.get(MEMBER_WIDGETS, name)
    assert platform.member_writes("widgets", name) == []


async def test_an_unreadable_kind_says_so_and_blocks_no_other(platform: Platform) -> None:
    await _member_namespace(platform)
    await platform.policy("roles", [{"apiVersion": "rbac.authorization.k8s.io/v1",
                                     "kind": "Role"}])
    name = f"web-{uuid.uuid4().hex[:6]}"
    await platform.tenant.create(resources.SERVICES, {
        "metadata": {"name": name, "namespace": platform.team},
        "spec": {"ports": [{"port": 80}], "selector": {"app": name}}}, namespace=platform.team)
    await platform.policy(f"svc-{name}", [{"apiVersion": "v1", "kind": "Service",
                                           "name": name}])
    await platform.schedule("Service", name)
    # the Service kind, selected after the unreadable one, propagates all the same
    await platform.eventually(lambda: platform.member.get(resources.SERVICES, name,
                                                          namespace=platform.team),
                              "the Service in the member")

    async def says_so() -> dict[str, Any] | None:
        policy = await platform.tenant.get(resources.PROPAGATION_POLICIES, "roles",
                                           namespace=platform.team)
        found = cpchart.condition(policy, "ResourcesSelected")
        return found if found and found["reason"] == "KindNotReadable" else None

    condition = await platform.eventually(says_so, "the policy's KindNotReadable condition")
    assert condition["status"] == "False"
    assert "cannot read Role rbac.authorization.k8s.io/v1 (Forbidden" in condition["message"]


async def test_a_secret_ref_outside_the_credentials_namespace_is_never_read(
        platform: Platform) -> None:
    suffix = uuid.uuid4().hex[:6]
    secret, cluster = f"elsewhere-{suffix}", f"outside-{suffix}"
    await platform.cp.create(resources.SECRETS, {
        "metadata": {"name": secret, "namespace": "kube-system"},
        "data": {"token": base64.b64encode(b"x").decode(),
                 "caBundle": base64.b64encode(b"x").decode()}}, namespace="kube-system")
    await platform.cp.create(resources.CLUSTERS, {
        "apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
        "metadata": {"name": cluster},
        "spec": {"apiEndpoint": platform.env.servers[MEMBER].url, "syncMode": "Push",
                 "secretRef": {"namespace": "kube-system", "name": secret}}})
    try:
        async def refused() -> dict[str, Any] | None:
            work = await platform.cp.get(resources.WORKS, namespacesync.work_name(
                platform.team), namespace=vocabulary.execution_namespace(cluster))
            applied = cpchart.condition(work, "Applied")
            return applied if applied and applied["status"] == "False" else None

        applied = await platform.eventually(refused, "the namespace Work refused there")
        assert f"names Secret kube-system/{secret}, outside karmada-cluster" in \
            applied["message"]
        reads = [e for e in platform.env.audit_events()
                 if (e.get("objectRef") or {}).get("resource") == "secrets"
                 and (e.get("objectRef") or {}).get("name") == secret
                 and (e.get("user") or {}).get("username") == MANAGER_USER]
        assert reads == []
    finally:
        await platform.cp.delete(resources.CLUSTERS, cluster, missing_ok=True)
        await platform.cp.delete(resources.SECRETS, secret, namespace="kube-system",
                                 missing_ok=True)


async def _gone(api: kube.ApiClient, resource: resources.Resource, name: str,
                namespace: str) -> bool:
    try:
        await api.get(resource, name, namespace=namespace)
    except errors.NotFound:
        return True
    return False


def test_the_chart_renders_what_this_test_runs() -> None:
    """The RBAC this module installs is the chart's own (rendered, not written here)."""
    documents = cpchart.render(RELEASE, "rbacOnly=true",
                               set_json=f"templateKinds={TEMPLATE_KINDS}")
    role = chartkit.one(documents, "ClusterRole", MANAGER)
    readable = {(g, r) for rule in role["rules"] for g in rule["apiGroups"]
                for r in rule["resources"] if "list" in rule["verbs"]}
    assert ("", "secrets") not in readable and ("", "namespaces") in readable
    assert (GROUP, "widgets") in readable
    assert ("rbac.authorization.k8s.io", "roles") not in readable
    assert pathlib.Path(cpchart.CHART / "values.yaml").exists()
