"""The DNS probe against real servers: dnsmasq, and a scripted server for odd rcodes."""

from __future__ import annotations

import asyncio
import pathlib
import socket

import dns.rcode
import probeservers
import prometheus_client
import pytest

from clusterhealth_agent.probes import base
from clusterhealth_agent.probes import dns as dns_probe
from clusterhealth_localenv import dns as localdns
from clusterhealth_localenv import processes


def make_probe(
    registry: prometheus_client.CollectorRegistry,
    nameservers: list[tuple[str, int]],
    query: str = probeservers.KUBERNETES_DEFAULT,
    record_type: str = "A",
    query_timeout: float = 0.5,
) -> dns_probe.DNSProbe:
    return dns_probe.DNSProbe(
        "dns", "ServiceDomainNameResolutionReady", query, nameservers, record_type,
        metrics=dns_probe.DNSMetrics(registry), query_timeout=query_timeout,
    )


def sample(registry: prometheus_client.CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def test_resolves_through_dnsmasq(
    dns_server: localdns.DnsServer, registry: prometheus_client.CollectorRegistry
) -> None:
    probe = make_probe(registry, [dns_server.address])
    result = await base.run_probe(probe, 2.0)
    assert result.ok, result
    assert result.reason == "Resolved"
    assert probeservers.KUBERNETES_IP in result.message
    assert f"127.0.0.1:{dns_server.port}" in result.message
    assert sample(registry, "clusterhealth_agent_dns_answer_addresses", probe="dns") == 1
    assert sample(registry, "clusterhealth_agent_dns_rcode_total", probe="dns",
                  rcode="NOERROR") == 1


async def test_stopped_server_fails_and_restart_recovers(
    dns_server: localdns.DnsServer, registry: prometheus_client.CollectorRegistry
) -> None:
    probe = make_probe(registry, [dns_server.address])
    assert (await base.run_probe(probe, 2.0)).ok

    await dns_server.stop_async()
    stopped = not dns_server.running
    assert stopped
    result = await base.run_probe(probe, 2.0)
    assert not result.ok
    # Over a connected socket the port-unreachable arrives at once (no waiting
    # out the 0.5s query timeout, which would say "Timeout").
    assert result.reason == "ConnectionRefused", result
    assert result.duration < 0.4
    assert sample(registry, "clusterhealth_agent_dns_answer_addresses", probe="dns") == 0

    await dns_server.restart_async()
    assert dns_server.running
    result = await base.run_probe(probe, 2.0)
    assert result.ok and result.reason == "Resolved", result


async def test_unknown_name_is_nxdomain(
    dns_server: localdns.DnsServer, registry: prometheus_client.CollectorRegistry
) -> None:
    probe = make_probe(registry, [dns_server.address], query="nothing.cluster.local.")
    result = await base.run_probe(probe, 2.0)
    assert (result.ok, result.reason) == (False, "NXDOMAIN")
    assert sample(registry, "clusterhealth_agent_dns_rcode_total", probe="dns",
                  rcode="NXDOMAIN") == 1


async def test_subdomain_of_a_record_is_not_answered(
    dns_server: localdns.DnsServer, registry: prometheus_client.CollectorRegistry
) -> None:
    probe = make_probe(registry, [dns_server.address], query="x." + probeservers.KUBERNETES_DEFAULT)
    assert (await base.run_probe(probe, 2.0)).reason == "NXDOMAIN"


async def test_name_without_address_of_that_type_is_no_answer(
    dns_server: localdns.DnsServer, registry: prometheus_client.CollectorRegistry
) -> None:
    probe = make_probe(registry, [dns_server.address], record_type="AAAA")
    result = await base.run_probe(probe, 2.0)
    assert (result.ok, result.reason) == (False, "NoAnswer")


@pytest.mark.parametrize(
    ("rcode", "reason"),
    [
        (dns.rcode.REFUSED, "Refused"),
        (dns.rcode.SERVFAIL, "SERVFAIL"),
        (dns.rcode.NOTIMP, "DNSError"),
        (dns.rcode.FORMERR, "DNSError"),
    ],
)
async def test_error_rcodes(
    registry: prometheus_client.CollectorRegistry, rcode: dns.rcode.Rcode, reason: str,
) -> None:
    async with probeservers.scripted_dns(rcode) as server:
        probe = make_probe(registry, [("127.0.0.1", server.port)])
        result = await base.run_probe(probe, 2.0)
    assert (result.ok, result.reason) == (False, reason)
    assert dns.rcode.to_text(rcode) in result.message
    assert sample(registry, "clusterhealth_agent_dns_rcode_total", probe="dns",
                  rcode=dns.rcode.to_text(rcode)) == 1


async def test_truncated_reply_is_retried_over_tcp(
    registry: prometheus_client.CollectorRegistry,
) -> None:
    addresses = ["198.18.0.1", "198.18.0.2"]
    async with probeservers.scripted_dns(addresses=addresses, truncate=True) as server:
        probe = make_probe(registry, [("127.0.0.1", server.port)])
        result = await base.run_probe(probe, 2.0)
    assert result.ok, result
    assert (server.udp_queries, server.tcp_queries) == (1, 1)
    assert "198.18.0.1, 198.18.0.2" in result.message
    assert sample(registry, "clusterhealth_agent_dns_answer_addresses", probe="dns") == 2


async def test_silent_server_times_out_per_query(
    registry: prometheus_client.CollectorRegistry,
) -> None:
    # A bound UDP socket that never answers: the query times out (no ICMP either).
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))
        probe = make_probe(registry, [silent.getsockname()], query_timeout=0.2)
        result = await base.run_probe(probe, 2.0)
    assert (result.ok, result.reason) == (False, "Timeout")
    assert 0.15 < result.duration < 1.0


