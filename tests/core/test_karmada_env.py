"""The local environment's Karmada mode runs Karmada's own control-plane parts.

On the session's Karmada-mode environment (``karmada_env``, shared with the
add-ons' end-to-end tests): Clusters must come from
``karmada-aggregated-apiserver`` through the APIService (not from a CRD),
Karmada's ``karmada-controller-manager`` must write Ready on the members and
follow a member's API server going away and coming back, and the Remedy and
MultiClusterIngress CRDs must be Karmada's own, with its schema.  Another
environment whose controller-manager cannot start shows the StartError.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import binaries as bins
from clusterhealth_localenv import environment, karmada, waiting

MEMBERS = ("member1", "member2")
READY_TIMEOUT = 60.0
"""Generous bound for Karmada's status timings (2 s updates, 6 s failure, 4 s success)."""


@pytest.fixture
async def kcp(karmada_env: environment.LocalEnvironment) -> AsyncIterator[kube.ApiClient]:
    async with karmada_env.client() as api:
        yield api


def _condition(cluster: dict[str, Any], kind: str) -> dict[str, Any]:
    return karmada.condition(cluster, kind) or {}


async def test_clusters_are_served_by_the_aggregated_apiserver(
        karmada_env: environment.LocalEnvironment, kcp: kube.ApiClient) -> None:
    groups = await kcp.request("GET", "/apis")
    group = next(g for g in groups["groups"] if g["name"] == "cluster.karmada.io")
    assert [v["version"] for v in group["versions"]] == ["v1alpha1"]
    discovery = await kcp.request("GET", "/apis/cluster.karmada.io/v1alpha1")
    names = {r["name"] for r in discovery["resources"]}
    assert {"clusters", "clusters/status", "clusters/proxy"} <= names  # proxy: Karmada's own
    with pytest.raises(errors.NotFound):
        await kcp.get(resources.CRDS, "clusters.cluster.karmada.io")

    api_service = await kcp.get(karmada.APISERVICES, karmada.API_SERVICE)
    assert _condition(api_service, "Available")["status"] == "True"
    spec = api_service["spec"]
    assert spec["service"]["namespace"] == karmada.KARMADA_SYSTEM
    assert (spec["groupPriorityMinimum"], spec["versionPriority"]) == (2000, 10)
    service = await kcp.get(resources.SERVICES, spec["service"]["name"],
                            namespace=karmada.KARMADA_SYSTEM)
    assert service["spec"]["type"] == "ExternalName"
    assert karmada_env.karmada is not None
    assert service["spec"]["externalName"] == karmada_env.karmada.host

    through_proxy = await kcp.list(resources.CLUSTERS)
    assert sorted(c["metadata"]["name"] for c in through_proxy["items"]) == list(MEMBERS)
    # The same objects straight from karmada-aggregated-apiserver's own address.
    admin = karmada_env.servers[environment.CONTROL_PLANE].credentials()
    direct_credentials = dataclasses.replace(admin, server=karmada_env.karmada.url)
    async with kube.ApiClient(direct_credentials, environ={}) as direct:
        served = await direct.list(resources.CLUSTERS)
    assert sorted(c["metadata"]["name"] for c in served["items"]) == list(MEMBERS)


async def test_karmada_writes_ready_and_api_enablements(kcp: kube.ApiClient) -> None:
    for name in MEMBERS:
        cluster = await waiting.eventually(
            lambda name=name: _ready_cluster(kcp, name), timeout=READY_TIMEOUT)
        assert _condition(cluster, "Ready")["reason"] == "ClusterReady"
        enablements = _condition(cluster, "CompleteAPIEnablements")
        assert enablements["status"] == "True", enablements
        status = cluster["status"]
        assert status["kubernetesVersion"] == bins.KUBERNETES_VERSION
        assert any(e["groupVersion"] == "v1" for e in status["apiEnablements"])
        managers = {entry["manager"] for entry in cluster["metadata"]["managedFields"]
                    if entry.get("subresource") == "status"}
        assert any(m.startswith("karmada-controller-manager") for m in managers), managers
        # Karmada's cluster controller took the Cluster over: finalizer and execution space.
        assert "karmada.io/cluster-controller" in cluster["metadata"]["finalizers"]
        await kcp.get(resources.NAMESPACES, f"karmada-es-{name}")


async def _ready_cluster(api: kube.ApiClient, name: str) -> dict[str, Any] | None:
    cluster = await api.get(resources.CLUSTERS, name)
    return cluster if _condition(cluster, "Ready").get("status") == "True" else None


async def _not_ready_cluster(api: kube.ApiClient, name: str) -> dict[str, Any] | None:
    cluster = await api.get(resources.CLUSTERS, name)
    ready = _condition(cluster, "Ready").get("status")
    return cluster if ready in ("False", "Unknown") else None


