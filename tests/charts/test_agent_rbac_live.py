"""The agent chart's control-plane RBAC, applied to the real API server, is exactly enough.

The rendered ClusterRole/ClusterRoleBinding are created in the control plane;
a client certificate for the agent's identity (signed by the environment's
CA) then may read its own Cluster and patch its own status, and nothing else.
"""

from __future__ import annotations

import pathlib
import subprocess

import chartkit
import pytest
import yaml

import testkit
from clusterhealth_core import schema, status
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config, errors, resources
from clusterhealth_localenv import binaries, environment

CHART = pathlib.Path(__file__).resolve().parents[2] / "charts" / "agent"
IDENTITY = "clusterhealth-agent:member1"
CONDITION = {"type": "RBACProbeReady", "status": "True", "reason": "Test",
             "message": "written with the agent's own identity",
             "lastTransitionTime": "2026-01-01T00:00:00Z"}


def _rendered() -> list[chartkit.Manifest]:
    proc = subprocess.run(
        [str(binaries.ensure_helm()), "template", "agent-rbac", str(CHART),
         "--set", "target=controlPlane", "--set", "clusterName=member1"],
        capture_output=True, text=True, check=True)
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


async def test_agent_identity_may_touch_only_its_own_cluster(
    env: environment.LocalEnvironment, cp: kube.ApiClient
) -> None:
    documents = _rendered()
    assert chartkit.kinds(documents) == ["ClusterRole", "ClusterRoleBinding"]
    for document in documents:
        await cp.delete(_kind(document), document["metadata"]["name"], missing_ok=True)
        await cp.create(_kind(document), document)

    pair = env.ca.client(IDENTITY)
    credentials = config.Credentials(
        server=env.servers[environment.CONTROL_PLANE].url, ca_data=env.ca.cert_pem,
        client_cert_data=pair.cert_pem, client_key_data=pair.key_pem, source=IDENTITY)
    async with kube.ApiClient(credentials) as agent:
        await testkit.eventually(  # RBAC caches take a moment to see new bindings
            lambda: agent.get(resources.CLUSTERS, "member1"), 5,
            "the agent identity reads its Cluster", interval=0.1, not_yet=(errors.Forbidden,))
        await status.apply_status(agent, resources.CLUSTERS, "member1",
                                  {"conditions": [CONDITION]}, field_manager="rbac-test")
        # What the agent reads to choose how to write, and the read-modify-write it uses
        # where conditions are an atomic list (Karmada's Cluster API).
        kind = await schema.discover(agent, resources.CLUSTERS)
        assert kind.known and kind.status_subresource
        atomic = schema.Kind(resources.CLUSTERS, status_subresource=True, root=None)
        writer = status.StatusWriter(agent, atomic, "rbac-test", frozenset({"conditions"}),
                                     frozenset({CONDITION["type"]}))
        await writer.write("member1", {"conditions": [CONDITION]})
        with pytest.raises(errors.Forbidden):
            await agent.get(resources.CLUSTERS, "member2")
        with pytest.raises(errors.Forbidden):
            await status.apply_status(agent, resources.CLUSTERS, "member2",
                                      {"conditions": [CONDITION]}, field_manager="rbac-test")
        with pytest.raises(errors.Forbidden):
            await agent.list(resources.CLUSTERS)
        with pytest.raises(errors.Forbidden):  # the spec (taints...) is not the agent's
            await agent.patch(resources.CLUSTERS, "member1", {"spec": {"zone": "x"}})
        with pytest.raises(errors.Forbidden):  # nor the credentials
            await agent.get(resources.SECRETS, "member1", namespace="karmada-cluster")

    # clean up: remove the probe condition and the RBAC
    await status.apply_status(cp, resources.CLUSTERS, "member1", {}, field_manager="rbac-test")
    member1 = await cp.get(resources.CLUSTERS, "member1")
    conditions = (member1.get("status") or {}).get("conditions") or []
    assert "RBACProbeReady" not in {c["type"] for c in conditions}
    for document in documents:
        await cp.delete(_kind(document), document["metadata"]["name"], missing_ok=True)


def _kind(document: chartkit.Manifest) -> resources.Resource:
    return resources.Resource("rbac.authorization.k8s.io", "v1",
                              document["kind"].lower() + "s", document["kind"], namespaced=False)
