"""The controller manager's flags, validated before anything starts.

Every flag can also be set as ``CLUSTERHEALTH_CONTROLPLANE_<FLAG>`` in the
environment.  ``--controllers`` picks the controllers this process runs, in
Karmada's syntax (``'*,-execution'``); the names are the table in
:mod:`clusterhealth_controlplane.controllers`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence

from clusterhealth_controlplane import controllers
from clusterhealth_core import election, events, selection, serving, settings
from clusterhealth_core.kube import config, transport

ENV_PREFIX = "CLUSTERHEALTH_CONTROLPLANE"
DEFAULT_LEASE = "clusterhealth-controlplane"


@dataclasses.dataclass(frozen=True)
class ControlPlaneSettings:
    """Everything the controller manager needs, already validated."""

    credentials: config.Credentials
    controllers: tuple[str, ...]
    """The selected controllers, in the table's order."""
    workers: int
    resync_period: float
    http_library: transport.Library
    event_namespace: str
    bind_address: str
    healthz_port: int
    tls: serving.TLSConfig | None
    leader_elect: bool
    election: election.ElectionConfig


def parser() -> settings.FlagParser:
    """The controller manager's command line."""
    p = settings.FlagParser(
        prog="clusterhealth-controlplane", env_prefix=ENV_PREFIX,
        description="Propagate resource templates to member clusters by their policies, "
                    "and report their status back.")
    settings.add_kube_flags(p, "", "the control plane")
    p.add_argument("--controllers", default="*",
                   help="controllers to run: names, * for all, -name to leave one out "
                        f"(known: {', '.join(controllers.NAMES)})")
    p.add_argument("--workers", type=settings.workers, default=4,
                   help="concurrent reconciles per controller")
    p.add_argument("--resync-period", type=settings.duration, default=300.0,
                   help="reconcile every object this often, as a safety net")
    p.add_argument("--http-library", choices=transport.LIBRARIES, default="aiohttp",
                   help="HTTP library to the API servers (decision 0004)")
    p.add_argument("--event-namespace", default="default",
                   help="namespace for Events about cluster-scoped objects")
    settings.add_serving_flags(p, 10357)
    settings.add_leader_election_flags(p, DEFAULT_LEASE, "")
    return p


def load(argv: Sequence[str] | None,
         environ: Mapping[str, str] | None = None) -> ControlPlaneSettings:
    """Parse and validate; raise :class:`clusterhealth_core.settings.SettingsError`."""
    env = os.environ if environ is None else environ
    args = parser().parse(argv, env)
    try:
        events.check_namespace(args.event_namespace)
    except ValueError as exc:
        raise settings.SettingsError(f"--event-namespace: {exc}") from exc
    try:
        chosen = selection.select(controllers.NAMES, args.controllers, "controller")
    except selection.UnknownName as exc:
        raise settings.SettingsError(f"--controllers: {exc}") from exc
    if not chosen:
        raise settings.SettingsError(f"--controllers {args.controllers!r} selects no controller")
    return ControlPlaneSettings(
        credentials=settings.credentials_from(args.kubeconfig, args.context),
        controllers=tuple(n for n in controllers.NAMES if n in chosen),
        workers=args.workers,
        resync_period=args.resync_period,
        http_library=args.http_library,
        event_namespace=args.event_namespace,
        bind_address=args.bind_address,
        healthz_port=args.healthz_port,
        tls=settings.tls_config_from(args),
        leader_elect=args.leader_elect,
        election=settings.election_config_from(args, env),
    )
