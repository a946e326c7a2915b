"""APIEnablement filter: the cluster must serve the binding's kind.

Karmada's ``apienablement`` plugin: a cluster already in the result always passes (an
API removed by accident must not make the scheduler delete the workload); any other
cluster must list the kind under its group/version in ``status.apiEnablements``. A
cluster whose list is not known yet (or incomplete and without the kind) does not fit:
Karmada only accepts an API it sees enabled.
"""

from __future__ import annotations

from clusterhealth_controlplane.scheduler import framework

NAME = "APIEnablement"
"""The plugin's name in the registry and in ``--plugins``."""


class APIEnablement(framework.Filter):
    """Filters out new clusters that do not (yet) serve the binding's kind."""

    name = NAME
    current_targets_fit = True

    def check(self, cycle: framework.Cycle, cluster: framework.ClusterView) -> framework.Result:
        """Fit when the cluster lists the kind (current targets fit unchecked)."""
        binding = cycle.binding
        what = f"{binding.kind} ({binding.api_version})"
        if cluster.api_enablements is None:
            return framework.Result(False, f"has not reported its APIs yet, so {what} is unknown")
        if binding.kind in cluster.api_enablements.get(binding.api_version, frozenset()):
            return framework.FIT
        if cluster.api_enablements_complete:
            return framework.Result(False, f"does not serve {what}")
        return framework.Result(False, f"has not reported {what} among its APIs (list incomplete)")
