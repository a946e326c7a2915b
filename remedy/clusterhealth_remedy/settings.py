"""The Remedy controller's flags, validated before anything starts.

Every flag can also be set as ``CLUSTERHEALTH_REMEDY_<FLAG>`` in the environment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from clusterhealth_core import settings

FLAGS = settings.ProcessFlags(
    prog="clusterhealth-remedy", healthz_port=10359, lease="clusterhealth-remedy",
    description="Turn Cluster conditions into Cluster.status.remedyActions per Remedy.",
    http_library="HTTP library to the API server: aiohttp (default: a third of httpx's "
                 "CPU per write, decision 0004) or httpx",
    event_namespace="namespace for Events about the (cluster-scoped) Clusters and "
                    "Remedies: default or kube-system, the only ones the API server "
                    "accepts for them")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RemedySettings(settings.ProcessSettings):
    """Everything the controller needs, already validated."""

    resync_period: float
    workers: int


def _own_flags(p: settings.FlagParser) -> None:
    p.add_argument("--resync-period", type=settings.duration, default=300.0,
                   help="re-evaluate every Cluster this often, as a safety net")
    p.add_argument("--workers", type=settings.workers, default=2,
                   help="concurrent Cluster reconciles")


def parser() -> settings.FlagParser:
    """The controller's command line."""
    return settings.process_parser(FLAGS, _own_flags)


def load(argv: Sequence[str] | None, environ: Mapping[str, str] | None = None) -> RemedySettings:
    """Parse and validate; raise :class:`clusterhealth_core.settings.SettingsError`."""
    return settings.read_process(RemedySettings, FLAGS, parser().parse(argv, environ), environ)
