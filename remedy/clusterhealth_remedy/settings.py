"""The Remedy controller's flags, validated before anything starts.

Every flag can also be set as ``CLUSTERHEALTH_REMEDY_<FLAG>`` in the environment.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence

from clusterhealth_core import election, events, serving, settings
from clusterhealth_core.kube import config, transport

ENV_PREFIX = "CLUSTERHEALTH_REMEDY"
DEFAULT_LEASE = "clusterhealth-remedy"


@dataclasses.dataclass(frozen=True)
class RemedySettings:
    """Everything the controller needs, already validated."""

    credentials: config.Credentials
    resync_period: float
    workers: int
    http_library: transport.Library
    event_namespace: str
    bind_address: str
    healthz_port: int
    tls: serving.TLSConfig | None
    leader_elect: bool
    election: election.ElectionConfig


def parser() -> settings.FlagParser:
    """The controller's command line."""
    p = settings.FlagParser(
        prog="clusterhealth-remedy", env_prefix=ENV_PREFIX,
        description="Turn Cluster conditions into Cluster.status.remedyActions per Remedy.",
    )
    settings.add_kube_flags(p, "", "the control plane")
    p.add_argument("--resync-period", type=settings.duration, default=300.0,
                   help="re-evaluate every Cluster this often, as a safety net")
    p.add_argument("--workers", type=settings.workers, default=2,
                   help="concurrent Cluster reconciles")
    p.add_argument("--http-library", choices=transport.LIBRARIES, default="aiohttp",
                   help="HTTP library to the API server: aiohttp (default: a third of httpx's "
                        "CPU per write, decision 0004) or httpx")
    p.add_argument("--event-namespace", default="default",
                   help="namespace for Events about the (cluster-scoped) Clusters and "
                        "Remedies: default or kube-system, the only ones the API server "
                        "accepts for them")
    settings.add_serving_flags(p, 10359)
    settings.add_leader_election_flags(p, DEFAULT_LEASE, "")
    return p


def load(argv: Sequence[str] | None, environ: Mapping[str, str] | None = None) -> RemedySettings:
    """Parse and validate; raise :class:`clusterhealth_core.settings.SettingsError`."""
    env = os.environ if environ is None else environ
    args = parser().parse(argv, env)
    try:
        events.check_namespace(args.event_namespace)
    except ValueError as exc:
        raise settings.SettingsError(f"--event-namespace: {exc}") from exc
    return RemedySettings(
        credentials=settings.credentials_from(args.kubeconfig, args.context),
        resync_period=args.resync_period,
        workers=args.workers,
        http_library=args.http_library,
        event_namespace=args.event_namespace,
        bind_address=args.bind_address,
        healthz_port=args.healthz_port,
        tls=settings.tls_config_from(args),
        leader_elect=args.leader_elect,
        election=settings.election_config_from(args, env),
    )
