"""The controller manager's flags, validated before anything starts.

Every flag can also be set as ``CLUSTERHEALTH_CONTROLPLANE_<FLAG>`` in the
environment.  ``--controllers`` picks the controllers this process runs, in
Karmada's syntax (``'*,-execution'``); the names are the table in
:mod:`clusterhealth_controlplane.controllers`.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Mapping, Sequence

from clusterhealth_controlplane import controllers, options
from clusterhealth_core import members, selection, settings
from clusterhealth_core.kube import client as kube

FLAGS = settings.ProcessFlags(
    prog="clusterhealth-controlplane", healthz_port=10357, lease="clusterhealth-controlplane",
    description="Propagate resource templates to member clusters by their policies, "
                "and report their status back.",
    http_library="HTTP library to the API servers (decision 0004)",
    event_namespace="namespace for Events about cluster-scoped objects")
PURGE_MODES = ("Gracefully", "Directly")
"""Karmada's ``--no-execute-taint-eviction-purge-mode`` values."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ControlPlaneSettings(settings.ProcessSettings):
    """Everything the controller manager needs, already validated."""

    controllers: tuple[str, ...]
    """The selected controllers, in the table's order."""
    workers: int
    resync_period: float
    options: options.Options = dataclasses.field(default_factory=options.Options)
    """The failover timers and limits."""
    member_limits: kube.Limits = members.LIMITS
    """What one member may cost: a deadline per request, requests at once."""


def parser() -> settings.FlagParser:
    """The controller manager's command line."""
    return settings.process_parser(FLAGS, _own_flags)


def _own_flags(p: settings.FlagParser) -> None:
    p.add_argument("--controllers", default="*",
                   help="controllers to run: names, * for all, -name to leave one out "
                        f"(known: {', '.join(controllers.NAMES)})")
    p.add_argument("--workers", type=settings.workers, default=4,
                   help="concurrent reconciles per controller")
    p.add_argument("--resync-period", type=settings.duration, default=300.0,
                   help="reconcile every object this often, as a safety net")
    p.add_argument("--skipped-propagating-namespaces", default="",
                   help="comma-separated regular expressions (each matched against the whole "
                        "name): namespaces the namespace sync never propagates, beside the "
                        "reserved ones, default, and those labelled "
                        "namespace.karmada.io/skip-auto-propagation=true")
    g = p.add_argument_group("member clusters")
    g.add_argument("--member-request-timeout", type=settings.duration,
                   default=members.REQUEST_TIMEOUT,
                   help="one request to a member (retries included) gives up after this")
    g.add_argument("--member-concurrent-requests", type=settings.workers, default=None,
                   help="requests to one member at once (watches aside); default: half of "
                        "--workers, at least 1, so that a hung member holds at most that many "
                        "workers")
    add_failover_flags(p)


