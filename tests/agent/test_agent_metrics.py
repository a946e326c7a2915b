"""The agent's own series: who the pod is (for joins), node and cluster conditions."""

from __future__ import annotations

import prometheus_client

from clusterhealth_agent import metrics


def _samples(registry: prometheus_client.CollectorRegistry, name: str
             ) -> dict[tuple[str, ...], float]:
    return {tuple(s.labels.values()): s.value for family in registry.collect()
            for s in family.samples if s.name == name}


def test_info_names_the_cluster_and_node_from_the_start() -> None:
    registry = prometheus_client.CollectorRegistry()
    agent_metrics = metrics.AgentMetrics(registry, "member1", "node-a")
    assert _samples(registry, "clusterhealth_agent_info") == {("member1", "node-a"): 1.0}
    assert _samples(registry, "clusterhealth_agent_is_leader") == {("member1",): 0.0}
    # leadership lost: the cluster-level series go, who the pod is stays
    agent_metrics.set_cluster("ServiceDomainNameResolutionReady", "False")
    agent_metrics.clear_cluster()
    assert _samples(registry, "clusterhealth_agent_cluster_condition") == {}
    assert _samples(registry, "clusterhealth_agent_info") == {("member1", "node-a"): 1.0}


def test_conditions_have_one_series_per_status() -> None:
    registry = prometheus_client.CollectorRegistry()
    agent_metrics = metrics.AgentMetrics(registry, "member1", "node-a")
    agent_metrics.set_node("node-a", "DNS", "False")
    agent_metrics.set_cluster("DNS", "Unknown")
    assert _samples(registry, "clusterhealth_agent_node_condition") == {
        ("node-a", "DNS", "True"): 0.0, ("node-a", "DNS", "False"): 1.0,
        ("node-a", "DNS", "Unknown"): 0.0}
    assert _samples(registry, "clusterhealth_agent_cluster_condition") == {
        ("member1", "DNS", "True"): 0.0, ("member1", "DNS", "False"): 0.0,
        ("member1", "DNS", "Unknown"): 1.0}
