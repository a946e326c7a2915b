"""The DNS probe: does a name resolve on this node, through the node's nameservers?

Karmada's headline detector asks whether ``kubernetes.default`` resolves from
every node.  This probe sends one query per nameserver (in order) over a
*connected* UDP socket, so an ICMP port-unreachable is seen at once as
``ConnectionRefused`` instead of waiting out a timeout (dnspython's own UDP
sockets are unconnected and never see it), and retries over TCP when the
answer is truncated.  Each way of failing has its own reason, so a condition
says *why* names do not resolve: ``NXDOMAIN``, ``SERVFAIL``, ``Refused``,
``NoAnswer``, ``Timeout``, ``ConnectionRefused``, ``ConnectionFailed`` or
``DNSError``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import pathlib
import socket
from collections.abc import Awaitable, Callable
from typing import cast

import dns._asyncbackend  # DatagramSocket: dns.asyncbackend re-exports it implicitly only
import dns.asyncbackend
import dns.asyncquery
import dns.exception
import dns.flags
import dns.inet
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import prometheus_client

from clusterhealth_agent.probes import base

REASON_RESOLVED = "Resolved"
REASON_NXDOMAIN = "NXDOMAIN"
REASON_SERVFAIL = "SERVFAIL"
REASON_REFUSED = "Refused"
REASON_NO_ANSWER = "NoAnswer"
REASON_TIMEOUT = "Timeout"
REASON_CONNECTION_REFUSED = "ConnectionRefused"
REASON_CONNECTION_FAILED = "ConnectionFailed"
REASON_DNS_ERROR = "DNSError"

RECORD_TYPES = ("A", "AAAA")
"""The address record types the probe can ask for."""

DEFAULT_PORT = 53
DEFAULT_QUERY_TIMEOUT = 2.0
"""Seconds to wait for one nameserver's reply (the runner's deadline also applies)."""

Nameserver = tuple[str, int]


class DNSMetrics:
    """The metric families of the DNS probes (one instance per registry)."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self.answer_addresses = prometheus_client.Gauge(
            "clusterhealth_agent_dns_answer_addresses",
            "Address records in the last DNS reply, by probe (0 when the last run got none).",
            ["probe"],
            registry=registry,
        )
        self.rcodes = prometheus_client.Counter(
            "clusterhealth_agent_dns_rcode",
            "DNS replies received, by probe and response code (NOERROR, NXDOMAIN...).",
            ["probe", "rcode"],
            registry=registry,
        )


@dataclasses.dataclass(frozen=True)
class _Failure:
    nameserver: Nameserver
    reason: str
    detail: str
    replied: bool
    """Whether the nameserver answered (a reply beats a silent server in the verdict)."""


def format_nameserver(nameserver: Nameserver) -> str:
    """``10.96.0.10:53`` or ``[fd00::10]:53``."""
    host, port = nameserver
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_nameserver(text: str) -> Nameserver:
    """Parse ``10.0.0.10``, ``10.0.0.10:5353``, ``fd00::10`` or ``[fd00::10]:5353``.

    Nameservers are IP addresses: the agent must not need DNS to find DNS.
    Raises :class:`ValueError` with a message meant for a person.
    """
    value = text.strip()
    host, port_text = value, ""
    if value.startswith("["):
        host, sep, rest = value[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"{text!r} is not an address like [fd00::10]:53")
        port_text = rest[1:]
    elif value.count(":") == 1:
        host, _, port_text = value.partition(":")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"{text!r} is not an IP address (optionally with :port)") from None
    port = DEFAULT_PORT
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) <= 65535:
            raise ValueError(f"{text!r}: the port must be in 1-65535")
        port = int(port_text)
    return host, port


def resolv_conf_nameservers(path: str | pathlib.Path = "/etc/resolv.conf") -> list[Nameserver]:
    """The ``nameserver`` entries of a resolv.conf (port 53), in order.

    Entries that are not IP addresses are skipped, as the C library does; a
    missing file gives an empty list.
    """
    try:
        text = pathlib.Path(path).read_text()
    except FileNotFoundError:
        return []
    servers: list[Nameserver] = []
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split(";", 1)[0].split()
        if len(fields) >= 2 and fields[0] == "nameserver":
            try:
                ipaddress.ip_address(fields[1].split("%", 1)[0])
            except ValueError:
                continue
            servers.append((fields[1], DEFAULT_PORT))
    return servers


def kubernetes_default_fqdn(cluster_domain: str) -> str:
    """``kubernetes.default.svc.<cluster-domain>.``: absolute, so no search list applies."""
    domain = cluster_domain.strip().strip(".")
    if not domain:
        raise ValueError("the cluster domain is empty")
    return f"kubernetes.default.svc.{domain}."


