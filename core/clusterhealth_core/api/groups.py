"""Names shared with Karmada: API groups, kinds, condition types, taints, actions.

These strings are the compatibility contract with Karmada (reference section 1);
they live in one place so the agent, the remedy controller, the MCI provider,
the CRDs' tests and the local environment cannot disagree on a spelling.
"""

from clusterhealth_core.kube import resources

CLUSTER = resources.CLUSTERS
CLUSTER_GROUP = CLUSTER.group
CLUSTER_VERSION = CLUSTER.version
CLUSTER_API_VERSION = CLUSTER.api_version
CLUSTER_KIND = CLUSTER.kind
CLUSTER_PLURAL = CLUSTER.plural

REMEDY = resources.REMEDIES
REMEDY_GROUP = REMEDY.group
REMEDY_VERSION = REMEDY.version
REMEDY_API_VERSION = REMEDY.api_version
REMEDY_KIND = REMEDY.kind
REMEDY_PLURAL = REMEDY.plural

MCI = resources.MULTI_CLUSTER_INGRESSES
MCI_GROUP = MCI.group
MCI_VERSION = MCI.version
MCI_API_VERSION = MCI.api_version
MCI_KIND = MCI.kind
MCI_PLURAL = MCI.plural
MCI_SHORT_NAME = "mci"

POLICY_GROUP = resources.PROPAGATION_POLICIES.group
WORK_GROUP = resources.WORKS.group

PROPAGATION_POLICY = resources.PROPAGATION_POLICIES
PROPAGATION_POLICY_API_VERSION = PROPAGATION_POLICY.api_version
PROPAGATION_POLICY_KIND = PROPAGATION_POLICY.kind
PROPAGATION_POLICY_PLURAL = PROPAGATION_POLICY.plural
PROPAGATION_POLICY_SHORT_NAME = "pp"

CLUSTER_PROPAGATION_POLICY = resources.CLUSTER_PROPAGATION_POLICIES
CLUSTER_PROPAGATION_POLICY_API_VERSION = CLUSTER_PROPAGATION_POLICY.api_version
CLUSTER_PROPAGATION_POLICY_KIND = CLUSTER_PROPAGATION_POLICY.kind
CLUSTER_PROPAGATION_POLICY_PLURAL = CLUSTER_PROPAGATION_POLICY.plural
CLUSTER_PROPAGATION_POLICY_SHORT_NAME = "cpp"

CLUSTER_TAINT_POLICY = resources.CLUSTER_TAINT_POLICIES
CLUSTER_TAINT_POLICY_API_VERSION = CLUSTER_TAINT_POLICY.api_version
CLUSTER_TAINT_POLICY_KIND = CLUSTER_TAINT_POLICY.kind
CLUSTER_TAINT_POLICY_PLURAL = CLUSTER_TAINT_POLICY.plural

RESOURCE_BINDING = resources.RESOURCE_BINDINGS
RESOURCE_BINDING_API_VERSION = RESOURCE_BINDING.api_version
RESOURCE_BINDING_KIND = RESOURCE_BINDING.kind
RESOURCE_BINDING_PLURAL = RESOURCE_BINDING.plural
RESOURCE_BINDING_SHORT_NAME = "rb"

CLUSTER_RESOURCE_BINDING = resources.CLUSTER_RESOURCE_BINDINGS
CLUSTER_RESOURCE_BINDING_API_VERSION = CLUSTER_RESOURCE_BINDING.api_version
CLUSTER_RESOURCE_BINDING_KIND = CLUSTER_RESOURCE_BINDING.kind
CLUSTER_RESOURCE_BINDING_PLURAL = CLUSTER_RESOURCE_BINDING.plural
CLUSTER_RESOURCE_BINDING_SHORT_NAME = "crb"

WORK = resources.WORKS
WORK_API_VERSION = WORK.api_version
WORK_KIND = WORK.kind
WORK_PLURAL = WORK.plural
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
