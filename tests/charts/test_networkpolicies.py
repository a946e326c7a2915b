"""Every chart's NetworkPolicies, as rendered: on by default, covering every port its pods open.

For each workload (Deployment or DaemonSet) a chart renders, one ingress
NetworkPolicy selects exactly its pods, and every named container port is in
exactly one rule: ``metrics`` (``/metrics`` ``/healthz`` ``/readyz``, no
authentication) only from the Prometheus namespace by default; the webhook's
port only from ``webhookFrom``; the MCI sidecar's frontend from everyone.  A
port the pod opens but no rule names would be unreachable; a port a rule names
but no container opens, a mistake: both fail here.  Every NetworkPolicy is
validated for the project's Kubernetes version (``test_charts.py`` validates
the rest).
"""

from __future__ import annotations

import pathlib
from typing import Any

import chartkit
import kubernetes_validate
import pytest
import yaml

CHARTS = pathlib.Path(__file__).resolve().parents[2] / "charts"
NAMESPACE = "clusterhealth-system"
MONITORING = [{"namespaceSelector": {"matchLabels": {
    "kubernetes.io/metadata.name": "monitoring"}}}]
Manifest = chartkit.Manifest

# chart -> values that make it run its workloads (and every optional port)
RUNNING: dict[str, dict[str, Any]] = {
    "agent": {"clusterName": "member1"},
    "remedy": {},
    "controlplane": {},
    "mci-provider": {"replicas": 1, "haproxy": {"sidecar": {"enabled": True}}},
}


_HELM: dict[str, str] = {}


def _render(chart: str, tmp_path: pathlib.Path, values: dict[str, Any] | None = None,
            ) -> list[Manifest]:
    directory = CHARTS / chart
    if chart not in _HELM:  # its file:// dependencies built once per session
        _HELM[chart] = chartkit.helm_for(directory)
    render = chartkit.renderer(_HELM[chart], directory, f"np-{chart}", NAMESPACE, tmp_path)
    documents = render({**RUNNING[chart], **(values or {})})
    for document in _policies(documents):  # the rest: tests/charts/test_charts.py
        kubernetes_validate.validate(document, chartkit.KUBERNETES, strict=True)
    return documents


def _workloads(documents: list[Manifest]) -> list[Manifest]:
    return [d for d in documents if d["kind"] in ("Deployment", "DaemonSet")]


def _policies(documents: list[Manifest]) -> list[Manifest]:
    return [d for d in documents if d["kind"] == "NetworkPolicy"]


def _selecting(policies: list[Manifest], workload: Manifest) -> Manifest:
    labels = workload["spec"]["template"]["metadata"]["labels"]
    found = [p for p in policies
             if p["spec"]["podSelector"]["matchLabels"].items() <= labels.items()]
    assert len(found) == 1, workload["metadata"]["name"]
    return found[0]


def _rules(policy: Manifest) -> dict[str, list[Any] | None]:
    """Named port -> its rule's ``from`` (None: every source)."""
    rules: dict[str, list[Any] | None] = {}
    for rule in policy["spec"]["ingress"]:
        for port in rule["ports"]:
            assert port["protocol"] == "TCP"
            assert port["port"] not in rules
            rules[port["port"]] = rule.get("from")
    return rules


@pytest.mark.parametrize("chart", sorted(RUNNING))
def test_on_by_default_and_every_open_port_has_exactly_one_rule(
        chart: str, tmp_path: pathlib.Path) -> None:
    documents = _render(chart, tmp_path)
    policies = _policies(documents)
    assert policies, f"{chart}: no NetworkPolicy by default"
    workloads = _workloads(documents)
    assert len(policies) == len(workloads)
    for workload in workloads:
        policy = _selecting(policies, workload)
        assert policy["metadata"]["namespace"] == NAMESPACE
        assert policy["spec"]["policyTypes"] == ["Ingress"]  # egress: the API servers
        opened = {p["name"] for c in workload["spec"]["template"]["spec"]["containers"]
                  for p in c.get("ports", [])}
        rules = _rules(policy)
        assert set(rules) == opened, workload["metadata"]["name"]
        assert rules["metrics"] == MONITORING
        if "webhook" in rules:  # the API servers: every address, until narrowed
            assert rules["webhook"] == [{"ipBlock": {"cidr": "0.0.0.0/0"}},
                                        {"ipBlock": {"cidr": "::/0"}}]
        if "http" in rules:  # the load balancer's frontend: every client
            assert rules["http"] is None


