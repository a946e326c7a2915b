"""Building probes: the built-in table, configured probes, metric families per registry."""

from __future__ import annotations

import pathlib
import re

import probeservers
import prometheus_client
import pytest

from clusterhealth_agent.probes import base, config, dns, http, kube, tcp
from clusterhealth_agent.probes import registry as probe_registry
from clusterhealth_core.api import meta
from clusterhealth_core.kube import client
from clusterhealth_core.kube import config as kubeconfig
from clusterhealth_localenv import dns as localdns


def context(
    member_api: client.ApiClient | None = None,
    nameservers: tuple[tuple[str, int], ...] = (("198.18.0.10", 53),),
    resolv_conf: str = "/etc/resolv.conf",
) -> probe_registry.BuildContext:
    return probe_registry.BuildContext(
        cluster_domain="cluster.local", nameservers=nameservers, node_ip="192.0.2.7",
        member_api=member_api, resolv_conf=resolv_conf,
    )


def api() -> client.ApiClient:
    return client.ApiClient(kubeconfig.Credentials("https://127.0.0.1:6443"))


def test_builtin_table() -> None:
    assert dict(probe_registry.BUILTIN_CONDITION_TYPES) == {
        "dns": "ServiceDomainNameResolutionReady",
        "kube-proxy": "KubeProxyReady",
        "apiserver": "APIServerReady",
        "coredns": "CoreDNSReady",
    }


def test_builds_every_builtin(registry: prometheus_client.CollectorRegistry) -> None:
    probes = probe_registry.build_probes(["*"], [], context(api()), registry)
    by_name = {p.name: p for p in probes}
    builtin_types = list(probe_registry.BUILTIN_CONDITION_TYPES.values())
    assert [p.condition_type for p in probes] == builtin_types
    probe = by_name["dns"]
    assert isinstance(probe, dns.DNSProbe)
    assert str(probe.query) == "kubernetes.default.svc.cluster.local."
    assert probe.nameservers == (("198.18.0.10", 53),)
    proxy = by_name["kube-proxy"]
    assert isinstance(proxy, http.HTTPProbe)
    assert proxy.url == "http://192.0.2.7:10256/healthz"
    assert isinstance(by_name["apiserver"], kube.APIServerProbe)
    assert isinstance(by_name["coredns"], kube.CoreDNSProbe)


def test_detector_selection() -> None:
    assert probe_registry.resolve_detectors(["dns"]) == ["dns"]
    resolve = probe_registry.resolve_detectors
    assert resolve(["*", "-coredns"]) == ["dns", "kube-proxy", "apiserver"]
    assert resolve(["apiserver", "dns", "dns", " "]) == ["apiserver", "dns"]
    assert probe_registry.resolve_detectors([]) == []


def test_unknown_detector_lists_the_known_ones(
    registry: prometheus_client.CollectorRegistry,
) -> None:
    with pytest.raises(config.ProbeConfigError) as caught:
        probe_registry.build_probes(["dns", "ntp"], [], context(), registry)
    assert str(caught.value) == (
        "unknown detector 'ntp'; known detectors: dns, kube-proxy, apiserver, coredns "
        "(or * for all)"
    )


def test_member_api_detectors_need_the_member_api(
    registry: prometheus_client.CollectorRegistry,
) -> None:
    with pytest.raises(config.ProbeConfigError, match="apiserver needs access"):
        probe_registry.build_probes(["apiserver"], [], context(None), registry)


def test_dns_falls_back_to_resolv_conf(
    tmp_path: pathlib.Path, registry: prometheus_client.CollectorRegistry
) -> None:
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 198.18.0.99\n")
    from_resolv_conf = context(nameservers=(), resolv_conf=str(resolv))
    [probe] = probe_registry.build_probes(["dns"], [], from_resolv_conf, registry)
    assert isinstance(probe, dns.DNSProbe)
    assert probe.nameservers == (("198.18.0.99", 53),)
    resolv.write_text("search cluster.local\n")
    with pytest.raises(config.ProbeConfigError, match=r"no nameserver in .*set --nameserver"):
        probe_registry.build_probes(["dns"], [], from_resolv_conf, registry)


def specs(tmp_path: pathlib.Path) -> list[config.ProbeSpec]:
    path = tmp_path / "probes.yaml"
    path.write_text(
        "probes:\n"
        "  - {name: a, type: http, conditionType: AReady, http: {url: 'http://198.18.0.1/'}}\n"
        "  - {name: b, type: http, conditionType: BReady, http: {url: 'http://198.18.0.2/'}}\n"
        "  - {name: c, type: dns, conditionType: CReady, timeout: 1s, dns: {query: c.example}}\n"
        "  - {name: d, type: tcp, conditionType: DReady, tcp: {host: 198.18.0.3, port: 5432}}\n"
    )
    return config.load_file(path, probe_registry.BUILTIN_CONDITION_TYPES)


def test_metric_families_once_per_registry(
    tmp_path: pathlib.Path, registry: prometheus_client.CollectorRegistry
) -> None:
    configured = specs(tmp_path)
    probes = probe_registry.build_probes(["dns", "kube-proxy"], configured, context(), registry)
    assert [p.name for p in probes] == ["dns", "kube-proxy", "a", "b", "c", "d"]
    assert isinstance(probes[-1], tcp.TCPProbe)
    dns_probes = [p for p in probes if isinstance(p, dns.DNSProbe)]
    http_probes = [p for p in probes if isinstance(p, http.HTTPProbe)]
    assert len({id(p.metrics) for p in dns_probes}) == 1
    assert len({id(p.metrics) for p in http_probes}) == 1
    # The configured timeout caps the per-query timeout; nameservers from the context.
    assert dns_probes[1].query_timeout == 1.0
    # ...and is the probe's own deadline; probes without one use the agent's default.
    assert [p.timeout for p in probes] == [None, None, None, None, 1.0, None]
    assert dns_probes[1].nameservers == (("198.18.0.10", 53),)
    # Building again on the same registry (a config reload) reuses the families.
    again = probe_registry.build_probes(["dns"], configured, context(), registry)
    assert len(again) == 5
    # A different registry gets its own.
    other = prometheus_client.CollectorRegistry()
    probe_registry.build_probes(["dns"], configured, context(), other)


async def test_built_probes_record_into_the_given_registry(
    tmp_path: pathlib.Path, registry: prometheus_client.CollectorRegistry
) -> None:
    server = localdns.DnsServer("127.0.0.1",
                                records={probeservers.KUBERNETES_DEFAULT: "198.18.0.1"},
                                log_dir=tmp_path)
    async with server:
        [probe] = probe_registry.build_probes(["dns"], [], context(nameservers=(server.address,)),
                                        registry)
        result = await base.run_probe(probe, 2.0, base.ProbeMetrics(registry))
    assert result.ok
    assert registry.get_sample_value(
        "clusterhealth_agent_dns_answer_addresses", {"probe": "dns"}) == 1
    assert prometheus_client.REGISTRY.get_sample_value(
        "clusterhealth_agent_dns_answer_addresses", {"probe": "dns"}) is None


def test_reasons_are_valid_condition_reasons() -> None:
    reasons = {
        value for module in (base, dns, http, kube, tcp)
        for name, value in vars(module).items() if name.startswith("REASON_")
    }
    assert len(reasons) >= 20
    for reason in reasons:
        assert re.match(meta.CONDITION_REASON_PATTERN, reason), reason
