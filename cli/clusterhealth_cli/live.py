"""Reading one Cluster and what concerns it from a control plane, for ``explain cluster``.

Read-only, a handful of requests: the Cluster, then every Remedy,
MultiClusterIngress, ResourceBinding and ClusterResourceBinding.  A missing
Cluster is an error of its own (:data:`~clusterhealth_cli.errors.NOT_FOUND`);
a kind the server does not serve, or that the user may not list, becomes a
note in the explanation instead of a failure: the rest is still worth showing
(on Karmada's own control plane, for instance, Remedies have no status and an
MCI controller may not be installed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clusterhealth_cli import errors, explain, fleet
from clusterhealth_core.kube import client as kube
from clusterhealth_core.kube import errors as kube_errors
from clusterhealth_core.kube import resources

OPTIONAL = (resources.REMEDIES, resources.MULTI_CLUSTER_INGRESSES,
            resources.RESOURCE_BINDINGS, resources.CLUSTER_RESOURCE_BINDINGS)
"""The kinds read besides the Cluster; any of them may be absent."""


def _names_object(exc: kube_errors.ApiError, name: str) -> bool:
    """Whether a 404 is about the object ``name`` (not about the kind being unknown)."""
    details = exc.body.get("details") if isinstance(exc.body, Mapping) else None
    return isinstance(details, Mapping) and details.get("name") == name


async def cluster(api: kube.ApiClient, name: str) -> dict[str, Any]:
    """The Cluster ``name``, or the error to show."""
    server = api.credentials.server
    try:
        return await api.get(resources.CLUSTERS, name)
    except kube_errors.NotFound as exc:
        if _names_object(exc, name):
            raise errors.CliError(f"no Cluster named {name!r} on {server} (list them with "
                                  "kubectl get clusters)", errors.NOT_FOUND) from None
        raise _no_clusters(server, exc) from None
    except kube_errors.Forbidden as exc:
        raise errors.CliError(f"not allowed to read Cluster {name!r}: {exc.message}",
                              errors.API) from None


def _no_clusters(server: str, exc: kube_errors.NotFound) -> errors.CliError:
    """The error when ``server`` has no Cluster API at all (not a control plane of ours)."""
    return errors.CliError(
        f"{server} does not serve {resources.CLUSTERS.api_version} Clusters: not a Karmada "
        f"or clusterhealth control plane? ({exc.message})", errors.API)


async def optional_list(api: kube.ApiClient, resource: resources.Resource,
                        notes: list[str]) -> list[dict[str, Any]] | None:
    """Every object of ``resource`` (each with its ``kind``), or None with a note why not."""
    what = f"{resource.plural} ({resource.api_version})"
    try:
        listed = await api.list(resource)
    except kube_errors.NotFound:
        notes.append(f"{what}: not served by this control plane")
        return None
    except kube_errors.Forbidden as exc:
        notes.append(f"{what}: not allowed to list them ({exc.message})")
        return None
    return [{**item, "kind": resource.kind} for item in listed.get("items") or []]


async def snapshot(api: kube.ApiClient, name: str) -> explain.Snapshot:
    """The Cluster and everything ``explain cluster`` looks at."""
    obj = await cluster(api, name)
    notes: list[str] = []
    found = {resource: await optional_list(api, resource, notes) for resource in OPTIONAL}
    namespaced = found[resources.RESOURCE_BINDINGS]
    cluster_wide = found[resources.CLUSTER_RESOURCE_BINDINGS]
    bindings = (None if namespaced is None and cluster_wide is None
                else (namespaced or []) + (cluster_wide or []))
    return explain.Snapshot(cluster=obj, remedies=found[resources.REMEDIES],
                            ingresses=found[resources.MULTI_CLUSTER_INGRESSES],
                            bindings=bindings, notes=tuple(notes))


FLEET_OPTIONAL = (resources.MULTI_CLUSTER_INGRESSES, resources.RESOURCE_BINDINGS,
                  resources.CLUSTER_RESOURCE_BINDINGS, resources.LEASES)
"""What ``status`` reads besides the Clusters; any of them may be absent or forbidden."""


async def fleet_snapshot(api: kube.ApiClient) -> fleet.Fleet:
    """Every Cluster, and what ``status`` shows about each, and the leaders."""
    server = api.credentials.server
    try:
        clusters = (await api.list(resources.CLUSTERS)).get("items") or []
    except kube_errors.NotFound as exc:
        raise _no_clusters(server, exc) from None
    except kube_errors.Forbidden as exc:
        raise errors.CliError(f"not allowed to list Clusters: {exc.message}",
                              errors.API) from None
    notes: list[str] = []
    found = {resource: await optional_list(api, resource, notes)
             for resource in FLEET_OPTIONAL}
    bindings = ((found[resources.RESOURCE_BINDINGS] or [])
                + (found[resources.CLUSTER_RESOURCE_BINDINGS] or []))
    return fleet.build(clusters, found[resources.MULTI_CLUSTER_INGRESSES] or [], bindings,
                       found[resources.LEASES] or [], notes)
