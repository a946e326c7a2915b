"""The scheduler process's flags, validated before anything starts.

Every flag can also be set as ``CLUSTERHEALTH_SCHEDULER_<FLAG>`` in the environment.
``--plugins`` picks the filter and score plugins in Karmada's syntax (``'*,-name'``,
checked against :func:`~clusterhealth_controlplane.scheduler.plugins.default_registry`),
``--scheduler-name`` which bindings are ours (``spec.schedulerName``; an empty one means
the default scheduler).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence

from clusterhealth_controlplane.scheduler import framework, plugins
from clusterhealth_core import election, events, serving, settings
from clusterhealth_core.kube import config, transport

ENV_PREFIX = "CLUSTERHEALTH_SCHEDULER"
DEFAULT_LEASE = "clusterhealth-scheduler"
DEFAULT_SCHEDULER_NAME = "default-scheduler"
"""Karmada's default ``schedulerName`` (bindings without one are the default scheduler's)."""


@dataclasses.dataclass(frozen=True)
class SchedulerSettings:
    """Everything the scheduler needs, already validated."""

    credentials: config.Credentials
    plugins: framework.Registry
    """The selected plugins, in the registry's order."""
    scheduler_name: str
    workers: int
    http_library: transport.Library
    event_namespace: str
    bind_address: str
    healthz_port: int
    tls: serving.TLSConfig | None
    leader_elect: bool
    election: election.ElectionConfig


def parser() -> settings.FlagParser:
    """The scheduler's command line."""
    known = ", ".join(plugins.default_registry())
    p = settings.FlagParser(
        prog="clusterhealth-scheduler", env_prefix=ENV_PREFIX,
        description="Schedule (Cluster)ResourceBindings onto member clusters: write "
                    "spec.clusters and the Scheduled condition.")
    settings.add_kube_flags(p, "", "the control plane")
    p.add_argument("--plugins", default="*",
                   help=f"filter and score plugins: names, * for all, -name to leave one out "
                        f"(known: {known})")
    p.add_argument("--scheduler-name", default=DEFAULT_SCHEDULER_NAME,
                   help="schedule the bindings whose spec.schedulerName is this (or empty, "
                        "for the default scheduler)")
    p.add_argument("--workers", type=settings.workers, default=8,
                   help="bindings scheduled concurrently (their writes overlap)")
    p.add_argument("--http-library", choices=transport.LIBRARIES, default="aiohttp",
                   help="HTTP library to the API server (decision 0004)")
    p.add_argument("--event-namespace", default="default",
                   help="namespace for Events about ClusterResourceBindings (cluster-scoped)")
    settings.add_serving_flags(p, 10351)
    settings.add_leader_election_flags(p, DEFAULT_LEASE, "")
    return p


def load(argv: Sequence[str] | None,
         environ: Mapping[str, str] | None = None) -> SchedulerSettings:
    """Parse and validate; raise :class:`clusterhealth_core.settings.SettingsError`."""
    env = os.environ if environ is None else environ
    args = parser().parse(argv, env)
    try:
        events.check_namespace(args.event_namespace)
    except ValueError as exc:
        raise settings.SettingsError(f"--event-namespace: {exc}") from exc
    try:
        chosen = framework.select_plugins(plugins.default_registry(), args.plugins)
    except framework.PluginSelectionError as exc:
        raise settings.SettingsError(f"--plugins: {exc}") from exc
    if not args.scheduler_name.strip():
        raise settings.SettingsError("--scheduler-name must not be empty")
    return SchedulerSettings(
        credentials=settings.credentials_from(args.kubeconfig, args.context),
        plugins=chosen,
        scheduler_name=args.scheduler_name,
        workers=args.workers,
        http_library=args.http_library,
        event_namespace=args.event_namespace,
        bind_address=args.bind_address,
        healthz_port=args.healthz_port,
        tls=settings.tls_config_from(args),
        leader_elect=args.leader_elect,
        election=settings.election_config_from(args, env),
    )
