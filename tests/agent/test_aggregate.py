"""The leader's aggregation rule, as a table (Karmada's rule plus a quorum)."""

from __future__ import annotations

import datetime

import pytest

from clusterhealth_agent import aggregate

DNS = "ServiceDomainNameResolutionReady"
NOW = datetime.datetime(2026, 11, 21, 12, 0, 0, tzinfo=datetime.UTC)
FRESH = NOW - datetime.timedelta(seconds=10)
STALE = NOW - datetime.timedelta(seconds=61)


def node(name: str, status: str | None, *, ready: bool = True,
         heartbeat: datetime.datetime = FRESH) -> aggregate.NodeView:
    results = {}
    if status is not None:
        results[DNS] = aggregate.NodeResult(status, "Timeout" if status == "False" else "Resolved",
                                            "msg", heartbeat)
    return aggregate.NodeView(name, ready, results)


@pytest.mark.parametrize(
    ("nodes", "quorum", "status", "reason"),
    [
        pytest.param([node("a", "True"), node("b", "True")], 1.0, True,
                     "ServiceDomainNameResolutionReady", id="all pass"),
        pytest.param([node("a", "False"), node("b", "False")], 1.0, False,
                     "ServiceDomainNameResolutionFailed", id="all fail"),
        pytest.param([node("a", "False"), node("b", "True"), node("c", "True")], 1.0, True,
                     "ServiceDomainNameResolutionReady", id="one of three fails, default quorum"),
        pytest.param([node("a", "False"), node("b", "True"), node("c", "True")], 0.3, False,
                     "ServiceDomainNameResolutionFailed", id="one of three fails, quorum 0.3"),
        pytest.param([node("a", "False"), node("b", "True"), node("c", "True")], 0.5, True,
                     "ServiceDomainNameResolutionReady", id="one of three below quorum 0.5"),
        pytest.param([node("a", "False"), node("b", "False"), node("c", "True")], 0.5, False,
                     "ServiceDomainNameResolutionFailed", id="two of three meet quorum 0.5"),
        pytest.param([node("a", "False"), node("b", None)], 1.0, None, "NodeResultsUnknown",
                     id="a Ready node without result: keep last"),
        pytest.param([node("a", "True"), node("b", "True", heartbeat=STALE)], 1.0, None,
                     "NodeResultsUnknown", id="a stale Ready node: keep last"),
        pytest.param([node("a", "False"), node("b", None, ready=False)], 1.0, False,
                     "ServiceDomainNameResolutionFailed", id="NotReady nodes are ignored"),
        pytest.param([node("a", "False", ready=False)], 1.0, None, "NoReadyNodes",
                     id="no Ready node: keep last"),
        pytest.param([], 1.0, None, "NoReadyNodes", id="no nodes at all"),
    ],
)
def test_aggregate(nodes: list[aggregate.NodeView], quorum: float, status: bool | None,
                   reason: str) -> None:
    verdict = aggregate.aggregate(DNS, nodes, NOW, stale=60, quorum=quorum)
    assert (verdict.status, verdict.reason) == (status, reason)


def test_failure_message_names_failing_nodes() -> None:
    verdict = aggregate.aggregate(DNS, [node("a", "False"), node("b", "False")], NOW, 60)
    assert verdict.message.startswith("2/2 Ready nodes failing")
    assert "a: Timeout" in verdict.message and "b: Timeout" in verdict.message


@pytest.mark.parametrize(
    ("ctype", "reasons"),
    [
        (DNS, ("ServiceDomainNameResolutionReady", "ServiceDomainNameResolutionFailed")),
        ("KubeProxyReady", ("KubeProxyReady", "KubeProxyFailed")),
        ("DatabaseReachable", ("DatabaseReachableReady", "DatabaseReachableFailed")),
    ],
)
def test_reasons(ctype: str, reasons: tuple[str, str]) -> None:
    assert aggregate.reasons_for(ctype) == reasons


def test_node_view_reads_node_object() -> None:
    obj = {"metadata": {"name": "n1"}, "status": {"conditions": [
        {"type": "Ready", "status": "True"},
        {"type": DNS, "status": "False", "reason": "NXDOMAIN", "message": "m",
         "lastHeartbeatTime": "2026-11-21T11:59:50Z"},
    ]}}
    view = aggregate.node_view(obj, [DNS, "KubeProxyReady"])
    assert view.ready
    assert view.results[DNS].heartbeat == FRESH
    assert "KubeProxyReady" not in view.results


def test_slim_node_keeps_only_what_the_verdict_reads() -> None:
    node = {"metadata": {"name": "n1", "resourceVersion": "7", "uid": "u", "labels": {"a": "b"},
                         "managedFields": [{"manager": "kubelet"}]},
            "status": {"images": [{"names": ["x"]}], "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok",
                 "lastHeartbeatTime": "2026-11-23T10:00:00Z", "lastTransitionTime": "t0"},
                {"type": "MemoryPressure", "status": "False"},
                {"type": "ServiceDomainNameResolutionReady", "status": "False",
                 "reason": "Timeout", "message": "m",
                 "lastHeartbeatTime": "2026-11-23T10:00:01Z"}]}}
    slim = aggregate.slim_node(["ServiceDomainNameResolutionReady"])(node)
    assert slim == {"metadata": {"name": "n1", "resourceVersion": "7"}, "status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok",
         "lastHeartbeatTime": "2026-11-23T10:00:00Z"},
        {"type": "ServiceDomainNameResolutionReady", "status": "False", "reason": "Timeout",
         "message": "m", "lastHeartbeatTime": "2026-11-23T10:00:01Z"}]}}
    view = aggregate.node_view(slim, ["ServiceDomainNameResolutionReady"])
    assert view == aggregate.node_view(node, ["ServiceDomainNameResolutionReady"])
