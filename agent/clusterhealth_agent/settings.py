"""The agent's flags, read and validated before anything starts.

Karmada's flag names where Karmada has them (``--karmada-kubeconfig``,
``--cluster-name``, ``--host-name``, ``--detect-period``,
``--detect-failure-threshold``, ``--detect-success-threshold``,
``--detectors``, ``--healthz-port``, leader election); every flag can also be
set as ``CLUSTERHEALTH_AGENT_<FLAG>`` in the environment.  The flags every
process has are :mod:`clusterhealth_core.settings`' (``ProcessFlags``): the
member cluster is its ``--kubeconfig`` (``credentials``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
from collections.abc import Mapping, Sequence

from clusterhealth_core import election, settings
from clusterhealth_core.kube import config

FLAGS = settings.ProcessFlags(
    prog="clusterhealth-agent", healthz_port=10358, lease="clusterhealth-agent",
    kube=(("", "the member cluster"), ("karmada-", "the control plane (Karmada)")),
    description="Probe cluster components on this node; the leader reports Cluster "
                "conditions to the control plane.")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


@dataclasses.dataclass(frozen=True, kw_only=True)
class AgentSettings(settings.ProcessSettings):
    """Everything the agent needs to start, already validated."""

    cluster_name: str
    node_name: str
    node_ip: str
    control_plane: config.Credentials
    detect_period: float
    failure_threshold: float
    success_threshold: float
    stale_threshold: float
    node_heartbeat_period: float
    report_period: float
    probe_timeout: float
    cluster_domain: str
    nameservers: tuple[tuple[str, int], ...]
    detectors: tuple[str, ...]
    probe_config: str | None
    failure_quorum: float
    election: election.ElectionConfig
    """Always: the agent elects the pod that reports (``FLAGS.lease``)."""


def parser() -> settings.FlagParser:
    """The agent's command line."""
    return settings.process_parser(FLAGS, _own_flags)


def _own_flags(p: settings.FlagParser) -> None:
    p.add_argument("--cluster-name", default=None, help="this member's Cluster name (required)")
    p.add_argument("--host-name", default=None, help="this node's name (default: $NODE_NAME)")
    p.add_argument("--node-ip", default=None, help="this node's IP (default: $NODE_IP)")
    group = p.add_argument_group("detection")
    group.add_argument("--detect-period", type=settings.duration, default=5.0,
                       help="how often every probe runs")
    group.add_argument("--probe-timeout", type=settings.duration, default=None,
                       help="deadline of one probe run (default: 80%% of the period)")
    group.add_argument("--detect-failure-threshold", type=settings.duration, default=30.0,
                       help="failures must persist this long before a node reports failing")
    group.add_argument("--detect-success-threshold", type=settings.duration, default=30.0,
                       help="successes must persist this long before a node reports healthy")
    group.add_argument("--stale-threshold", type=settings.duration, default=60.0,
                       help="a node result older than this counts as Unknown")
    group.add_argument("--node-heartbeat-period", type=settings.duration, default=20.0,
                       help="a node re-publishes an unchanged result this often")
    group.add_argument("--report-period", type=settings.duration, default=60.0,
                       help="the leader re-applies unchanged cluster conditions this often")
    group.add_argument("--cluster-domain", default="cluster.local",
                       help="cluster domain for kubernetes.default.svc.<domain>")
    group.add_argument("--nameserver", action="append", default=[],
                       help="HOST[:PORT] to query (repeatable; default: resolv.conf)")
    group.add_argument("--detectors", default="dns",
                       help="comma-separated built-in probes: dns, kube-proxy, apiserver, coredns")
    group.add_argument("--probe-config", default=None,
                       help="YAML file with user-defined HTTP/TCP/DNS probes")
    group.add_argument("--failure-quorum", type=settings.fraction, default=1.0,
                       help="fraction of Ready nodes that must fail for the cluster to fail")


def parse_nameserver(text: str) -> tuple[str, int]:
    """``10.0.0.10``, ``10.0.0.10:5353`` or ``[fd00::10]:53``."""
    host, port = text, 53
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest.startswith(":"):
            port = settings.port(rest[1:])
    elif text.count(":") == 1:
        host, port_text = text.split(":")
        port = settings.port(port_text)
    if not host:
        raise argparse.ArgumentTypeError(f"--nameserver {text!r}: no host")
    return host, port


def load(argv: Sequence[str] | None, environ: Mapping[str, str] | None = None) -> AgentSettings:
    """Parse and validate; raise :class:`clusterhealth_core.settings.SettingsError`."""
    env = os.environ if environ is None else environ
    args = parser().parse(argv, env)
    cluster = args.cluster_name
    if not cluster or not _NAME.match(cluster):
        raise settings.SettingsError(f"--cluster-name {cluster!r}: give this member's Cluster name")
    node = args.host_name or env.get("NODE_NAME", "")
    if not node:
        raise settings.SettingsError("--host-name (or $NODE_NAME) is required")
    if not args.karmada_kubeconfig:
        raise settings.SettingsError("--karmada-kubeconfig is required (control-plane access)")
    period = args.detect_period
    timeout = args.probe_timeout if args.probe_timeout is not None else 0.8 * period
    if timeout >= period:
        raise settings.SettingsError(
            f"--probe-timeout ({timeout:g}s) must be shorter than --detect-period ({period:g}s)"
        )
    if args.stale_threshold <= args.node_heartbeat_period:
        raise settings.SettingsError(
            f"--stale-threshold ({args.stale_threshold:g}s) must be longer than "
            f"--node-heartbeat-period ({args.node_heartbeat_period:g}s)"
        )
    try:
        nameservers = tuple(parse_nameserver(n) for n in args.nameserver)
    except argparse.ArgumentTypeError as exc:
        raise settings.SettingsError(str(exc)) from exc
    loaded = settings.read_process(
        AgentSettings, FLAGS, args, env,
        cluster_name=cluster,
        node_name=node,
        node_ip=args.node_ip or env.get("NODE_IP", "127.0.0.1"),
        control_plane=settings.credentials_from(args.karmada_kubeconfig, args.karmada_context),
        failure_threshold=args.detect_failure_threshold,
        success_threshold=args.detect_success_threshold,
        probe_timeout=timeout,
        cluster_domain=args.cluster_domain.strip("."),
        nameservers=nameservers,
        detectors=tuple(d.strip() for d in args.detectors.split(",") if d.strip()),
    )
    member = loaded.credentials
    if member is not None and not member.host_is_ip():
        raise settings.SettingsError(
            f"the member API server address {member.host!r} is a DNS name: the agent must not "
            "depend on the DNS it probes; use an IP address (in-cluster: KUBERNETES_SERVICE_HOST)"
        )
    return loaded
