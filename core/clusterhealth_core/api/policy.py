"""The ``policy.karmada.io/v1alpha1`` propagation policies and ClusterTaintPolicy.

A propagation policy says which resource templates of the control plane
(``resourceSelectors``) go to which member clusters (``placement``) and how
their replicas are split.  The detector matches templates to policies and
writes ResourceBindings (:mod:`clusterhealth_core.api.work`) that carry the
placement on to the scheduler, so :class:`Placement` is shared by both.

Field names, enums, required fields and defaults are Karmada v1.18.2's, so a
user's Karmada manifests apply unchanged.  The subset is the one the control
plane implements (reference section 1): Karmada fields left out here
(``dependentOverrides``, ``activationPreference``,
``schedulePriority``, ``placement.workloadAffinity``, ``overflowAffinities``,
``statePreservation``) are unknown fields, which the API server rejects under
strict field validation (``kubectl``'s default) instead of silently ignoring.

Beyond Karmada's CRD schema, a few per-field checks that Karmada makes in its
validating webhook are schema rules here (non-negative spread group counts,
field-selector keys and operators, failover durations), so bad input gets the
API server's error at once.  Cross-field rules (``minGroups`` above
``maxGroups``, weights that leave no cluster) are left to the scheduler, which
reports them as a condition.  Also beyond Karmada, a policy has a status with
conditions, where the detector says e.g. that a policy selects nothing.

A ClusterTaintPolicy (Karmada >= 1.14) adds taints to the Clusters it targets
when their conditions match ``addOnConditions`` and removes them when they
match ``removeOnConditions``; the control plane's ``clusterTaint`` controller
applies it.  What Karmada's webhook checks and its controller ignores
(duplicate taints, an effect or operator it does not know, a policy with no
conditions at all, which can never do anything) is refused by the schema here.
"""

import dataclasses
import enum
from collections.abc import Mapping

from clusterhealth_core.api import cluster, groups, meta, wire

INT32_MAX = cluster.INT32_MAX

AFFINITY_NAME_MAX_LENGTH = 32
"""Karmada's bound on ``clusterAffinities[].affinityName``."""

# Bounds beyond Karmada's CRDs (which set none on these lists), so that a policy stays
# small enough to match, schedule from and copy into every binding it makes: the API
# server refuses a longer list, naming the field and the limit.  Cluster-name lists use
# cluster.MAX_CLUSTER_NAMES.
MAX_RESOURCE_SELECTORS = 1024
"""``resourceSelectors`` of one policy."""
MAX_EXPRESSIONS = 64
"""``matchExpressions`` of one label or field selector."""
MAX_VALUES = 1024
"""``values`` of one selector expression."""
LABEL_VALUE_MAX_LENGTH = 63
"""Characters of a label value: a longer one in a label selector matches nothing."""
MAX_AFFINITIES = 64
"""``placement.clusterAffinities`` (tried in order)."""
MAX_TOLERATIONS = 128
"""``placement.clusterTolerations``."""
MAX_SPREAD_CONSTRAINTS = 16
"""``placement.spreadConstraints`` (four fields and labels to spread by)."""
MAX_TAINT_CONDITIONS = 64
"""``addOnConditions`` and ``removeOnConditions`` of a ClusterTaintPolicy."""
MAX_POLICY_TAINTS = 64
"""``taints`` of a ClusterTaintPolicy."""
MAX_STATUS_VALUES = 3
"""``statusValues`` of a match condition (True, False, Unknown)."""

DEFAULT_SCHEDULER_NAME = "default-scheduler"
"""``spec.schedulerName`` when absent (Karmada's CRD default)."""

DEFAULT_TOLERATION_SECONDS = 300
"""``failover.application.decisionConditions.tolerationSeconds`` when absent."""


class ReplicaSchedulingType(enum.StrEnum):
    """Whether every selected cluster gets all replicas or they are divided."""

    DUPLICATED = "Duplicated"
    DIVIDED = "Divided"


class ReplicaDivisionPreference(enum.StrEnum):
    """How Divided replicas are split: packed onto few clusters, or by weight."""

    AGGREGATED = "Aggregated"
    WEIGHTED = "Weighted"


class DynamicWeightFactor(enum.StrEnum):
    """What dynamic weights are computed from."""

    AVAILABLE_REPLICAS = "AvailableReplicas"


