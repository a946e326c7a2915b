"""The scheduler process's flags, validated before anything starts.

Every flag can also be set as ``CLUSTERHEALTH_SCHEDULER_<FLAG>`` in the environment.
``--plugins`` picks the filter and score plugins in Karmada's syntax (``'*,-name'``,
checked against :func:`~clusterhealth_controlplane.scheduler.plugins.default_registry`),
``--scheduler-name`` which bindings are ours (``spec.schedulerName``; an empty one means
the default scheduler).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from clusterhealth_controlplane.scheduler import framework, plugins
from clusterhealth_core import settings

DEFAULT_SCHEDULER_NAME = "default-scheduler"
"""Karmada's default ``schedulerName`` (bindings without one are the default scheduler's)."""
FLAGS = settings.ProcessFlags(
    prog="clusterhealth-scheduler", healthz_port=10351, lease="clusterhealth-scheduler",
    description="Schedule (Cluster)ResourceBindings onto member clusters: write "
                "spec.clusters and the Scheduled condition.",
    http_library="HTTP library to the API server (decision 0004)",
    event_namespace="namespace for Events about ClusterResourceBindings (cluster-scoped)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SchedulerSettings(settings.ProcessSettings):
    """Everything the scheduler needs, already validated."""

    plugins: framework.Registry
    """The selected plugins, in the registry's order."""
    scheduler_name: str
    workers: int


def _own_flags(p: settings.FlagParser) -> None:
    known = ", ".join(plugins.default_registry())
    p.add_argument("--plugins", default="*",
                   help=f"filter and score plugins: names, * for all, -name to leave one out "
                        f"(known: {known})")
    p.add_argument("--scheduler-name", default=DEFAULT_SCHEDULER_NAME,
                   help="schedule the bindings whose spec.schedulerName is this (or empty, "
                        "for the default scheduler)")
    p.add_argument("--workers", type=settings.workers, default=8,
                   help="bindings scheduled concurrently (their writes overlap)")


def parser() -> settings.FlagParser:
    """The scheduler's command line."""
    return settings.process_parser(FLAGS, _own_flags)


def load(argv: Sequence[str] | None,
         environ: Mapping[str, str] | None = None) -> SchedulerSettings:
    """Parse and validate; raise :class:`clusterhealth_core.settings.SettingsError`."""
    args = parser().parse(argv, environ)
    try:
        chosen = framework.select_plugins(plugins.default_registry(), args.plugins)
    except framework.PluginSelectionError as exc:
        raise settings.SettingsError(f"--plugins: {exc}") from exc
    if not args.scheduler_name.strip():
        raise settings.SettingsError("--scheduler-name must not be empty")
    return settings.read_process(SchedulerSettings, FLAGS, args, environ, plugins=chosen)
