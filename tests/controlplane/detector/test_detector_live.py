"""The detector against a real API server: templates + policies -> claims and bindings."""

from __future__ import annotations

from typing import Any

import cpkit

import testkit
from clusterhealth_controlplane.detector import controller, decision
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment, waiting

BY_NAME = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}


async def binding(api: kube.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return await api.get(resources.RESOURCE_BINDINGS, name, namespace=namespace)
    except errors.NotFound:
        return None


async def test_a_deployment_and_its_policy_make_a_binding(
        env: environment.LocalEnvironment) -> None:
    async with env.client() as api, cpkit.running_manager(api, ["detector"]):
        ns = await cpkit.make_namespace(api)
        await api.create(resources.DEPLOYMENTS, cpkit.deployment("nginx", ns), namespace=ns)
        await api.create(resources.PROPAGATION_POLICIES, cpkit.propagation_policy(
            "nginx-propagation", ns, [BY_NAME], cpkit.DIVIDED_1_2), namespace=ns)

        made = await waiting.eventually(lambda: binding(api, ns, "nginx-deployment"))
        template = await api.get(resources.DEPLOYMENTS, "nginx", namespace=ns)
        spec = made["spec"]
        assert spec["resource"]["uid"] == template["metadata"]["uid"]
        assert spec["resource"]["kind"] == "Deployment"
        assert spec["replicas"] == 3
        assert spec["replicaRequirements"]["resourceRequest"] == {"cpu": "100m",
                                                                   "memory": str(64 * 2**20)}
        weights = spec["placement"]["replicaScheduling"]["weightPreference"]["staticWeightList"]
        assert [w["weight"] for w in weights] == [1, 2]
        assert made["metadata"]["ownerReferences"][0]["uid"] == template["metadata"]["uid"]
        assert made["metadata"]["labels"][controller.MANAGED_BY] == controller.FIELD_MANAGER
        annotations = template["metadata"]["annotations"]
        assert annotations[decision.PP_NAME] == "nginx-propagation"
        assert annotations[decision.PP_NAMESPACE] == ns

        # the template changes: the binding follows
        await api.patch(resources.DEPLOYMENTS, "nginx", {"spec": {"replicas": 5}}, namespace=ns)

        async def five() -> bool:
            found = await binding(api, ns, "nginx-deployment")
            return bool(found and found["spec"].get("replicas") == 5)
        await waiting.eventually(five)

        # the template goes: so does its binding
        await api.delete(resources.DEPLOYMENTS, "nginx", namespace=ns)

        async def gone() -> bool:
            return await binding(api, ns, "nginx-deployment") is None
        await waiting.eventually(gone)


async def test_a_preempting_policy_takes_the_template_and_a_deleted_one_lets_go(
        env: environment.LocalEnvironment) -> None:
    async with env.client() as api, cpkit.running_manager(api, ["detector"]):
        ns = await cpkit.make_namespace(api)
        await api.create(resources.DEPLOYMENTS, cpkit.deployment("nginx", ns), namespace=ns)
        await api.create(resources.PROPAGATION_POLICIES, cpkit.propagation_policy(
            "by-kind", ns, [{"apiVersion": "apps/v1", "kind": "Deployment"}]), namespace=ns)

        async def claimed_by(name: str) -> bool:
            obj = await api.get(resources.DEPLOYMENTS, "nginx", namespace=ns)
            return (obj["metadata"].get("annotations") or {}).get(decision.PP_NAME) == name
        await waiting.eventually(lambda: claimed_by("by-kind"))

        # higher priority without preemption: the claim stays
        await api.create(resources.PROPAGATION_POLICIES, cpkit.propagation_policy(
            "quiet", ns, [BY_NAME], priority=5), namespace=ns)
        # higher priority with preemption: it takes over
        await api.create(resources.PROPAGATION_POLICIES, cpkit.propagation_policy(
            "bold", ns, [BY_NAME], {"clusterAffinity": {"clusterNames": ["member2"]}},
            priority=9, preemption="Always"), namespace=ns)
        await waiting.eventually(lambda: claimed_by("bold"))

        async def placed_on_member2() -> bool:
            found = await binding(api, ns, "nginx-deployment")
            return bool(found and found["spec"]["placement"]["clusterAffinity"]
                        == {"clusterNames": ["member2"]})
        await waiting.eventually(placed_on_member2)

        # every policy deleted: the claim is removed, the binding kept (Karmada's behaviour)
        for name in ("by-kind", "quiet", "bold"):
            await api.delete(resources.PROPAGATION_POLICIES, name, namespace=ns)

        async def unclaimed() -> bool:
            obj = await api.get(resources.DEPLOYMENTS, "nginx", namespace=ns)
            return not {decision.PP_NAME, decision.PP_NAMESPACE} & set(
                obj["metadata"].get("annotations") or {})
        await waiting.eventually(unclaimed)
        assert await binding(api, ns, "nginx-deployment") is not None


async def test_any_kind_a_policy_selects_is_bound_and_unserved_kinds_break_nothing(
        env: environment.LocalEnvironment) -> None:
    async with env.client() as api, cpkit.running_manager(api, ["detector"]):
        ns = await cpkit.make_namespace(api)
        await api.create(resources.CONFIGMAPS, {"metadata": {"name": "settings", "namespace": ns},
                                                "data": {"a": "1"}}, namespace=ns)
        await api.create(resources.PROPAGATION_POLICIES, cpkit.propagation_policy(
            "mixed", ns, [{"apiVersion": "example.com/v1", "kind": "Widget"},
                          {"apiVersion": "v1", "kind": "ConfigMap", "name": "settings"}]),
            namespace=ns)
        made = await waiting.eventually(lambda: binding(api, ns, "settings-configmap"))
        assert "replicas" not in made["spec"]
        assert made["spec"]["resource"]["kind"] == "ConfigMap"

        # the user's typo shows on the policy, not only in a log line
        async def says_unserved() -> bool:
            obj = await api.get(resources.PROPAGATION_POLICIES, "mixed", namespace=ns)
            return any(c["type"] == decision.CONDITION_SELECTED and "not served by this API "
                       "server: Widget example.com/v1" in c["message"]
                       for c in (obj.get("status") or {}).get("conditions") or [])
        await waiting.eventually(says_unserved)


async def test_templates_in_karmadas_namespaces_are_not_propagated(
        env: environment.LocalEnvironment) -> None:
    async with env.client() as api, cpkit.running_manager(api, ["detector"]):
        ns = testkit.unique("karmada-es-x")
        await api.create(resources.NAMESPACES, {"metadata": {"name": ns}})
        await api.create(resources.CONFIGMAPS, {"metadata": {"name": "c", "namespace": ns}},
                         namespace=ns)
        await api.create(resources.PROPAGATION_POLICIES, cpkit.propagation_policy(
            "p", ns, [{"apiVersion": "v1", "kind": "ConfigMap"}]), namespace=ns)
        other = await cpkit.make_namespace(api)
        await api.create(resources.CONFIGMAPS, {"metadata": {"name": "c", "namespace": other}},
                         namespace=other)
        await api.create(resources.PROPAGATION_POLICIES, cpkit.propagation_policy(
            "p", other, [{"apiVersion": "v1", "kind": "ConfigMap"}]), namespace=other)
        # the ordinary namespace's ConfigMap is bound; by then the reserved one would be too
        await waiting.eventually(lambda: binding(api, other, "c-configmap"))
        assert await binding(api, ns, "c-configmap") is None


async def test_a_policy_selecting_nothing_says_so_until_a_template_appears(
        env: environment.LocalEnvironment) -> None:
    async with env.client() as api, cpkit.running_manager(api, ["detector"]):
        ns = await cpkit.make_namespace(api)
        await api.create(resources.PROPAGATION_POLICIES, cpkit.propagation_policy(
            "lonely", ns, [BY_NAME]), namespace=ns)

        async def selected(status: str) -> dict[str, Any] | None:
            obj = await api.get(resources.PROPAGATION_POLICIES, "lonely", namespace=ns)
            for condition in (obj.get("status") or {}).get("conditions") or []:
                if condition["type"] == decision.CONDITION_SELECTED \
                        and condition["status"] == status:
                    return dict(condition)
            return None
        empty = await waiting.eventually(lambda: selected("False"))
        assert empty["reason"] == decision.REASON_NO_MATCH
        assert "Deployment apps/v1 name=nginx" in empty["message"]
        # nothing was bound meanwhile
        listing = await api.list(resources.RESOURCE_BINDINGS, namespace=ns)
        assert listing["items"] == []

        await api.create(resources.DEPLOYMENTS, cpkit.deployment("nginx", ns), namespace=ns)
        claimed = await waiting.eventually(lambda: selected("True"))
        assert claimed["message"] == f"claims 1 resource template(s): Deployment {ns}/nginx"
