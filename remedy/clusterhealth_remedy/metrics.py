"""The Remedy controller's own metric families, on an injected registry.

Reconcile counts and durations, work-queue depth and retries come from the
controller runtime (``clusterhealth_controller_*``, ``clusterhealth_workqueue_*``
with ``controller``/``name`` ``remedy-cluster`` and ``remedy-status``); these
are what only the Remedy controller knows.

The per-Cluster series (an action on a Cluster, and the Remedies behind it)
are not one ``Gauge`` child each: at 5,000 Clusters that was 10,000 child
objects (about 1 KiB each, made and dropped again by every mass change) and a
``labels()``/``remove()`` per Cluster write.  :class:`ClusterSeries` keeps
each Cluster's actions and sources in two dictionaries and writes the samples
at scrape time, as kube-state-metrics does for objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

import prometheus_client
import prometheus_client.core
import prometheus_client.registry

KIND_CLUSTER = "Cluster"
KIND_REMEDY = "Remedy"


class ClusterSeries(prometheus_client.registry.Collector):
    """Per Cluster: its actions and the Remedies behind them, exported at scrape time."""

    ACTIONS = "clusterhealth_remedy_active_actions"
    SOURCES = "clusterhealth_remedy_action_sources"

    def __init__(self) -> None:
        self._actions: dict[str, frozenset[str]] = {}
        self._sources: dict[str, frozenset[tuple[str, str]]] = {}

    def set_actions(self, cluster: str, actions: Iterable[str]) -> None:
        """Make ``actions`` the cluster's action series (none: no series)."""
        after: frozenset[str] = frozenset(actions)
        if after:
            self._actions[cluster] = after
        else:
            self._actions.pop(cluster, None)

    def set_sources(self, cluster: str, sources: Mapping[str, Iterable[str]]) -> None:
        """Make ``sources`` (action to Remedy names) the cluster's source series."""
        after = frozenset((action, remedy) for action, remedies in sources.items()
                          for remedy in remedies)
        if after:
            self._sources[cluster] = after
        else:
            self._sources.pop(cluster, None)

    def clear(self) -> None:
        """Forget every Cluster."""
        self._actions.clear()
        self._sources.clear()

    def _families(self) -> tuple[prometheus_client.core.GaugeMetricFamily,
                                 prometheus_client.core.GaugeMetricFamily]:
        return (
            prometheus_client.core.GaugeMetricFamily(
                self.ACTIONS, "1 for each remedy action currently written on a Cluster.",
                labels=["cluster", "action"]),
            prometheus_client.core.GaugeMetricFamily(
                self.SOURCES,
                "1 for each Remedy that requires an action on a Cluster, as decided (what "
                "status.remedyActionSources holds where the server declares that field).",
                labels=["cluster", "action", "remedy"]),
        )

    def describe(self) -> Iterator[prometheus_client.core.Metric]:
        """The two families without samples (the registry checks names with them)."""
        yield from self._families()

    def collect(self) -> Iterator[prometheus_client.core.Metric]:
        """Both families with a sample of 1 per (Cluster, action) and (Cluster, action, Remedy)."""
        actions, sources = self._families()
        for cluster, names in list(self._actions.items()):
            for action in sorted(names):
                actions.add_metric([cluster, action], 1)
        for cluster, pairs in list(self._sources.items()):
            for action, remedy in sorted(pairs):
                sources.add_metric([cluster, action, remedy], 1)
        yield actions
        yield sources


class RemedyMetrics:
    """Active actions and the Remedies behind them, evaluations, rejected writes, leadership."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self.clusters = ClusterSeries()
        registry.register(self.clusters)
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
        """Make a cluster's active-action series ``actions``."""
        self.clusters.set_actions(cluster, actions)

    def set_sources(self, cluster: str, sources: Mapping[str, Iterable[str]]) -> None:
        """Make a cluster's action-source series ``sources`` (action to Remedy names)."""
        self.clusters.set_sources(cluster, sources)

    def forget(self, cluster: str) -> None:
        """Drop a cluster's series (the Cluster is gone)."""
        self.set_actions(cluster, ())
        self.set_sources(cluster, {})

    def clear(self) -> None:
        """Drop every per-Cluster series (leadership lost: another replica reports them)."""
        self.clusters.clear()
