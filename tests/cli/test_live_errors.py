"""How ``explain cluster`` reads: a missing Cluster, an unserved kind, a forbidden list."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from clusterhealth_cli import errors, live
from clusterhealth_core.kube import errors as kube_errors
from clusterhealth_core.kube import resources

SERVER = "https://127.0.0.1:6443"
MISSING_OBJECT = {"kind": "Status", "reason": "NotFound", "code": 404,
                  "message": 'clusters.cluster.karmada.io "m9" not found',
                  "details": {"name": "m9", "group": "cluster.karmada.io", "kind": "clusters"}}
MISSING_KIND = {"kind": "Status", "reason": "NotFound", "code": 404,
                "message": "the server could not find the requested resource"}


@dataclasses.dataclass
class Credentials:
    server: str = SERVER


class FakeApi:
    """Answers ``get``/``list`` from tables; an exception in a table is raised."""

    def __init__(self, objects: dict[str, Any], lists: dict[str, Any]) -> None:
        self.credentials = Credentials()
        self.objects = objects
        self.lists = lists

    async def get(self, resource: resources.Resource, name: str) -> Any:
        found = self.objects[name]
        if isinstance(found, Exception):
            raise found
        return found

    async def list(self, resource: resources.Resource) -> Any:
        found = self.lists.get(resource.plural, {"items": []})
        if isinstance(found, Exception):
            raise found
        return found


def not_found(body: dict[str, Any]) -> kube_errors.NotFound:
    return kube_errors.NotFound(404, "NotFound", str(body["message"]), body)


CLUSTER_ERRORS = [
    ("no such Cluster", not_found(MISSING_OBJECT), errors.NOT_FOUND,
     f"no Cluster named 'm9' on {SERVER} (list them with kubectl get clusters)"),
    ("no Cluster kind on this server", not_found(MISSING_KIND), errors.API,
     f"{SERVER} does not serve cluster.karmada.io/v1alpha1 Clusters: not a Karmada or "
     "clusterhealth control plane? (the server could not find the requested resource)"),
    ("RBAC", kube_errors.Forbidden(403, "Forbidden", "user u cannot get clusters"), errors.API,
     "not allowed to read Cluster 'm9': user u cannot get clusters"),
]


@pytest.mark.parametrize(("raised", "code", "message"), [c[1:] for c in CLUSTER_ERRORS],
                         ids=[c[0] for c in CLUSTER_ERRORS])
async def test_cluster_errors(raised: Exception, code: int, message: str) -> None:
    api: Any = FakeApi({"m9": raised}, {})
    with pytest.raises(errors.CliError) as caught:
        await live.snapshot(api, "m9")
    assert (caught.value.code, caught.value.message) == (code, message)


async def test_unreadable_kinds_become_notes() -> None:
    api: Any = FakeApi({"m1": {"metadata": {"name": "m1"}}}, {
        "remedies": not_found(MISSING_KIND),
        "multiclusteringresses": kube_errors.Forbidden(403, "Forbidden", "no"),
        "resourcebindings": {"items": [{"metadata": {"name": "a", "namespace": "d"}}]},
        "clusterresourcebindings": not_found(MISSING_KIND)})
    found = await live.snapshot(api, "m1")
    assert found.remedies is None and found.ingresses is None
    assert found.bindings == [{"metadata": {"name": "a", "namespace": "d"},
                               "kind": "ResourceBinding"}]
    assert found.notes == (
        "remedies (remedy.karmada.io/v1alpha1): not served by this control plane",
        "multiclusteringresses (networking.karmada.io/v1alpha1): not allowed to list them (no)",
        "clusterresourcebindings (work.karmada.io/v1alpha2): not served by this control plane")


async def test_other_api_errors_propagate() -> None:
    api: Any = FakeApi({"m1": {"metadata": {"name": "m1"}}}, {
        "remedies": kube_errors.ApiError(500, "InternalError", "etcd is down")})
    with pytest.raises(kube_errors.ApiError):
        await live.snapshot(api, "m1")
