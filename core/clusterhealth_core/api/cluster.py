"""The ``cluster.karmada.io/v1alpha1`` Cluster: a member cluster and its health.

Cluster is the object every component meets: the control plane reads its spec
to reach the member, the cluster-status controller and the detection agent
write conditions, the remedy controller writes ``remedyActions`` (and, beyond
Karmada, ``remedyActionSources`` saying which Remedy asked for which action),
and the MCI provider reads them to block traffic.
"""

import dataclasses
import datetime
import enum
from collections.abc import Mapping

from clusterhealth_core.api import groups, meta, wire

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
"""resource.Quantity in its string form (the pattern Kubernetes CRDs use)."""

INT32_MAX = 2**31 - 1
"""The API server ignores ``format: int32``; the CRD bounds int32 fields explicitly."""

Quantity = str | int
"""resource.Quantity on the wire: ``"16Gi"``, ``"500m"`` or a plain integer."""

# Bounds of the lists of cluster names in the policy kinds (PropagationPolicy,
# ClusterPropagationPolicy, ClusterTaintPolicy, Remedy), which Karmada's CRDs leave
# unbounded: the API server refuses a longer list naming the field and the limit.
MAX_CLUSTER_NAMES = 1024
"""Names in one ``clusterNames``, ``exclude`` or ``staticWeightList`` (as many as an MCI's
status lists)."""
NAME_MAX_LENGTH = 253
"""Characters of an object name (a DNS subdomain): a longer cluster name matches nothing."""
"""resource.Quantity on the wire: ``"16Gi"``, ``"500m"`` or a plain integer."""


class SyncMode(enum.StrEnum):
    """How the control plane talks to the member cluster."""

    PUSH = "Push"
    PULL = "Pull"


class TaintEffect(enum.StrEnum):
    """corev1.TaintEffect."""

    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SecretReference(wire.Model):
    """A Secret in the control plane, by namespace and name."""

    namespace: str = dataclasses.field(metadata=wire.json("namespace", min_length=1))
    name: str = dataclasses.field(metadata=wire.json("name", min_length=1))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Taint(wire.Model):
    """corev1.Taint, applied to a Cluster to repel or evict workloads."""

    key: str = dataclasses.field(metadata=wire.json("key", min_length=1))
    value: str | None = dataclasses.field(default=None, metadata=wire.json("value"))
    effect: TaintEffect = dataclasses.field(metadata=wire.json("effect"))
    time_added: datetime.datetime | None = dataclasses.field(
        default=None, metadata=wire.json("timeAdded")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterSpec(wire.Model):
    """How to reach the member cluster and how to schedule onto it."""

    id: str | None = dataclasses.field(default=None, metadata=wire.json("id"))
    """The member's unique ID (its ``kube-system`` namespace's UID, as Karmada's join sets it)."""
    api_endpoint: str | None = dataclasses.field(default=None, metadata=wire.json("apiEndpoint"))
    secret_ref: SecretReference | None = dataclasses.field(
        default=None, metadata=wire.json("secretRef")
    )
    impersonator_secret_ref: SecretReference | None = dataclasses.field(
        default=None, metadata=wire.json("impersonatorSecretRef")
    )
    sync_mode: SyncMode = dataclasses.field(metadata=wire.json("syncMode"))
    provider: str | None = dataclasses.field(default=None, metadata=wire.json("provider"))
    region: str | None = dataclasses.field(default=None, metadata=wire.json("region"))
    zone: str | None = dataclasses.field(default=None, metadata=wire.json("zone"))
    taints: tuple[Taint, ...] = dataclasses.field(default=(), metadata=wire.json("taints"))
    insecure_skip_tls_verification: bool = dataclasses.field(
        default=False, metadata=wire.json("insecureSkipTLSVerification")
    )
    proxy_url: str | None = dataclasses.field(default=None, metadata=wire.json("proxyURL"))
    proxy_header: Mapping[str, str] = dataclasses.field(
        default_factory=dict, metadata=wire.json("proxyHeader")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class APIResource(wire.Model):
    """A resource served by the member cluster."""

    name: str = dataclasses.field(metadata=wire.json("name"))
    kind: str = dataclasses.field(metadata=wire.json("kind"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class APIEnablement(wire.Model):
    """The resources a member cluster serves under one group/version."""

    group_version: str = dataclasses.field(metadata=wire.json("groupVersion"))
    resources: tuple[APIResource, ...] = dataclasses.field(
        default=(), metadata=wire.json("resources")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class NodeSummary(wire.Model):
    """Node counts of the member cluster."""

    total_num: int = dataclasses.field(
        default=0, metadata=wire.json("totalNum", fmt="int32", minimum=0, maximum=INT32_MAX)
    )
    ready_num: int = dataclasses.field(
        default=0, metadata=wire.json("readyNum", fmt="int32", minimum=0, maximum=INT32_MAX)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResourceSummary(wire.Model):
    """Aggregated resources of the member cluster (name to quantity)."""

    allocatable: Mapping[str, Quantity] = dataclasses.field(
        default_factory=dict, metadata=wire.json("allocatable", pattern=QUANTITY_PATTERN)
    )
    allocating: Mapping[str, Quantity] = dataclasses.field(
        default_factory=dict, metadata=wire.json("allocating", pattern=QUANTITY_PATTERN)
    )
    allocated: Mapping[str, Quantity] = dataclasses.field(
        default_factory=dict, metadata=wire.json("allocated", pattern=QUANTITY_PATTERN)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class RemedyActionSource(wire.Model):
    """Provenance of one remedy action: the Remedies that produced it.

    This answers the Remedy proposal's open question ("which Remedy produced
    which action?"); Karmada itself records only the action names.
    """

    action: str = dataclasses.field(metadata=wire.json("action", min_length=1))
    remedies: tuple[str, ...] = dataclasses.field(metadata=wire.json("remedies", list_type="set"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterStatus(wire.Model):
    """Observed state of the member cluster, written by several controllers."""

    kubernetes_version: str | None = dataclasses.field(
        default=None, metadata=wire.json("kubernetesVersion")
    )
    api_enablements: tuple[APIEnablement, ...] = dataclasses.field(
        default=(), metadata=wire.json("apiEnablements")
    )
    conditions: tuple[meta.Condition, ...] = meta.conditions()
    node_summary: NodeSummary | None = dataclasses.field(
        default=None, metadata=wire.json("nodeSummary")
    )
    resource_summary: ResourceSummary | None = dataclasses.field(
        default=None, metadata=wire.json("resourceSummary")
    )
    remedy_actions: tuple[str, ...] = dataclasses.field(
        default=(), metadata=wire.json("remedyActions", list_type="atomic")
    )
    remedy_action_sources: tuple[RemedyActionSource, ...] = dataclasses.field(
        default=(),
        metadata=wire.json("remedyActionSources", list_type="map", list_map_keys=("action",)),
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Cluster(meta.Object, resource=groups.CLUSTER):
    """cluster.karmada.io/v1alpha1 Cluster (cluster-scoped)."""

    spec: ClusterSpec = meta.spec()
    status: ClusterStatus = meta.status(ClusterStatus)
