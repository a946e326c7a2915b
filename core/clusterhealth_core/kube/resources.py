"""Descriptors of the API resources clusterhealth reads and writes.

A :class:`Resource` knows its URL layout, so no caller builds API paths by
hand and every component names a kind the same way.
"""

from __future__ import annotations

import dataclasses
import urllib.parse


@dataclasses.dataclass(frozen=True)
class Resource:
    """One API resource: group/version/plural, and whether it is namespaced."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """``group/version``, or ``version`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def crd_name(self) -> str:
        """``plural.group``: the name of the CustomResourceDefinition serving it."""
        return f"{self.plural}.{self.group}"

    def path(
        self,
        name: str | None = None,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """The URL path of the collection, or of one object and its subresource."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [base]
        if self.namespaced and namespace is not None:
            parts.append(f"namespaces/{urllib.parse.quote(namespace, safe='')}")
        parts.append(self.plural)
        if name is not None:
            parts.append(urllib.parse.quote(name, safe=""))
            if subresource is not None:
                parts.append(subresource)
        return "/".join(parts)


NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
SECRETS = Resource("", "v1", "secrets", "Secret", namespaced=True)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
SERVICES = Resource("", "v1", "services", "Service", namespaced=True)
PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
EVENTS = Resource("", "v1", "events", "Event", namespaced=True)
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True)
ENDPOINT_SLICES = Resource(
    "discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", namespaced=True
)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", namespaced=True)
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole",
                         namespaced=False)
CLUSTER_ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings",
                                 "ClusterRoleBinding", namespaced=False)
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
    namespaced=False,
)
CLUSTERS = Resource("cluster.karmada.io", "v1alpha1", "clusters", "Cluster", namespaced=False)
REMEDIES = Resource("remedy.karmada.io", "v1alpha1", "remedies", "Remedy", namespaced=False)
MULTI_CLUSTER_INGRESSES = Resource(
    "networking.karmada.io", "v1alpha1", "multiclusteringresses", "MultiClusterIngress",
    namespaced=True,
)
PROPAGATION_POLICIES = Resource(
    "policy.karmada.io", "v1alpha1", "propagationpolicies", "PropagationPolicy", namespaced=True
)
CLUSTER_PROPAGATION_POLICIES = Resource(
    "policy.karmada.io", "v1alpha1", "clusterpropagationpolicies", "ClusterPropagationPolicy",
    namespaced=False,
)
CLUSTER_TAINT_POLICIES = Resource(
    "policy.karmada.io", "v1alpha1", "clustertaintpolicies", "ClusterTaintPolicy",
    namespaced=False,
)
RESOURCE_BINDINGS = Resource(
    "work.karmada.io", "v1alpha2", "resourcebindings", "ResourceBinding", namespaced=True
)
CLUSTER_RESOURCE_BINDINGS = Resource(
    "work.karmada.io", "v1alpha2", "clusterresourcebindings", "ClusterResourceBinding",
    namespaced=False,
)
WORKS = Resource("work.karmada.io", "v1alpha1", "works", "Work", namespaced=True)
