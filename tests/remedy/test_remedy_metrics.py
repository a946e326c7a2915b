"""The Remedy controller's per-Cluster series: actions, the Remedies behind them, clearing."""

from __future__ import annotations

import prometheus_client
import pytest

from clusterhealth_remedy import metrics

Sources = dict[str, tuple[str, ...]]


def _series(registry: prometheus_client.CollectorRegistry, name: str) -> set[tuple[str, ...]]:
    """The label values of ``name``'s samples whose value is 1."""
    return {tuple(s.labels.values()) for family in registry.collect()
            for s in family.samples if s.name == name and s.value == 1}


@pytest.mark.parametrize(("steps", "expected"), [
    # one Remedy, then a second one for the same action, then the first gone
    ([("m1", {"TrafficControl": ("dns",)})],
     {("m1", "TrafficControl", "dns")}),
    ([("m1", {"TrafficControl": ("dns",)}), ("m1", {"TrafficControl": ("dns", "manual")})],
     {("m1", "TrafficControl", "dns"), ("m1", "TrafficControl", "manual")}),
    ([("m1", {"TrafficControl": ("dns", "manual")}), ("m1", {"TrafficControl": ("manual",)})],
     {("m1", "TrafficControl", "manual")}),
    # a cluster's sources gone (no Remedy acts any more, or the Cluster deleted)
    ([("m1", {"TrafficControl": ("dns",)}), ("m2", {"TrafficControl": ("dns",)}), ("m1", {})],
     {("m2", "TrafficControl", "dns")}),
    # one Remedy with two actions
    ([("m1", {"TrafficControl": ("r",), "Other": ("r",)})],
     {("m1", "TrafficControl", "r"), ("m1", "Other", "r")}),
    # nothing ever: no series (and removing what is not there is no error)
    ([("m1", {})], set()),
])
def test_action_sources_follow_the_decisions(steps: list[tuple[str, Sources]],
                                             expected: set[tuple[str, ...]]) -> None:
    registry = prometheus_client.CollectorRegistry()
    remedy_metrics = metrics.RemedyMetrics(registry)
    for cluster, sources in steps:
        remedy_metrics.set_sources(cluster, sources)
    assert _series(registry, "clusterhealth_remedy_action_sources") == expected


@pytest.mark.parametrize(("steps", "expected"), [
    ([("m1", ("TrafficControl",))], {("m1", "TrafficControl")}),
    ([("m1", ("TrafficControl",)), ("m1", ("TrafficControl", "Other"))],
     {("m1", "TrafficControl"), ("m1", "Other")}),
    ([("m1", ("TrafficControl", "Other")), ("m1", ("Other",)), ("m2", ("TrafficControl",))],
     {("m1", "Other"), ("m2", "TrafficControl")}),
    # the same again (a mass change re-decides most Clusters unchanged), then cleared
    ([("m1", ("TrafficControl",)), ("m1", ("TrafficControl",))], {("m1", "TrafficControl")}),
    ([("m1", ("TrafficControl",)), ("m1", ())], set()),
    ([("m1", ())], set()),
])
def test_active_actions_follow_the_decisions(steps: list[tuple[str, tuple[str, ...]]],
                                             expected: set[tuple[str, ...]]) -> None:
    registry = prometheus_client.CollectorRegistry()
    remedy_metrics = metrics.RemedyMetrics(registry)
    for cluster, actions in steps:
        remedy_metrics.set_actions(cluster, actions)
    assert _series(registry, "clusterhealth_remedy_active_actions") == expected


def test_clear_drops_every_per_cluster_series_and_starts_afresh() -> None:
    registry = prometheus_client.CollectorRegistry()
    remedy_metrics = metrics.RemedyMetrics(registry)
    remedy_metrics.set_actions("m1", ("TrafficControl",))
    remedy_metrics.set_sources("m1", {"TrafficControl": ("dns",)})
    remedy_metrics.clear()
    assert _series(registry, "clusterhealth_remedy_active_actions") == set()
    assert _series(registry, "clusterhealth_remedy_action_sources") == set()
    # the next term reports again from nothing
    remedy_metrics.set_sources("m1", {"TrafficControl": ("manual",)})
    remedy_metrics.set_actions("m1", ("TrafficControl",))
    assert _series(registry, "clusterhealth_remedy_action_sources") == {
        ("m1", "TrafficControl", "manual")}
    assert _series(registry, "clusterhealth_remedy_active_actions") == {
        ("m1", "TrafficControl")}


def test_the_series_are_written_at_scrape_time_in_the_exposition_format() -> None:
    registry = prometheus_client.CollectorRegistry()
    remedy_metrics = metrics.RemedyMetrics(registry)
    for n in range(3):
        remedy_metrics.set_actions(f"m{n}", ("TrafficControl",))
        remedy_metrics.set_sources(f"m{n}", {"TrafficControl": ("dns", "manual")})
    remedy_metrics.set_actions("m1", ())
    text = prometheus_client.generate_latest(registry).decode()
    assert "# TYPE clusterhealth_remedy_active_actions gauge" in text
    assert 'clusterhealth_remedy_active_actions{action="TrafficControl",cluster="m0"} 1.0' in text
    assert 'cluster="m1"' not in text.split("clusterhealth_remedy_action_sources")[0]
    assert ('clusterhealth_remedy_action_sources{action="TrafficControl",cluster="m2",'
            'remedy="manual"} 1.0') in text


def test_a_second_collector_of_the_same_names_is_refused() -> None:
    registry = prometheus_client.CollectorRegistry()
    metrics.RemedyMetrics(registry)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        registry.register(metrics.ClusterSeries())