async def test_a_stopped_member_turns_not_ready_and_back(
        karmada_env: environment.LocalEnvironment, kcp: kube.ApiClient) -> None:
    await waiting.eventually(lambda: _ready_cluster(kcp, "member1"), timeout=READY_TIMEOUT)
    await karmada_env.stop_server("member1")
    try:
        cluster = await waiting.eventually(lambda: _not_ready_cluster(kcp, "member1"),
                                           timeout=READY_TIMEOUT, interval=0.2)
        ready = _condition(cluster, "Ready")
        assert ready["reason"] == "ClusterNotReachable", ready
        tainted = await waiting.eventually(lambda: _taint_keys(kcp, "member1"),
                                           timeout=READY_TIMEOUT)
        assert "cluster.karmada.io/not-ready" in tainted  # Karmada's cluster controller
        other = await kcp.get(resources.CLUSTERS, "member2")
        assert _condition(other, "Ready")["status"] == "True"
    finally:
        await karmada_env.start_server("member1")
    cluster = await waiting.eventually(lambda: _ready_cluster(kcp, "member1"),
                                       timeout=READY_TIMEOUT, interval=0.2)
    assert _condition(cluster, "Ready")["reason"] == "ClusterReady"
    await waiting.eventually(lambda: _untainted(kcp, "member1"), timeout=READY_TIMEOUT)


async def _taint_keys(api: kube.ApiClient, name: str) -> set[str]:
    cluster = await api.get(resources.CLUSTERS, name)
    return {taint["key"] for taint in cluster["spec"].get("taints") or []}


async def _untainted(api: kube.ApiClient, name: str) -> bool:
    return not await _taint_keys(api, name)


async def test_the_controller_manager_stops_and_starts_again(
        karmada_env: environment.LocalEnvironment, kcp: kube.ApiClient) -> None:
    assert karmada_env.karmada is not None
    await karmada_env.karmada.stop_controller_manager()
    assert not karmada_env.karmada.controller_manager.running()
    await karmada_env.karmada.start_controller_manager()
    assert karmada_env.karmada.controller_manager.running()
    for name in MEMBERS:
        await waiting.eventually(lambda name=name: _ready_cluster(kcp, name),
                                 timeout=READY_TIMEOUT)


async def test_remedy_and_mci_crds_are_karmada_s_own(kcp: kube.ApiClient) -> None:
    remedy = await kcp.get(resources.CRDS, resources.REMEDIES.crd_name)
    mci = await kcp.get(resources.CRDS, resources.MULTI_CLUSTER_INGRESSES.crd_name)
    for crd in (remedy, mci):
        assert "controller-gen.kubebuilder.io/version" in crd["metadata"]["annotations"]
    assert [v.get("subresources") for v in remedy["spec"]["versions"]] == [None]
    assert [v.get("subresources") for v in mci["spec"]["versions"]] == [{"status": {}}]
    remedy_schema = remedy["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert "status" not in remedy_schema["properties"]
    await kcp.get(resources.CRDS, resources.RESOURCE_BINDINGS.crd_name)


async def test_karmada_s_cluster_schema_as_served(kcp: kube.ApiClient) -> None:
    """What the writers must cope with: atomic conditions, no remedyActionSources."""
    document = await kcp.request("GET", "/openapi/v3/apis/cluster.karmada.io/v1alpha1")
    schemas = document["components"]["schemas"]
    status = next(schema for name, schema in schemas.items()
                  if name.endswith("cluster.v1alpha1.ClusterStatus"))
    properties = status["properties"]
    conditions = properties["conditions"]
    assert conditions.get("x-kubernetes-list-type") != "map", conditions
    assert "x-kubernetes-list-map-keys" not in conditions
    assert "remedyActionSources" not in properties
    assert "remedyActions" in properties


async def test_an_applied_condition_replaces_karmada_s_list_until_it_writes_again(
        kcp: kube.ApiClient) -> None:
    """The server's side of issue 12: status.conditions is one atomic value to apply."""
    await waiting.eventually(lambda: _ready_cluster(kcp, "member2"), timeout=READY_TIMEOUT)
    probe = {"type": "ServiceDomainNameResolutionReady", "status": "True",
             "reason": "ServiceDomainNameResolutionReady", "message": "probe",
             "lastTransitionTime": "2026-01-01T00:00:00Z"}
    body = {"apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
            "metadata": {"name": "member2"}, "status": {"conditions": [probe]}}
    applied = await kcp.apply(resources.CLUSTERS, body, field_manager="karmada-env-test",
                              subresource="status")
    assert [c["type"] for c in applied["status"]["conditions"]] == [probe["type"]]
    restored = await waiting.eventually(lambda: _ready_cluster(kcp, "member2"),
                                        timeout=READY_TIMEOUT)
    assert _condition(restored, "CompleteAPIEnablements")["status"] == "True"


def test_karmada_crd_manifests_are_cached_beside_the_binaries() -> None:
    built = bins.ensure_karmada()
    assert built.crd_dir.parent == built.aggregated_apiserver.parent
    assert bins.cache_root() in built.crd_dir.parents
    for name in karmada.CRD_FILES:
        assert built.crd(name).is_file()


async def test_a_part_that_does_not_come_up_is_a_start_error(tmp_path: pathlib.Path) -> None:
    settings = karmada.KarmadaSettings(
        extra_controller_manager_args=("--no-such-flag",))
    config = environment.EnvironmentConfig(
        members=("member1",), control_plane="karmada", karmada=settings, workdir=tmp_path)
    env = environment.LocalEnvironment(config)
    with pytest.raises(environment.StartError) as raised:
        async with env:
            pass
    message = str(raised.value)
    assert "karmada-controller-manager exited" in message
    assert "unknown flag: --no-such-flag" in message  # quoted from its log
    assert (tmp_path / "logs" / "karmada-controller-manager.log").exists()
    assert env.karmada is not None
    assert not env.karmada.aggregated.running()
    assert not any(s.process.running() for s in env.servers.values())
