"""The MCI provider with only the chart's RBAC, reading members with its own read-only identity.

On real API servers (members that run kube-controller-manager, whose token
controller fills ServiceAccount token Secrets, as in a real cluster):

- in the control plane, the chart's ``rbacOnly`` objects; the controller runs
  with the chart's own arguments and a token of its ServiceAccount;
- in each member, the chart's ``target=member`` objects; the token and CA the
  member's token controller writes into the Secret are copied into the control
  plane as the README says (the Secret named like the Cluster in
  ``memberCredentials.namespace``).  (The chart's rendering alone is tested in
``tests/charts/test_mci_chart.py``.)

The provider does its whole job with that (both members located for an MCI,
leader Lease held, nothing Forbidden in its log); the read-only credential is
refused any write in the member (403, tried directly), and the provider's own
identity cannot read the Clusters' read-write credentials in ``karmada-cluster``.
"""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import subprocess
import sys
import uuid
from typing import Any

import mcikit
import pytest
import yaml

import testkit
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import config, errors, resources
from clusterhealth_localenv import binaries, environment, processes, waiting

CHART = pathlib.Path(__file__).resolve().parents[2] / "charts" / "mci-provider"
NAMESPACE = "clusterhealth-system"
RELEASE = "clusterhealth-mci-provider-live"
"""Contains the chart's name, so the objects are named like the release (and differ from
the local environment's own reader, ``clusterhealth-mci-provider``)."""
RBAC = "rbac.authorization.k8s.io"
KINDS = {
    "ServiceAccount": resources.SERVICE_ACCOUNTS,
    "Secret": resources.SECRETS,
    "ClusterRole": resources.Resource(RBAC, "v1", "clusterroles", "ClusterRole", False),
    "ClusterRoleBinding": resources.Resource(RBAC, "v1", "clusterrolebindings",
                                             "ClusterRoleBinding", False),
    "Role": resources.Resource(RBAC, "v1", "roles", "Role", True),
    "RoleBinding": resources.Resource(RBAC, "v1", "rolebindings", "RoleBinding", True),
    "IngressClass": resources.Resource("networking.k8s.io", "v1", "ingressclasses",
                                       "IngressClass", False),
}


Manifest = dict[str, Any]


def _render(*sets: str) -> list[Manifest]:
    """``helm template`` of the chart (its file:// dependency built first)."""
    helm = str(binaries.ensure_helm())
    subprocess.run([helm, "dependency", "build", str(CHART)], capture_output=True, check=True)
    proc = subprocess.run(
        [helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE,
         "--set", "crds.enabled=false", *[a for s in sets for a in ("--set", s)]],
        capture_output=True, text=True, check=True)
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


async def _ensure_namespace(api: kube.ApiClient, name: str) -> None:
    with contextlib.suppress(errors.Conflict):
        await api.create(resources.NAMESPACES, {"metadata": {"name": name}})


async def _apply(api: kube.ApiClient, documents: list[Manifest]) -> None:
    for document in documents:
        kind = KINDS[document["kind"]]
        namespace = document["metadata"].get("namespace")
        await api.delete(kind, document["metadata"]["name"], namespace=namespace,
                         missing_ok=True)
        await api.create(kind, document, namespace=namespace)


async def _remove(api: kube.ApiClient, documents: list[Manifest]) -> None:
    for document in documents:
        await api.delete(KINDS[document["kind"]], document["metadata"]["name"],
                         namespace=document["metadata"].get("namespace"), missing_ok=True)


def _kubeconfig(path: pathlib.Path, server: str, ca: pathlib.Path, token: str) -> pathlib.Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "x", "cluster": {"server": server,
                                               "certificate-authority": str(ca)}}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "x", "user": "sa"}}]}))
    return path


