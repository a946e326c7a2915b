"""The remedy chart, as rendered, runs against the real API server with only its own RBAC.

Its ServiceAccount, (Cluster)Roles and bindings are created in the control
plane; the controller then runs with the chart's own arguments and a token of
that ServiceAccount (TokenRequest API), and must do its whole job: write
remedyActions and their sources, the Remedy's status, Events, and its Lease.
Both event namespaces the chart allows are used for real: the API server
accepts Events about cluster-scoped objects only in ``default`` and
``kube-system``.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import uuid
from typing import Any

import chartkit
import cpchart
import pytest
import yaml

import testkit
from clusterhealth_core import status
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment, processes

CHART = pathlib.Path(__file__).resolve().parents[2] / "charts" / "remedy"
NAMESPACE = "clusterhealth-system"
RELEASE = "rbac-live"


def _render(*sets: str) -> list[chartkit.Manifest]:
    proc = subprocess.run(
        [chartkit.helm_for(CHART), "template", RELEASE, str(CHART), "--namespace", NAMESPACE,
         "--set", "crds.enabled=false", *[a for s in sets for a in ("--set", s)]],
        capture_output=True, text=True, check=True)
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


@pytest.mark.parametrize("event_namespace", ["default", "kube-system"])
async def test_controller_works_with_exactly_the_charts_rbac(
    env: environment.LocalEnvironment, cp: kube.ApiClient, tmp_path: pathlib.Path,
    python_env: dict[str, str], event_namespace: str,
) -> None:
    values = f"eventNamespace={event_namespace}"
    rbac = _render("rbacOnly=true", values)
    await cpchart.install(cp, rbac)
    account = next(d for d in rbac if d["kind"] == "ServiceAccount")["metadata"]["name"]
    kubeconfig = cpchart.kubeconfig(env, tmp_path / "sa.kubeconfig",
                                    await cpchart.token(cp, account))

    deployment = next(d for d in _render(values) if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "clusterhealth_remedy"]
    controller = processes.ManagedProcess(
        "remedy", [sys.executable, "-m", "clusterhealth_remedy", *container["args"],
                   "--kubeconfig", str(kubeconfig), "--bind-address", "127.0.0.1",
                   "--healthz-port", "0"],
        tmp_path / "remedy.log", env={**python_env, "POD_NAMESPACE": NAMESPACE})
    cluster, remedy = f"rbac-{uuid.uuid4().hex[:6]}", f"rbac-{uuid.uuid4().hex[:6]}"
    await cp.create(resources.CLUSTERS, {
        "apiVersion": resources.CLUSTERS.api_version, "kind": "Cluster",
        "metadata": {"name": cluster},
        "spec": {"apiEndpoint": "https://10.0.0.1:6443", "syncMode": "Push"}})
    await status.apply_status(cp, resources.CLUSTERS, cluster, {"conditions": [{
        "type": "ServiceDomainNameResolutionReady", "status": "False", "reason": "Test",
        "message": "down", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        field_manager="test-agent")
    await cp.create(resources.REMEDIES, {
        "apiVersion": resources.REMEDIES.api_version, "kind": "Remedy",
        "metadata": {"name": remedy},
        "spec": {"clusterAffinity": {"clusterNames": [cluster]},
                 "decisionMatches": [{"clusterConditionMatch": {
                     "conditionType": "ServiceDomainNameResolutionReady",
                     "operator": "Equal", "conditionStatus": "False"}}],
                 "actions": ["TrafficControl"]}})
    controller.start()
    try:
        async def done() -> bool:
            obj = await cp.get(resources.CLUSTERS, cluster)
            rem = await cp.get(resources.REMEDIES, remedy)
            events = await cp.list(resources.EVENTS, namespace=event_namespace,
                                   field_selector=f"involvedObject.name={cluster}")
            lease: dict[str, Any] = await cp.get(
                resources.LEASES, container_arg(container, "leader-elect-resource-name"),
                namespace=NAMESPACE)
            return ((obj.get("status") or {}).get("remedyActions") == ["TrafficControl"]
                    and bool((rem.get("status") or {}).get("activeClusters"))
                    and bool(events["items"])
                    and bool(lease["spec"].get("holderIdentity")))

        await testkit.eventually(done, 30, "the controller does its job", interval=0.1,
                                 not_yet=(errors.NotFound,), process=controller)
        assert "Forbidden" not in controller.log_tail(200), controller.log_tail(200)
    finally:
        await controller.stop()
        await cp.delete(resources.REMEDIES, remedy, missing_ok=True)
        await cp.delete(resources.CLUSTERS, cluster, missing_ok=True)
        await cpchart.uninstall(cp, rbac)


def container_arg(container: dict[str, Any], flag: str) -> str:
    prefix = f"--{flag}="
    return next(a[len(prefix):] for a in container["args"] if a.startswith(prefix))
