"""The API tests' table of every top-level kind and its model, kept once for all of them."""

from clusterhealth_core.api import cluster, groups, mci, policy, remedy, wire, work

MODELS: dict[str, type[wire.Model]] = {
    groups.CLUSTER.kind: cluster.Cluster,
    groups.REMEDY.kind: remedy.Remedy,
    groups.MCI.kind: mci.MultiClusterIngress,
    groups.PROPAGATION_POLICY.kind: policy.PropagationPolicy,
    groups.CLUSTER_PROPAGATION_POLICY.kind: policy.ClusterPropagationPolicy,
    groups.CLUSTER_TAINT_POLICY.kind: policy.ClusterTaintPolicy,
    groups.RESOURCE_BINDING.kind: work.ResourceBinding,
    groups.CLUSTER_RESOURCE_BINDING.kind: work.ClusterResourceBinding,
    groups.WORK.kind: work.Work,
}
"""Every kind this project serves, by ``kind``."""