async def test_the_provider_works_with_the_charts_identities_and_the_reader_cannot_write(
    workload_env: environment.LocalEnvironment, tmp_path: pathlib.Path,
    python_env: dict[str, str],
) -> None:
    env = workload_env
    credentials = f"mci-creds-{uuid.uuid4().hex[:6]}"
    rbac = _render("rbacOnly=true", "provider=fake",
                   f"memberCredentials.namespace={credentials}")
    member_rbac = _render("target=member")
    members = {name: env.client(name) for name in env.members}
    service, mci = testkit.unique("ro"), testkit.unique("ro")
    async with env.client() as cp:
        await _ensure_namespace(cp, NAMESPACE)
        await _ensure_namespace(cp, credentials)
        await _apply(cp, rbac)
        # each member: the chart's read-only identity; its token, as the README copies it
        for name, member in members.items():
            await _ensure_namespace(member, NAMESPACE)
            await _apply(member, member_rbac)

            async def filled(api: kube.ApiClient = member) -> dict[str, Any] | None:
                secret = await api.get(resources.SECRETS, f"{RELEASE}-token",
                                       namespace=NAMESPACE)
                data = secret.get("data") or {}
                return data if data.get("token") and data.get("ca.crt") else None
            data = await waiting.eventually(filled, timeout=30)
            await cp.create(resources.SECRETS, {
                "metadata": {"name": name, "namespace": credentials}, "type": "Opaque",
                "data": {"token": data["token"], "caBundle": data["ca.crt"]}})
        account = next(d for d in rbac if d["kind"] == "ServiceAccount")["metadata"]["name"]
        answer = await cp.request(
            "POST", resources.SERVICE_ACCOUNTS.path(account, namespace=NAMESPACE,
                                                    subresource="token"),
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                  "spec": {"audiences": ["https://kubernetes.default.svc"],
                           "expirationSeconds": 3600}})
        ca = env.workdir / "ca.crt"
        kubeconfig = _kubeconfig(tmp_path / "sa.kubeconfig",
                                 env.servers[environment.CONTROL_PLANE].url, ca,
                                 str(answer["status"]["token"]))
        deployment = next(d for d in _render("provider=fake",
                                             f"memberCredentials.namespace={credentials}")
                          if d["kind"] == "Deployment")
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert container["command"] == ["python", "-m", "clusterhealth_mci"]
        assert "--member-credentials=readonly" in container["args"]
        controller = processes.ManagedProcess(
            "mci", [sys.executable, "-m", "clusterhealth_mci", *container["args"],
                    "--kubeconfig", str(kubeconfig), "--bind-address", "127.0.0.1",
                    "--healthz-port", "0"],
            tmp_path / "mci.log", env={**python_env, "POD_NAMESPACE": NAMESPACE})
        for index, member in enumerate(members.values()):
            await mcikit.make_service(member, service, [(f"198.18.0.{10 + index}", 8080)])
        await cp.create(resources.MULTI_CLUSTER_INGRESSES,
                        mcikit.mci_body(mci, service, "ro-live.example",
                                        ingress_class="clusterhealth"))
        controller.start()
        try:
            async def located() -> bool:
                status = await mcikit.mci_status(cp, mci)
                return status.get("serviceLocations") == [
                    {"name": service, "clusters": sorted(members)}]
            try:
                await waiting.eventually(located, timeout=60)
            except AssertionError as exc:
                raise AssertionError(controller.log_tail(60)) from exc
            lease = await cp.get(resources.LEASES, RELEASE, namespace=NAMESPACE)
            assert lease["spec"].get("holderIdentity")
            assert "Forbidden" not in controller.log_tail(300), controller.log_tail(300)
            assert "own read-only credentials" in controller.log_tail(300)

            # the read-only credential, as the provider holds it: reading works, writing not
            secret = await cp.get(resources.SECRETS, "member1", namespace=credentials)
            reader = config.from_cluster_secret(env.servers["member1"].url, secret, False)
            async with kube.ApiClient(reader) as api:
                await api.get(resources.SERVICES, service, namespace="default")
                with pytest.raises(errors.Forbidden):
                    await api.create(resources.SERVICES, {
                        "metadata": {"name": testkit.unique("no"), "namespace": "default"},
                        "spec": {"ports": [{"port": 80}]}})
                with pytest.raises(errors.Forbidden):
                    await api.patch(resources.SERVICES, service, {"metadata": {
                        "labels": {"x": "y"}}}, namespace="default", patch_type="merge")
                with pytest.raises(errors.Forbidden):
                    await api.delete(resources.ENDPOINT_SLICES, f"{service}-0",
                                     namespace="default")
                with pytest.raises(errors.Forbidden):
                    await api.list(resources.SECRETS, namespace=NAMESPACE)
            # the provider's own identity cannot read the Clusters' read-write credentials
            provider = config.load_kubeconfig(kubeconfig)
            async with kube.ApiClient(provider) as api:
                with pytest.raises(errors.Forbidden):
                    await api.get(resources.SECRETS, "member1",
                                  namespace=environment.CLUSTER_SECRET_NAMESPACE)
                await api.get(resources.SECRETS, "member1", namespace=credentials)
        finally:
            await controller.stop()
            await cp.delete(resources.MULTI_CLUSTER_INGRESSES, mci, namespace="default",
                            missing_ok=True)
            for name, member in members.items():
                await mcikit.delete_service(member, service)
                await _remove(member, member_rbac)
                await cp.delete(resources.SECRETS, name, namespace=credentials,
                                missing_ok=True)
            await _remove(cp, rbac)
            await asyncio.gather(*(m.close() for m in members.values()))
