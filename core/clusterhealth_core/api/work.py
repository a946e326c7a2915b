"""The ``work.karmada.io`` ResourceBinding, ClusterResourceBinding (v1alpha2) and Work (v1alpha1).

A binding ties one resource template to its placement: the detector writes
``spec.resource``, ``replicas`` and ``placement``; the scheduler writes
``spec.clusters`` (with replicas per cluster) and the ``Scheduled``
condition; the taint manager moves evicted clusters into
``gracefulEvictionTasks``; the binding controller aggregates the members'
status into ``status.aggregatedStatus``.  A Work, one per target cluster in
namespace ``karmada-es-<cluster>``, carries the manifests to apply there and
their status as read back from the member.

Field names, enums, required fields and defaults are Karmada v1.18.2's.  Left
out (unknown fields): the multi-component ``components``, ``schedulePriority``
and ``workloadAffinityGroups`` of a binding.  Beyond Karmada, the status lists
are list-maps (``conditions`` by type, ``aggregatedStatus`` by cluster), so
several writers can own entries of the same binding.
"""

import dataclasses
import datetime
import enum
from collections.abc import Mapping

from clusterhealth_core.api import cluster, groups, meta, policy, wire

INT32_MAX = cluster.INT32_MAX

EVICTION_REASON_MAX_LENGTH = 32
"""Karmada's bound on ``gracefulEvictionTasks[].reason``."""
EVICTION_MESSAGE_MAX_LENGTH = 1024
"""Karmada's bound on ``gracefulEvictionTasks[].message``."""


