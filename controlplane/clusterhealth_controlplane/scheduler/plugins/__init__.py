"""The in-tree scheduler plugins (Karmada's ``pkg/scheduler/framework/plugins``) and their registry.

One module per plugin. :func:`default_registry` builds the registry explicitly; nothing
registers itself on import.
"""

from __future__ import annotations

from clusterhealth_controlplane.scheduler import framework
from clusterhealth_controlplane.scheduler.plugins import (
    apienablement,
    clusteraffinity,
    clustereviction,
    clusterlocality,
    spreadconstraint,
    tainttoleration,
)


def default_registry() -> framework.Registry:
    """Every in-tree plugin, by name, in the order they run.

    Filters run cheapest and most telling first: a cluster the placement does not
    select is reported as such, not as tainted.
    """
    plugins: list[framework.Plugin] = [
        clusteraffinity.ClusterAffinity(),
        clustereviction.ClusterEviction(),
        tainttoleration.TaintToleration(),
        apienablement.APIEnablement(),
        spreadconstraint.SpreadConstraint(),
        clusterlocality.ClusterLocality(),
    ]
    return {plugin.name: plugin for plugin in plugins}
