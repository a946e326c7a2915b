"""The Remedy controller's own metric families, on an injected registry.

Reconcile counts and durations, work-queue depth and retries come from the
controller runtime (``clusterhealth_controller_*``, ``clusterhealth_workqueue_*``
with ``controller``/``name`` ``remedy-cluster`` and ``remedy-status``); these
are what only the Remedy controller knows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import prometheus_client

KIND_CLUSTER = "Cluster"
KIND_REMEDY = "Remedy"


class RemedyMetrics:
    """Active actions and the Remedies behind them, evaluations, rejected writes, leadership."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self.active_actions = prometheus_client.Gauge(
            "clusterhealth_remedy_active_actions",
            "1 for each remedy action currently written on a Cluster.",
            ["cluster", "action"], registry=registry,
        )
        self.action_sources = prometheus_client.Gauge(
            "clusterhealth_remedy_action_sources",
            "1 for each Remedy that requires an action on a Cluster, as decided (what "
            "status.remedyActionSources holds where the server declares that field).",
            ["cluster", "action", "remedy"], registry=registry,
        )
        self._actions: dict[str, frozenset[str]] = {}
        """Cluster to the action series this process exports for it."""
        self._sources: dict[str, frozenset[tuple[str, str]]] = {}
        """Cluster to the (action, Remedy) series this process exports for it."""
        self.evaluations = prometheus_client.Counter(
            "clusterhealth_remedy_evaluations",
            "Evaluations of a Cluster against the Remedies.",
            registry=registry,
        )
        self.status_rejected = prometheus_client.Counter(
            "clusterhealth_remedy_status_rejected",
            "Status writes of this controller that the API server refused as invalid (422), "
            "by kind (Cluster|Remedy): a bug, not retried until the object changes.",
            ["kind"], registry=registry,
        )
        self.is_leader = prometheus_client.Gauge(
            "clusterhealth_remedy_is_leader", "Whether this replica is the active one.",
            registry=registry,
        )
        for kind in (KIND_CLUSTER, KIND_REMEDY):
            self.status_rejected.labels(kind)

    def set_actions(self, cluster: str, actions: Iterable[str]) -> None:
        """Make a cluster's active-action series ``actions`` (only the differences are touched)."""
        after = frozenset(actions)
        before = self._actions.pop(cluster, frozenset())
        if after:
            self._actions[cluster] = after
        if after == before:
            return  # the usual case: nothing to do for most Clusters of a mass change
        for action in before - after:
            self.active_actions.remove(cluster, action)
        for action in after - before:
            self.active_actions.labels(cluster, action).set(1)

    def set_sources(self, cluster: str, sources: Mapping[str, Iterable[str]]) -> None:
        """Make a cluster's action-source series ``sources`` (action to Remedy names)."""
        after = frozenset((action, remedy) for action, remedies in sources.items()
                          for remedy in remedies)
        before = self._sources.pop(cluster, frozenset())
        if after:
            self._sources[cluster] = after
        if after == before:
            return
        for action, remedy in before - after:
            self.action_sources.remove(cluster, action, remedy)
        for action, remedy in after - before:
            self.action_sources.labels(cluster, action, remedy).set(1)

    def clear(self) -> None:
        """Drop every per-Cluster series (leadership lost: another replica reports them)."""
        self.active_actions.clear()
        self.action_sources.clear()
        self._actions.clear()
        self._sources.clear()
