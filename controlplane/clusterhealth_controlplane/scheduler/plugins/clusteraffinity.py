"""ClusterAffinity filter: the cluster must be one the placement's cluster affinity selects.

Karmada's ``clusteraffinity`` plugin with ``spec.placement.clusterAffinity`` (the
``clusterAffinities`` failover list is not supported here): no affinity selects every
cluster.
"""

from __future__ import annotations

from clusterhealth_controlplane.scheduler import framework, selectors

NAME = "ClusterAffinity"
"""The plugin's name in the registry and in ``--plugins``."""


class ClusterAffinity(framework.Filter):
    """Filters out the clusters the placement's cluster affinity does not select."""

    name = NAME

    def check(self, cycle: framework.Cycle, cluster: framework.ClusterView) -> framework.Result:
        """Fit when the affinity is absent or matches."""
        affinity = cycle.placement.affinity
        if affinity is None or selectors.affinity_matches(affinity, cluster):
            return framework.FIT
        if cluster.name in affinity.exclude:
            return framework.Result(False, "is excluded by the placement's cluster affinity")
        return framework.Result(False, "did not match the placement's cluster affinity")
