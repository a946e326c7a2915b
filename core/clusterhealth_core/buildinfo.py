"""Which version runs, and the series every process exports about itself.

Every component (and the CLI) answers ``--version``; every component's
registry gets, once, at start:

* ``clusterhealth_build_info{component, version, python_version}`` = 1, the
  Prometheus convention for "which build is this" (join it on ``instance``);
* the process and platform collectors of prometheus_client
  (``process_cpu_seconds_total``, ``process_resident_memory_bytes``,
  ``process_open_fds``, ``python_info``, ...), on the component's own
  registry, not the library's global one;
* ``clusterhealth_leader{component}`` 0/1, one leadership series for every
  component; the older per-component names (``clusterhealth_remedy_is_leader``,
  ...) are kept for one release beside it (docs/operations.md, "Metrics every
  component exports").

``_created`` series (one per counter, histogram and summary child, which
nobody graphs) are turned off process-wide by :func:`disable_created_series`,
called by :func:`clusterhealth_core.runner.main` before anything is made.
"""

from __future__ import annotations

import functools
import importlib.metadata
import platform

import prometheus_client

DISTRIBUTION = "clusterhealth"
UNKNOWN = "unknown"
LEGACY_LEADER_GAUGES = {
    "agent": "clusterhealth_agent_is_leader",
    "remedy": "clusterhealth_remedy_is_leader",
    "mci-provider": "clusterhealth_mci_is_leader",
    "controlplane": "clusterhealth_controlplane_is_leader",
    "scheduler": "clusterhealth_scheduler_is_leader",
}
"""The per-component leadership series ``clusterhealth_leader`` replaces (kept one release)."""


@functools.cache
def version() -> str:
    """The installed distribution's version (pyproject's), ``unknown`` when not installed."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return UNKNOWN


def version_line(prog: str) -> str:
    """What ``--version`` prints: ``clusterhealth-remedy 0.1.0 (Python 3.11.2)``."""
    return f"{prog} {version()} (Python {platform.python_version()})"


def disable_created_series() -> None:
    """No ``*_created`` series from this process (a process-wide prometheus_client switch)."""
    prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]


class Leadership:
    """``clusterhealth_leader{component}``: 1 while this replica leads."""

    def __init__(self, registry: prometheus_client.CollectorRegistry, component: str) -> None:
        self.gauge = prometheus_client.Gauge(
            "clusterhealth_leader",
            "1 while this replica holds its component's Lease (leads), else 0.",
            ["component"], registry=registry)
        self.child = self.gauge.labels(component)
        self.child.set(0)

    def set(self, leading: bool) -> None:
        """Record whether this replica leads."""
        self.child.set(1 if leading else 0)


def register(registry: prometheus_client.CollectorRegistry, component: str,
             *, elected: bool = True) -> Leadership | None:
    """Build info, process and platform series on ``registry``; the leadership gauge.

    ``elected``: the component elects a leader (the webhook does not: no gauge).
    """
    info = prometheus_client.Gauge(
        "clusterhealth_build_info",
        "Always 1: the component, its version and the Python it runs on.",
        ["component", "version", "python_version"], registry=registry)
    info.labels(component, version(), platform.python_version()).set(1)
    prometheus_client.ProcessCollector(registry=registry)
    prometheus_client.PlatformCollector(registry=registry)
    return Leadership(registry, component) if elected else None
