"""The scheduler's own metric families, on an injected registry.

Reconcile counts and durations, work-queue depth, adds and retries come from the
controller runtime (``clusterhealth_controller_*`` and ``clusterhealth_workqueue_*`` with
``controller``/``name`` ``scheduler``); these are what only the scheduler knows, named
after Karmada's (``karmada_scheduler_schedule_attempts_total``,
``karmada_scheduler_e2e_scheduling_duration_seconds``,
``karmada_scheduler_plugin_execution_duration_seconds``).
"""

from __future__ import annotations

import prometheus_client

SCHEDULED = "scheduled"
UNSCHEDULABLE = "unschedulable"
ERROR = "error"
RESULTS = (SCHEDULED, UNSCHEDULABLE, ERROR)

_FAST_BUCKETS = (0.00001, 0.00003, 0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
_E2E_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class SchedulerMetrics:
    """Attempts by result, end-to-end duration, per-plugin duration, leadership."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self.attempts = prometheus_client.Counter(
            "clusterhealth_scheduler_schedule_attempts",
            "Scheduling attempts by result: scheduled, unschedulable (no cluster fits or the "
            "placement cannot be satisfied), error (the result could not be written).",
            ["result"], registry=registry)
        self.e2e_duration = prometheus_client.Histogram(
            "clusterhealth_scheduler_e2e_scheduling_duration_seconds",
            "One binding's scheduling, from its reconcile start to its result written, by "
            "result.", ["result"], registry=registry, buckets=_E2E_BUCKETS)
        self.algorithm_duration = prometheus_client.Histogram(
            "clusterhealth_scheduler_algorithm_duration_seconds",
            "The scheduling decision alone (filters, scores, selection, assignment).",
            registry=registry, buckets=_FAST_BUCKETS)
        self.plugin_duration = prometheus_client.Histogram(
            "clusterhealth_scheduler_plugin_execution_duration_seconds",
            "Time one plugin took over every cluster for one binding, by plugin and "
            "extension point (Filter, Score).",
            ["plugin", "extension_point"], registry=registry, buckets=_FAST_BUCKETS)
        self.is_leader = prometheus_client.Gauge(
            "clusterhealth_scheduler_is_leader", "Whether this replica is the active one.",
            registry=registry)
        for result in RESULTS:
            self.attempts.labels(result)

    def observe_plugin(self, plugin: str, extension_point: str, seconds: float) -> None:
        """The pure algorithm's ``observe`` hook."""
        self.plugin_duration.labels(plugin, extension_point).observe(seconds)
