"""The controller manager's controllers: one explicit table, in the order they start.

``--controllers`` selects from :data:`TABLE` by name (``'*,-execution'``).
Adding a controller means adding a row here; nothing registers itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from clusterhealth_controlplane import manager
from clusterhealth_controlplane.binding import controller as binding
from clusterhealth_controlplane.clusterstatus import controller as cluster_status
from clusterhealth_controlplane.clustertaint import controller as cluster_taint
from clusterhealth_controlplane.detector import controller as detector
from clusterhealth_controlplane.execution import controller as execution
from clusterhealth_controlplane.failback import controller as failback
from clusterhealth_controlplane.gracefuleviction import controller as graceful_eviction
from clusterhealth_controlplane.namespacesync import controller as namespace_sync
from clusterhealth_controlplane.status import binding as binding_status
from clusterhealth_controlplane.status import work as work_status
from clusterhealth_controlplane.taintmanager import controller as taint_manager
from clusterhealth_core.kube import resources

TABLE: tuple[manager.Entry, ...] = (
    manager.Entry("detector", "resource templates matched to propagation policies -> bindings",
                  detector.Detector),
    manager.Entry("binding", "bindings -> one Work per target cluster in karmada-es-<cluster>",
                  binding.BindingController),
    manager.Entry("namespaceSync", "every control-plane namespace (but reserved or opted-out "
                  "ones) -> a Work per member, with its labels",
                  namespace_sync.NamespaceSyncController),
    manager.Entry("execution", "Works -> member objects (server-side apply, finalizer; "
                  "another's object is left alone unless conflictResolution is Overwrite)",
                  execution.ExecutionController),
    manager.Entry("workStatus", "member objects' status -> Work.status.manifestStatuses",
                  work_status.WorkStatusController),
    manager.Entry("bindingStatus", "Works' status -> binding aggregatedStatus and the template",
                  binding_status.BindingStatusController),
    manager.Entry("clusterStatus", "members probed -> Cluster Ready, served APIs, node and "
                  "resource summaries", cluster_status.ClusterStatusController),
    manager.Entry("clusterTaint", "Ready and ClusterTaintPolicies -> Cluster taints "
                  "(NoSchedule, then NoExecute after --failover-eviction-timeout)",
                  cluster_taint.ClusterTaintController),
    manager.Entry("taintManager", "bindings off NoExecute-tainted clusters (graceful-eviction "
                  "tasks), rate-limited, held back by the storm guard",
                  taint_manager.TaintManager),
    manager.Entry("gracefulEviction", "graceful-eviction tasks ended once the replacement is "
                  "healthy, or at their deadline", graceful_eviction.GracefulEvictionController),
    manager.Entry("failback", "opted-in static-weight bindings rebalanced back onto a cluster "
                  "recovered for the stabilisation window", failback.FailbackController),
)
NAMES: list[str] = [entry.name for entry in TABLE]
NEEDS: dict[str, tuple[resources.Resource, ...]] = {
    "detector": (resources.PROPAGATION_POLICIES, resources.CLUSTER_PROPAGATION_POLICIES,
                 resources.RESOURCE_BINDINGS, resources.CLUSTER_RESOURCE_BINDINGS),
    "binding": (resources.RESOURCE_BINDINGS, resources.CLUSTER_RESOURCE_BINDINGS,
                resources.WORKS),
    "namespaceSync": (resources.NAMESPACES, resources.CLUSTERS, resources.WORKS),
    "execution": (resources.WORKS, resources.CLUSTERS),
    "workStatus": (resources.WORKS, resources.CLUSTERS),
    "bindingStatus": (resources.RESOURCE_BINDINGS, resources.CLUSTER_RESOURCE_BINDINGS,
                      resources.WORKS),
    "clusterStatus": (resources.CLUSTERS,),
    "clusterTaint": (resources.CLUSTERS, resources.CLUSTER_TAINT_POLICIES),
    "taintManager": (resources.CLUSTERS, resources.RESOURCE_BINDINGS,
                     resources.CLUSTER_RESOURCE_BINDINGS),
    "gracefulEviction": (resources.RESOURCE_BINDINGS, resources.CLUSTER_RESOURCE_BINDINGS),
    "failback": (resources.RESOURCE_BINDINGS, resources.CLUSTER_RESOURCE_BINDINGS,
                 resources.PROPAGATION_POLICIES, resources.CLUSTER_PROPAGATION_POLICIES,
                 resources.CLUSTERS),
}
"""The APIs each controller cannot start without (checked once at start-up)."""


def selected(names: Sequence[str]) -> list[manager.Entry]:
    """The table's entries named in ``names``, in the table's order."""
    return [entry for entry in TABLE if entry.name in names]


def needed(names: Sequence[str]) -> list[resources.Resource]:
    """Every API the selected controllers need, once each."""
    found: list[resources.Resource] = []
    for name in names:
        for resource in NEEDS.get(name, ()):
            if resource not in found:
                found.append(resource)
    return found
