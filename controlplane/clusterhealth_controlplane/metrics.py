"""The failover metrics of the controller manager, made once per process.

Each family is registered once on the process's registry (terms of
leadership come and go; the families stay) and handed to the controllers
through :class:`clusterhealth_controlplane.manager.Context`.  Names follow
the project's ``clusterhealth_`` prefix and Prometheus' conventions; the
chart's alert rules and dashboards use them, and a test scrapes a running
controller manager for every one of them.
"""

from __future__ import annotations

import prometheus_client


class FailoverMetrics:
    """Cluster health, taints, evictions and the storm guard."""

    def __init__(self, registry: prometheus_client.CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else prometheus_client.CollectorRegistry()
        self.registry = registry
        self.cluster_ready = prometheus_client.Gauge(
            "clusterhealth_cluster_ready",
            "1 for the Cluster's Ready condition status (True, False, Unknown), 0 for the others.",
            ["cluster", "status"], registry=registry)
        self.cluster_probes = prometheus_client.Counter(
            "clusterhealth_cluster_health_probes",
            "Health probes of member API servers by result (ok, not_ok, unreachable).",
            ["cluster", "result"], registry=registry)
        self.cluster_probe_duration = prometheus_client.Histogram(
            "clusterhealth_cluster_health_probe_duration_seconds",
            "Time one health probe of a member API server took.", ["cluster"],
            registry=registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
        self.taints = prometheus_client.Gauge(
            "clusterhealth_cluster_taints",
            "Taints currently on the Cluster, by key and effect.",
            ["cluster", "key", "effect"], registry=registry)
        self.taint_changes = prometheus_client.Counter(
            "clusterhealth_cluster_taint_changes",
            "Taints added or removed by the controller manager, by key, effect and change.",
            ["key", "effect", "change"], registry=registry)
        self.evictions = prometheus_client.Counter(
            "clusterhealth_evictions",
            "Bindings evicted from a cluster (or not), by result and reason.",
            ["result", "reason"], registry=registry)
        self.eviction_queue_depth = prometheus_client.Gauge(
            "clusterhealth_eviction_queue_depth",
            "Evictions due and waiting for the rate limit or a worker.", registry=registry)
        self.eviction_latency = prometheus_client.Histogram(
            "clusterhealth_eviction_latency_seconds",
            "From an eviction falling due to the binding written.", registry=registry,
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900))
        self.storm_guard = prometheus_client.Gauge(
            "clusterhealth_eviction_storm_guard",
            "1 while more than --unhealthy-cluster-threshold of clusters are unhealthy "
            "and evictions run at the secondary rate (or stop).", registry=registry)
        self.unhealthy_fraction = prometheus_client.Gauge(
            "clusterhealth_unhealthy_cluster_fraction",
            "The fraction of Clusters not Ready, as the storm guard sees it.", registry=registry)
        self.graceful_eviction_tasks = prometheus_client.Gauge(
            "clusterhealth_graceful_eviction_tasks",
            "Graceful-eviction tasks on bindings, waiting for their replacement.",
            registry=registry)
        self.graceful_eviction_ends = prometheus_client.Counter(
            "clusterhealth_graceful_eviction_task_ends",
            "Graceful-eviction tasks removed, by why (healthy, timeout, grace_period, confirmed).",
            ["why"], registry=registry)
        self.failbacks = prometheus_client.Counter(
            "clusterhealth_failbacks",
            "Bindings rebalanced back onto a recovered cluster.", registry=registry)
