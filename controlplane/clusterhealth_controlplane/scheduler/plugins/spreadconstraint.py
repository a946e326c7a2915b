"""SpreadConstraint filter: a cluster lacking a field the placement spreads by does not fit.

Karmada's ``spreadconstraint`` plugin: spreading by provider, region or zone needs the
cluster's provider, region or zones to be set.
"""

from __future__ import annotations

from clusterhealth_controlplane.scheduler import framework, spread

NAME = "SpreadConstraint"
"""The plugin's name in the registry and in ``--plugins``."""


class SpreadConstraint(framework.Filter):
    """Filters out clusters without the provider, region or zone spread by."""

    name = NAME

    def check(self, cycle: framework.Cycle, cluster: framework.ClusterView) -> framework.Result:
        """Fit when the cluster has every spread field the placement uses."""
        for constraint in cycle.placement.spread_constraints:
            field = constraint.field
            if field == spread.PROVIDER and not cluster.provider:
                return framework.Result(False, "did not have the provider property")
            if field == spread.REGION and not cluster.region:
                return framework.Result(False, "did not have the region property")
            if field == spread.ZONE and not cluster.zones:
                return framework.Result(False, "did not have the zones property")
        return framework.FIT
