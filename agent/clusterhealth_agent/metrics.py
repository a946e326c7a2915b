"""The agent's own metric families (probers own theirs), on an injected registry."""

from __future__ import annotations

import prometheus_client

STATUSES = ("True", "False", "Unknown")


class AgentMetrics:
    """Who this pod is, node and cluster state, leadership and reporting health."""

    def __init__(self, registry: prometheus_client.CollectorRegistry, cluster: str,
                 node: str) -> None:
        self.cluster = cluster
        self.info = prometheus_client.Gauge(
            "clusterhealth_agent_info",
            "Always 1: the cluster and node this pod probes (the probe series have neither "
            "label; dashboards join them on the pod's target labels).",
            ["cluster", "node"], registry=registry,
        )
        self.node_condition = prometheus_client.Gauge(
            "clusterhealth_agent_node_condition",
            "1 for the status this node currently reports for a condition type.",
            ["node", "condition", "status"], registry=registry,
        )
        self.cluster_condition = prometheus_client.Gauge(
            "clusterhealth_agent_cluster_condition",
            "1 for the status the leader last wrote for a cluster condition type.",
            ["cluster", "condition", "status"], registry=registry,
        )
        self.is_leader = prometheus_client.Gauge(
            "clusterhealth_agent_is_leader", "Whether this pod leads (reports for the cluster).",
            ["cluster"], registry=registry,
        )
        self.report_errors = prometheus_client.Counter(
            "clusterhealth_agent_report_errors",
            "Failed writes, by target (control-plane: Cluster status; node: Node status).",
            ["target"], registry=registry,
        )
        self.last_report_success = prometheus_client.Gauge(
            "clusterhealth_agent_last_report_success_timestamp_seconds",
            "Unix time of the leader's last successful write to the control plane.",
            ["cluster"], registry=registry,
        )
        self.info.labels(cluster, node).set(1)
        self.is_leader.labels(cluster).set(0)
        for target in ("control-plane", "node"):
            self.report_errors.labels(target)

    def set_node(self, node: str, condition: str, status: str) -> None:
        """Record the status a node reports for ``condition``."""
        for value in STATUSES:
            self.node_condition.labels(node, condition, value).set(1 if value == status else 0)

    def set_cluster(self, condition: str, status: str) -> None:
        """Record the status the leader wrote for ``condition``."""
        for value in STATUSES:
            self.cluster_condition.labels(self.cluster, condition, value).set(
                1 if value == status else 0
            )

    def clear_cluster(self) -> None:
        """Forget the cluster-level series when this pod stops leading."""
        self.cluster_condition.clear()
        self.last_report_success.clear()