async def test_runner_deadline_bounds_many_slow_nameservers(
    registry: prometheus_client.CollectorRegistry,
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))
        probe = make_probe(registry, [silent.getsockname()] * 5, query_timeout=0.2)
        result = await base.run_probe(probe, 0.5)
    assert result.reason == "Timeout"
    assert result.duration < 0.9


async def test_next_nameserver_is_tried_after_a_dead_one(
    dns_server: localdns.DnsServer, registry: prometheus_client.CollectorRegistry
) -> None:
    dead = ("127.0.0.1", probeservers.closed_port(kind=socket.SOCK_DGRAM))
    probe = make_probe(registry, [dead, dns_server.address])
    result = await base.run_probe(probe, 2.0)
    assert result.ok and result.reason == "Resolved", result


async def test_reply_beats_silence_in_the_verdict(
    registry: prometheus_client.CollectorRegistry,
) -> None:
    dead = ("127.0.0.1", probeservers.closed_port(kind=socket.SOCK_DGRAM))
    async with probeservers.scripted_dns(dns.rcode.SERVFAIL) as server:
        probe = make_probe(registry, [dead, ("127.0.0.1", server.port)])
        result = await base.run_probe(probe, 2.0)
    assert result.reason == "SERVFAIL"
    assert "connection refused" in result.message and "SERVFAIL" in result.message


async def test_dnsmasq_on_another_loopback_address_and_ipv6_record(
    tmp_path: pathlib.Path, registry: prometheus_client.CollectorRegistry
) -> None:
    server = localdns.DnsServer(
        "127.0.1.53", records={"v6.example": "fd00::1", "v4.example.": "10.1.2.3"},
        log_dir=tmp_path,
    )
    async with server:
        metrics = dns_probe.DNSMetrics(registry)
        v6 = dns_probe.DNSProbe("v6", "V6Ready", "v6.example", [server.address], "AAAA",
                                metrics=metrics)
        v4 = dns_probe.DNSProbe("v4", "V4Ready", "v4.example.", [server.address],
                                metrics=metrics)
        results = await asyncio.gather(base.run_probe(v6, 2.0), base.run_probe(v4, 2.0))
    assert [r.reason for r in results] == ["Resolved", "Resolved"]
    assert "fd00::1" in results[0].message and "10.1.2.3" in results[1].message
    assert not server.running


async def test_dnsmasq_removes_its_own_log_folder_and_keeps_a_given_one(
        tmp_path: pathlib.Path) -> None:
    own = localdns.DnsServer("127.0.0.1", records={"a.example": "198.18.0.1"})
    async with own:
        made = own.log_path.parent
        assert made.is_dir() and made.name.startswith("clusterhealth-dns-")
    assert not made.exists()
    own.start()  # started again: a new folder, removed at the next stop
    again = own.log_path.parent
    own.stop()
    assert not again.exists()
    given = localdns.DnsServer("127.0.0.1", log_dir=tmp_path)
    async with given:
        pass
    assert given.log_path.parent == tmp_path and given.log_path.exists()


def test_dns_server_needs_an_ip_and_valid_records() -> None:
    with pytest.raises(ValueError, match="does not appear to be an IPv4 or IPv6"):
        localdns.DnsServer("localhost")
    with pytest.raises(ValueError, match="does not appear to be an IPv4 or IPv6"):
        localdns.DnsServer("127.0.0.1", records={"a.example": "not-an-ip"})


def test_missing_dnsmasq_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(processes, "SBIN_DIRS", ("/nonexistent",))
    with pytest.raises(localdns.DnsServerError, match="install Debian package dnsmasq-base"):
        localdns.find_dnsmasq()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("198.18.0.10", ("198.18.0.10", 53)),
        ("198.18.0.10:5353", ("198.18.0.10", 5353)),
        ("fd00::10", ("fd00::10", 53)),
        ("[fd00::10]:5353", ("fd00::10", 5353)),
        ("[fd00::10]", ("fd00::10", 53)),
    ],
)
def test_parse_nameserver(text: str, expected: tuple[str, int]) -> None:
    assert dns_probe.parse_nameserver(text) == expected


@pytest.mark.parametrize("text", ["kube-dns", "kube-dns:53", "198.18.0.1:0", "198.18.0.1:x",
                                  "[fd00::1]x", "198.18.0.1:70000"])
def test_parse_nameserver_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=repr(text).replace("[", r"\[")):
        dns_probe.parse_nameserver(text)


def test_resolv_conf_nameservers(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "resolv.conf"
    path.write_text(
        "# generated by kubelet\n"
        "search default.svc.cluster.local svc.cluster.local cluster.local\n"
        "nameserver 198.18.0.10\n"
        "nameserver fd00::a  # comment\n"
        "nameserver not-an-ip\n"
        "options ndots:5\n"
    )
    assert dns_probe.resolv_conf_nameservers(path) == [("198.18.0.10", 53), ("fd00::a", 53)]
    assert dns_probe.resolv_conf_nameservers(tmp_path / "missing") == []


def test_kubernetes_default_fqdn() -> None:
    assert dns_probe.kubernetes_default_fqdn("cluster.local") == probeservers.KUBERNETES_DEFAULT
    assert dns_probe.kubernetes_default_fqdn("corp.example.") == (
        "kubernetes.default.svc.corp.example."
    )
    with pytest.raises(ValueError, match="empty"):
        dns_probe.kubernetes_default_fqdn(".")
