"""ClusterEviction filter: a binding is not scheduled back onto a cluster it is being evicted from.

Karmada's ``clustereviction`` plugin: a cluster named by one of the binding's
``gracefulEvictionTasks`` (``fromCluster``) does not fit.
"""

from __future__ import annotations

from clusterhealth_controlplane.scheduler import framework

NAME = "ClusterEviction"
"""The plugin's name in the registry and in ``--plugins``."""


class ClusterEviction(framework.Filter):
    """Filters out the clusters the binding is being evicted from."""

    name = NAME

    def check(self, cycle: framework.Cycle, cluster: framework.ClusterView) -> framework.Result:
        """Fit unless a graceful eviction task evicts the binding from the cluster."""
        if cluster.name in cycle.binding.evicting_from:
            return framework.Result(False, "is in the process of eviction")
        return framework.FIT
