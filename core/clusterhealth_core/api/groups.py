"""Names shared with Karmada: API groups, kinds, condition types, taints, actions.

These strings are the compatibility contract with Karmada (reference section 1);
they live in one place so the agent, the remedy controller, the MCI provider,
the CRDs' tests and the local environment cannot disagree on a spelling.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Resource:
    """Where a kind is served: group, version, kind, plural and scope."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """``group/version`` as written in ``apiVersion``."""
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        """``plural.group``, the name of the CustomResourceDefinition."""
        return f"{self.plural}.{self.group}"


CLUSTER_GROUP = "cluster.karmada.io"
CLUSTER_VERSION = "v1alpha1"
CLUSTER_API_VERSION = f"{CLUSTER_GROUP}/{CLUSTER_VERSION}"
CLUSTER_KIND = "Cluster"
CLUSTER_PLURAL = "clusters"
CLUSTER = Resource(CLUSTER_GROUP, CLUSTER_VERSION, CLUSTER_KIND, CLUSTER_PLURAL, False)

REMEDY_GROUP = "remedy.karmada.io"
REMEDY_VERSION = "v1alpha1"
REMEDY_API_VERSION = f"{REMEDY_GROUP}/{REMEDY_VERSION}"
REMEDY_KIND = "Remedy"
REMEDY_PLURAL = "remedies"
REMEDY = Resource(REMEDY_GROUP, REMEDY_VERSION, REMEDY_KIND, REMEDY_PLURAL, False)

MCI_GROUP = "networking.karmada.io"
MCI_VERSION = "v1alpha1"
MCI_API_VERSION = f"{MCI_GROUP}/{MCI_VERSION}"
MCI_KIND = "MultiClusterIngress"
MCI_PLURAL = "multiclusteringresses"
MCI_SHORT_NAME = "mci"
MCI = Resource(MCI_GROUP, MCI_VERSION, MCI_KIND, MCI_PLURAL, True)

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
