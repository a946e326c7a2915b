"""The MCI controller's metric families, on an injected registry."""

from __future__ import annotations

import contextlib

import prometheus_client


class MCIMetrics:
    """Blocked clusters, backends, provider calls, fail-open, leadership."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self.blocked_clusters = prometheus_client.Gauge(
            "clusterhealth_mci_blocked_clusters",
            "Clusters in status.trafficBlockClusters, per MCI (namespace/name).",
            ["mci"], registry=registry,
        )
        self.backends = prometheus_client.Gauge(
            "clusterhealth_mci_backends",
            "Backend endpoints receiving new traffic, per MCI and cluster.",
            ["mci", "cluster"], registry=registry,
        )
        self.provider_call_duration = prometheus_client.Histogram(
            "clusterhealth_mci_provider_call_duration_seconds",
            "Time of one load-balancer provider call.",
            ["provider", "operation"], registry=registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
        self.provider_errors = prometheus_client.Counter(
            "clusterhealth_mci_provider_errors",
            "Failed load-balancer provider calls.",
            ["provider", "operation"], registry=registry,
        )
        self.fail_open = prometheus_client.Gauge(
            "clusterhealth_mci_fail_open",
            "1 while an MCI serves from blocked clusters because all of them are blocked.",
            ["mci"], registry=registry,
        )
        self.is_leader = prometheus_client.Gauge(
            "clusterhealth_mci_is_leader", "Whether this replica is the active one.",
            registry=registry,
        )

    def clear(self) -> None:
        """Drop every per-MCI series (leadership lost: another replica reports them now)."""
        for gauge in (self.blocked_clusters, self.backends, self.fail_open):
            gauge.clear()

    def forget(self, key: str) -> None:
        """Drop every series of a deleted MCI."""
        for gauge in (self.blocked_clusters, self.fail_open):
            with contextlib.suppress(KeyError):
                gauge.remove(key)
        for labels in list(self.backends._metrics):
            if labels[0] == key:
                self.backends.remove(*labels)

