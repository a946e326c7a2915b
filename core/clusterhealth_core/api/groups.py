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

CATEGORIES = ("karmada", "clusterhealth")
"""``kubectl get karmada`` / ``kubectl get clusterhealth`` list all our kinds."""

# Cluster condition types.
CONDITION_READY = "Ready"
CONDITION_SERVICE_DOMAIN_NAME_RESOLUTION_READY = "ServiceDomainNameResolutionReady"

# Taint keys Karmada puts on unhealthy clusters.
TAINT_CLUSTER_NOT_READY = "cluster.karmada.io/not-ready"
TAINT_CLUSTER_UNREACHABLE = "cluster.karmada.io/unreachable"

# Remedy actions.
ACTION_TRAFFIC_CONTROL = "TrafficControl"

# Remedy cluster condition operators.
OPERATOR_EQUAL = "Equal"
OPERATOR_NOT_EQUAL = "NotEqual"