def add_failover_flags(p: settings.FlagParser) -> None:
    """The timers and limits of :mod:`clusterhealth_controlplane.options`, with Karmada's names."""
    d = options.Options()
    g = p.add_argument_group("cluster health")
    g.add_argument("--cluster-status-update-frequency", type=settings.duration,
                   default=d.health.update_frequency, help="probe each member this often")
    g.add_argument("--cluster-success-threshold", type=settings.duration,
                   default=d.health.success_threshold,
                   help="healthy for this long before Ready turns True")
    g.add_argument("--cluster-failure-threshold", type=settings.duration,
                   default=d.health.failure_threshold,
                   help="unhealthy for this long before Ready turns False")
    g.add_argument("--cluster-monitor-grace-period", type=settings.duration,
                   default=d.health.monitor_grace_period,
                   help="no probe result for this long -> Ready Unknown")
    g.add_argument("--cluster-probe-timeout", type=settings.duration,
                   default=d.health.probe_timeout, help="one health request gives up after this")
    g = p.add_argument_group("taints and eviction")
    g.add_argument("--failover-eviction-timeout", type=settings.duration,
                   default=d.taints.failover_eviction_timeout,
                   help="NoSchedule for this long -> the NoExecute taint is added too")
    g.add_argument("--eviction-rate", type=settings.rate, default=d.eviction.rate,
                   help="evictions per second (0: no limit)")
    g.add_argument("--secondary-eviction-rate", type=settings.rate,
                   default=d.eviction.secondary_rate,
                   help="evictions per second while the storm guard holds (0: none)")
    g.add_argument("--unhealthy-cluster-threshold", type=settings.fraction,
                   default=d.eviction.unhealthy_cluster_threshold,
                   help="more than this fraction of clusters unhealthy -> the storm guard holds")
    g.add_argument("--eviction-workers", type=settings.workers, default=d.eviction.workers,
                   help="concurrent evictions")
    g.add_argument("--graceful-eviction-timeout", type=settings.duration,
                   default=d.eviction.graceful_eviction_timeout,
                   help="a graceful-eviction task ends after this long at most")
    g.add_argument("--no-execute-taint-eviction-purge-mode", choices=PURGE_MODES,
                   default=d.eviction.purge_mode,
                   help="purgeMode of a taint eviction for bindings without "
                        "spec.failover.cluster")
    g.add_argument("--failback-stabilization-window", type=settings.duration,
                   default=d.failback.window,
                   help="an evicted cluster is Ready this long before failback (opt-in per policy)")
    g.add_argument("--failback-batch", type=settings.workers, default=d.failback.batch,
                   help="bindings rebalanced back at a time (1-64)")


def skipped_namespaces(text: str) -> tuple[re.Pattern[str], ...]:
    """``--skipped-propagating-namespaces``, compiled; :class:`settings.SettingsError` if bad."""
    found = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        try:
            found.append(re.compile(item))
        except re.error as exc:
            raise settings.SettingsError(
                f"--skipped-propagating-namespaces: {item!r} is not a regular expression "
                f"({exc})") from exc
    return tuple(found)


def failover_options(args: argparse.Namespace) -> options.Options:
    """The parsed failover flags as :class:`options.Options`."""
    return options.Options(
        propagation=options.Propagation(
            skipped_namespaces=skipped_namespaces(args.skipped_propagating_namespaces)),
        health=options.ClusterHealth(
            update_frequency=args.cluster_status_update_frequency,
            success_threshold=args.cluster_success_threshold,
            failure_threshold=args.cluster_failure_threshold,
            monitor_grace_period=args.cluster_monitor_grace_period,
            probe_timeout=args.cluster_probe_timeout),
        taints=options.Taints(failover_eviction_timeout=args.failover_eviction_timeout),
        eviction=options.Eviction(
            rate=args.eviction_rate, secondary_rate=args.secondary_eviction_rate,
            unhealthy_cluster_threshold=args.unhealthy_cluster_threshold,
            workers=args.eviction_workers,
            graceful_eviction_timeout=args.graceful_eviction_timeout,
            purge_mode=args.no_execute_taint_eviction_purge_mode),
        failback=options.Failback(window=args.failback_stabilization_window,
                                  batch=args.failback_batch),
    )


def load(argv: Sequence[str] | None,
         environ: Mapping[str, str] | None = None) -> ControlPlaneSettings:
    """Parse and validate; raise :class:`clusterhealth_core.settings.SettingsError`."""
    args = parser().parse(argv, environ)
    try:
        chosen = selection.select(controllers.NAMES, args.controllers, "controller")
    except selection.UnknownName as exc:
        raise settings.SettingsError(f"--controllers: {exc}") from exc
    if not chosen:
        raise settings.SettingsError(f"--controllers {args.controllers!r} selects no controller")
    return settings.read_process(
        ControlPlaneSettings, FLAGS, args, environ,
        controllers=tuple(n for n in controllers.NAMES if n in chosen),
        options=failover_options(args),
        member_limits=member_limits(args.workers, args.member_request_timeout,
                                    args.member_concurrent_requests),
    )


def member_limits(workers: int, request_timeout: float, concurrent: int | None) -> kube.Limits:
    """The member clients' limits: ``concurrent`` requests at once, default half the workers."""
    return dataclasses.replace(members.LIMITS, request_timeout=request_timeout,
                               max_in_flight=concurrent or max(1, workers // 2))
