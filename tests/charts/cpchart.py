"""The controlplane chart's RBAC made real, and its controller manager run as its identity.

Shared by the RBAC and the multi-team tests: render the chart's ``rbacOnly`` objects,
create them in an API server (and remove them), get a token of a ServiceAccount, write
a kubeconfig for it, and start ``python -m clusterhealth_controlplane`` with the
Deployment's own arguments, as that ServiceAccount.
"""

from __future__ import annotations

import contextlib
import pathlib
import subprocess
import sys
from typing import Any

import chartkit
import yaml

from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors, resources
from clusterhealth_localenv import environment, processes

CHART = pathlib.Path(__file__).resolve().parents[2] / "charts" / "controlplane"
NAMESPACE = "clusterhealth-system"
RBAC = "rbac.authorization.k8s.io"
KINDS = {
    "ServiceAccount": resources.SERVICE_ACCOUNTS,
    "ClusterRole": resources.Resource(RBAC, "v1", "clusterroles", "ClusterRole", False),
    "ClusterRoleBinding": resources.Resource(RBAC, "v1", "clusterrolebindings",
                                             "ClusterRoleBinding", False),
    "Role": resources.Resource(RBAC, "v1", "roles", "Role", True),
    "RoleBinding": resources.Resource(RBAC, "v1", "rolebindings", "RoleBinding", True),
}


def render(release: str, *sets: str, set_json: str | None = None) -> list[chartkit.Manifest]:
    """``helm template`` of the chart (CRDs left out), as a list of documents."""
    proc = subprocess.run(
        [chartkit.helm_for(CHART), "template", release, str(CHART), "--namespace", NAMESPACE,
         "--set", "crds.enabled=false", *[a for s in sets for a in ("--set", s)],
         *(["--set-json", set_json] if set_json else [])],
        capture_output=True, text=True, check=True)
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


async def ensure_namespace(cp: kube.ApiClient, name: str) -> None:
    with contextlib.suppress(errors.Conflict):
        await cp.create(resources.NAMESPACES, {"metadata": {"name": name}})


async def install(cp: kube.ApiClient, documents: list[chartkit.Manifest]) -> None:
    """Create the RBAC documents (replacing any left from an earlier run)."""
    await ensure_namespace(cp, NAMESPACE)
    for document in documents:
        kind = KINDS[document["kind"]]
        namespace = document["metadata"].get("namespace")
        if namespace:
            await ensure_namespace(cp, namespace)
        await cp.delete(kind, document["metadata"]["name"], namespace=namespace,
                        missing_ok=True)
        await cp.create(kind, document, namespace=namespace)


async def uninstall(cp: kube.ApiClient, documents: list[chartkit.Manifest]) -> None:
    for document in documents:
        await cp.delete(KINDS[document["kind"]], document["metadata"]["name"],
                        namespace=document["metadata"].get("namespace"), missing_ok=True)


async def token(cp: kube.ApiClient, account: str, namespace: str = NAMESPACE) -> str:
    """A one-hour token of the ServiceAccount (TokenRequest API)."""
    answer = await cp.request(
        "POST", resources.SERVICE_ACCOUNTS.path(account, namespace=namespace,
                                                subresource="token"),
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
              "spec": {"audiences": ["https://kubernetes.default.svc"],
                       "expirationSeconds": 3600}})
    return str(answer["status"]["token"])


def kubeconfig(env: environment.LocalEnvironment, path: pathlib.Path, bearer: str) -> pathlib.Path:
    """A kubeconfig for ``env``'s control plane with a bearer token."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "cp", "cluster": {
            "server": env.servers[environment.CONTROL_PLANE].url,
            "certificate-authority": str(env.workdir / "ca.crt")}}],
        "users": [{"name": "sa", "user": {"token": bearer}}],
        "contexts": [{"name": "sa", "context": {"cluster": "cp", "user": "sa"}}]}))
    return path


def manager_process(documents: list[chartkit.Manifest], manager: str, config: pathlib.Path,
                    log: pathlib.Path, python_env: dict[str, str],
                    *extra: str) -> processes.ManagedProcess:
    """The controller manager with the chart Deployment's arguments (not yet started)."""
    deployment = next(d for d in documents if d["kind"] == "Deployment"
                      and d["metadata"]["name"] == manager)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "clusterhealth_controlplane"]
    return processes.ManagedProcess(
        "controlplane", [sys.executable, "-m", "clusterhealth_controlplane", *container["args"],
                         "--kubeconfig", str(config), "--bind-address", "127.0.0.1",
                         "--healthz-port", "0", *extra],
        log, env={**python_env, "POD_NAMESPACE": NAMESPACE})


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c.get("type") == kind), None)