class ResourceHealth(enum.StrEnum):
    """Health of a resource in a member cluster, as the status interpreter judges it."""

    HEALTHY = "Healthy"
    UNHEALTHY = "Unhealthy"
    UNKNOWN = "Unknown"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ObjectReference(wire.Model):
    """The resource template a binding is for."""

    api_version: str = dataclasses.field(metadata=wire.json("apiVersion"))
    kind: str = dataclasses.field(metadata=wire.json("kind"))
    namespace: str | None = dataclasses.field(default=None, metadata=wire.json("namespace"))
    name: str = dataclasses.field(metadata=wire.json("name"))
    uid: str | None = dataclasses.field(default=None, metadata=wire.json("uid"))
    resource_version: str | None = dataclasses.field(
        default=None, metadata=wire.json("resourceVersion")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class NodeSelectorRequirement(wire.Model):
    """corev1.NodeSelectorRequirement (copied from the template's pod spec)."""

    key: str = dataclasses.field(metadata=wire.json("key"))
    operator: str = dataclasses.field(metadata=wire.json("operator"))
    values: tuple[str, ...] = dataclasses.field(
        default=(), metadata=wire.json("values", list_type="atomic")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class NodeSelectorTerm(wire.Model):
    """corev1.NodeSelectorTerm: all requirements must hold."""

    WIRE_ATOMIC = True

    match_expressions: tuple[NodeSelectorRequirement, ...] = dataclasses.field(
        default=(), metadata=wire.json("matchExpressions", list_type="atomic")
    )
    match_fields: tuple[NodeSelectorRequirement, ...] = dataclasses.field(
        default=(), metadata=wire.json("matchFields", list_type="atomic")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class NodeSelector(wire.Model):
    """corev1.NodeSelector: any term must hold."""

    WIRE_ATOMIC = True

    node_selector_terms: tuple[NodeSelectorTerm, ...] = dataclasses.field(
        metadata=wire.json("nodeSelectorTerms", list_type="atomic")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class NodeClaim(wire.Model):
    """Where one replica's pod may run: the node constraints of the template."""

    hard_node_affinity: NodeSelector | None = dataclasses.field(
        default=None, metadata=wire.json("hardNodeAffinity")
    )
    node_selector: Mapping[str, str] = dataclasses.field(
        default_factory=dict, metadata=wire.json("nodeSelector")
    )
    tolerations: tuple[policy.Toleration, ...] = dataclasses.field(
        default=(), metadata=wire.json("tolerations")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReplicaRequirements(wire.Model):
    """What one replica needs, so the scheduler can tell how many a cluster fits."""

    node_claim: NodeClaim | None = dataclasses.field(
        default=None, metadata=wire.json("nodeClaim")
    )
    resource_request: Mapping[str, cluster.Quantity] = dataclasses.field(
        default_factory=dict,
        metadata=wire.json("resourceRequest", pattern=cluster.QUANTITY_PATTERN),
    )
    namespace: str | None = dataclasses.field(default=None, metadata=wire.json("namespace"))
    priority_class_name: str | None = dataclasses.field(
        default=None, metadata=wire.json("priorityClassName")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class TargetCluster(wire.Model):
    """A cluster the resource is scheduled to, with its share of the replicas."""

    name: str = dataclasses.field(metadata=wire.json("name", min_length=1))
    replicas: int = dataclasses.field(
        default=0, metadata=wire.json("replicas", fmt="int32", minimum=0, maximum=INT32_MAX)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class GracefulEvictionTask(wire.Model):
    """A cluster being evicted from: its workload stays until the new placement is healthy."""

    from_cluster: str = dataclasses.field(metadata=wire.json("fromCluster"))
    purge_mode: policy.PurgeMode | None = dataclasses.field(
        default=None, metadata=wire.json("purgeMode")
    )
    replicas: int | None = dataclasses.field(
        default=None, metadata=wire.json("replicas", fmt="int32", minimum=0, maximum=INT32_MAX)
    )
    reason: str = dataclasses.field(
        metadata=wire.json(
            "reason",
            pattern=meta.CONDITION_REASON_PATTERN,
            min_length=1,
            max_length=EVICTION_REASON_MAX_LENGTH,
        )
    )
    message: str | None = dataclasses.field(
        default=None, metadata=wire.json("message", max_length=EVICTION_MESSAGE_MAX_LENGTH)
    )
    producer: str = dataclasses.field(metadata=wire.json("producer"))
    grace_period_seconds: int | None = dataclasses.field(
        default=None,
        metadata=wire.json("gracePeriodSeconds", fmt="int32", minimum=0, maximum=INT32_MAX),
    )
    suppress_deletion: bool | None = dataclasses.field(
        default=None, metadata=wire.json("suppressDeletion")
    )
    preserved_label_state: Mapping[str, str] = dataclasses.field(
        default_factory=dict, metadata=wire.json("preservedLabelState")
    )
    creation_timestamp: datetime.datetime | None = dataclasses.field(
        default=None, metadata=wire.json("creationTimestamp")
    )
    clusters_before_failover: tuple[str, ...] = dataclasses.field(
        default=(), metadata=wire.json("clustersBeforeFailover")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class BindingSnapshot(wire.Model):
    """A binding that depends on this one (``propagateDeps``), and where it is scheduled."""

    namespace: str | None = dataclasses.field(default=None, metadata=wire.json("namespace"))
    name: str = dataclasses.field(metadata=wire.json("name"))
    clusters: tuple[TargetCluster, ...] = dataclasses.field(
        default=(), metadata=wire.json("clusters")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class BindingSuspension(wire.Model):
    """The policy's suspension, plus suspending the scheduling of this binding."""

    dispatching: bool | None = dataclasses.field(default=None, metadata=wire.json("dispatching"))
    dispatching_on_clusters: policy.SuspendClusters | None = dataclasses.field(
        default=None, metadata=wire.json("dispatchingOnClusters")
    )
    scheduling: bool | None = dataclasses.field(default=None, metadata=wire.json("scheduling"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResourceBindingSpec(wire.Model):
    """The resource, what its replicas need, its placement and where it is scheduled."""

    resource: ObjectReference = dataclasses.field(metadata=wire.json("resource"))
    propagate_deps: bool = dataclasses.field(default=False, metadata=wire.json("propagateDeps"))
    replica_requirements: ReplicaRequirements | None = dataclasses.field(
        default=None, metadata=wire.json("replicaRequirements")
    )
    replicas: int = dataclasses.field(
        default=0, metadata=wire.json("replicas", fmt="int32", minimum=0, maximum=INT32_MAX)
    )
    clusters: tuple[TargetCluster, ...] = dataclasses.field(
        default=(), metadata=wire.json("clusters")
    )
    placement: policy.Placement | None = dataclasses.field(
        default=None, metadata=wire.json("placement")
    )
    graceful_eviction_tasks: tuple[GracefulEvictionTask, ...] = dataclasses.field(
        default=(), metadata=wire.json("gracefulEvictionTasks")
    )
    required_by: tuple[BindingSnapshot, ...] = dataclasses.field(
        default=(), metadata=wire.json("requiredBy")
    )
    scheduler_name: str | None = dataclasses.field(
        default=None, metadata=wire.json("schedulerName")
    )
    failover: policy.FailoverBehavior | None = dataclasses.field(
        default=None, metadata=wire.json("failover")
    )
    conflict_resolution: policy.ConflictResolution = dataclasses.field(
        default=policy.ConflictResolution.ABORT,
        metadata=wire.json("conflictResolution", defaulted=True),
    )
    reschedule_triggered_at: datetime.datetime | None = dataclasses.field(
        default=None, metadata=wire.json("rescheduleTriggeredAt")
    )
    suspension: BindingSuspension | None = dataclasses.field(
        default=None, metadata=wire.json("suspension")
    )
    preserve_resources_on_deletion: bool | None = dataclasses.field(
        default=None, metadata=wire.json("preserveResourcesOnDeletion")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class AggregatedStatusItem(wire.Model):
    """The resource's status in one member cluster."""

    cluster_name: str = dataclasses.field(metadata=wire.json("clusterName", min_length=1))
    status: wire.RawObject | None = dataclasses.field(default=None, metadata=wire.json("status"))
    applied: bool = dataclasses.field(default=False, metadata=wire.json("applied"))
    applied_message: str | None = dataclasses.field(
        default=None, metadata=wire.json("appliedMessage")
    )
    health: ResourceHealth | None = dataclasses.field(default=None, metadata=wire.json("health"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResourceBindingStatus(wire.Model):
    """Observed state of a binding: the scheduler's and the members'."""

    scheduler_observed_generation: int = dataclasses.field(
        default=0, metadata=wire.json("schedulerObservedGeneration", fmt="int64")
    )
    scheduler_observed_affinity_name: str | None = dataclasses.field(
        default=None, metadata=wire.json("schedulerObservingAffinityName")
    )
    """Karmada's Go field is SchedulerObservedAffinityName; its JSON name is this one."""
    last_scheduled_time: datetime.datetime | None = dataclasses.field(
        default=None, metadata=wire.json("lastScheduledTime")
    )
    conditions: tuple[meta.Condition, ...] = meta.conditions()
    aggregated_status: tuple[AggregatedStatusItem, ...] = dataclasses.field(
        default=(),
        metadata=wire.json("aggregatedStatus", list_type="map", list_map_keys=("clusterName",)),
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Binding(meta.Object):
    """What a ResourceBinding and a ClusterResourceBinding both are: one spec, one status."""

    spec: ResourceBindingSpec = meta.spec()
    status: ResourceBindingStatus = meta.status(ResourceBindingStatus)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResourceBinding(_Binding, resource=groups.RESOURCE_BINDING):
    """work.karmada.io/v1alpha2 ResourceBinding (namespaced, beside its template)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterResourceBinding(_Binding, resource=groups.CLUSTER_RESOURCE_BINDING):
    """work.karmada.io/v1alpha2 ClusterResourceBinding (for cluster-scoped templates)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkloadTemplate(wire.Model):
    """The manifests to apply in the member cluster, as whole objects."""

    manifests: tuple[wire.RawObject, ...] = dataclasses.field(
        default=(), metadata=wire.json("manifests")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkSpec(wire.Model):
    """What to apply in the Work's member cluster."""

    workload: WorkloadTemplate = dataclasses.field(
        default_factory=WorkloadTemplate, metadata=wire.json("workload")
    )
    suspend_dispatching: bool | None = dataclasses.field(
        default=None, metadata=wire.json("suspendDispatching")
    )
    preserve_resources_on_deletion: bool | None = dataclasses.field(
        default=None, metadata=wire.json("preserveResourcesOnDeletion")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResourceIdentifier(wire.Model):
    """Which manifest of the Work a status is for (``ordinal`` is its index)."""

    ordinal: int = dataclasses.field(metadata=wire.json("ordinal", minimum=0))
    group: str | None = dataclasses.field(default=None, metadata=wire.json("group"))
    version: str = dataclasses.field(metadata=wire.json("version"))
    kind: str = dataclasses.field(metadata=wire.json("kind"))
    resource: str = dataclasses.field(metadata=wire.json("resource"))
    namespace: str | None = dataclasses.field(default=None, metadata=wire.json("namespace"))
    name: str = dataclasses.field(metadata=wire.json("name"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ManifestStatus(wire.Model):
    """The status of one manifest's object in the member cluster."""

    identifier: ResourceIdentifier = dataclasses.field(metadata=wire.json("identifier"))
    status: wire.RawObject | None = dataclasses.field(default=None, metadata=wire.json("status"))
    health: ResourceHealth | None = dataclasses.field(default=None, metadata=wire.json("health"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkStatus(wire.Model):
    """Observed state of a Work, written by the execution and status controllers."""

    conditions: tuple[meta.Condition, ...] = meta.conditions()
    manifest_statuses: tuple[ManifestStatus, ...] = dataclasses.field(
        default=(), metadata=wire.json("manifestStatuses")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Work(meta.Object, resource=groups.WORK):
    """work.karmada.io/v1alpha1 Work (namespaced, in ``karmada-es-<cluster>``)."""

    spec: WorkSpec = meta.spec()
    status: WorkStatus = meta.status(WorkStatus)
