"""Wire the controller manager: its metrics and selected controllers, served by ``process``."""

from __future__ import annotations

import prometheus_client

from clusterhealth_controlplane import controllers, manager, metrics
from clusterhealth_controlplane import settings as manager_settings
from clusterhealth_core import process

COMPONENT = "clusterhealth-controlplane"


async def serve(settings: manager_settings.ControlPlaneSettings) -> None:
    """Run until SIGTERM/SIGINT."""
    entries = controllers.selected(settings.controllers)

    async def start(running: process.Process) -> process.Work:
        leader = prometheus_client.Gauge(
            "clusterhealth_controlplane_is_leader",
            "1 while this replica holds the controller manager's Lease.",
            registry=running.registry)
        failover_metrics = metrics.FailoverMetrics(running.registry)
        return running.elect(
            COMPONENT,
            lambda term: manager.Manager(
                manager.Context(term, settings.workers, settings.resync_period,
                                options=settings.options, metrics=failover_metrics,
                                member_limits=settings.member_limits), entries),
            leader, readiness="controllers").run()

    await process.serve(settings, process.Component(
        "controlplane", user_agent=COMPONENT,
        max_connections=settings.workers * len(entries) + 4,
        needed=controllers.needed(settings.controllers)), start)