class SpreadFieldValue(enum.StrEnum):
    """The Cluster field that groups clusters for a spread constraint."""

    CLUSTER = "cluster"
    REGION = "region"
    ZONE = "zone"
    PROVIDER = "provider"


class PreemptionBehavior(enum.StrEnum):
    """Whether a policy may take resources over from a lower-priority one."""

    ALWAYS = "Always"
    NEVER = "Never"


class ConflictResolution(enum.StrEnum):
    """What to do when the resource already exists in a member cluster."""

    ABORT = "Abort"
    OVERWRITE = "Overwrite"


class PurgeMode(enum.StrEnum):
    """How the application is removed from the cluster it fails over from.

    ``Immediately`` and ``Graciously`` are Karmada's deprecated spellings of
    ``Directly`` and ``Gracefully``, still accepted.
    """

    DIRECTLY = "Directly"
    GRACEFULLY = "Gracefully"
    NEVER = "Never"
    IMMEDIATELY = "Immediately"
    GRACIOUSLY = "Graciously"


class ClusterPurgeMode(enum.StrEnum):
    """PurgeMode for cluster failover (Karmada allows only these two there)."""

    DIRECTLY = "Directly"
    GRACEFULLY = "Gracefully"


class LabelSelectorOperator(enum.StrEnum):
    """metav1.LabelSelectorOperator (Kubernetes rejects any other value)."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


class FieldSelectorKey(enum.StrEnum):
    """The Cluster fields a field selector can match (Karmada's webhook allows only these)."""

    PROVIDER = "provider"
    REGION = "region"
    ZONE = "zone"


class FieldSelectorOperator(enum.StrEnum):
    """Operators of a field selector (Karmada's webhook allows only these)."""

    IN = "In"
    NOT_IN = "NotIn"


class TolerationOperator(enum.StrEnum):
    """corev1.TolerationOperator (absent means Equal)."""

    EXISTS = "Exists"
    EQUAL = "Equal"


@dataclasses.dataclass(frozen=True, kw_only=True)
class LabelSelectorRequirement(wire.Model):
    """One ``key operator values`` requirement of a label selector."""

    key: str = dataclasses.field(metadata=wire.json("key", min_length=1))
    operator: LabelSelectorOperator = dataclasses.field(metadata=wire.json("operator"))
    values: tuple[str, ...] = dataclasses.field(
        default=(), metadata=wire.json("values", list_type="atomic", max_items=MAX_VALUES,
                                       max_length=LABEL_VALUE_MAX_LENGTH)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class LabelSelector(wire.Model):
    """metav1.LabelSelector: every label and every expression must match.

    An empty selector matches everything (as in Kubernetes).
    """

    WIRE_ATOMIC = True

    match_labels: Mapping[str, str] = dataclasses.field(
        default_factory=dict, metadata=wire.json("matchLabels")
    )
    match_expressions: tuple[LabelSelectorRequirement, ...] = dataclasses.field(
        default=(), metadata=wire.json("matchExpressions", list_type="atomic",
                                       max_items=MAX_EXPRESSIONS)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class FieldSelectorRequirement(wire.Model):
    """A requirement on the Cluster's ``spec.provider``, ``spec.region`` or ``spec.zone``."""

    key: FieldSelectorKey = dataclasses.field(metadata=wire.json("key"))
    operator: FieldSelectorOperator = dataclasses.field(metadata=wire.json("operator"))
    values: tuple[str, ...] = dataclasses.field(
        default=(), metadata=wire.json("values", list_type="atomic", max_items=MAX_VALUES,
                                       max_length=cluster.NAME_MAX_LENGTH)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class FieldSelector(wire.Model):
    """Cluster fields that must match (all requirements)."""

    match_expressions: tuple[FieldSelectorRequirement, ...] = dataclasses.field(
        default=(), metadata=wire.json("matchExpressions", max_items=MAX_EXPRESSIONS)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Toleration(wire.Model):
    """corev1.Toleration: lets a placement onto clusters with a matching taint.

    Absent ``effect`` matches every effect; ``tolerationSeconds`` (NoExecute
    only) is how long a tainted cluster is tolerated before eviction.
    """

    key: str | None = dataclasses.field(default=None, metadata=wire.json("key"))
    operator: TolerationOperator | None = dataclasses.field(
        default=None, metadata=wire.json("operator")
    )
    value: str | None = dataclasses.field(default=None, metadata=wire.json("value"))
    effect: cluster.TaintEffect | None = dataclasses.field(
        default=None, metadata=wire.json("effect")
    )
    toleration_seconds: int | None = dataclasses.field(
        default=None, metadata=wire.json("tolerationSeconds", fmt="int64")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResourceSelector(wire.Model):
    """Resource templates a policy selects: by kind, and by name or labels.

    Without ``name`` and ``labelSelector`` every object of the kind (in the
    namespace) is selected; ``name`` wins over ``labelSelector``.
    """

    api_version: str = dataclasses.field(metadata=wire.json("apiVersion", min_length=1))
    kind: str = dataclasses.field(metadata=wire.json("kind", min_length=1))
    namespace: str | None = dataclasses.field(default=None, metadata=wire.json("namespace"))
    name: str | None = dataclasses.field(default=None, metadata=wire.json("name"))
    label_selector: LabelSelector | None = dataclasses.field(
        default=None, metadata=wire.json("labelSelector")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterAffinity(wire.Model):
    """The clusters a placement may use: all of the given criteria must hold.

    An empty affinity selects every cluster; ``exclude`` always wins.
    """

    label_selector: LabelSelector | None = dataclasses.field(
        default=None, metadata=wire.json("labelSelector")
    )
    field_selector: FieldSelector | None = dataclasses.field(
        default=None, metadata=wire.json("fieldSelector")
    )
    cluster_names: tuple[str, ...] = dataclasses.field(
        default=(), metadata=wire.json("clusterNames", max_items=cluster.MAX_CLUSTER_NAMES,
                                       max_length=cluster.NAME_MAX_LENGTH)
    )
    exclude: tuple[str, ...] = dataclasses.field(
        default=(), metadata=wire.json("exclude", max_items=cluster.MAX_CLUSTER_NAMES,
                                       max_length=cluster.NAME_MAX_LENGTH)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterAffinityTerm(ClusterAffinity):
    """One named affinity of an ordered list: the scheduler tries them in order."""

    affinity_name: str = dataclasses.field(
        metadata=wire.json("affinityName", min_length=1, max_length=AFFINITY_NAME_MAX_LENGTH)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class SpreadConstraint(wire.Model):
    """How many groups (clusters, regions, ...) the selected clusters span.

    ``0`` means no bound.  ``minGroups`` above ``maxGroups`` is accepted by the
    schema (as by Karmada's) and reported by the scheduler.
    """

    spread_by_field: SpreadFieldValue | None = dataclasses.field(
        default=None, metadata=wire.json("spreadByField")
    )
    spread_by_label: str | None = dataclasses.field(
        default=None, metadata=wire.json("spreadByLabel")
    )
    max_groups: int = dataclasses.field(default=0, metadata=wire.json("maxGroups", minimum=0))
    min_groups: int = dataclasses.field(default=0, metadata=wire.json("minGroups", minimum=0))


@dataclasses.dataclass(frozen=True, kw_only=True)
class StaticClusterWeight(wire.Model):
    """A weight for the clusters matching ``targetCluster``."""

    target_cluster: ClusterAffinity = dataclasses.field(metadata=wire.json("targetCluster"))
    weight: int = dataclasses.field(metadata=wire.json("weight", fmt="int64", minimum=1))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterPreferences(wire.Model):
    """Weights for Divided/Weighted: static per cluster, or dynamic."""

    static_weight_list: tuple[StaticClusterWeight, ...] = dataclasses.field(
        default=(), metadata=wire.json("staticWeightList", max_items=cluster.MAX_CLUSTER_NAMES)
    )
    dynamic_weight: DynamicWeightFactor | None = dataclasses.field(
        default=None, metadata=wire.json("dynamicWeight")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReplicaSchedulingStrategy(wire.Model):
    """How the replicas of a workload are placed on the selected clusters."""

    replica_scheduling_type: ReplicaSchedulingType = dataclasses.field(
        default=ReplicaSchedulingType.DIVIDED,
        metadata=wire.json("replicaSchedulingType", defaulted=True),
    )
    replica_division_preference: ReplicaDivisionPreference | None = dataclasses.field(
        default=None, metadata=wire.json("replicaDivisionPreference")
    )
    weight_preference: ClusterPreferences | None = dataclasses.field(
        default=None, metadata=wire.json("weightPreference")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Placement(wire.Model):
    """Where a workload may run and how its replicas are spread."""

    cluster_affinity: ClusterAffinity | None = dataclasses.field(
        default=None, metadata=wire.json("clusterAffinity")
    )
    cluster_affinities: tuple[ClusterAffinityTerm, ...] = dataclasses.field(
        default=(), metadata=wire.json("clusterAffinities", max_items=MAX_AFFINITIES)
    )
    cluster_tolerations: tuple[Toleration, ...] = dataclasses.field(
        default=(), metadata=wire.json("clusterTolerations", max_items=MAX_TOLERATIONS)
    )
    spread_constraints: tuple[SpreadConstraint, ...] = dataclasses.field(
        default=(), metadata=wire.json("spreadConstraints", max_items=MAX_SPREAD_CONSTRAINTS)
    )
    replica_scheduling: ReplicaSchedulingStrategy | None = dataclasses.field(
        default=None, metadata=wire.json("replicaScheduling")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecisionConditions(wire.Model):
    """When an application counts as failed on a cluster."""

    toleration_seconds: int = dataclasses.field(
        default=DEFAULT_TOLERATION_SECONDS,
        metadata=wire.json(
            "tolerationSeconds", fmt="int32", minimum=0, maximum=INT32_MAX, defaulted=True
        ),
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ApplicationFailoverBehavior(wire.Model):
    """Moving an application off a cluster where it stays unhealthy."""

    decision_conditions: DecisionConditions = dataclasses.field(
        metadata=wire.json("decisionConditions")
    )
    purge_mode: PurgeMode = dataclasses.field(
        default=PurgeMode.GRACEFULLY, metadata=wire.json("purgeMode", defaulted=True)
    )
    grace_period_seconds: int | None = dataclasses.field(
        default=None,
        metadata=wire.json("gracePeriodSeconds", fmt="int32", minimum=1, maximum=INT32_MAX),
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterFailoverBehavior(wire.Model):
    """Moving an application off a failed cluster."""

    purge_mode: ClusterPurgeMode = dataclasses.field(
        default=ClusterPurgeMode.GRACEFULLY, metadata=wire.json("purgeMode", defaulted=True)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class FailoverBehavior(wire.Model):
    """Failover of the application and on cluster failure."""

    application: ApplicationFailoverBehavior | None = dataclasses.field(
        default=None, metadata=wire.json("application")
    )
    cluster: ClusterFailoverBehavior | None = dataclasses.field(
        default=None, metadata=wire.json("cluster")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class SuspendClusters(wire.Model):
    """Clusters to which dispatching is suspended."""

    cluster_names: tuple[str, ...] = dataclasses.field(
        default=(), metadata=wire.json("clusterNames", max_items=cluster.MAX_CLUSTER_NAMES,
                                       max_length=cluster.NAME_MAX_LENGTH)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Suspension(wire.Model):
    """Pausing the propagation of the selected resources."""

    dispatching: bool | None = dataclasses.field(default=None, metadata=wire.json("dispatching"))
    dispatching_on_clusters: SuspendClusters | None = dataclasses.field(
        default=None, metadata=wire.json("dispatchingOnClusters")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class PropagationSpec(wire.Model):
    """What a propagation policy selects and where it places it."""

    resource_selectors: tuple[ResourceSelector, ...] = dataclasses.field(
        metadata=wire.json("resourceSelectors", min_items=1, max_items=MAX_RESOURCE_SELECTORS)
    )
    association: bool = dataclasses.field(default=False, metadata=wire.json("association"))
    """Deprecated in Karmada in favor of ``propagateDeps``, and ignored there as here.

    Accepted so that Karmada manifests that still set it apply unchanged.
    """
    propagate_deps: bool = dataclasses.field(default=False, metadata=wire.json("propagateDeps"))
    placement: Placement = dataclasses.field(
        default_factory=Placement, metadata=wire.json("placement")
    )
    priority: int = dataclasses.field(
        default=0,
        metadata=wire.json(
            "priority", fmt="int32", minimum=-(2**31), maximum=INT32_MAX, defaulted=True
        ),
    )
    preemption: PreemptionBehavior = dataclasses.field(
        default=PreemptionBehavior.NEVER, metadata=wire.json("preemption", defaulted=True)
    )
    scheduler_name: str = dataclasses.field(
        default=DEFAULT_SCHEDULER_NAME, metadata=wire.json("schedulerName", defaulted=True)
    )
    failover: FailoverBehavior | None = dataclasses.field(
        default=None, metadata=wire.json("failover")
    )
    conflict_resolution: ConflictResolution = dataclasses.field(
        default=ConflictResolution.ABORT,
        metadata=wire.json("conflictResolution", defaulted=True),
    )
    suspension: Suspension | None = dataclasses.field(
        default=None, metadata=wire.json("suspension")
    )
    preserve_resources_on_deletion: bool | None = dataclasses.field(
        default=None, metadata=wire.json("preserveResourcesOnDeletion")
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class PropagationPolicyStatus(wire.Model):
    """Observed state of a policy (beyond Karmada), written by the detector."""

    conditions: tuple[meta.Condition, ...] = meta.conditions()


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Policy(meta.Object):
    """What a PropagationPolicy and a ClusterPropagationPolicy both are: one spec, one status."""

    spec: PropagationSpec = meta.spec()
    status: PropagationPolicyStatus = meta.status(PropagationPolicyStatus)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PropagationPolicy(_Policy, resource=groups.PROPAGATION_POLICY):
    """policy.karmada.io/v1alpha1 PropagationPolicy (namespaced: selects in its namespace)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterPropagationPolicy(_Policy, resource=groups.CLUSTER_PROPAGATION_POLICY):
    """policy.karmada.io/v1alpha1 ClusterPropagationPolicy (cluster-scoped: selects anywhere)."""


class MatchConditionOperator(enum.StrEnum):
    """How a ClusterTaintPolicy compares a condition's status with ``statusValues``."""

    IN = "In"
    NOT_IN = "NotIn"


class PolicyTaintEffect(enum.StrEnum):
    """The effects a ClusterTaintPolicy may put on a Cluster (the two Karmada acts on)."""

    NO_SCHEDULE = "NoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclasses.dataclass(frozen=True, kw_only=True)
class MatchCondition(wire.Model):
    """A Cluster condition whose status is (``In``) or is not (``NotIn``) one of the values.

    A Cluster without a condition of that type matches neither operator.
    """

    condition_type: str = dataclasses.field(metadata=wire.json("conditionType", min_length=1))
    operator: MatchConditionOperator = dataclasses.field(metadata=wire.json("operator"))
    status_values: tuple[meta.ConditionStatus, ...] = dataclasses.field(
        metadata=wire.json("statusValues", max_items=MAX_STATUS_VALUES)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class PolicyTaint(wire.Model):
    """A taint a ClusterTaintPolicy adds or removes, known by its key and effect."""

    key: str = dataclasses.field(metadata=wire.json("key", min_length=1))
    effect: PolicyTaintEffect = dataclasses.field(metadata=wire.json("effect"))
    value: str | None = dataclasses.field(default=None, metadata=wire.json("value"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterTaintPolicySpec(wire.Model):
    """Which Clusters, on which conditions, get or lose which taints.

    Each list of conditions matches when every entry matches (and never when
    empty); at least one of the two lists must be set.
    """

    target_clusters: ClusterAffinity | None = dataclasses.field(
        default=None, metadata=wire.json("targetClusters")
    )
    add_on_conditions: tuple[MatchCondition, ...] = dataclasses.field(
        default=(), metadata=wire.json("addOnConditions", max_items=MAX_TAINT_CONDITIONS)
    )
    remove_on_conditions: tuple[MatchCondition, ...] = dataclasses.field(
        default=(), metadata=wire.json("removeOnConditions", max_items=MAX_TAINT_CONDITIONS)
    )
    taints: tuple[PolicyTaint, ...] = dataclasses.field(
        metadata=wire.json("taints", min_items=1, max_items=MAX_POLICY_TAINTS, list_type="map",
                           list_map_keys=("key", "effect"))
    )

    def check(self, path: str) -> None:
        """addOnConditions or removeOnConditions (a policy with neither never acts)."""
        if not self.add_on_conditions and not self.remove_on_conditions:
            raise wire.ValidationError(
                path, "at least one of addOnConditions or removeOnConditions must be set")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterTaintPolicy(meta.Object, resource=groups.CLUSTER_TAINT_POLICY):
    """policy.karmada.io/v1alpha1 ClusterTaintPolicy (cluster-scoped; no status, as in Karmada)."""

    spec: ClusterTaintPolicySpec = meta.spec()
