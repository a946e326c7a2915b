"""The Remedy controller's metric families, on an injected registry."""

from __future__ import annotations

import prometheus_client


class RemedyMetrics:
    """Active actions, reconcile timing and errors, evaluations, leadership."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self.active_actions = prometheus_client.Gauge(
            "clusterhealth_remedy_active_actions",
            "1 for each remedy action currently written on a Cluster.",
            ["cluster", "action"], registry=registry,
        )
        self.reconcile_duration = prometheus_client.Histogram(
            "clusterhealth_remedy_reconcile_duration_seconds",
            "Time one reconcile took, by kind (cluster|remedy).",
            ["kind"], registry=registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
        )
        self.reconcile_errors = prometheus_client.Counter(
            "clusterhealth_remedy_reconcile_errors",
            "Reconciles that failed and were retried, by kind.",
            ["kind"], registry=registry,
        )
        self.evaluations = prometheus_client.Counter(
            "clusterhealth_remedy_evaluations",
            "Evaluations of a Cluster against the Remedies.",
            registry=registry,
        )
        self.is_leader = prometheus_client.Gauge(
            "clusterhealth_remedy_is_leader", "Whether this replica is the active one.",
            registry=registry,
        )
        for kind in ("cluster", "remedy"):
            self.reconcile_errors.labels(kind)

    def set_actions(self, cluster: str, before: tuple[str, ...], after: tuple[str, ...]) -> None:
        """Move a cluster's active-action series from ``before`` to ``after``."""
        for action in set(before) - set(after):
            self.active_actions.remove(cluster, action)
        for action in after:
            self.active_actions.labels(cluster, action).set(1)
