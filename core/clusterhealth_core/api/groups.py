"""Names shared with Karmada: API groups, kinds, condition types, taints, actions.

These strings are the compatibility contract with Karmada (reference section 1);
they live in one place so the agent, the remedy controller, the MCI provider,
the CRDs' tests and the local environment cannot disagree on a spelling.
"""

from clusterhealth_core.kube import resources

# The kinds: their group, version, kind and plural are the resources' own
# (``groups.CLUSTER.kind``, ``groups.WORK.api_version``), spelled once in kube.resources.
CLUSTER = resources.CLUSTERS
REMEDY = resources.REMEDIES
MCI = resources.MULTI_CLUSTER_INGRESSES
PROPAGATION_POLICY = resources.PROPAGATION_POLICIES
CLUSTER_PROPAGATION_POLICY = resources.CLUSTER_PROPAGATION_POLICIES
CLUSTER_TAINT_POLICY = resources.CLUSTER_TAINT_POLICIES
RESOURCE_BINDING = resources.RESOURCE_BINDINGS
CLUSTER_RESOURCE_BINDING = resources.CLUSTER_RESOURCE_BINDINGS
WORK = resources.WORKS

POLICY_GROUP = PROPAGATION_POLICY.group
WORK_GROUP = WORK.group

# ``kubectl`` short names.
MCI_SHORT_NAME = "mci"
PROPAGATION_POLICY_SHORT_NAME = "pp"
CLUSTER_PROPAGATION_POLICY_SHORT_NAME = "cpp"
RESOURCE_BINDING_SHORT_NAME = "rb"
CLUSTER_RESOURCE_BINDING_SHORT_NAME = "crb"
WORK_SHORT_NAME = "wk"

EXECUTION_NAMESPACE_PREFIX = "karmada-es-"
"""Works for member cluster ``<name>`` live in namespace ``karmada-es-<name>``."""

CATEGORIES = ("karmada", "clusterhealth")
"""``kubectl get karmada`` / ``kubectl get clusterhealth`` list all our kinds."""

# Cluster condition types.
CONDITION_READY = "Ready"
CONDITION_SERVICE_DOMAIN_NAME_RESOLUTION_READY = "ServiceDomainNameResolutionReady"

# (Cluster)ResourceBinding condition types.
CONDITION_SCHEDULED = "Scheduled"
CONDITION_FULLY_APPLIED = "FullyApplied"

# Work condition types.
CONDITION_APPLIED = "Applied"
CONDITION_AVAILABLE = "Available"

# Taint keys Karmada puts on unhealthy clusters.
TAINT_CLUSTER_NOT_READY = "cluster.karmada.io/not-ready"
TAINT_CLUSTER_UNREACHABLE = "cluster.karmada.io/unreachable"

# Remedy actions.
ACTION_TRAFFIC_CONTROL = "TrafficControl"

# Remedy cluster condition operators.
OPERATOR_EQUAL = "Equal"
OPERATOR_NOT_EQUAL = "NotEqual"