class DNSProbe(base.Probe):
    """Resolve ``query`` through ``nameservers`` (tried in order) and expect addresses."""

    kind = "dns"

    def __init__(
        self,
        name: str,
        condition_type: str,
        query: str,
        nameservers: list[Nameserver] | tuple[Nameserver, ...],
        record_type: str = "A",
        *,
        metrics: DNSMetrics,
        query_timeout: float = DEFAULT_QUERY_TIMEOUT,
    ) -> None:
        super().__init__(name, condition_type)
        if not nameservers:
            raise ValueError(f"DNS probe {name}: no nameserver")
        if record_type not in RECORD_TYPES:
            raise ValueError(f"DNS probe {name}: record type must be one of {RECORD_TYPES}")
        if query_timeout <= 0:
            raise ValueError(f"DNS probe {name}: the query timeout must be > 0")
        self.query = dns.name.from_text(query)
        self.nameservers = tuple(nameservers)
        self.record_type = record_type
        self.rdtype = dns.rdatatype.from_text(record_type)
        self.metrics = metrics
        self.query_timeout = query_timeout

    async def check(self) -> base.ProbeResult:
        """Ask each nameserver in turn until one gives a definitive answer."""
        failures: list[_Failure] = []
        for nameserver in self.nameservers:
            outcome = await self._ask(nameserver)
            if isinstance(outcome, base.ProbeResult):
                return outcome
            failures.append(outcome)
        self.metrics.answer_addresses.labels(self.name).set(0)
        return self._verdict(failures)

    async def _ask(self, nameserver: Nameserver) -> base.ProbeResult | _Failure:
        """One nameserver: a final result (answer or NXDOMAIN), or a failure to move past."""
        where, port = nameserver
        question = f"{self.query} {self.record_type}"
        try:
            response = await self._exchange(where, port)
        except dns.exception.Timeout:
            return _Failure(
                nameserver, REASON_TIMEOUT, f"no reply within {self.query_timeout:g}s", False
            )
        except ConnectionRefusedError:
            return _Failure(nameserver, REASON_CONNECTION_REFUSED, "connection refused", False)
        except OSError as exc:
            return _Failure(nameserver, REASON_CONNECTION_FAILED, str(exc) or repr(exc), False)
        except dns.exception.DNSException as exc:  # malformed or mismatched reply
            return _Failure(nameserver, REASON_DNS_ERROR, f"bad reply: {exc}", True)
        rcode = response.rcode()
        rcode_text = dns.rcode.to_text(rcode)
        self.metrics.rcodes.labels(self.name, rcode_text).inc()
        server = format_nameserver(nameserver)
        if rcode == dns.rcode.NOERROR:
            addresses = sorted(  # an rrset has no order; sort for stable messages
                str(rdata)
                for rrset in response.answer
                if rrset.rdtype == self.rdtype
                for rdata in rrset
            )
            self.metrics.answer_addresses.labels(self.name).set(len(addresses))
            if addresses:
                return base.ProbeResult(
                    True, REASON_RESOLVED,
                    f"{question}: {', '.join(addresses)} from {server}",
                )
            return base.ProbeResult(
                False, REASON_NO_ANSWER, f"{question}: NOERROR but no address from {server}"
            )
        self.metrics.answer_addresses.labels(self.name).set(0)
        if rcode == dns.rcode.NXDOMAIN:
            return base.ProbeResult(
                False, REASON_NXDOMAIN, f"{question}: NXDOMAIN (no such name) from {server}"
            )
        reason = {
            dns.rcode.SERVFAIL: REASON_SERVFAIL,
            dns.rcode.REFUSED: REASON_REFUSED,
        }.get(rcode, REASON_DNS_ERROR)
        return _Failure(nameserver, reason, f"answered {rcode_text}", True)

    async def _exchange(self, where: str, port: int) -> dns.message.Message:
        """Query over connected UDP; repeat over TCP when the reply is truncated."""
        query = dns.message.make_query(self.query, self.rdtype)
        async with await _connected_udp_socket(where, port) as sock:
            response = await dns.asyncquery.udp(
                query, where, port=port, timeout=self.query_timeout, sock=sock
            )
        if response.flags & dns.flags.TC:
            response = await dns.asyncquery.tcp(
                query, where, port=port, timeout=self.query_timeout
            )
        return response

    def _verdict(self, failures: list[_Failure]) -> base.ProbeResult:
        """No nameserver answered definitively: pick the most telling failure.

        A reply (SERVFAIL, REFUSED...) says more than silence, so the first
        reply wins; otherwise ``ConnectionRefused`` when every nameserver
        refused, ``Timeout`` when any stayed silent, else ``ConnectionFailed``.
        """
        replies = [f for f in failures if f.replied]
        reasons = {f.reason for f in failures}
        if replies:
            reason = replies[0].reason
        elif reasons == {REASON_CONNECTION_REFUSED}:
            reason = REASON_CONNECTION_REFUSED
        elif REASON_TIMEOUT in reasons:
            reason = REASON_TIMEOUT
        else:
            reason = REASON_CONNECTION_FAILED
        details = "; ".join(f"{format_nameserver(f.nameserver)} {f.detail}" for f in failures)
        return base.ProbeResult(False, reason, f"{self.query} {self.record_type}: {details}")


async def _connected_udp_socket(where: str, port: int) -> dns._asyncbackend.DatagramSocket:
    """A UDP socket connected to the nameserver.

    Connected, so the kernel reports an ICMP port-unreachable as
    ``ConnectionRefusedError`` on the next receive.
    """
    backend = dns.asyncbackend.get_backend("asyncio")
    # dnspython leaves make_socket unannotated.
    make_socket = cast(
        Callable[..., Awaitable[dns._asyncbackend.DatagramSocket]], backend.make_socket
    )
    return await make_socket(
        dns.inet.af_for_address(where), socket.SOCK_DGRAM, 0, None, (where, port)
    )
