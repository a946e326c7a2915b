"""Which probes exist: the built-in detectors (an explicit table) and the configured ones.

``--detectors`` names built-in detectors (Karmada's convention: ``*`` for
all, ``-name`` to leave one out); the probe configuration file adds custom
HTTP/TCP/DNS probes.  :func:`build_probes` turns both into probe objects.
The table is plain data in this module -- nothing registers itself by being
imported -- so what the agent can run is visible in one place.
"""

from __future__ import annotations

import dataclasses
import types
import weakref
from collections.abc import Callable, Mapping, Sequence

import prometheus_client

from clusterhealth_agent.probes import base, config, dns, http, kube, tcp
from clusterhealth_core import selection
from clusterhealth_core.kube import client

KUBE_PROXY_HEALTHZ_PORT = 10256


@dataclasses.dataclass(frozen=True)
class BuildContext:
    """What the built-in detectors need to know about this node and cluster."""

    cluster_domain: str
    nameservers: tuple[tuple[str, int], ...]
    """From ``--nameserver``; empty means the pod's resolv.conf."""
    node_ip: str
    member_api: client.ApiClient | None
    resolv_conf: str = "/etc/resolv.conf"


class _Families:
    """The metric families of each probe type, created on first use, once per registry."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self._registry = registry
        self._dns: dns.DNSMetrics | None = None
        self._http: http.HTTPMetrics | None = None

    @property
    def dns(self) -> dns.DNSMetrics:
        if self._dns is None:
            self._dns = dns.DNSMetrics(self._registry)
        return self._dns

    @property
    def http(self) -> http.HTTPMetrics:
        if self._http is None:
            self._http = http.HTTPMetrics(self._registry)
        return self._http


# Registries are injected, not global; this only remembers which families a
# registry already holds, so rebuilding probes (e.g. on a config reload) reuses them.
_FAMILIES: weakref.WeakKeyDictionary[prometheus_client.CollectorRegistry, _Families] = (
    weakref.WeakKeyDictionary()
)


def _families(registry: prometheus_client.CollectorRegistry) -> _Families:
    families = _FAMILIES.get(registry)
    if families is None:
        families = _FAMILIES[registry] = _Families(registry)
    return families


Factory = Callable[[str, str, BuildContext, _Families], base.Probe]


@dataclasses.dataclass(frozen=True)
class Builtin:
    """One built-in detector: the condition type it reports and how to build it."""

    condition_type: str
    factory: Factory
    description: str


def _nameservers(name: str, context: BuildContext) -> tuple[tuple[str, int], ...]:
    if context.nameservers:
        return context.nameservers
    found = tuple(dns.resolv_conf_nameservers(context.resolv_conf))
    if not found:
        raise config.ProbeConfigError(
            f"probe {name}: no nameserver in {context.resolv_conf} (set --nameserver)"
        )
    return found


def _dns(name: str, condition_type: str, context: BuildContext, fam: _Families) -> base.Probe:
    try:
        query = dns.kubernetes_default_fqdn(context.cluster_domain)
    except ValueError as exc:
        raise config.ProbeConfigError(f"detector {name}: {exc}") from exc
    return dns.DNSProbe(
        name, condition_type, query, _nameservers(name, context), metrics=fam.dns
    )


def _kube_proxy(
    name: str, condition_type: str, context: BuildContext, fam: _Families
) -> base.Probe:
    if not context.node_ip:
        raise config.ProbeConfigError(f"detector {name}: the node IP is unknown")
    host = f"[{context.node_ip}]" if ":" in context.node_ip else context.node_ip
    url = f"http://{host}:{KUBE_PROXY_HEALTHZ_PORT}/healthz"
    return http.HTTPProbe(name, condition_type, url, metrics=fam.http)


def _member_api(name: str, context: BuildContext) -> client.ApiClient:
    if context.member_api is None:
        raise config.ProbeConfigError(
            f"detector {name} needs access to the member cluster's API server"
        )
    return context.member_api


def _apiserver(
    name: str, condition_type: str, context: BuildContext, fam: _Families
) -> base.Probe:
    return kube.APIServerProbe(name, condition_type, _member_api(name, context))


def _coredns(name: str, condition_type: str, context: BuildContext, fam: _Families) -> base.Probe:
    return kube.CoreDNSProbe(name, condition_type, _member_api(name, context))


BUILTINS: Mapping[str, Builtin] = types.MappingProxyType({
    "dns": Builtin(
        "ServiceDomainNameResolutionReady", _dns,
        "resolve kubernetes.default.svc.<cluster-domain>. through the node's nameservers",
    ),
    "kube-proxy": Builtin(
        "KubeProxyReady", _kube_proxy, "GET http://<node-ip>:10256/healthz (kube-proxy)"
    ),
    "apiserver": Builtin("APIServerReady", _apiserver, "GET /readyz on the member API server"),
    "coredns": Builtin(
        "CoreDNSReady", _coredns, "kube-system/kube-dns has a ready endpoint"
    ),
})
"""Built-in detectors by ``--detectors`` name."""

BUILTIN_CONDITION_TYPES: Mapping[str, str] = types.MappingProxyType(
    {name: builtin.condition_type for name, builtin in BUILTINS.items()}
)
"""Detector name -> condition type; custom probes may use neither (``config.load_file``)."""


def resolve_detectors(detectors: Sequence[str]) -> list[str]:
    """Expand ``--detectors``: names, ``*`` (all built-ins) and ``-name`` (not that one).

    Raises :class:`~clusterhealth_agent.probes.config.ProbeConfigError` for an
    unknown name, listing the known ones.
    """
    try:
        return selection.select(list(BUILTINS), detectors, "detector")
    except selection.UnknownName as exc:
        raise config.ProbeConfigError(str(exc)) from exc


def build_probes(
    detectors: Sequence[str],
    specs: Sequence[config.ProbeSpec],
    context: BuildContext,
    registry: prometheus_client.CollectorRegistry,
) -> list[base.Probe]:
    """The enabled built-in detectors, then the configured probes, in order."""
    families = _families(registry)
    probes: list[base.Probe] = []
    for name in resolve_detectors(detectors):
        builtin = BUILTINS[name]
        probes.append(builtin.factory(name, builtin.condition_type, context, families))
    for spec in specs:
        probes.append(_from_spec(spec, context, families))
    seen: set[str] = set()
    for probe in probes:
        for key in (f"name {probe.name!r}", f"condition type {probe.condition_type!r}"):
            if key in seen:
                raise config.ProbeConfigError(f"two probes with the {key}")
            seen.add(key)
    return probes


def _from_spec(
    spec: config.ProbeSpec, context: BuildContext, families: _Families
) -> base.Probe:
    probe = _probe_from_spec(spec, context, families)
    probe.timeout = spec.timeout
    return probe


def _probe_from_spec(
    spec: config.ProbeSpec, context: BuildContext, families: _Families
) -> base.Probe:
    try:
        if isinstance(spec, config.HTTPProbeSpec):
            return http.HTTPProbe(
                spec.name, spec.condition_type, spec.url, spec.expect_status,
                metrics=families.http, insecure_skip_verify=spec.insecure_skip_verify,
            )
        if isinstance(spec, config.TCPProbeSpec):
            return tcp.TCPProbe(spec.name, spec.condition_type, spec.host, spec.port)
        nameservers = spec.nameservers or _nameservers(spec.name, context)
        query_timeout = dns.DEFAULT_QUERY_TIMEOUT
        if spec.timeout is not None:
            query_timeout = min(query_timeout, spec.timeout)
        return dns.DNSProbe(
            spec.name, spec.condition_type, spec.query, nameservers, spec.record_type,
            metrics=families.dns, query_timeout=query_timeout,
        )
    except ValueError as exc:
        if isinstance(exc, config.ProbeConfigError):
            raise
        raise config.ProbeConfigError(f"{spec.location or spec.name}: {exc}") from exc