@pytest.mark.parametrize("chart", sorted(RUNNING))
def test_sources_follow_values_and_can_be_turned_off(chart: str,
                                                     tmp_path: pathlib.Path) -> None:
    prometheus = [{"namespaceSelector": {"matchLabels": {"team": "observability"}},
                   "podSelector": {"matchLabels": {"app": "prometheus"}}}]
    values: dict[str, Any] = {"metricsFrom": prometheus}
    if chart == "controlplane":
        values["webhookFrom"] = [{"ipBlock": {"cidr": "198.18.0.0/24"}}]
    if chart == "mci-provider":
        values["frontendFrom"] = [{"ipBlock": {"cidr": "198.19.0.0/16"}}]
    defaults = _render(chart, tmp_path)
    documents = _render(chart, tmp_path, {"networkPolicy": {
        **_values(chart)["networkPolicy"], **values}})
    for policy in _policies(documents):
        rules = _rules(policy)
        assert rules["metrics"] == prometheus
        if "webhook" in rules:
            assert rules["webhook"] == [{"ipBlock": {"cidr": "198.18.0.0/24"}}]
        if "http" in rules:
            assert rules["http"] == [{"ipBlock": {"cidr": "198.19.0.0/16"}}]
    every = _render(chart, tmp_path, {"networkPolicy": {
        **_values(chart)["networkPolicy"], "metricsFrom": []}})
    assert all(_rules(p)["metrics"] is None for p in _policies(every))
    off = _render(chart, tmp_path, {"networkPolicy": {**_values(chart)["networkPolicy"],
                                                      "enabled": False}})
    assert not _policies(off)
    assert len(off) == len(defaults) - len(_policies(defaults))


def _values(chart: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((CHARTS / chart / "values.yaml").read_text())
    return loaded


def test_no_policy_where_nothing_runs(tmp_path: pathlib.Path) -> None:
    assert not _policies(_render("remedy", tmp_path, {"rbacOnly": True,
                                                      "crds": {"enabled": False}}))
    assert not _policies(_render("controlplane", tmp_path, {"rbacOnly": True}))
    assert not _policies(_render("mci-provider", tmp_path, {
        "target": "member", "crds": {"enabled": False}}))
    assert not _policies(_render("agent", tmp_path, {"target": "controlPlane"}))


def test_an_haproxy_of_yours_admin_port_only_from_the_controller(
        tmp_path: pathlib.Path) -> None:
    values = {"haproxy": {"sidecar": {"enabled": False}, "socket": "198.18.0.7:9999"},
              "replicas": 2,
              "networkPolicy": {**_values("mci-provider")["networkPolicy"],
                                "haproxy": {"podSelector": {"app": "haproxy"},
                                            "frontendPorts": [80, 443]}}}
    documents = _render("mci-provider", tmp_path, values)
    (admin,) = [p for p in _policies(documents) if p["metadata"]["name"].endswith("-admin")]
    assert admin["spec"]["podSelector"] == {"matchLabels": {"app": "haproxy"}}
    controller = _workloads(documents)[0]["spec"]["template"]["metadata"]["labels"]
    first, frontend = admin["spec"]["ingress"]
    assert first["ports"] == [{"port": 9999, "protocol": "TCP"}]
    (source,) = first["from"]
    assert source["podSelector"]["matchLabels"].items() <= controller.items()
    assert frontend == {"ports": [{"port": 80, "protocol": "TCP"},
                                  {"port": 443, "protocol": "TCP"}]}
    # a UNIX admin socket has no port to guard; without a podSelector nothing is known
    for other in ({**values, "haproxy": {"sidecar": {"enabled": False},
                                         "socket": "/run/haproxy/admin.sock"}},
                  {**values, "networkPolicy": _values("mci-provider")["networkPolicy"]}):
        assert not [p for p in _policies(_render("mci-provider", tmp_path, other))
                    if p["metadata"]["name"].endswith("-admin")]
