"""TaintToleration filter: NoSchedule and NoExecute taints must be tolerated by the placement.

Karmada's ``tainttoleration`` plugin: a cluster already in the binding's result passes
whatever its taints (the taint manager, not the scheduler, evicts from it after the
toleration period); any other cluster must have every NoSchedule and NoExecute taint
tolerated (PreferNoSchedule is ignored, as is ``tolerationSeconds``).
"""

from __future__ import annotations

from clusterhealth_controlplane.scheduler import framework, selectors

NAME = "TaintToleration"
"""The plugin's name in the registry and in ``--plugins``."""


class TaintToleration(framework.Filter):
    """Filters out new clusters with a taint the placement does not tolerate."""

    name = NAME
    current_targets_fit = True

    def check(self, cycle: framework.Cycle, cluster: framework.ClusterView) -> framework.Result:
        """Fit when every scheduling taint is tolerated (current targets fit unchecked)."""
        taint = selectors.untolerated_taint(cluster.taints, cycle.placement.tolerations)
        if taint is None:
            return framework.FIT
        return framework.Result(False, f"had untolerated taint {{{taint}}}")
