"""A user's script with the official ``kubernetes`` client reads and writes our APIs.

The official client is independent of ours: if it can create a Remedy, read
the Cluster conditions our agent writes, and see the columns ``kubectl get``
shows, so can any user's tooling.  It runs against the real API server with
the environment's admin kubeconfig.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import kubernetes
import pytest

from clusterhealth_core import status
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import resources
from clusterhealth_localenv import environment


def _official(env: environment.LocalEnvironment) -> kubernetes.client.CustomObjectsApi:
    api_client = kubernetes.config.new_client_from_config(config_file=str(env.kubeconfig()))
    return kubernetes.client.CustomObjectsApi(api_client)


async def test_a_users_script_manages_remedies_and_reads_clusters(
        env: environment.LocalEnvironment, cp: kube.ApiClient) -> None:
    custom = _official(env)
    name = f"script-{uuid.uuid4().hex[:6]}"
    remedy: dict[str, Any] = {
        "apiVersion": "remedy.karmada.io/v1alpha1", "kind": "Remedy",
        "metadata": {"name": name},
        "spec": {"clusterAffinity": {"clusterNames": ["member1"]},
                 "decisionMatches": [{"clusterConditionMatch": {
                     "conditionType": "ServiceDomainNameResolutionReady",
                     "operator": "Equal", "conditionStatus": "False"}}],
                 "actions": ["TrafficControl"]}}
    created = await asyncio.to_thread(
        custom.create_cluster_custom_object, "remedy.karmada.io", "v1alpha1", "remedies", remedy)
    assert created["metadata"]["name"] == name
    ours = await cp.get(resources.REMEDIES, name)  # our client sees what theirs wrote
    assert ours["spec"] == remedy["spec"]

    # A condition written by our status writer is readable by theirs.
    await status.apply_status(cp, resources.CLUSTERS, "member1", {"conditions": [{
        "type": "ScriptVisible", "status": "True", "reason": "Test", "message": "hello",
        "lastTransitionTime": "2026-11-23T10:00:00Z"}]}, field_manager="test-official-client")
    cluster = await asyncio.to_thread(
        custom.get_cluster_custom_object, "cluster.karmada.io", "v1alpha1", "clusters",
        "member1")
    conditions = {c["type"]: c for c in cluster["status"]["conditions"]}
    assert conditions["ScriptVisible"]["message"] == "hello"

    # Their merge patch of the spec, our read of it.
    await asyncio.to_thread(
        custom.patch_cluster_custom_object, "remedy.karmada.io", "v1alpha1", "remedies", name,
        {"spec": {"clusterAffinity": {"clusterNames": ["member2"]}}})
    assert (await cp.get(resources.REMEDIES, name))["spec"]["clusterAffinity"] == {
        "clusterNames": ["member2"]}
    listed = await asyncio.to_thread(
        custom.list_cluster_custom_object, "remedy.karmada.io", "v1alpha1", "remedies")
    assert name in [item["metadata"]["name"] for item in listed["items"]]

    await asyncio.to_thread(custom.delete_cluster_custom_object, "remedy.karmada.io",
                            "v1alpha1", "remedies", name)
    await status.apply_status(cp, resources.CLUSTERS, "member1", {},
                              field_manager="test-official-client")


async def test_a_bad_remedy_is_refused_with_the_schemas_message(
        env: environment.LocalEnvironment) -> None:
    custom = _official(env)
    bad = {"apiVersion": "remedy.karmada.io/v1alpha1", "kind": "Remedy",
           "metadata": {"name": f"bad-{uuid.uuid4().hex[:6]}"},
           "spec": {"decisionMatches": [{"clusterConditionMatch": {
               "conditionType": "Ready", "operator": "Bigger", "conditionStatus": "False"}}],
               "actions": ["TrafficControl"]}}
    with pytest.raises(kubernetes.client.ApiException) as caught:
        await asyncio.to_thread(custom.create_cluster_custom_object, "remedy.karmada.io",
                                "v1alpha1", "remedies", bad)
    assert caught.value.status == 422
    assert "Bigger" in str(caught.value.body) and "operator" in str(caught.value.body)
