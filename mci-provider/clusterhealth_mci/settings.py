"""The MCI controller's flags, validated before anything starts.

Every flag can also be set as ``CLUSTERHEALTH_MCI_<FLAG>`` in the environment.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence

from clusterhealth_core import settings

FLAGS = settings.ProcessFlags(
    prog="clusterhealth-mci", healthz_port=10360, lease="clusterhealth-mci-provider",
    description="Keep MultiClusterIngress status and a load balancer in step with the "
                "member clusters and their remedy actions.")
PROVIDERS = ("haproxy", "fake")
MEMBER_CREDENTIALS = ("readonly", "cluster")
"""``--member-credentials`` (the modes of :mod:`clusterhealth_core.members`, its ``MODES``)."""
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclasses.dataclass(frozen=True, kw_only=True)
class MCISettings(settings.ProcessSettings):
    """Everything the controller needs, already validated."""

    provider: str
    ingress_class: str
    default_class: bool
    haproxy_socket: str
    haproxy_slots: int
    haproxy_servers_per_slot: int
    haproxy_map_dir: str
    haproxy_bind_address: str
    haproxy_bind_port: int
    haproxy_advertise: tuple[tuple[str, int], ...]
    haproxy_monitor_interval: float
    drain_timeout: float
    fail_open: bool
    standby_programs: bool
    """Standby replicas program their own load balancer too (one HAProxy per replica)."""
    resync_period: float
    workers: int
    member_credentials: str
    member_secret_namespace: str
    cluster_secret_namespace: str


def _bounded(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r}: a whole number {low}-{high}")
        return value
    return parse


def _namespace(text: str) -> str:
    if not _DNS_LABEL.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a namespace name (a DNS label)")
    return text


def _own_flags(p: settings.FlagParser) -> None:
    p.add_argument("--provider", choices=PROVIDERS, default="haproxy",
                   help="load-balancer provider")
    p.add_argument("--ingress-class", default="clusterhealth",
                   help="the ingressClassName this controller serves")
    p.add_argument("--default-class", type=settings.boolean, default=True,
                   help="also serve MCIs without an ingressClassName")
    p.add_argument("--haproxy-socket", default="/var/run/haproxy/admin.sock",
                   help="HAProxy runtime API: a UNIX socket path or HOST:PORT")
    p.add_argument("--haproxy-slots", type=_bounded(1, 4096), default=256,
                   help="backend slots in the HAProxy layout (one per MCI backend)")
    p.add_argument("--haproxy-servers-per-slot", type=_bounded(1, 1024), default=32,
                   help="servers per backend slot in the HAProxy layout")
    p.add_argument("--haproxy-map-dir", default="/etc/haproxy/mci",
                   help="where the HAProxy configuration keeps the routing maps")
    p.add_argument("--haproxy-bind-address", default="0.0.0.0",
                   help="the HAProxy frontend's bind address (as in its configuration)")
    p.add_argument("--haproxy-bind-port", type=settings.port, default=80,
                   help="the HAProxy frontend's port (as in its configuration)")
    p.add_argument("--haproxy-advertise", action="append", default=[],
                   help="IP:PORT written to status.loadBalancer (repeatable; default: the "
                        "bind address and port)")
    p.add_argument("--haproxy-monitor-interval", type=settings.duration, default=1.0,
                   help="how often the provider checks that HAProxy was not restarted between "
                        "calls (a restarted HAProxy serves 503 until it is re-programmed); "
                        "1s is a good value for a sidecar")
    p.add_argument("--drain-timeout", type=settings.duration, default=30.0,
                   help="longest wait for a blocked cluster's connections to finish")
    p.add_argument("--fail-open", type=settings.boolean, default=True,
                   help="keep serving from all clusters when every one is blocked")
    p.add_argument("--standby-programs", type=settings.boolean, default=False,
                   help="standby replicas program their own load balancer too (read-only: "
                        "only the leader writes status and finalizers); for one HAProxy "
                        "per replica, such as the chart's sidecar")
    p.add_argument("--resync-period", type=settings.duration, default=300.0,
                   help="re-check the load balancer and every MCI this often")
    p.add_argument("--workers", type=_bounded(1, 64), default=2, help="concurrent reconciles")
    p.add_argument("--member-credentials", choices=MEMBER_CREDENTIALS,
                   default=MEMBER_CREDENTIALS[0],
                   help="whose credentials read the members' Services and EndpointSlices: "
                        "readonly, the provider's own read-only identity (a Secret named like "
                        "each Cluster in --member-secret-namespace); cluster, each Cluster's "
                        "spec.secretRef (in Karmada's joins, the member's administrator)")
    p.add_argument("--member-secret-namespace", type=_namespace,
                   default="clusterhealth-mci-credentials",
                   help="readonly: the namespace of the provider's own member Secrets; the "
                        "only one whose Secrets are read and watched")
    p.add_argument("--cluster-secret-namespace", type=_namespace, default="karmada-cluster",
                   help="cluster: the namespace of the Clusters' credential Secrets "
                        "(spec.secretRef); the only one whose Secrets are read and watched")


def parser() -> settings.FlagParser:
    """The controller's command line."""
    return settings.process_parser(FLAGS, _own_flags)


def load(argv: Sequence[str] | None, environ: Mapping[str, str] | None = None) -> MCISettings:
    """Parse and validate; raise :class:`clusterhealth_core.settings.SettingsError`."""
    args = parser().parse(argv, environ)
    advertise = []
    for item in args.haproxy_advertise:
        host, _, port_text = item.rpartition(":")
        try:
            advertise.append((host.strip("[]"), settings.port(port_text)))
        except argparse.ArgumentTypeError as exc:
            raise settings.SettingsError(f"--haproxy-advertise {item!r}: {exc}") from exc
        if not host:
            raise settings.SettingsError(f"--haproxy-advertise {item!r}: want IP:PORT")
    return settings.read_process(MCISettings, FLAGS, args, environ,
                                 haproxy_advertise=tuple(advertise))
